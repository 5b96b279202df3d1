"""Authoring: events (definitions), their working copy, publishing and versions.

Checks run in one order on every write: the token and the route's role (401, 403, before
the handler), the event (404), the body (400, every problem at once), the role floor (403),
then the state and the slug (409). A refused request writes nothing: each handler does its
work in one transaction, and every refusal is raised inside it. The one check made before
that transaction is a sent spec's (:mod:`pageant.events.saving`, shared with the console's
editor): it asks plugins' option sources, which must not hold the write lock meanwhile.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from aiohttp import web
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    RootModel,
    StringConstraints,
    WithJsonSchema,
    field_validator,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.access.floor import check_role_floor
from pageant.access.roles import ADMIN, AUTHORS, STAFF
from pageant.api.bodies import (
    SLUG_SCHEMA,
    Checked,
    Description,
    Id,
    Title,
    Visibility,
    check_body,
    check_slug,
    no_defaults,
    prefetch,
)
from pageant.api.keys import HOST
from pageant.api.pagination import page_from
from pageant.api.routing import (
    CURSOR,
    LIMIT,
    Query,
    RouteTable,
    int_param,
    principal,
    query_count,
    read_body,
    respond,
)
from pageant.engine import rehearsal
from pageant.errors import Invalid, NotFound
from pageant.events import definitions, verify
from pageant.events.authoring import validator as specs
from pageant.events.authoring.params import PARAM_NAME
from pageant.events.blackouts import unknown_blackouts
from pageant.events.campaigns import unknown_required
from pageant.events.definitions import MAX_GRACE_SECONDS, MIN_GRACE_SECONDS, STATES
from pageant.events.publish_preview import preview_publish
from pageant.events.publishing import publish
from pageant.events.saving import savable_spec, still_savable
from pageant.events.series import get_series
from pageant.events.slugs import slugify
from pageant.runs.create import SCOPE_PLACEHOLDER
from pageant.runs.params import PLACEHOLDER, key_problems
from pageant.schedules import preview
from pageant.schedules.blackouts import subscribed
from pageant.schedules.recurrence import zone
from pageant.states import Overlap

routes = RouteTable("events")

MAX_TIMEZONE = 64
MAX_CONCURRENCY_KEY = 100

# ── Shapes ──────────────────────────────────────────────────────────────────────────────────

Timezone = Annotated[str, StringConstraints(min_length=1, max_length=MAX_TIMEZONE)]
PublishReason = Annotated[
    str,
    StringConstraints(
        strip_whitespace=True, min_length=1, max_length=definitions.MAX_PUBLISH_REASON
    ),
]
Grace = Annotated[int, Field(ge=MIN_GRACE_SECONDS, le=MAX_GRACE_SECONDS)]


def _key_template(value: str) -> str:
    # Each {name} must name a param: checked against the spec at publish, where both meet.
    bare = PLACEHOLDER.sub("", value)
    if (
        "{" in bare
        or "}" in bare
        or not all(PARAM_NAME.fullmatch(name) for name in PLACEHOLDER.findall(value))
    ):
        raise ValueError(
            f"only a param's name may be written in braces, such as {SCOPE_PLACEHOLDER} or "
            "{server} (a param the spec declares)"
        )
    return value


#: What a run does when it becomes due while another run holds its concurrency key. Not
#: strict: a JSON body carries the policy as its word, which names the enumeration's member.
OverlapPolicy = Annotated[
    Overlap,
    Field(
        strict=False,
        description="What a run does when it becomes due while another run still holds its "
        "concurrency key: hold (wait for the key), skip (end as skipped), replace (cancel "
        "the run holding it, then start) or allow (start beside it).",
    ),
]


def check_key_names(checked: Checked[Any], spec: Any, *, otherwise: Any) -> None:
    """A concurrency key sent in this request must name only params of the spec it is saved
    beside (``spec``, the one sent with it, else ``otherwise``, the stored one): each
    placeholder that names none is a problem of ``body.concurrency_key``. A spec sent that
    failed its own check says nothing of params, so nothing is checked against it. A spec
    saved without the key is left to publish, which checks the two together
    (:func:`pageant.events.definitions.publish_definition`)."""
    key = checked.given.get("concurrency_key")
    if spec is None:
        spec = None if "spec" in checked.sent else otherwise
    if not key or not isinstance(spec, dict):
        return
    for problem in key_problems(key, spec.get("params")):
        checked.fail(f"body.{problem}")


ConcurrencyKey = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_CONCURRENCY_KEY),
    AfterValidator(_key_template),
]
#: The spec is checked by :mod:`pageant.events.authoring.validator` (against the registry, with its
#: own paths), not by the model; the model only documents its shape.
SpecBody = Annotated[Any, WithJsonSchema(specs.SPEC_SCHEMA)]
#: A spec as the server answers it: normalised, each step with its action's version.
SpecOut = Annotated[dict[str, Any], WithJsonSchema(specs.SPEC_SCHEMA)]


class EventCreate(BaseModel):
    """A new event: only ``title`` is required."""

    model_config = ConfigDict(extra="forbid", strict=True)

    title: Title
    slug: str | None = Field(
        None, description="Derived from the title when absent.", json_schema_extra=SLUG_SCHEMA
    )
    description: Description = ""
    timezone: Timezone = definitions.DEFAULT_TIMEZONE
    grace_seconds: Grace = definitions.DEFAULT_GRACE_SECONDS
    concurrency_key: ConcurrencyKey | None = None
    overlap: OverlapPolicy = Overlap.HOLD
    series_id: Id | None = None
    visibility: Visibility = "staff"
    spec: SpecBody = Field(None, description="The empty spec (one phase, main) when absent.")

    _slug = field_validator("slug")(check_slug)


class EventUpdate(BaseModel):
    """A partial update: only the fields sent change. ``concurrency_key`` and ``series_id``
    take null (none, detached); the others do not."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra=no_defaults)

    # Defaults are not validated, so an absent field stays None while a null that was
    # actually sent for a non-nullable field is refused. The annotations say what a sent
    # value must be (what the OpenAPI document shows); the None defaults contradict them on
    # purpose, hence each ignore[assignment].
    title: Title = None  # type: ignore[assignment]  # None: absent, see above
    slug: str = Field(None, json_schema_extra=SLUG_SCHEMA)  # type: ignore[assignment]  # None: absent, see above
    description: Description = None  # type: ignore[assignment]  # None: absent, see above
    timezone: Timezone = None  # type: ignore[assignment]  # None: absent, see above
    grace_seconds: Grace = None  # type: ignore[assignment]  # None: absent, see above
    concurrency_key: ConcurrencyKey | None = None
    overlap: OverlapPolicy = None  # type: ignore[assignment]  # None: absent, see above
    series_id: Id | None = None
    visibility: Visibility = None  # type: ignore[assignment]  # None: absent, see above
    spec: SpecBody = None

    _slug = field_validator("slug")(check_slug)


class VersionRef(BaseModel):
    id: int
    number: int
    published_at: datetime
    published_by: str | None
    verified_at: datetime | None
    verified_by: str | None


class Drift(BaseModel):
    """A step written against an older declaration of its action."""

    path: str
    action: str
    stored_version: int
    declared_version: int


class SaveWarning(BaseModel):
    """Something in the working copy that is valid and probably not meant (a gate counting
    every server's firings on an event whose steps target one): listed until fixed, or until
    its ``id`` is in the spec's ``acknowledge``. Never refuses anything."""

    id: str
    path: str
    message: str


class EventOut(BaseModel):
    """The event object."""

    id: int
    title: str
    slug: str
    description: str
    timezone: str
    grace_seconds: int
    concurrency_key: str | None
    overlap: Overlap
    series_id: int | None
    visibility: Visibility
    state: Literal["draft", "ready", "archived"]
    spec: SpecOut
    current_version: VersionRef | None
    version_verified: bool
    version_drift: list[Drift]
    next_occurrence: datetime | None
    runs_waiting: int
    warnings: list[SaveWarning]


class EventList(BaseModel):
    items: list[EventOut]
    next_cursor: str | None


class VersionOut(BaseModel):
    """A published version: immutable."""

    id: int
    number: int
    published_at: datetime
    published_by: str | None
    spec: SpecOut


class PlannedSpend(BaseModel):
    dimension: str
    label: str
    unit: str
    total: int
    cap: int | None
    cap_source_action: str | None


class VerifyOut(BaseModel):
    """A version that passed its dry run (a failure is a 400 listing every problem)."""

    event_id: int
    version: dict[str, int]
    verified_at: datetime
    verified_by: str | None
    spend: list[PlannedSpend]
    warnings: list[str]


class SimulatedFiring(BaseModel):
    """A firing the rehearsal feeds its gates, ``after`` the start ("30s", "5m", "2h")."""

    model_config = ConfigDict(extra="forbid")

    after: str
    trigger: str
    payload: dict[str, Any] = Field(default_factory=dict)


class RehearseBody(BaseModel):
    """Which version (the published one by default) and the firings to simulate, or a
    finished run of the event whose recorded firings to replay."""

    model_config = ConfigDict(extra="forbid")

    version: Annotated[int, Field(ge=1, strict=True)] | None = None
    firings: list[SimulatedFiring] = Field(default_factory=list, max_length=1000)
    from_run: Annotated[int, Field(ge=1, strict=True)] | None = Field(
        None,
        description="a finished run of this event: replay the firings it received, at their "
        "offsets from its start, and say where the rehearsal differs from it",
    )
    params: dict[str, Any] = Field(
        default_factory=dict, description="the run params to rehearse with (spec.params)"
    )


class VerifyBody(BaseModel):
    """The run params to verify with (each declared by spec.params; defaults fill the rest)."""

    model_config = ConfigDict(extra="forbid")

    params: dict[str, Any] = Field(default_factory=dict)


class RehearsalOut(BaseModel):
    """What a rehearsal saw; every ``*_seconds`` is an offset from the virtual start."""

    event_id: int
    version: dict[str, int]
    started_at: datetime
    outcome: dict[str, Any]
    timeline: dict[str, list[dict[str, Any]]]
    spend: list[dict[str, Any]]
    refusals: list[dict[str, Any]]
    stalls: list[dict[str, Any]]
    firings: list[dict[str, Any]]
    took_ms: float
    replayed: dict[str, Any] | None = Field(
        None,
        description="with from_run: how many of the run's recorded firings were replayed "
        "before the rehearsed run stopped, and the real run ({firings, recorded, from_run, "
        "version, status, phases, ended_seconds})",
    )
    differences: list[dict[str, Any]] | None = Field(
        None,
        description="with from_run: where the rehearsal differs from the real run, each "
        "{phase, what, real, rehearsed, sentence}",
    )


class VersionList(BaseModel):
    items: list[VersionOut]
    next_cursor: str | None


class PublishBody(BaseModel):
    """Why this publish changes what people rely on: needed when it would remove or move an
    occurrence a person confirmed, that was announced, or that is on the public calendar."""

    model_config = ConfigDict(extra="forbid", strict=True)

    reason: PublishReason | None = None


class PreviewOccurrence(BaseModel):
    """One occurrence in a publish preview. ``run_id`` is null for a run the publish would
    make; ``held_by`` says why changing it asks for a reason (``confirmed``, ``announced``,
    ``public``)."""

    run_id: int | None
    scope: str
    slot: str | None
    scheduled_for: datetime
    local_time: str
    timezone: str
    status: str
    dst_adjusted: dict[str, Any] | None
    held_by: list[str] = Field(default_factory=list)


class PreviewMove(BaseModel):
    """An occurrence the publish would move: its old and new instants and wall times."""

    run_id: int
    scope: str
    slot: str | None
    from_: datetime = Field(alias="from")
    to: datetime
    from_local: str
    to_local: str
    from_timezone: str
    timezone: str
    dst_adjusted: dict[str, Any] | None
    held_by: list[str]


class PreviewKept(BaseModel):
    """A run under way: the publish leaves it on the version it started with."""

    run_id: int
    scope: str
    slot: str | None
    scheduled_for: datetime
    local_time: str
    timezone: str
    status: str
    dst_adjusted: dict[str, Any] | None
    version: int | None


class PreviewScope(BaseModel):
    """One scope's next occurrences from now, as they are and as they would be."""

    scope: str
    before: list[PreviewOccurrence]
    after: list[PreviewOccurrence]


class PublishPreview(BaseModel):
    """What publishing would change (``preview=1``); nothing is written. Each list holds the
    first ``occurrences`` of each scope, in instant order; ``counts`` how many it holds in all.
    ``blacked_out`` lists runs the publish would put in a blackout."""

    event_id: int
    version: int
    added: list[PreviewOccurrence]
    removed: list[PreviewOccurrence]
    moved: list[PreviewMove]
    blacked_out: list[PreviewOccurrence]
    dst: list[PreviewOccurrence]
    kept: list[PreviewKept]
    counts: dict[str, int]
    reason_required: bool
    upcoming: list[PreviewScope]


class PublishAnswer(RootModel[EventOut | PublishPreview]):
    """The event as published, or (``preview=1``) what publishing would change."""


# ── Checks shared by create and edit ────────────────────────────────────────────────────────


async def check_spec(
    checked: Checked[Any], request: web.Request, *, stored: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The spec sent, as it is saved over the working copy ``stored``
    (:func:`pageant.events.saving.savable_spec`, the console editor's check too); None when
    no spec was sent or it is invalid, its problems then added to ``checked``. It asks
    plugins' option sources, so a handler makes it before its write transaction."""
    if "spec" not in checked.sent:
        return None
    try:
        return await savable_spec(checked.raw["spec"], request.app[HOST].registry, stored=stored)
    except Invalid as exc:
        checked.details.extend(exc.details)
        return None


async def check_fields(conn: AsyncConnection, checked: Checked[Any]) -> None:
    """The checks a model cannot make besides the spec's: the zone and the series. Problems
    are added to ``checked``."""
    given = checked.given
    tz = given.get("timezone")
    if tz is not None:
        try:
            zone(tz)
        except ValueError:
            checked.fail(
                f'body.timezone: "{tz}" is not a known IANA time zone, such as '
                '"Europe/Berlin" or "UTC"'
            )
    series_id = given.get("series_id")
    if series_id is not None and await get_series(conn, series_id) is None:
        checked.fail(f"body.series_id: no series {series_id}")


async def check_required(
    conn: AsyncConnection,
    checked: Checked[Any],
    spec: dict[str, Any] | None,
    *,
    own_slug: str | None = None,
) -> None:
    """The event the spec requires must exist (and be another): each problem is added to
    ``checked``, named by its path (:func:`pageant.events.campaigns.unknown_required`)."""
    for problem in await unknown_required(conn, spec, own_slug=own_slug):
        checked.fail(problem)


async def check_blackouts(
    conn: AsyncConnection, checked: Checked[Any], spec: dict[str, Any] | None
) -> None:
    """Every blackout the spec subscribes to must exist: an unknown slug is a problem added
    to ``checked``, named by its place in ``spec.blackouts``."""
    if spec is None:
        return
    slugs = subscribed(spec)
    for slug in await unknown_blackouts(conn, slugs):
        checked.fail(
            f'spec.blackouts[{slugs.index(slug)}]: no blackout "{slug}" '
            "(GET /api/v1/admin/blackouts lists them)"
        )


def _now(request: web.Request) -> datetime:
    return request.app[HOST].clock.now()


async def _event(request: web.Request, conn: AsyncConnection, definition_id: int) -> dict[str, Any]:
    """The event as every route answers it (:class:`EventOut`), at the host's now."""
    return await definitions.render_event(
        conn, definition_id, now=_now(request), registry=request.app[HOST].registry
    )


# ── Routes ──────────────────────────────────────────────────────────────────────────────────

LIST_QUERY = {
    "state": Query(
        "only events in this state: draft, ready or archived",
        {"type": "string", "enum": list(STATES)},
    ),
    "limit": LIMIT,
    "cursor": CURSOR,
}


@routes.get(
    "/api/v1/admin/events",
    roles=STAFF,
    summary="List events, in id order",
    response=EventList,
    query=LIST_QUERY,
)
async def list_events(request: web.Request) -> web.Response:
    problems = []
    state = request.query.get("state")
    if state is not None and state not in STATES:
        problems.append(f"query.state: expected one of {', '.join(STATES)}; got {state!r}")
    try:
        page = page_from(request)
    except Invalid as exc:
        problems = exc.details + problems
    if problems:
        raise Invalid("invalid query", details=problems)
    async with request.app[HOST].db.begin() as conn:
        rows = await definitions.list_definitions(
            conn, state=state, after_id=page.after_id, limit=page.limit + 1
        )
        items = await definitions.render_events(
            conn, rows[: page.limit], now=_now(request), registry=request.app[HOST].registry
        )
    return respond(page.answer(items, rows))


@routes.post(
    "/api/v1/admin/events",
    roles=AUTHORS,
    summary="Create a draft event",
    body=EventCreate,
    response=EventOut,
    status=201,
)
async def create_event(request: web.Request) -> web.Response:
    raw = await prefetch(request)
    host = request.app[HOST]
    who = principal(request)
    checked = check_body(EventCreate, raw)
    spec = await check_spec(checked, request, stored=None)
    async with host.db.begin() as conn:
        await check_fields(conn, checked)
        check_key_names(checked, spec, otherwise=specs.empty_spec())
        await check_blackouts(conn, checked, spec)
        await check_required(conn, checked, spec, own_slug=checked.given.get("slug"))
        checked.raise_if_invalid()
        body = checked.body
        assert body is not None
        spec = spec if spec is not None else specs.empty_spec()
        check_role_floor(who.role, None, spec, host.registry)
        definition_id = await definitions.create_definition(
            conn,
            title=body.title,
            slug=body.slug,
            derived_slug=slugify(body.title),
            spec=spec,
            now=_now(request),
            actor=who.actor,
            description=body.description,
            timezone=body.timezone,
            grace_seconds=body.grace_seconds,
            concurrency_key=body.concurrency_key,
            overlap=body.overlap,
            series_id=body.series_id,
            visibility=body.visibility,
        )
        event = await _event(request, conn, definition_id)
    return respond(event, 201)


@routes.get(
    "/api/v1/admin/events/{id}",
    roles=STAFF,
    summary="One event, with its working-copy spec",
    response=EventOut,
)
async def get_event(request: web.Request) -> web.Response:
    definition_id = int_param(request, "id", "event")
    async with request.app[HOST].db.begin() as conn:
        event = await _event(request, conn, definition_id)
    return respond(event)


@routes.put(
    "/api/v1/admin/events/{id}",
    roles=AUTHORS,
    summary="Edit an event's fields and working copy (a partial update)",
    body=EventUpdate,
    response=EventOut,
)
async def update_event(request: web.Request) -> web.Response:
    definition_id = int_param(request, "id", "event")
    raw = await prefetch(request)
    host = request.app[HOST]
    who = principal(request)
    async with host.db.connect() as conn:
        checked_with = (await definitions.require_definition(conn, definition_id)).spec
    checked = check_body(EventUpdate, raw)
    spec = await check_spec(checked, request, stored=checked_with)
    async with host.db.begin() as conn:
        row = await definitions.require_definition(conn, definition_id, lock=True)
        await check_fields(conn, checked)
        if spec is not None:
            try:
                spec = still_savable(
                    spec, host.registry, checked_with=checked_with, stored=row.spec
                )
            except Invalid as exc:
                checked.details.extend(exc.details)
        check_key_names(checked, spec, otherwise=row.spec)
        await check_blackouts(conn, checked, spec)
        await check_required(conn, checked, spec, own_slug=checked.given.get("slug", row.slug))
        checked.raise_if_invalid()
        changes = dict(checked.given)
        if spec is not None:
            check_role_floor(who.role, row.spec, spec, host.registry)
            changes["spec"] = spec
        definitions.refuse_unless_open(row, "edited")
        await definitions.update_definition(conn, definition_id, changes, now=_now(request))
        event = await _event(request, conn, definition_id)
    return respond(event)


PUBLISH_QUERY = {
    "preview": Query(
        "1: publish nothing, answer what publishing would change (0, the default: publish)",
        {"type": "string", "enum": ["0", "1", "false", "true"]},
    ),
    "occurrences": Query(
        f"with preview=1: how many occurrences each list shows per scope, 1 to "
        f"{preview.MAX_PER_SCOPE} (default {preview.DEFAULT_PER_SCOPE})",
        {"type": "integer", "minimum": 1, "maximum": preview.MAX_PER_SCOPE},
    ),
}


def _publish_query(request: web.Request) -> tuple[bool, int]:
    """``preview`` and ``occurrences`` as read; every problem a 400 naming its parameter."""
    problems = []
    raw_preview = request.query.get("preview", "0")
    previewing = raw_preview in ("1", "true")
    if raw_preview not in ("0", "1", "false", "true"):
        problems.append(f"query.preview: expected 1 or 0 (true or false); got {raw_preview!r}")
    per_scope = preview.DEFAULT_PER_SCOPE
    count = query_count(request, "occurrences", preview.MAX_PER_SCOPE, problems, joined="; got")
    if count is not None:
        if not previewing and not problems:
            problems.append("query.occurrences: only read with preview=1")
        else:
            per_scope = count
    if problems:
        raise Invalid("invalid query", details=problems)
    return previewing, per_scope


@routes.post(
    "/api/v1/admin/events/{id}/publish",
    roles=ADMIN,
    summary="Publish the working copy as the next numbered version (preview=1: only say what "
    "it would change)",
    body=PublishBody,
    body_optional=True,
    response=PublishAnswer,
    query=PUBLISH_QUERY,
)
async def publish_event(request: web.Request) -> web.Response:
    definition_id = int_param(request, "id", "event")
    host = request.app[HOST]
    async with host.db.connect() as conn:
        await definitions.require_definition(conn, definition_id)
    previewing, per_scope = _publish_query(request)
    body = await read_body(request, PublishBody, optional=True)
    if previewing:
        answer = await preview_publish(
            host.db,
            definition_id,
            host.registry,
            now=_now(request),
            actor=principal(request).actor,
            horizon_days=host.settings.horizon_days,
            per_scope=per_scope,
        )
        return respond(answer)
    await publish(host, definition_id, actor=principal(request).actor, reason=body.reason)
    async with host.db.connect() as conn:
        return respond(await _event(request, conn, definition_id))


@routes.post(
    "/api/v1/admin/events/{id}/verify",
    roles=AUTHORS,
    summary="Dry-run the published version; record it verified if it passes",
    body=VerifyBody,
    body_optional=True,
    response=VerifyOut,
)
async def verify_event(request: web.Request) -> web.Response:
    definition_id = int_param(request, "id")
    host = request.app[HOST]
    body = await read_body(request, VerifyBody, optional=True)
    answer = await verify.verify_event(
        host, definition_id, actor=principal(request).actor, params=body.params
    )
    return respond(answer)


@routes.post(
    "/api/v1/admin/events/{id}/rehearse",
    roles=AUTHORS,
    summary="Run a version on a virtual clock in a throwaway database: timeline, spend, refusals",
    body=RehearseBody,
    body_optional=True,
    response=RehearsalOut,
)
async def rehearse_event(request: web.Request) -> web.Response:
    definition_id = int_param(request, "id")
    host = request.app[HOST]
    async with host.db.connect() as conn:
        await definitions.require_definition(conn, definition_id)
    body = await read_body(request, RehearseBody, optional=True)
    report = await rehearsal.rehearse(
        host,
        definition_id,
        version_number=body.version,
        firings=[f.model_dump() for f in body.firings],
        params=body.params,
        from_run=body.from_run,
    )
    return respond(report)


@routes.post(
    "/api/v1/admin/events/{id}/archive",
    roles=ADMIN,
    summary="Archive an event: its schedule stops",
    response=EventOut,
)
async def archive_event(request: web.Request) -> web.Response:
    definition_id = int_param(request, "id", "event")
    host = request.app[HOST]
    async with host.db.begin() as conn:
        await definitions.archive_definition(
            conn, definition_id, now=_now(request), actor=principal(request).actor
        )
        event = await _event(request, conn, definition_id)
    request.app[HOST].wake()
    return respond(event)


@routes.get(
    "/api/v1/admin/events/{id}/versions",
    roles=STAFF,
    summary="An event's published versions, oldest first",
    response=VersionList,
    query={k: LIST_QUERY[k] for k in ("limit", "cursor")},
)
async def list_versions(request: web.Request) -> web.Response:
    definition_id = int_param(request, "id", "event")
    async with request.app[HOST].db.begin() as conn:
        await definitions.require_definition(conn, definition_id)
        page = page_from(request)
        rows = await definitions.list_versions(
            conn, definition_id, after_id=page.after_id, limit=page.limit + 1
        )
    items = [definitions.version_object(r) for r in rows[: page.limit]]
    return respond(page.answer(items, rows))


@routes.get(
    "/api/v1/admin/events/{id}/versions/{number}",
    roles=STAFF,
    summary="One published version of an event",
    response=VersionOut,
)
async def get_version(request: web.Request) -> web.Response:
    definition_id = int_param(request, "id", "event")
    number = int_param(request, "number")
    async with request.app[HOST].db.begin() as conn:
        await definitions.require_definition(conn, definition_id)
        row = await definitions.get_version(conn, definition_id, number)
    if row is None:
        raise NotFound(f"event {definition_id} has no version {number}")
    return respond(definitions.version_object(row))
