"""The public calendar and pages, for players: no token, nothing staff-only.

Every answer may be cached for a minute by anyone (``Cache-Control: public, max-age=60``):
the calendar changes on the scale of a publish or a cancel, and a page served to many players
at once should not cost a calendar computation each. Errors are not marked cacheable, and a
staff, draft or archived event answers exactly as an unknown slug does.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from aiohttp import web
from pydantic import BaseModel, Field

from pageant.api.keys import HOST
from pageant.api.routing import INSTANT, Query, RouteTable, query_count, respond
from pageant.api.window import instant, read_window
from pageant.errors import Invalid
from pageant.schedules import public_pages as public
from pageant.states import PublicEnd, PublicStatus

routes = RouteTable("public")

CACHE_CONTROL = "public, max-age=60"
#: Progress moves with every firing: a page that polls it is told within seconds.
PROGRESS_CACHE_CONTROL = "public, max-age=5"


class PublicSeriesRef(BaseModel):
    """The series an event belongs to, when that series is public."""

    slug: str
    title: str


class PublicEvent(BaseModel):
    """An event as players see it."""

    slug: str
    title: str
    description: str
    timezone: str
    series: PublicSeriesRef | None


class PublicRequirement(BaseModel):
    """Another public event's outcome an occurrence requires: its slug, the outcome
    (completed, failed, cancelled or ended) and how long before the occurrence it may have
    ended."""

    event: str
    outcome: str
    within: str


class PublicOccurrence(BaseModel):
    """One occurrence: a run (``materialised``) or a forecast past them (``projected``)."""

    event: PublicEvent
    scheduled_for: datetime
    local_time: str
    status: PublicStatus
    kind: Literal["materialised", "projected"]
    #: The run's params: which server, say, when a schedule fans out over several.
    params: dict[str, Any] = Field(default_factory=dict)
    #: The name of the blackout an occurrence is ``blacked_out`` by; null otherwise.
    blackout: str | None = None
    #: The public event whose outcome the occurrence requires (a campaign's chain); null
    #: for none, and when the event it requires is not public.
    requires: PublicRequirement | None = None


class PublicCalendar(BaseModel):
    items: list[PublicOccurrence]


class PublicResultEntry(BaseModel):
    rank: int | None
    name: str
    detail: str


class PublicResults(BaseModel):
    """A results table a step of the occurrence reported."""

    title: str
    entries: list[PublicResultEntry]


class PublicLastCompleted(BaseModel):
    """How the latest completed occurrence ended."""

    scheduled_for: datetime
    local_time: str
    ended_at: datetime | None
    participants: int
    results: list[PublicResults]


class PublicProgress(BaseModel):
    """A count gate of a run under way that its event shows players: "Bosses slain
    tonight: 37 of 50"."""

    label: str = Field(description="what is counted, as the gate's label (or its phase's) says")
    count: int = Field(description="how many have been counted so far")
    target: int = Field(description="how many the gate takes")
    reached: bool = Field(description="whether count has reached target")
    scheduled_for: datetime = Field(description="the instant of the run it belongs to")
    local_time: str
    params: dict[str, Any] = Field(default_factory=dict)


class PublicProgressList(BaseModel):
    items: list[PublicProgress]


class PublicEventPage(PublicEvent):
    """A public event's page: the event, its next occurrence and the ones after it, how
    its latest completed occurrence ended (null when none has), and the progress of its
    runs under way."""

    next_occurrence: datetime | None
    upcoming: list[PublicOccurrence]
    last_completed: PublicLastCompleted | None
    progress: list[PublicProgress]


class PublicPastOccurrence(BaseModel):
    """An occurrence that is over, and how it ended."""

    scheduled_for: datetime
    local_time: str
    status: PublicEnd
    participants: int


class PublicHistory(BaseModel):
    items: list[PublicPastOccurrence]
    next_before: datetime | None


class PublicSeriesEvent(PublicEvent):
    next_occurrence: datetime | None


class PublicSeriesPage(BaseModel):
    """A public series' page: its public events and their next occurrences."""

    slug: str
    title: str
    description: str
    events: list[PublicSeriesEvent]
    upcoming: list[PublicOccurrence]


def _cacheable(data: object) -> web.Response:
    response = respond(data)
    response.headers["Cache-Control"] = CACHE_CONTROL
    return response


@routes.get(
    "/api/v1/public/events",
    roles=None,
    summary="The public calendar: occurrences of public events in a window",
    response=PublicCalendar,
    query={
        "from": Query(
            "the window's start, an instant with an offset (inclusive); default now", INSTANT
        ),
        "to": Query(
            "the window's end (exclusive), with an offset; at most 400 days after from; "
            "default 30 days after from",
            INSTANT,
        ),
        "series": "only events of this public series (a slug)",
    },
)
async def calendar(request: web.Request) -> web.Response:
    host = request.app[HOST]
    now = host.clock.now()
    problems: list[str] = []
    start, end = read_window(request, problems, default_start=now, default_span=public.DEFAULT_SPAN)
    if problems:
        raise Invalid("invalid query", details=problems)
    assert start is not None and end is not None
    async with host.db.connect() as conn:
        items = await public.public_calendar(
            conn, start=start, end=end, now=now, series=request.query.get("series")
        )
    return _cacheable({"items": items})


def _page(path: str, summary: str, model: type[BaseModel], read: Any) -> None:
    """Declare ``GET path``: the public page ``read`` answers for the ``{slug}`` in the path
    at the host's now (cacheable, as every public answer)."""

    async def page(request: web.Request) -> web.Response:
        host = request.app[HOST]
        async with host.db.connect() as conn:
            found = await read(conn, request.match_info["slug"], now=host.clock.now())
        return _cacheable(found)

    page.__name__ = read.__name__
    routes.get(path, roles=None, summary=summary, response=model)(page)


_page(
    "/api/v1/public/events/{slug}",
    "A public event's page: its next occurrences",
    PublicEventPage,
    public.event_page,
)


@routes.get(
    "/api/v1/public/events/{slug}/progress",
    roles=None,
    summary="A public event's progress: the count gates its runs under way show players",
    response=PublicProgressList,
)
async def event_progress(request: web.Request) -> web.Response:
    host = request.app[HOST]
    async with host.db.connect() as conn:
        found = await public.event_progress(conn, request.match_info["slug"], now=host.clock.now())
    response = respond(found)
    response.headers["Cache-Control"] = PROGRESS_CACHE_CONTROL
    return response


@routes.get(
    "/api/v1/public/events/{slug}/history",
    roles=None,
    summary="A public event's past occurrences, latest first, with how each ended",
    response=PublicHistory,
    query={
        "before": Query(
            "only occurrences scheduled before this instant (next_before of the previous page)",
            INSTANT,
        ),
        "limit": Query(
            f"1 to {public.MAX_HISTORY} (default {public.DEFAULT_HISTORY})",
            {"type": "integer", "minimum": 1, "maximum": public.MAX_HISTORY},
        ),
    },
)
async def event_history(request: web.Request) -> web.Response:
    host = request.app[HOST]
    problems: list[str] = []
    before = None
    if "before" in request.query:
        before = instant(request, "before", problems)
    limit = query_count(request, "limit", public.MAX_HISTORY, problems) or public.DEFAULT_HISTORY
    if problems:
        raise Invalid("invalid query", details=problems)
    async with host.db.connect() as conn:
        page = await public.event_history(
            conn, request.match_info["slug"], before=before, limit=limit
        )
    return _cacheable(page)


_page(
    "/api/v1/public/series/{slug}",
    "A public series' page: its public events and their next occurrences",
    PublicSeriesPage,
    public.series_page,
)
