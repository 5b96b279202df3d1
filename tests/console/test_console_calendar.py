"""The calendar page (both dialects), on the page's one clock: the viewer's chosen zone, else
UTC. Every time on it, its tooltip and the day it falls on are that zone's, whatever the
event's own zone, and the page says which once. The month grid counts and picks each day's
first runs in the database, so it must place every run on the day of the page's zone that
:func:`pageant.schedules.calendar.calendar_items`' instant falls on — across midnight, month
edges and ``now`` — and show the same first six."""

from __future__ import annotations

import calendar as cal
import re
from datetime import UTC, date, datetime, timedelta
from html import unescape
from typing import Any

from sqlalchemy import update

from pageant.db.tables import event_definitions, event_versions
from pageant.runs.create import start_now
from pageant.schedules.calendar import calendar_items, local_time
from tests.console.test_console import page_csrf, sign_in
from tests.factories import announce, phase, publish_event, set_run, spec


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


async def _event_in(host: Any, title: str, timezone: str) -> int:
    event = await publish_event(host.db, host.clock.now(), title=title)
    async with host.db.begin() as conn:
        await conn.execute(
            update(event_versions)
            .where(event_versions.c.id == event.version_id)
            .values(timezone=timezone)
        )
    return event.id


async def _run_at(host: Any, event_id: int, at: datetime, n: int, status: str) -> int:
    run_id, _ = await start_now(host, event_id, scope=f"r{n}", actor="admin:test")
    await set_run(host.db, run_id, scheduled_for=at, status=status)
    return run_id


def _grid(html: str) -> list[tuple[list[int], int]]:
    """Each cell of the month grid, in order: the runs it links to, and how many it says
    are not shown ("and N more")."""
    body = html.split('<table class="month">')[1].split("</table>")[0]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", body, re.S)
    out = []
    for cell in cells:
        runs = [int(n) for n in re.findall(r'href="/runs/(\d+)"', cell)]
        more = re.search(r">and (\d+) more</a>", cell)
        out.append((runs, int(more.group(1)) if more else 0))
    return out


async def _choose_zone(client: Any, zone: str | None) -> None:
    """The viewer's own zone (None: back to the page's, UTC), as the page's switch posts it."""
    csrf = await page_csrf(client, "/calendar")
    form = {"csrf_token": csrf, "want": "mine", "zone": zone} if zone else {"csrf_token": csrf}
    form = {**form, "want": "mine" if zone else "page", "next": "/calendar"}
    answer = await client.post("/zone", data=form, allow_redirects=False)
    assert answer.status == 303, await answer.text()


def _caption(html: str) -> str:
    return unescape(re.search(r'id="zone-caption">([^<]+)<', html).group(1))


async def _expected(host: Any, month: date, tz: str = "UTC") -> list[tuple[list[int], int]]:
    weeks = cal.Calendar(firstweekday=0).monthdatescalendar(month.year, month.month)
    days = [d.isoformat() for week in weeks for d in week]
    async with host.db.connect() as conn:
        items = await calendar_items(
            conn,
            start=datetime.combine(weeks[0][0] - timedelta(days=1), datetime.min.time(), UTC),
            end=datetime.combine(weeks[-1][-1] + timedelta(days=2), datetime.min.time(), UTC),
            now=host.clock.now(),
        )
    by_day: dict[str, list[int]] = {d: [] for d in days}
    for item in items:
        day = local_time(item["scheduled_for"], tz)[:10]
        if day in by_day and item["run_id"] is not None:
            by_day[day].append(item["run_id"])
    return [(by_day[d][:6], max(0, len(by_day[d]) - 6)) for d in days]


async def test_the_month_grid_places_and_counts_runs_as_the_calendar_does(client, tokens, host):
    # now: 2027-03-01 12:00 UTC. Auckland is UTC+13 in February, Los Angeles UTC-8.
    north = await _event_in(host, "Auckland night", "Pacific/Auckland")
    west = await _event_in(host, "Coast night", "America/Los_Angeles")
    spots = [
        (north, utc(2027, 2, 9, 10, 30), "completed"),  # local Feb 9, 23:30
        (north, utc(2027, 2, 9, 11, 30), "completed"),  # local Feb 10, 00:30
        (west, utc(2027, 2, 10, 7, 30), "failed"),  # local Feb 9, 23:30
        (west, utc(2027, 2, 10, 8, 30), "cancelled"),  # local Feb 10, 00:30
        (north, utc(2027, 1, 31, 20, 0), "completed"),  # local Feb 1: on the grid
        (west, utc(2027, 2, 1, 7, 0), "completed"),  # local Jan 31: before the grid
        (west, utc(2027, 3, 1, 7, 0), "completed"),  # local Feb 28, 23:00: its last day
        (north, utc(2027, 2, 28, 23, 30), "completed"),  # UTC's Feb 28, Auckland's Mar 1
        (north, utc(2027, 3, 1, 10, 0), "completed"),  # local Mar 1, before now
        (west, utc(2027, 3, 1, 15, 0), "scheduled"),  # local Mar 1, after now
        (west, utc(2027, 3, 1, 12, 0), "running"),  # exactly now
    ]
    # a crowded local day (Feb 16 in Auckland), the two zones interleaved on it
    spots += [(north, utc(2027, 2, 15, 12, n), "completed") for n in range(0, 16, 2)]
    spots += [(west, utc(2027, 2, 16, 12, n), "completed") for n in range(1, 6, 2)]
    for n, (event_id, at, status) in enumerate(spots):
        await _run_at(host, event_id, at, n, status)
    await sign_in(client, tokens["moderator"])
    # On UTC (the page's own), then on either event's zone as the viewer's choice.
    for zone in (None, "Pacific/Auckland", "America/Los_Angeles"):
        if zone:
            await _choose_zone(client, zone)
        for month in (date(2027, 2, 1), date(2027, 3, 1)):
            html = await (await client.get(f"/calendar?month={month:%Y-%m}")).text()
            expected = await _expected(host, month, zone or "UTC")
            assert _grid(html) == expected, (zone, month)
    # and the expectations are not empty: the edges and the crowded day are in them
    february = await _expected(host, date(2027, 2, 1))
    assert february[14] == (february[14][0], 2) and len(february[14][0]) == 6  # Feb 15
    assert len(february[8][0]) == 2 and len(february[9][0]) == 2  # Feb 9 and Feb 10
    assert len(february[0][0]) == 1 and len(february[27][0]) == 1  # Feb 1 and Feb 28
    march = await _expected(host, date(2027, 3, 1))
    assert len(march[0][0]) == 4  # Mar 1: early, before, at and after now
    # Auckland's days are not UTC's: its crowded day is Feb 16.
    southern = await _expected(host, date(2027, 2, 1), "Pacific/Auckland")
    assert southern[15] == (southern[15][0], 2) and len(southern[15][0]) == 6


async def test_the_month_grid_filters_by_series(client, tokens, host):
    from tests.conftest import bearer

    north = await _event_in(host, "Auckland night", "Pacific/Auckland")
    other = await _event_in(host, "Other night", "UTC")
    await _run_at(host, north, utc(2027, 2, 9, 11, 30), 0, "completed")
    await _run_at(host, other, utc(2027, 2, 9, 11, 30), 1, "completed")
    made = await client.post(
        "/api/v1/admin/series", headers=bearer(tokens["admin"]), json={"title": "Southern"}
    )
    series_id = (await made.json())["id"]
    async with host.db.begin() as conn:
        await conn.execute(
            update(event_definitions)
            .where(event_definitions.c.id == north)
            .values(series_id=series_id)
        )
    await sign_in(client, tokens["moderator"])
    html = await (await client.get("/calendar?month=2027-02")).text()
    assert "Auckland night" in html and "Other night" in html
    html = await (await client.get(f"/calendar?month=2027-02&series={series_id}")).text()
    assert "Auckland night" in html and "Other night" not in html


def _cell(html: str, day: int) -> str:
    """The month grid's cell of ``day`` in the month shown."""
    body = html.split('<table class="month">')[1].split("</table>")[0]
    for cell in re.findall(r"<td([^>]*)>(.*?)</td>", body, re.S):
        if "other" not in cell[0] and re.search(rf'<span class="day">{day}\b', cell[1]):
            return cell[1]
    raise AssertionError(f"no cell for day {day}")


async def test_the_calendar_is_on_the_page_clock_not_the_events(client, tokens, host):
    # An event in Berlin at 03:30 its time on Feb 10: 02:30 UTC, and 21:30 on Feb 9 in
    # New York.
    berlin = await _event_in(host, "Berlin dawn", "Europe/Berlin")
    run_id = await _run_at(host, berlin, utc(2027, 2, 10, 2, 30), 0, "completed")
    link = f'href="/runs/{run_id}"'
    await sign_in(client, tokens["moderator"])

    html = await (await client.get("/calendar?month=2027-02")).text()
    assert _caption(html) == "Times are in UTC."
    assert html.count('id="zone-caption"') == 1 and "Show times in my zone" in html
    assert link in _cell(html, 10) and link not in _cell(html, 9)
    assert '<time datetime="2027-02-10T02:30:00Z" title="2027-02-10 02:30:00 UTC"' in html
    assert ">02:30</time> Berlin dawn" in html and "03:30" not in html
    agenda = await (await client.get("/calendar?view=agenda&month=2027-02")).text()
    assert "<dt>2027-02-10</dt>" in agenda and ">02:30</time> Berlin dawn" in agenda
    assert "(an event in Europe/Berlin)" in agenda

    await _choose_zone(client, "America/New_York")
    html = await (await client.get("/calendar?month=2027-02")).text()
    assert _caption(html) == "Times are in your zone, America/New_York."
    assert "Show times in UTC" in html
    assert link in _cell(html, 9) and link not in _cell(html, 10)
    assert '<time datetime="2027-02-10T02:30:00Z" title="2027-02-09 21:30:00 EST"' in html
    assert ">21:30</time> Berlin dawn" in html and "03:30" not in html
    agenda = await (await client.get("/calendar?view=agenda&month=2027-02")).text()
    assert "<dt>2027-02-09</dt>" in agenda and "<dt>2027-02-10</dt>" not in agenda
    one_day = await client.get("/calendar?view=agenda&month=2027-02&day=2027-02-09")
    assert ">21:30</time> Berlin dawn" in await one_day.text()

    await _choose_zone(client, None)
    html = await (await client.get("/calendar?month=2027-02")).text()
    assert _caption(html) == "Times are in UTC." and link in _cell(html, 10)


async def test_a_projected_occurrence_is_on_the_page_clock(client, tokens, host):
    # Tuesdays at 00:30 in Berlin, projected from now (Monday 2027-03-01 12:00 UTC): Mar 2
    # 00:30 in Berlin is Mar 1 23:30 UTC and Mar 1 18:30 in New York.
    weekly = {
        **spec(phase("main", announce("hi"))),
        "schedule": {"kind": "weekly", "days": ["tuesday"], "time": "00:30"},
    }
    await publish_event(
        host.db, host.clock.now(), weekly, title="Berlin midnight", timezone="Europe/Berlin"
    )
    await sign_in(client, tokens["moderator"])
    agenda = await client.get("/calendar?view=agenda&month=2027-03&day=2027-03-01")
    text = await agenda.text()
    assert ">23:30</time> Berlin midnight" in text, text
    await _choose_zone(client, "America/New_York")
    agenda = await client.get("/calendar?view=agenda&month=2027-03&day=2027-03-01")
    assert ">18:30</time> Berlin midnight" in await agenda.text()
