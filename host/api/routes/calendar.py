"""The admin calendar: every occurrence in a window, materialised and projected."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from aiohttp import web
from pydantic import BaseModel, Field

from pageant.access.roles import STAFF
from pageant.api.keys import HOST
from pageant.api.routing import ID, INSTANT, MAX_ID, Query, RouteTable, respond, whole_number
from pageant.api.window import read_window
from pageant.errors import Invalid, NotFound
from pageant.events.definitions import get_definition
from pageant.events.series import events_of_series, get_series
from pageant.runs.listing import STATUSES, choices
from pageant.schedules import calendar

routes = RouteTable("calendar")


class DstAdjusted(BaseModel):
    kind: Literal["gap", "fold"]
    shift_minutes: int


class Requirement(BaseModel):
    """Another event's outcome an occurrence requires (its spec's ``requires``)."""

    event: str
    outcome: str
    within: str


class CalendarItem(BaseModel):
    """One occurrence: a run (``materialised``) or a forecast (``projected``)."""

    definition_id: int
    title: str
    scheduled_for: datetime
    local_time: str
    timezone: str
    kind: Literal["materialised", "projected"]
    scope: str
    #: The run's params (a schedule's fan-out makes one run per param set).
    params: dict[str, Any]
    run_id: int | None
    status: str | None
    dst_adjusted: DstAdjusted | None
    #: Set when a person rescheduled the occurrence: the instant it was moved from.
    moved_from: datetime | None
    reason: str | None = Field(
        default=None,
        description=(
            "why the run is as it is, for staff: a missed or failed run's reason, a cancelled "
            "or skipped run's (replaced by run 42 ..., the previous run of this key was "
            "still going), or a catch-up's words (started 40 min late, catching up after the "
            "host was down ...), or what a run held for its requirement waits for (held: "
            "waiting for champion-muster (run 18) to complete)"
        ),
    )
    #: The name of the blackout that holds a ``blacked_out`` run; null otherwise.
    blackout: str | None = None
    #: The event outcome the occurrence requires (the chain of a campaign); null for none.
    requires: Requirement | None = None


class CalendarList(BaseModel):
    items: list[CalendarItem]


def _id(request: web.Request, name: str, problems: list[str]) -> int | None:
    raw = request.query.get(name)
    if raw is None:
        return None
    value = whole_number(raw)
    if value is None or value < 1 or value > MAX_ID:
        problems.append(f"query.{name}: expected an id (a positive whole number); got {raw!r}")
        return None
    return value


@routes.get(
    "/api/v1/admin/calendar",
    roles=STAFF,
    summary="Occurrences in a window: runs, and projections past the horizon",
    response=CalendarList,
    query={
        "from": Query(
            "the window's start, an instant with an offset (inclusive)", INSTANT, required=True
        ),
        "to": Query(
            "the window's end (exclusive), with an offset; at most 400 days after from",
            INSTANT,
            required=True,
        ),
        "series": Query("only events of this series (an id)", ID),
        "definition": Query("only this event (an id)", ID),
        "status": "only runs in these statuses (repeat or comma-separate); drops projections",
        "scope": "only runs of this scope (projections are of the empty scope)",
    },
)
async def get_calendar(request: web.Request) -> web.Response:
    problems: list[str] = []
    start, end = read_window(request, problems)
    series_id = _id(request, "series", problems)
    definition_id = _id(request, "definition", problems)
    statuses = choices(request.query.getall("status", []), STATUSES, "query.status", problems)
    scopes = request.query.getall("scope", [])
    if len(scopes) > 1:
        problems.append(f"query.scope: given {len(scopes)} times; expected at most once")
    if problems:
        raise Invalid("invalid query", details=problems)
    assert start is not None and end is not None
    host = request.app[HOST]
    async with host.db.connect() as conn:
        ids: list[int] | None = None
        if series_id is not None:
            if await get_series(conn, series_id) is None:
                raise NotFound(f"no series {series_id}")
            ids = await events_of_series(conn, series_id)
        if definition_id is not None:
            if await get_definition(conn, definition_id) is None:
                raise NotFound(f"no event {definition_id}")
            ids = [definition_id] if ids is None or definition_id in ids else []
        items = await calendar.calendar_items(
            conn,
            start=start,
            end=end,
            now=host.clock.now(),
            definition_ids=ids,
            statuses=statuses,
            scope=scopes[0] if scopes else None,
        )
    return respond({"items": items})
