"""The public calendar and pages: what players see of the schedule, without a token.

Only events whose ``visibility`` is ``public`` and whose state is ``ready`` are shown, and a
series only when it is public itself (:mod:`pageant.db.public_calendar` filters both in SQL).
The occurrences are the staff calendar's (:func:`pageant.schedules.calendar.calendar_items`:
materialised rows, projections past them), re-rendered field by field into a shape that holds
nothing staff-only: no ids, no scope, no spec, no actor, no error, no concurrency key.

A run's status is told in the words a player needs: ``scheduled``, ``running`` (starting,
running, paused or ending: under way), ``completed``, ``cancelled`` (a person's cancel, or a
run that failed in flight: either way it was called off) and ``missed``. An occurrence a
republish withdrew (``superseded``) is not shown at all: the event was rescheduled, not called
off, and its new occurrences are on the calendar already.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db import outcomes
from pageant.db import public_calendar as public_db
from pageant.db import public_progress as progress_db
from pageant.db.definitions import read_pinned
from pageant.db.rows import AnyRow
from pageant.errors import NotFound
from pageant.runs.versions import phases_of
from pageant.schedules import calendar
from pageant.states import RunStatus

#: The public calendar's window when the query names no ``to``.
DEFAULT_SPAN = timedelta(days=30)
#: How many occurrences a page lists under ``upcoming``.
UPCOMING = 10
# A page looks a month ahead for its next occurrences, and only if that holds too few, as far
# as a calendar window may reach.
_PAGE_SPANS = (timedelta(days=31), calendar.MAX_WINDOW)

#: A run's status as players are told it.
PUBLIC_STATUS = {status.value: status.public.value for status in RunStatus}


def event_object(row: AnyRow) -> dict[str, Any]:
    """The one public rendering of an event.

    Renders a row of :func:`pageant.db.public_calendar.public_events`.
    """
    series = None
    if row.series_slug is not None:
        series = {"slug": row.series_slug, "title": row.series_title}
    return {
        "slug": row.slug,
        "title": row.title,
        "description": row.description,
        "timezone": row.timezone,
        "series": series,
    }


def _occurrence(
    item: dict[str, Any], event: dict[str, Any], public_slugs: set[str]
) -> dict[str, Any]:
    status = "scheduled" if item["kind"] == "projected" else PUBLIC_STATUS[item["status"]]
    return {
        "event": event,
        "scheduled_for": item["scheduled_for"],
        "local_time": item["local_time"],
        "status": status,
        "kind": item["kind"],
        # The declared params (the server, say); a bare scope stays staff data.
        "params": {k: v for k, v in (item.get("params") or {}).items() if k != "scope"},
        "blackout": item.get("blackout"),
        "requires": _public_requirement(item.get("requires"), public_slugs),
    }


def _public_requirement(
    required: dict[str, Any] | None, public_slugs: set[str]
) -> dict[str, Any] | None:
    # The chain is told only when the event it names is public too: a staff event's slug
    # is staff data.
    if required is None or required["event"] not in public_slugs:
        return None
    return dict(required)


async def _occurrences(
    conn: AsyncConnection,
    events: Sequence[AnyRow],
    *,
    start: datetime,
    end: datetime,
    now: datetime,
) -> list[dict[str, Any]]:
    rendered = {row.id: event_object(row) for row in events}
    items = await calendar.calendar_items(
        conn, start=start, end=end, now=now, definition_ids=list(rendered)
    )
    cancelled = [i["run_id"] for i in items if i["status"] == "cancelled"]
    withdrawn = await public_db.superseded_runs(conn, cancelled)
    public_slugs: set[str] = set()
    if any(item.get("requires") for item in items):
        public_slugs = {row.slug for row in await public_db.public_events(conn)}
    return [
        _occurrence(item, rendered[item["definition_id"]], public_slugs)
        for item in items
        if item["run_id"] is None or item["run_id"] not in withdrawn
    ]


async def _upcoming(
    conn: AsyncConnection, events: Sequence[AnyRow], *, now: datetime
) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for span in _PAGE_SPANS:
        items = await _occurrences(conn, events, start=now, end=now + span, now=now)
        if len(items) >= UPCOMING:
            break
    return items[:UPCOMING]


async def public_calendar(
    conn: AsyncConnection,
    *,
    start: datetime,
    end: datetime,
    now: datetime,
    series: str | None = None,
) -> list[dict[str, Any]]:
    """Occurrences of public ready events with ``start <= scheduled_for < end``, in instant
    order, each ``{event, scheduled_for, local_time, status, kind}``; only the events of the
    public series ``series`` (a slug) when given.

    An unknown or staff series is the same :class:`NotFound`. The window's bounds are the
    caller's to check; more than :data:`pageant.schedules.calendar.MAX_ITEMS` is :class:`Invalid`.
    """
    series_id = None
    if series is not None:
        found = await public_db.public_series(conn, series)
        if found is None:
            raise NotFound(f"no series {series!r}")
        series_id = found.id
    events = await public_db.public_events(conn, series_id=series_id)
    return await _occurrences(conn, events, start=start, end=end, now=now)


async def event_page(conn: AsyncConnection, slug: str, *, now: datetime) -> dict[str, Any]:
    """A public event's page: the event, its ``next_occurrence`` (an instant, or None) and
    its next :data:`UPCOMING` occurrences from ``now`` on (cancelled ones included, so
    players are told). A staff, draft, archived or unknown event is the same
    :class:`NotFound`."""
    row = await public_db.public_event(conn, slug)
    if row is None:
        raise NotFound(f"no event {slug!r}")
    following = await calendar.next_occurrences(conn, [row.id], now=now)
    return {
        **event_object(row),
        "next_occurrence": following[row.id],
        "upcoming": await _upcoming(conn, [row], now=now),
        "last_completed": await _last_completed(conn, row),
        "progress": await _progress(conn, row),
    }


async def event_progress(conn: AsyncConnection, slug: str, *, now: datetime) -> dict[str, Any]:
    """A public event's progress alone (``{"items": [...]}``, as :func:`_progress`), for a
    page that polls it; the same :class:`NotFound` as the event's page."""
    row = await public_db.public_event(conn, slug)
    if row is None:
        raise NotFound(f"no event {slug!r}")
    return {"items": await _progress(conn, row)}


async def _progress(conn: AsyncConnection, event: AnyRow) -> list[dict[str, Any]]:
    """The public count gates of the event's runs under way, each ``{label, count, target,
    reached, scheduled_for, local_time, params}``: what the gate's ``label`` (or its
    phase's) counts, its tally and how many it takes. Only a gate its run's pinned spec
    marks ``"public": true`` is told, and of it nothing but these: no trigger, condition,
    phase key or run id (:mod:`pageant.events.authoring.progress`)."""
    shown: dict[int, dict[str, str]] = {}
    items = []
    for gate in await progress_db.count_gates_under_way(conn, event.id):
        if gate.version_id not in shown:
            shown[gate.version_id] = await _public_gates(conn, gate.version_id)
        label = shown[gate.version_id].get(gate.phase)
        if label is None:
            continue
        items.append(
            {
                "label": label,
                "count": gate.tally,
                "target": gate.needed,
                "reached": gate.tally >= gate.needed,
                "scheduled_for": gate.scheduled_for,
                "local_time": calendar.local_time(gate.scheduled_for, event.timezone),
                # As on the calendar: the declared params, a bare scope staying staff data.
                "params": {k: v for k, v in (gate.params or {}).items() if k != "scope"},
            }
        )
    return items


async def _public_gates(conn: AsyncConnection, version_id: int) -> dict[str, str]:
    """Phase key -> the label players read, for each public count gate of a version."""
    pinned = await read_pinned(conn, version_id)
    out = {}
    for phase in (phases_of(pinned.spec) if pinned else None) or []:
        advance = phase.get("advance") or {}
        if advance.get("on") and advance.get("public") is True:
            out[phase["key"]] = str(advance.get("label") or phase.get("label") or phase["key"])
    return out


async def _last_completed(conn: AsyncConnection, event: AnyRow) -> dict[str, Any] | None:
    """How the event's latest completed occurrence ended: when, how many took part, and the
    results tables its steps reported (titles and entries only: no step, no phase key)."""
    run = await outcomes.last_completed(conn, event.id)
    if run is None:
        return None
    counts = await outcomes.participant_counts(conn, [run.id])
    tables = await outcomes.results_of(conn, run.id)
    return {
        "scheduled_for": run.scheduled_for,
        "local_time": calendar.local_time(run.scheduled_for, event.timezone),
        "ended_at": run.ended_at,
        "participants": counts[run.id],
        "results": [{"title": t.title, "entries": t.entries} for t in tables],
    }


#: The most past occurrences one history page lists, and how many it lists by default.
MAX_HISTORY, DEFAULT_HISTORY = 100, 20


async def event_history(
    conn: AsyncConnection, slug: str, *, before: datetime | None, limit: int
) -> dict[str, Any]:
    """A public event's past occurrences, latest first: ``{items, next_before}``, each item
    ``{scheduled_for, local_time, status, participants}`` (``status`` in the players' words;
    ``participants`` a count). ``next_before`` is the ``before`` of the next page, or None.
    Occurrences a republish withdrew are not listed. A staff, draft, archived or unknown
    event is the same :class:`NotFound`."""
    row = await public_db.public_event(conn, slug)
    if row is None:
        raise NotFound(f"no event {slug!r}")
    runs = await outcomes.ended_runs(conn, row.id, before=before, limit=limit)
    withdrawn = await public_db.superseded_runs(
        conn, [run.id for run in runs if run.status == "cancelled"]
    )
    shown = [run for run in runs if run.id not in withdrawn]
    counts = await outcomes.participant_counts(conn, [run.id for run in shown])
    return {
        "items": [
            {
                "scheduled_for": run.scheduled_for,
                "local_time": calendar.local_time(run.scheduled_for, row.timezone),
                "status": PUBLIC_STATUS[run.status],
                "participants": counts[run.id],
            }
            for run in shown
        ],
        "next_before": runs[-1].scheduled_for if len(runs) == limit else None,
    }


async def series_page(conn: AsyncConnection, slug: str, *, now: datetime) -> dict[str, Any]:
    """A public series' page: the series, its public ready events each with its
    ``next_occurrence`` (soonest first; those with none last), and the next
    :data:`UPCOMING` occurrences across them. A staff or unknown series is the same
    :class:`NotFound`."""
    series = await public_db.public_series(conn, slug)
    if series is None:
        raise NotFound(f"no series {slug!r}")
    events = await public_db.public_events(conn, series_id=series.id)
    following = await calendar.next_occurrences(conn, [row.id for row in events], now=now)
    listed = sorted(
        events, key=lambda row: (following[row.id] is None, following[row.id] or now, row.slug)
    )
    return {
        "slug": series.slug,
        "title": series.title,
        "description": series.description,
        "events": [{**event_object(row), "next_occurrence": following[row.id]} for row in listed],
        "upcoming": await _upcoming(conn, events, now=now),
    }
