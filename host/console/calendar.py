"""The calendar: a month grid or an agenda of every occurrence, materialised (a run exists)
or projected (the schedule says so, past what is made), with DST markers and a series filter.

The occurrences are :func:`pageant.schedules.calendar.calendar_items`' (the function behind
``GET /api/v1/admin/calendar``), read through its outline: every one placed on a day and
counted, and only those the page shows (six a day, or the agenda's first 300) read whole.
Days are the days of each event's own zone.
"""

from __future__ import annotations

import calendar as cal
from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from typing import Any

from aiohttp import web

from pageant.access.roles import STAFF
from pageant.console.keys import host_of, render, require
from pageant.errors import Invalid, NotFound
from pageant.events.series import events_of_series, get_series, list_series
from pageant.schedules.calendar import calendar_outline, complete

routes = web.RouteTableDef()

VIEWS = ("month", "agenda")
#: A month's day cell lists this many occurrences, then links to that day's agenda.
PER_DAY = 6
#: The agenda lists this many occurrences, then says how many more there are: a page of
#: thousands is neither readable nor fast (choose a day or a series to see them).
AGENDA_MAX = 300


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


@routes.get("/calendar")
async def calendar_page(request: web.Request) -> web.Response:
    require(request, STAFF)
    host = host_of(request)
    now = host.clock.now()
    view = request.query.get("view") or "month"
    if view not in VIEWS:
        raise Invalid(f"There is no view {view!r}; choose month or agenda.")
    month = _month(request.query.get("month"), now.date())
    if not 1900 < month.year < 9000:
        raise Invalid("Choose a month between the years 1901 and 8999.")
    raw_series = request.query.get("series") or ""
    series_id = None
    if raw_series:
        if not (raw_series.isascii() and raw_series.isdigit()) or len(raw_series) > 18:
            raise Invalid(f"{raw_series!r} is not a series id.")
        series_id = int(raw_series)
    weeks = cal.Calendar(firstweekday=0).monthdatescalendar(month.year, month.month)
    # Days are each event's own: the window reaches a day past the grid either side (no zone
    # is more than 14 hours from UTC), and what falls outside the shown days is dropped.
    start = datetime.combine(weeks[0][0] - timedelta(days=1), datetime.min.time(), UTC)
    end = datetime.combine(weeks[-1][-1] + timedelta(days=2), datetime.min.time(), UTC)
    if view == "agenda":
        shown = {month.replace(day=d).isoformat() for d in range(1, 32) if _valid(month, d)}
    else:
        shown = {d.isoformat() for week in weeks for d in week}
    day = request.query.get("day") or ""
    if day:
        try:
            date.fromisoformat(day)
        except ValueError:
            raise Invalid(f"{day!r} is not a day; expected YYYY-MM-DD") from None
    async with host.db.connect() as conn:
        ids = None
        if series_id is not None:
            if await get_series(conn, series_id) is None:
                raise NotFound(f"There is no series {series_id}.")
            ids = await events_of_series(conn, series_id)
        # Every occurrence is placed and counted; only the ones the page shows are read whole.
        items = await calendar_outline(conn, start=start, end=end, now=now, definition_ids=ids)
        items = [i for i in items if i["local_time"][:10] in shown]
        if day:
            items = [i for i in items if i["local_time"][:10] == day]
        total = len(items)
        counts: dict[str, int] = defaultdict(int)
        if view == "agenda":
            items = items[:AGENDA_MAX]
        else:
            kept = []
            for item in items:
                counts[item["local_time"][:10]] += 1
                if counts[item["local_time"][:10]] <= PER_DAY:
                    kept.append(item)
            items = kept
        items = await complete(conn, items)
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
        total=total,
        day=day,
        day_counts=counts,
        per_day=PER_DAY,
        series=all_series,
        series_id=series_id,
        today=now.date(),
    )
