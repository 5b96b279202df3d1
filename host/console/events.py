"""Events: the list, a new event, the editor (save, publish, start), and the read-only view.

Every write calls the domain functions the API's routes call, in the same order of checks:
the role (the page's role set, from :mod:`pageant.access.roles`), the event (404), the fields
and the spec (every problem at once, each shown at its field), the role floor (403), then
the state (409). The editor is for ``AUTHORS``; publish and start are ``ADMIN`` only; a
moderator sees the event read-only.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from aiohttp import web

from pageant.access.floor import check_role_floor
from pageant.access.roles import ADMIN, AUTHORS, STAFF
from pageant.builtin_plugins.announce_chat import unconfigured_setting
from pageant.console import editor
from pageant.console.capmeter import meter
from pageant.console.cautions import cautions_view
from pageant.console.clock import page_clock
from pageant.console.keys import host_of, path_id, render, require, see_other
from pageant.console.rehearsal import drawn
from pageant.db.blackouts import ACTIVE, list_blackouts
from pageant.engine import rehearsal
from pageant.errors import Invalid, NotFound, PageantError
from pageant.events import definitions, publishing, verify
from pageant.events.authoring import validator as specs
from pageant.events.blackouts import unknown_blackouts
from pageant.events.campaigns import unknown_required
from pageant.events.publish_preview import preview_publish
from pageant.events.saving import savable_spec, still_savable
from pageant.events.slugs import slugify
from pageant.gates.conditions import OPERATORS
from pageant.gates.durations import parse_after
from pageant.gates.emit import payload_from_text
from pageant.plugins.options import resolve_options
from pageant.runs.console import runs_page
from pageant.runs.create import start_now
from pageant.runs.grid import grid
from pageant.runs.params import PARAM_TYPES, values_from_text
from pageant.schedules.blackouts import subscribed
from pageant.schedules.recurrence import WEEKDAYS, next_occurrence, zone
from pageant.states import Overlap

routes = web.RouteTableDef()
#: The most blackouts the editor offers as boxes (far more than a community keeps).
SHOWN_BLACKOUTS = 500

MAX_TITLE = 200
MAX_DESCRIPTION = 4000
#: The overlap policies the editor's select offers, in the order it lists them.
OVERLAPS = tuple(Overlap)
#: How many occurrences the schedule preview shows.
PREVIEW = 5
RISK_WORDS = {
    "notify": "notify: only tells people",
    "inspect": "inspect: reads the world",
    "change": "change: changes the world",
    "irreversible": "irreversible: cannot be undone",
}


def _event_id(request: web.Request) -> int:
    return path_id(request, "id", "event")


# ── the list ───────────────────────────────────────────────────────────────────


@routes.get("/events")
async def events_page(request: web.Request) -> web.Response:
    require(request, STAFF)
    host = host_of(request)
    state = request.query.get("state") or None
    if state is not None and state not in definitions.STATES:
        raise Invalid(
            f"There is no state {state!r}; choose one of {', '.join(definitions.STATES)}."
        )
    async with host.db.begin() as conn:
        rows = await definitions.list_definitions(conn, state=state, limit=500)
        items = await definitions.render_events(
            conn, rows, now=host.clock.now(), registry=host.registry
        )
    return render(request, "events.html", events=items, state=state, states=definitions.STATES)


# ── a new event ────────────────────────────────────────────────────────────────


def _check_overlap(value: str, problems: list[str]) -> None:
    if value not in OVERLAPS:
        problems.append(f"overlap: {value!r} is not one of {', '.join(OVERLAPS)}")


def _check_fields(title: str, timezone: str, description: str, problems: list[str]) -> None:
    if not title:
        problems.append("title: a title is required")
    elif len(title) > MAX_TITLE:
        problems.append(f"title: at most {MAX_TITLE} characters; this one has {len(title)}")
    try:
        zone(timezone)
    except ValueError:
        problems.append(
            f'timezone: "{timezone}" is not a known IANA time zone, such as "Europe/Berlin" '
            'or "UTC"'
        )
    if len(description) > MAX_DESCRIPTION:
        problems.append(f"description: at most {MAX_DESCRIPTION} characters")


def _field(form: Any, name: str) -> str:
    value = form.get(name)
    return value.strip() if isinstance(value, str) else ""


@routes.get("/events/new")
async def new_event_page(request: web.Request) -> web.Response:
    require(request, AUTHORS)
    return render(request, "event_new.html", values={"timezone": "UTC"}, errors={})


@routes.post("/events")
async def create_event(request: web.Request) -> web.Response:
    session = require(request, AUTHORS)
    host = host_of(request)
    form = await request.post()
    title, timezone = _field(form, "title"), _field(form, "timezone") or "UTC"
    description = _field(form, "description")
    problems: list[str] = []
    _check_fields(title, timezone, description, problems)
    if problems:
        values = {"title": title, "timezone": timezone, "description": description}
        return render(
            request,
            "event_new.html",
            status=400,
            values=values,
            errors=editor.place_errors(problems),
        )
    async with host.db.begin() as conn:
        definition_id = await definitions.create_definition(
            conn,
            title=title,
            slug=None,
            derived_slug=slugify(title),
            spec=specs.empty_spec(),
            now=host.clock.now(),
            actor=session.principal.actor,
            description=description,
            timezone=timezone,
        )
    return see_other(f"/events/{definition_id}")


# ── the editor ─────────────────────────────────────────────────────────────────


def preview(schedule: dict[str, Any], timezone: str, now: datetime) -> list[dict[str, Any]]:
    """The next occurrences of a schedule in its zone, each with any DST adjustment."""
    found: list[dict[str, Any]] = []
    after = now
    try:
        for _ in range(PREVIEW):
            occ = next_occurrence(schedule, timezone, after)
            if occ is None:
                break
            found.append({"at": occ.at, "local": occ.local, "dst_adjusted": occ.dst_adjusted})
            after = occ.at + timedelta(seconds=1)
    except (ValueError, TypeError, AttributeError):
        return found
    return found


def _phases_of(spec: Any) -> list[dict[str, Any]]:
    phases = spec.get("phases") if isinstance(spec, dict) else None
    return [p for p in phases or [] if isinstance(p, dict) and p.get("key")]


async def _options(registry: Any, settings: Any = None) -> dict[str, dict[str, Any]]:
    """Every option source's current values (a failing source answers its reason); a leg
    the host has nowhere to send to (its setting unset) is marked in the legs' picker."""
    found = {
        source_id: await resolve_options(source)
        for source_id, source in sorted(registry.option_sources.items())
    }
    legs = found.get("core.options.legs") or {}
    for item in legs.get("items") or []:
        missing = unconfigured_setting(item["value"], settings)
        if missing is not None:
            item["label"] = f"{item['label']} (not configured: {missing} is not set)"
    return found


async def _editor(
    request: web.Request,
    event: dict[str, Any],
    spec: dict[str, Any],
    *,
    status: int = 200,
    errors: list[str] | None = None,
    notice: str = "",
    fields: dict[str, str] | None = None,
    partial: bool = False,
    **extra: Any,
) -> web.Response:
    """The editor page, or with ``partial`` only its form (what htmx swaps in place after a
    structural button: add, move or remove a phase, a step or a condition)."""
    host = host_of(request)
    registry = host.registry
    catalog_actions = sorted(registry.actions.values(), key=lambda a: a.id)
    runs, _ids = await runs_page(host, event["id"], after_id=0, limit=50)
    async with host.db.connect() as conn:
        published = await definitions.published_version(conn, event["id"])
        subscribed_to = set(subscribed(spec))
        blackouts = [
            b
            for b in await list_blackouts(conn, limit=SHOWN_BLACKOUTS)
            if b.state == ACTIVE or b.slug in subscribed_to
        ]
    published_spec = published.spec if published is not None else None
    fields = fields or {
        "title": event["title"],
        "timezone": event["timezone"],
        "description": event["description"],
        "overlap": event["overlap"],
    }
    return render(
        request,
        "_editor_form.html" if partial else "editor.html",
        status=status,
        grid=None if partial else await grid(host, event["id"], _phases_of(event["spec"])),
        firing_rows=firing_rows(event["spec"], registry),
        event=event,
        clock=page_clock(request, event["timezone"]),
        fields=fields,
        view=editor.editor_view(spec, registry),
        cautions=cautions_view(spec, registry),
        preview=preview(spec.get("schedule") or {}, fields["timezone"], host.clock.now()),
        actions=catalog_actions,
        triggers=sorted(registry.triggers.values(), key=lambda t: t.id),
        options=await _options(registry, host_of(request).settings),
        operators=OPERATORS,
        param_types=PARAM_TYPES,
        option_sources=sorted(registry.option_sources.values(), key=lambda o: o.id),
        risk_words=RISK_WORDS,
        overlaps=OVERLAPS,
        weekdays=WEEKDAYS,
        on_failure=specs.ON_FAILURE,
        units=editor.AFTER_UNITS,
        errors=editor.place_errors(errors or []),
        all_errors=errors or [],
        readable_errors=[editor.readable(e) for e in errors or []],
        meter=await meter(host, spec),
        notice=notice,
        runs=runs,
        dormant=specs.dormant_items(event["spec"]),
        start_params=(published_spec or {}).get("params") or [],
        blackouts=blackouts,
        **extra,
    )


async def _event(request: web.Request, definition_id: int) -> dict[str, Any]:
    host = host_of(request)
    async with host.db.begin() as conn:
        return await definitions.render_event(
            conn, definition_id, now=host.clock.now(), registry=host.registry
        )


@routes.get("/events/{id}")
async def event_page(request: web.Request) -> web.Response:
    session = require(request, STAFF)
    event = await _event(request, _event_id(request))
    if session.principal.role not in AUTHORS:
        host = host_of(request)
        runs, _ids = await runs_page(host, event["id"], after_id=0, limit=50)
        return render(
            request,
            "event_view.html",
            grid=await grid(host, event["id"], _phases_of(event["spec"])),
            event=event,
            clock=page_clock(request, event["timezone"]),
            view=editor.editor_view(event["spec"], host.registry),
            cautions=cautions_view(event["spec"], host.registry),
            preview=preview(
                event["spec"].get("schedule") or {}, event["timezone"], host.clock.now()
            ),
            runs=runs,
        )
    notice = "Saved." if request.query.get("saved") else ""
    if request.query.get("published"):
        notice = f"Published as version {event['current_version']['number']}."
    warned = len(event.get("warnings") or [])
    if notice and warned:
        notice += f" {warned} warning{'s' if warned > 1 else ''}: see Warnings below."
    return await _editor(
        request, event, event["spec"], notice=notice, notice_tone="warn" if warned else None
    )


@routes.post("/events/{id}")
async def save_event(request: web.Request) -> web.Response:
    """Every editor button posts here: ``op=save`` saves, the others change the form."""
    session = require(request, AUTHORS)
    host = host_of(request)
    definition_id = _event_id(request)
    event = await _event(request, definition_id)
    form = await request.post()
    spec = editor.spec_from_form(form, host.registry)
    fields = {
        "title": _field(form, "title"),
        "timezone": _field(form, "timezone") or "UTC",
        "description": _field(form, "description"),
        # A form without the select (one posted by a script) leaves the policy as it is.
        "overlap": _field(form, "overlap") or event["overlap"],
    }
    op = _field(form, "op") or "save"
    if op != "save":
        notice = editor.apply_op(spec, op, form, host.registry)
        return await _editor(
            request,
            event,
            spec,
            notice=notice,
            fields=fields,
            partial=request.headers.get("HX-Request") == "true",
            unsaved=True,
            focus=editor.focus_after(spec, op),
        )
    problems: list[str] = []
    _check_fields(fields["title"], fields["timezone"], fields["description"], problems)
    _check_overlap(fields["overlap"], problems)
    try:
        async with host.db.connect() as conn:
            checked_with = (await definitions.require_definition(conn, definition_id)).spec
        # The API's check, made before the write transaction as the API makes it: it asks
        # the plugins' option sources.
        try:
            checked = await savable_spec(spec, host.registry, stored=checked_with)
        except Invalid as exc:
            problems.extend(exc.details)
            checked = None
        if problems or checked is None:
            raise Invalid("The event was not saved; fix the fields marked below.", details=problems)
        async with host.db.begin() as conn:
            row = await definitions.require_definition(conn, definition_id, lock=True)
            try:
                checked = still_savable(
                    checked, host.registry, checked_with=checked_with, stored=row.spec
                )
            except Invalid as exc:
                raise Invalid(
                    "The event was not saved; fix the fields marked below.", details=exc.details
                ) from None
            unknown = await unknown_blackouts(conn, subscribed(checked))
            if unknown:
                slugs = subscribed(checked)
                raise Invalid(
                    "The event was not saved; fix the fields marked below.",
                    details=[
                        f'spec.blackouts[{slugs.index(s)}]: no blackout "{s}"' for s in unknown
                    ],
                )
            unmet = await unknown_required(conn, checked, own_slug=row.slug)
            if unmet:
                raise Invalid(
                    "The event was not saved; fix the fields marked below.", details=unmet
                )
            check_role_floor(session.principal.role, row.spec, checked, host.registry)
            definitions.refuse_unless_open(row, "edited")
            await definitions.update_definition(
                conn, definition_id, {**fields, "spec": checked}, now=host.clock.now()
            )
    except PageantError as exc:
        return await _editor(
            request,
            event,
            spec,
            status=exc.status,
            errors=exc.details or [exc.message],
            notice=exc.message,
            fields=fields,
            unsaved=True,
        )
    return see_other(f"/events/{definition_id}?saved=1")


@routes.post("/events/{id}/meter")
async def cap_meter(request: web.Request) -> web.Response:
    """The cap meter for the form as it stands (unsaved): htmx posts the editor's fields
    here as they change and swaps the answer into the meter."""
    require(request, AUTHORS)
    host = host_of(request)
    definition_id = _event_id(request)
    async with host.db.connect() as conn:
        await definitions.require_definition(conn, definition_id)
    form = await request.post()
    spec = editor.spec_from_form(form, host.registry)
    return render(request, "_meter.html", meter=await meter(host, spec))


async def _refused(
    request: web.Request,
    definition_id: int,
    exc: PageantError,
    *,
    errors: list[str] | None = None,
) -> web.Response:
    """The stored event's editor again, with the refusal of a publish, start or verify
    (an unknown event stays a 404)."""
    if isinstance(exc, NotFound):
        raise exc
    return await _editor_refusing(request, definition_id, exc, errors=errors)


async def _editor_refusing(
    request: web.Request,
    definition_id: int,
    exc: PageantError,
    *,
    errors: list[str] | None = None,
) -> web.Response:
    """The stored event's editor, showing ``exc`` (its details, or ``errors``)."""
    event = await _event(request, definition_id)
    return await _editor(
        request,
        event,
        event["spec"],
        status=exc.status,
        errors=exc.details or [exc.message] if errors is None else errors,
        notice=exc.message,
    )


@routes.post("/events/{id}/publish-preview")
async def publish_preview(request: web.Request) -> web.Response:
    """The editor with what publishing the saved working copy would change, and a publish
    form asking for the reason when the change needs one."""
    session = require(request, ADMIN)
    host = host_of(request)
    definition_id = _event_id(request)
    try:
        changes = await preview_publish(
            host.db,
            definition_id,
            host.registry,
            now=host.clock.now(),
            actor=session.principal.actor,
            horizon_days=host.settings.horizon_days,
        )
    except PageantError as exc:
        return await _refused(request, definition_id, exc)
    event = await _event(request, definition_id)
    return await _editor(request, event, event["spec"], publish_preview=changes)


def _publish_reason(form: Any) -> str | None:
    """The publish form's reason: None when left empty; longer than allowed is refused."""
    text = str(form.get("reason") or "").strip()
    if len(text) > definitions.MAX_PUBLISH_REASON:
        raise Invalid(
            "the publish's reason is too long",
            details=[f"reason: at most {definitions.MAX_PUBLISH_REASON} characters"],
        )
    return text or None


@routes.post("/events/{id}/publish")
async def publish(request: web.Request) -> web.Response:
    session = require(request, ADMIN)
    host = host_of(request)
    definition_id = _event_id(request)
    try:
        reason = _publish_reason(await request.post())
        await publishing.publish(host, definition_id, actor=session.principal.actor, reason=reason)
    except PageantError as exc:
        return await _refused(request, definition_id, exc)
    return see_other(f"/events/{definition_id}?published=1")


async def _given_params(request: web.Request, definition_id: int) -> dict[str, Any]:
    """The run params a start, a verification or a rehearsal form gives: one field per
    param the published version declares, named ``param.<name>``, each read as its declared
    type. An empty field is left out, so its default (or its being required) decides."""
    host = host_of(request)
    form = await request.post()
    words = [
        f"{name.removeprefix('param.')}={value}"
        for name, value in form.items()
        if name.startswith("param.") and isinstance(value, str) and value != ""
    ]
    async with host.db.connect() as conn:
        published = await definitions.published_version(conn, definition_id)
    declared = (published.spec or {}).get("params") if published is not None else None
    return values_from_text(declared, words)


@routes.post("/events/{id}/start")
async def start(request: web.Request) -> web.Response:
    session = require(request, ADMIN)
    host = host_of(request)
    definition_id = _event_id(request)
    try:
        params = await _given_params(request, definition_id)
        run_id, _created = await start_now(
            host, definition_id, params=params, actor=session.principal.actor
        )
    except PageantError as exc:
        # A param that does not fit is named; a refusal of the start itself is its sentence.
        shown = exc.details if isinstance(exc, Invalid) else []
        return await _refused(request, definition_id, exc, errors=shown)
    return see_other(f"/runs/{run_id}")


@routes.post("/events/{id}/verify")
async def verify_published(request: web.Request) -> web.Response:
    """Dry-run the published version (``POST /api/v1/admin/events/{id}/verify``'s function)
    with the run params its form gives: the answer on the editor, or every problem at the
    field its path names."""
    session = require(request, AUTHORS)
    host = host_of(request)
    definition_id = _event_id(request)
    try:
        params = await _given_params(request, definition_id)
        answer = await verify.verify_event(
            host, definition_id, actor=session.principal.actor, params=params
        )
    except PageantError as exc:
        return await _refused(request, definition_id, exc)
    event = await _event(request, definition_id)
    number = answer["version"]["number"]
    notice = f"Version {number} passed verification and is recorded verified."
    return await _editor(request, event, event["spec"], notice=notice, verified=answer)


#: The most rows of simulated firings the rehearsal's form offers, and the most firings one
#: row may stand for.
FIRING_ROWS = 6
MAX_FIRING_COUNT = 100


def firing_rows(spec: Any, registry: Any) -> list[dict[str, Any]]:
    """The rehearsal form's rows of simulated firings: one for each ``on`` gate of ``spec``
    (its trigger, its count, a minute after the phase could begin), then blank rows up to
    :data:`FIRING_ROWS`; each row with its trigger's declared variables as fields."""
    rows: list[dict[str, Any]] = []
    for minute, phase in enumerate(_phases_of(spec), start=1):
        found = phase.get("advance")
        gate: dict[str, Any] = found if isinstance(found, dict) else {}
        trigger = gate.get("on") if isinstance(gate.get("on"), str) else None
        if trigger and len(rows) < FIRING_ROWS:
            count = gate.get("count") if isinstance(gate.get("count"), int) else 1
            rows.append({"trigger": trigger, "after": f"{minute}m", "count": count})
    while len(rows) < FIRING_ROWS:
        rows.append({"trigger": "", "after": "", "count": 1})
    for row in rows:
        declared = registry.triggers.get(row["trigger"]) if row["trigger"] else None
        row["variables"] = [v.name for v in declared.variables] if declared else []
    return rows


def firings_of_form(form: Any, registry: Any) -> list[dict[str, Any]]:
    """The simulated firings the rehearsal's form asks for, as the rehearsal takes them
    (``{after, trigger, payload}``, a row's count as that many firings a second apart);
    Invalid naming each field that does not fit."""
    problems: list[str] = []
    firings: list[dict[str, Any]] = []
    for i in range(FIRING_ROWS):
        trigger = _field(form, f"firing-{i}-trigger")
        if not trigger:
            continue
        where = f"simulated firing {i + 1}"
        written = _field(form, f"firing-{i}-after")
        after = 0 if written in ("", "0", "0s", "0m") else parse_after(written)
        if after is None:
            problems.append(f'{where}: the offset is a length such as "30s", "5m" or "2h"')
            continue
        raw_count = _field(form, f"firing-{i}-count") or "1"
        if not raw_count.isdigit() or not 1 <= int(raw_count) <= MAX_FIRING_COUNT:
            problems.append(f"{where}: the count is a whole number from 1 to {MAX_FIRING_COUNT}")
            continue
        prefix = f"firing-{i}-var-"
        words = [
            f"{name[len(prefix) :]}={value.strip()}"
            for name, value in form.items()
            if name.startswith(prefix) and isinstance(value, str) and value.strip()
        ]
        try:
            payload = payload_from_text(registry, trigger, words)
        except PageantError as exc:
            problems.extend(f"{where}: {d}" for d in exc.details or [exc.message])
            continue
        for n in range(int(raw_count)):
            firings.append(
                {"after": f"{(after or 0) + n}s", "trigger": trigger, "payload": payload}
            )
    if problems:
        raise Invalid("the simulated firings do not fit", details=problems)
    return firings


@routes.post("/events/{id}/rehearse")
async def rehearse_published(request: web.Request) -> web.Response:
    """Rehearse the published version on a virtual clock in a throwaway database
    (``POST /api/v1/admin/events/{id}/rehearse``'s function, with the run params and the
    simulated firings its form gives, so an event with ``on`` gates rehearses to its end):
    the timeline drawn, the worst-case spend against the caps, refusals and stalls."""
    require(request, AUTHORS)
    host = host_of(request)
    definition_id = _event_id(request)
    async with host.db.connect() as conn:
        await definitions.require_definition(conn, definition_id)
    try:
        params = await _given_params(request, definition_id)
        firings = firings_of_form(await request.post(), host.registry)
        report = await rehearsal.rehearse(host, definition_id, params=params, firings=firings)
    except PageantError as exc:
        return await _editor_refusing(request, definition_id, exc)
    event = await _event(request, definition_id)
    outcome = report["outcome"]
    tone = (
        "bad"
        if outcome["status"] == "failed"
        else "ok"
        if outcome["status"] == "completed"
        and outcome["health"] == "ok"
        and not report.get("refusals")
        and not any(d.get("over_cap") for d in report.get("spend") or [])
        else "warn"
    )
    notice = (
        f"Rehearsed version {report['version']['number']}: the run ended {outcome['status']}"
        if outcome.get("ended_seconds") is not None
        else f"Rehearsed version {report['version']['number']}: the run stopped "
        f"{outcome['status']} ({outcome['health']})"
    ) + f" in {report['took_ms']} ms of real time; nothing was performed."
    return await _editor(
        request, event, event["spec"], notice=notice, notice_tone=tone, rehearsed=drawn(report)
    )
