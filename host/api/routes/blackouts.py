"""Blackouts: named, shared calendars of periods that subscribed events do not run in.
Reads are staff; writes are authoring (admin, editor), like series.

An event subscribes through its spec's top-level ``blackouts`` (a list of slugs). Every
write re-marks the subscribed events' occurrences inside the horizon in the same
transaction, and answers ``{"blackout": ..., "remarked": n}``: how many occurrences a
blackout took or gave back (:mod:`pageant.events.blackouts`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from pageant.access.roles import AUTHORS, STAFF
from pageant.api.bodies import SLUG_SCHEMA, Checked, check_body, check_slug, no_defaults, prefetch
from pageant.api.keys import HOST
from pageant.api.pagination import page_from
from pageant.api.routing import CURSOR, LIMIT, Query, RouteTable, int_param, respond
from pageant.db.blackouts import ACTIVE, ARCHIVED, list_blackouts
from pageant.errors import Invalid
from pageant.events import blackouts
from pageant.events.blackouts import Remarking
from pageant.schedules.blackouts import MAX_NAME, MAX_PERIODS, PERIOD_KINDS
from pageant.schedules.recurrence import WEEKDAYS

routes = RouteTable("blackouts")

Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_NAME)]

#: One period as the document shows it; the checks (and their messages, each with its path)
#: are :func:`pageant.schedules.blackouts.check_periods`.
PERIODS_SCHEMA: dict[str, Any] = {
    "description": "the periods, read in the blackout's zone: weekly wall-clock windows "
    '({"kind": "weekly", "days": ["friday"], "start": "18:00", "end": "23:00"}; an end at or '
    'before the start runs past midnight), whole days ({"kind": "dates", "start": '
    '"2026-12-24", "end"?: "2026-12-26"}, both inclusive) and dated ranges ({"kind": '
    '"range", "start": "2026-12-24T10:00", "end": "2026-12-26T08:00"}); see docs/schedules.md',
    "minItems": 1,
    "maxItems": MAX_PERIODS,
    "items": {
        "type": "object",
        "properties": {
            "kind": {"enum": list(PERIOD_KINDS)},
            "days": {"type": "array", "items": {"enum": list(WEEKDAYS)}, "minItems": 1},
            "start": {"type": "string"},
            "end": {"type": "string"},
        },
        "required": ["kind", "start"],
        "additionalProperties": False,
    },
}


Periods = Annotated[list[dict[str, Any]], Field(json_schema_extra=PERIODS_SCHEMA)]


class BlackoutCreate(BaseModel):
    """A new blackout: its slug (what events name), name, zone and periods."""

    model_config = ConfigDict(extra="forbid", strict=True)

    slug: str = Field(json_schema_extra=SLUG_SCHEMA)
    name: Name
    timezone: str = Field("UTC", description="the IANA zone its periods are read in")
    periods: Periods

    _slug = field_validator("slug")(check_slug)


class BlackoutUpdate(BaseModel):
    """A partial update: only the fields sent change."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra=no_defaults)

    # None defaults mark a field as absent (see pageant.api.routes.series).
    slug: str = Field(None, json_schema_extra=SLUG_SCHEMA)  # type: ignore[assignment]  # None: absent
    name: Name = None  # type: ignore[assignment]  # None: absent, see above
    timezone: str = None  # type: ignore[assignment]  # None: absent, see above
    periods: Periods = None  # type: ignore[assignment]  # None: absent, see above

    _slug = field_validator("slug")(check_slug)


class BlackoutOut(BaseModel):
    id: int
    slug: str
    name: str
    timezone: str
    periods: list[dict[str, Any]]
    state: Literal["active", "archived"]


class BlackoutChange(BaseModel):
    """A write's answer: the blackout, and how many occurrences of the subscribed events it
    marked ``blacked_out`` or gave back to ``scheduled``."""

    blackout: BlackoutOut
    remarked: int


class BlackoutList(BaseModel):
    items: list[BlackoutOut]
    next_cursor: str | None


def _check_fields(checked: Checked[Any]) -> dict[str, Any]:
    """The fields that passed the model, with the zone and the periods checked too (their
    problems added to ``checked``, each with its path)."""
    return blackouts.check_zone_and_periods(checked.given, checked.details)


async def _answer(
    request: web.Request, blackout_id: int, remarked: blackouts.Remarked, status: int = 200
) -> web.Response:
    async with request.app[HOST].db.begin() as conn:
        row = await blackouts.require_blackout(conn, blackout_id)
    await remarked.announce(request.app[HOST])
    return respond({"blackout": blackouts.blackout_object(row), "remarked": remarked.count}, status)


@routes.get(
    "/api/v1/admin/blackouts",
    roles=STAFF,
    summary="List blackouts, in id order",
    response=BlackoutList,
    query={
        "state": Query(
            "only blackouts in this state: active or archived",
            {"type": "string", "enum": [ACTIVE, ARCHIVED]},
        ),
        "limit": LIMIT,
        "cursor": CURSOR,
    },
)
async def list_all(request: web.Request) -> web.Response:
    state = request.query.get("state")
    if state is not None and state not in (ACTIVE, ARCHIVED):
        raise Invalid(
            "invalid query", details=[f"query.state: expected active or archived; got {state!r}"]
        )
    page = page_from(request)
    async with request.app[HOST].db.begin() as conn:
        rows = await list_blackouts(conn, after_id=page.after_id, limit=page.limit + 1, state=state)
    items = [blackouts.blackout_object(r) for r in rows[: page.limit]]
    return respond(page.answer(items, rows))


@routes.post(
    "/api/v1/admin/blackouts",
    roles=AUTHORS,
    summary="Create a blackout (re-marks the events that name its slug)",
    body=BlackoutCreate,
    response=BlackoutChange,
    status=201,
)
async def create(request: web.Request) -> web.Response:
    host = request.app[HOST]
    checked = check_body(BlackoutCreate, await prefetch(request))
    given = _check_fields(checked)
    checked.raise_if_invalid()
    body = checked.body
    assert body is not None
    values = {
        "slug": body.slug,
        "name": body.name,
        "timezone": body.timezone,
        "periods": given["periods"],
    }
    async with host.db.begin() as conn:
        blackout_id, remarked = await blackouts.create_blackout(conn, values, Remarking.of(host))
    return await _answer(request, blackout_id, remarked, 201)


@routes.get(
    "/api/v1/admin/blackouts/{id}", roles=STAFF, summary="One blackout", response=BlackoutOut
)
async def get_one(request: web.Request) -> web.Response:
    blackout_id = int_param(request, "id", "blackout")
    async with request.app[HOST].db.begin() as conn:
        row = await blackouts.require_blackout(conn, blackout_id)
    return respond(blackouts.blackout_object(row))


@routes.put(
    "/api/v1/admin/blackouts/{id}",
    roles=AUTHORS,
    summary="Edit a blackout (a partial update; re-marks the subscribed events)",
    body=BlackoutUpdate,
    response=BlackoutChange,
)
async def update(request: web.Request) -> web.Response:
    host = request.app[HOST]
    blackout_id = int_param(request, "id", "blackout")
    raw = await prefetch(request)
    async with host.db.begin() as conn:
        await blackouts.require_blackout(conn, blackout_id)
        checked = check_body(BlackoutUpdate, raw)
        given = _check_fields(checked)
        checked.raise_if_invalid()
        remarked = await blackouts.update_blackout(conn, blackout_id, given, Remarking.of(host))
    return await _answer(request, blackout_id, remarked)


@routes.post(
    "/api/v1/admin/blackouts/{id}/archive",
    roles=AUTHORS,
    summary="Archive a blackout: it applies to nothing, and the occurrences it held come back",
    response=BlackoutChange,
)
async def archive(request: web.Request) -> web.Response:
    host = request.app[HOST]
    blackout_id = int_param(request, "id", "blackout")
    async with host.db.begin() as conn:
        remarked = await blackouts.archive_blackout(conn, blackout_id, Remarking.of(host))
    return await _answer(request, blackout_id, remarked)
