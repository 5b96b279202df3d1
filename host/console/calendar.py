"""The calendar: a month grid or an agenda of every occurrence, materialised (a run exists)
or projected (the schedule says so, past what is made), with DST markers and a series filter.

The occurrences are :func:`pageant.schedules.calendar.calendar_items`' (the function behind
``GET /api/v1/admin/calendar``), read through its outline: every one placed on a day and
counted, and only those the page shows (six a day) read whole. The agenda is paged: each
page reads a window that ends where its hundredth occurrence does, and links to the next.

The page is on one clock (:mod:`pageant.console.clock`): the viewer's chosen zone, else UTC.
Every time on it, and the day each occurrence falls on, is that zone's — an event in Berlin
at 01:00 on the 10th is on the 9th of a page in New York — and the page says so once.
"""

from __future__ import annotations

import calendar as cal
from collections import defaultdict
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from aiohttp import web

from pageant.access.roles import STAFF
from pageant.console.clock import page_clock
from pageant.console.keys import host_of, render, require
from pageant.db import occurrences
from pageant.errors import Invalid, NotFound
from pageant.events.series import events_of_series, get_series, list_series
from pageant.schedules import recurrence
from pageant.schedules.calendar import calendar_outline, complete, local_time

routes = web.RouteTableDef()

VIEWS = ("month", "agenda")
#: A month's day cell lists this many occurrences, then links to that day's agenda.
PER_DAY = 6
#: The agenda lists this many occurrences a page, then links to the next page ("later"):
#: a page of thousands is neither readable nor fast.
AGENDA_PAGE = 100
#: What the agenda's ``after`` names: an occurrence's instant, event and run (0: projected).
Key = tuple[datetime, int, int]


def _day(item: dict[str, Any], tz: str) -> str:
    """The day (``YYYY-MM-DD``) an occurrence falls on in the page's zone ``tz``."""
    return local_time(item["scheduled_for"], tz)[:10]


def _on_clock(items: list[dict[str, Any]], tz: str) -> list[dict[str, Any]]:
    """``items`` with ``local_time`` on the page's clock ``tz`` (the calendar's functions
    give each its own event's)."""
    return [{**item, "local_time": local_time(item["scheduled_for"], tz)} for item in items]


def _key(item: dict[str, Any]) -> Key:
    """An occurrence's place in the agenda's order (the calendar's: instant, event, run)."""
    return (item["scheduled_for"], item["definition_id"], item["run_id"] or 0)


def _after(raw: str) -> Key | None:
    """The agenda's cursor, ``<UTC instant>,<event id>,<run id>``; None when not given."""
    if not raw:
        return None
    parts = raw.split(",")
    try:
        if len(parts) != 3 or not all(p.isascii() and p.isdigit() for p in parts[1:]):
            raise ValueError
        at = datetime.fromisoformat(parts[0])
        if at.tzinfo is None or len(parts[1]) > 18 or len(parts[2]) > 18:
            raise ValueError
    except ValueError:
        raise Invalid(
            f"{raw[:80]!r} is not a place in the agenda; follow the page's own links"
        ) from None
    return (at.astimezone(UTC), int(parts[1]), int(parts[2]))


def _cursor(key: Key) -> str:
    return f"{key[0].astimezone(UTC).isoformat()},{key[1]},{key[2]}"


async def _agenda_page(
    conn: Any,
    *,
    start: datetime,
    end: datetime,
    now: datetime,
    ids: list[int] | None,
    shown: set[str],
    after: Key | None,
    tz: str,
) -> tuple[list[dict[str, Any]], Key | None]:
    """Up to :data:`AGENDA_PAGE` outlined occurrences in the calendar's order after
    ``after`` (on the ``shown`` days of zone ``tz``), and the key to continue after (None at
    the end).

    Each round reads only the window up to the instant of the page-plus-one-th run (one
    indexed read), so a page costs what it shows, not what the month holds; rounds repeat
    while what falls on the shown days does not fill the page."""
    lo = max(start, after[0]) if after else start
    found: list[dict[str, Any]] = []
    while lo < end and len(found) <= AGENDA_PAGE:
        nth = await occurrences.nth_instant(
            conn, lo, end, definition_ids=ids, n=AGENDA_PAGE + 1 - len(found)
        )
        # A window never splits an instant: runs at the last instant are all read.
        top = end if nth is None else max(nth, lo + timedelta(microseconds=1))
        for item in await calendar_outline(conn, start=lo, end=top, now=now, definition_ids=ids):
            if _day(item, tz) in shown and (after is None or _key(item) > after):
                found.append(item)
        lo = top
    if len(found) > AGENDA_PAGE:
        return found[:AGENDA_PAGE], _key(found[AGENDA_PAGE - 1])
    return found, None


def _month(raw: str | None, today: date) -> date:
    if not raw:
        return today.replace(day=1)
    try:
        year, month = (int(p) for p in raw.split("-"))
        return date(year, month, 1)
    except ValueError:
        raise Invalid(f"{raw!r} is not a month; expected YYYY-MM, such as 2027-03") from None


def _valid(month: date, day: int) -> bool:
    return day <= cal.monthrange(month.year, month.month)[1]


def _shift(month: date, by: int) -> date:
    index = month.year * 12 + month.month - 1 + by
    return date(index // 12, index % 12 + 1, 1)


def _day_bounds(days: list[date], timezone: str) -> list[datetime]:
    """The UTC instants at which each of ``days`` (and the day after the last) begins in
    ``timezone`` (a zone the page's clock has checked): a local day is the span between two
    of them."""
    zone = recurrence.zone(timezone)
    edges = [*days, days[-1] + timedelta(days=1)]
    return [datetime.combine(d, time(0), tzinfo=zone).astimezone(UTC) for d in edges]


async def _month_places(
    conn: Any,
    *,
    weeks: list[list[date]],
    start: datetime,
    end: datetime,
    now: datetime,
    ids: list[int] | None,
    counts: dict[str, int],
    tz: str,
) -> list[dict[str, Any]]:
    """The month grid's candidates, outlined and on the page's clock ``tz``, with ``counts``
    (occurrences per day of ``tz``) filled in: the first :data:`PER_DAY` runs of each day
    before ``now`` (counted and chosen in the database), and every occurrence from ``now``
    on (runs and projections, :func:`calendar_outline`'s). Runs before ``now`` are never
    projected, so the two halves are the calendar's occurrences, each once."""
    cut = min(max(start, now), end)
    days = [d for week in weeks for d in week]
    items: list[dict[str, Any]] = []
    bounds = [min(b, cut) for b in _day_bounds(days, tz)]
    if start < cut and bounds[0] < bounds[-1]:
        per_day, rows = await occurrences.calendar_days(
            conn, bounds, definition_ids=ids, first=PER_DAY
        )
        for index, n in per_day.items():
            if index >= 0:
                counts[days[index].isoformat()] += n
        items += [
            {
                "definition_id": row.definition_id,
                "scheduled_for": row.scheduled_for,
                "local_time": local_time(row.scheduled_for, tz),
                "kind": "materialised",
                "run_id": row.id,
                "outline": True,
            }
            for row in rows
            if row.day >= 0
        ]
    if cut < end:
        later = await calendar_outline(conn, start=cut, end=end, now=now, definition_ids=ids)
        for item in later:
            counts[_day(item, tz)] += 1
        items += later
    return items


@routes.get("/calendar")
async def calendar_page(request: web.Request) -> web.Response:
    require(request, STAFF)
    host = host_of(request)
    now = host.clock.now()
    clock = page_clock(request)
    tz = clock.tz
    today = now.astimezone(recurrence.zone(tz)).date()
    view = request.query.get("view") or "month"
    if view not in VIEWS:
        raise Invalid(f"There is no view {view!r}; choose month or agenda.")
    month = _month(request.query.get("month"), today)
    if not 1900 < month.year < 9000:
        raise Invalid("Choose a month between the years 1901 and 8999.")
    raw_series = request.query.get("series") or ""
    series_id = None
    if raw_series:
        if not (raw_series.isascii() and raw_series.isdigit()) or len(raw_series) > 18:
            raise Invalid(f"{raw_series!r} is not a series id.")
        series_id = int(raw_series)
    weeks = cal.Calendar(firstweekday=0).monthdatescalendar(month.year, month.month)
    # Days are the page's zone's: the window reaches a day past the grid either side (no zone
    # is more than 14 hours from UTC), and what falls outside the shown days is dropped.
    first_day, last_day = weeks[0][0], weeks[-1][-1]
    if view == "agenda":
        shown = {month.replace(day=d).isoformat() for d in range(1, 32) if _valid(month, d)}
        first_day, last_day = month, _shift(month, 1) - timedelta(days=1)
    else:
        shown = {d.isoformat() for week in weeks for d in week}
    day = request.query.get("day") or ""
    if day:
        try:
            on = date.fromisoformat(day)
        except ValueError:
            raise Invalid(f"{day!r} is not a day; expected YYYY-MM-DD") from None
        if view == "agenda":
            shown &= {day}
            first_day = last_day = on
    after = _after(request.query.get("after") or "") if view == "agenda" else None
    start = datetime.combine(first_day - timedelta(days=1), datetime.min.time(), UTC)
    end = datetime.combine(last_day + timedelta(days=2), datetime.min.time(), UTC)
    later = None
    async with host.db.connect() as conn:
        ids = None
        if series_id is not None:
            if await get_series(conn, series_id) is None:
                raise NotFound(f"There is no series {series_id}.")
            ids = await events_of_series(conn, series_id)
        counts: dict[str, int] = defaultdict(int)
        if view == "agenda":
            # One page in order from ``after``: only what the page shows is read.
            items, next_key = await _agenda_page(
                conn, start=start, end=end, now=now, ids=ids, shown=shown, after=after, tz=tz
            )
            later = _cursor(next_key) if next_key else None
        else:
            # Every occurrence is counted; only those shown are read whole.
            items = await _month_places(
                conn, weeks=weeks, start=start, end=end, now=now, ids=ids, counts=counts, tz=tz
            )
            items = [i for i in items if _day(i, tz) in shown]
            if day:
                items = [i for i in items if _day(i, tz) == day]
            kept: dict[str, int] = defaultdict(int)
            shown_items = []
            for item in sorted(items, key=_key):
                kept[_day(item, tz)] += 1
                if kept[_day(item, tz)] <= PER_DAY:
                    shown_items.append(item)
            items = shown_items
        items = _on_clock(await complete(conn, items, now=now), tz)
        all_series = await list_series(conn, limit=200)
    by_day: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for item in items:
        by_day[item["local_time"][:10]].append(item)
    return render(
        request,
        "calendar.html",
        view=view,
        month=month,
        previous=_shift(month, -1),
        following=_shift(month, 1),
        weeks=weeks,
        by_day=by_day,
        items=items,
        after=after,
        later=later,
        day=day,
        day_counts=counts,
        per_day=PER_DAY,
        series=all_series,
        series_id=series_id,
        today=today,
        clock=clock,
    )
