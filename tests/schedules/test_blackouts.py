"""Blackouts as the schedule reads them: periods in the blackout's own zone across DST
changes, every problem named with its path, and what the reconciliation does with an
occurrence inside one (on both dialects, time injected)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import insert

from pageant.db.tables import event_blackouts
from pageant.events import blackouts as staff
from pageant.schedules import reconcile
from pageant.schedules.blackouts import Calendar, check_periods, covering, windows
from pageant.states import RUN_ENDED, RunStatus
from tests.factories import log_lines
from tests.scheduling import ready_event, runs_of, spec_with, utc, weekly

SUNDAY_NIGHT = {"kind": "weekly", "days": ["sunday"], "start": "01:30", "end": "03:30"}


def berlin(*periods: dict[str, Any], name: str = "Maintenance") -> Calendar:
    errors: list[str] = []
    checked = check_periods(list(periods), "body.periods", errors)
    assert errors == []
    return Calendar("maintenance", name, "Europe/Berlin", tuple(checked))


# ── periods into instants ─────────────────────────────────────────────────────────────────


def test_a_weekly_window_follows_the_zone_across_spring_forward():
    # 28 March 2027, 02:00 -> 03:00 in Berlin: 01:30 CET is 00:30Z, 03:30 CEST is 01:30Z.
    found = windows(berlin(SUNDAY_NIGHT), utc(2027, 3, 20), utc(2027, 4, 5))
    assert [(w.start, w.end) for w in found] == [
        (utc(2027, 3, 21, 0, 30), utc(2027, 3, 21, 2, 30)),  # winter: two real hours
        (utc(2027, 3, 28, 0, 30), utc(2027, 3, 28, 1, 30)),  # the gap day: one real hour
        (utc(2027, 4, 3, 23, 30), utc(2027, 4, 4, 1, 30)),  # summer: two real hours
    ]


def test_a_weekly_window_follows_the_zone_across_fall_back():
    # 31 October 2027, 03:00 -> 02:00: 01:30 CEST is 23:30Z, 03:30 CET is 02:30Z.
    (window,) = windows(berlin(SUNDAY_NIGHT), utc(2027, 10, 30), utc(2027, 11, 1))
    assert (window.start, window.end) == (utc(2027, 10, 30, 23, 30), utc(2027, 10, 31, 2, 30))


def test_an_instant_is_covered_by_the_half_open_window():
    calendar = berlin(SUNDAY_NIGHT)
    assert covering([calendar], utc(2027, 3, 28, 0, 30)) is calendar  # the first instant
    assert covering([calendar], utc(2027, 3, 28, 1, 29)) is calendar
    assert covering([calendar], utc(2027, 3, 28, 1, 30)) is None  # the end runs
    assert covering([calendar], utc(2027, 3, 28, 0, 29)) is None


def test_an_overnight_window_runs_past_midnight():
    late = {"kind": "weekly", "days": ["friday"], "start": "22:00", "end": "02:00"}
    (window,) = windows(berlin(late), utc(2027, 3, 5), utc(2027, 3, 6, 12))
    assert (window.start, window.end) == (utc(2027, 3, 5, 21), utc(2027, 3, 6, 1))


def test_dated_periods_are_whole_local_days_and_ranges():
    days = {"kind": "dates", "start": "2027-12-24", "end": "2027-12-26"}
    span = {"kind": "range", "start": "2027-07-01T10:00", "end": "2027-07-02T08:00"}
    found = windows(berlin(days, span), utc(2027, 1, 1), utc(2028, 1, 1))
    assert [(w.start, w.end) for w in found] == [
        (utc(2027, 7, 1, 8), utc(2027, 7, 2, 6)),
        (utc(2027, 12, 23, 23), utc(2027, 12, 26, 23)),  # 24 to 26 December, inclusive
    ]
    one_day = berlin({"kind": "dates", "start": "2027-12-24"})
    assert covering([one_day], utc(2027, 12, 24, 22, 59)) is one_day
    assert covering([one_day], utc(2027, 12, 24, 23)) is None


def test_every_problem_is_named_with_its_path():
    errors: list[str] = []
    periods = [
        {"kind": "weekly", "days": ["fri"], "start": "25:00", "end": "18:00", "extra": 1},
        {"kind": "dates", "start": "2027-02-30"},
        {"kind": "range", "start": "2027-03-01T10:00", "end": "2027-03-01T10:00"},
        {"kind": "dates", "start": "2027-01-01", "end": "2028-01-02"},
        {"kind": "hourly"},
        "friday",
    ]
    assert check_periods(periods, "body.periods", errors) == []
    assert errors == [
        'body.periods[0].extra: not a field of a "weekly" period',
        'body.periods[0].days[0]: "fri" is not a weekday; expected one of monday, tuesday, '
        "wednesday, thursday, friday, saturday, sunday",
        'body.periods[0].start: expected a 24-hour time as "HH:MM"; got "25:00"',
        'body.periods[1].start: "2027-02-30" is not a real date',
        'body.periods[2].end: "2027-03-01T10:00" is not after the start',
        "body.periods[3].end: a period may last at most 366 days",
        'body.periods[4].kind: expected one of weekly, dates, range; got "hourly"',
        "body.periods[5]: expected an object with a kind",
    ]


def test_a_dated_period_of_a_year_is_the_longest_accepted():
    errors: list[str] = []
    leap = {"kind": "dates", "start": "2028-01-01", "end": "2028-12-31"}  # 366 days
    across = {"kind": "dates", "start": "2027-01-01", "end": "2028-01-01"}  # 366 days
    assert len(check_periods([leap, across], "p", errors)) == 2
    assert errors == []
    check_periods([{"kind": "dates", "start": "2027-01-01", "end": "2028-01-02"}], "p", errors)
    assert errors == ["p[0].end: a period may last at most 366 days"]


def test_a_weekly_period_of_no_time_and_an_empty_list_are_refused():
    errors: list[str] = []
    same = {"kind": "weekly", "days": ["friday"], "start": "18:00", "end": "18:00"}
    check_periods([same], "p", errors)
    check_periods([], "q", errors)
    assert errors == [
        "p[0].end: must differ from start (a period of no time)",
        "q: expected a non-empty list of periods",
    ]


def test_the_blacked_out_status_is_terminal_and_taken_back_only_by_a_lift():
    assert RunStatus.BLACKED_OUT in RUN_ENDED
    assert RunStatus.BLACKED_OUT.public == "blacked_out"


# ── the reconciliation ────────────────────────────────────────────────────────────────────


async def add_blackout(db: Any, now: Any, slug: str, name: str, *periods: dict[str, Any]) -> None:
    async with db.begin() as conn:
        await conn.execute(
            insert(event_blackouts).values(
                slug=slug,
                name=name,
                timezone="Europe/Berlin",
                periods=list(periods),
                state="active",
                created_at=now,
                updated_at=now,
            )
        )


async def subscribed_event(db: Any, now: Any, schedule: dict[str, Any], *slugs: str) -> Any:
    published = await ready_event(db, now, schedule)
    async with db.begin() as conn:
        from sqlalchemy import update

        from pageant.db.tables import event_versions

        await conn.execute(
            update(event_versions)
            .where(event_versions.c.id == published.version_id)
            .values(spec={**spec_with(schedule), "blackouts": list(slugs)})
        )
    return published


async def expand(db: Any, host: Any, published: Any, now: Any) -> reconcile.Outcome:
    from pageant.db.schedules import published_schedules

    async with db.begin() as conn:
        (row,) = await published_schedules(conn, definition_ids=[published.id])
        return await reconcile.reconcile_schedule(
            conn,
            reconcile.Plan.of(row),
            now=now,
            end=now + timedelta(days=14),
            registry=host.registry,
            supersede=False,
        )


async def test_occurrences_in_the_spring_forward_window_are_blacked_out_and_named(db, host, clock):
    clock.advance(timedelta(days=20).total_seconds())  # Sunday 21 March 2027, 12:00Z
    now = clock.now()
    await add_blackout(db, now, "maintenance", "Sunday maintenance", SUNDAY_NIGHT)
    # 02:30 on 28 March does not exist: it runs at 03:00 CEST (01:00Z), inside the window.
    event = await subscribed_event(db, now, weekly("sunday", at="02:30"), "maintenance")
    outcome = await expand(db, host, event, now)

    rows = await runs_of(db, event.id)
    assert [(r.occurrence_local, r.status, r.cancel_reason) for r in rows] == [
        ("2027-03-28T02:30", "blacked_out", "Sunday maintenance"),
        ("2027-04-04T02:30", "blacked_out", "Sunday maintenance"),
    ]
    assert (outcome.created, outcome.blacked_out, outcome.created_runs) == (2, 2, [])
    (line,) = await log_lines(db, rows[0].id, "run.status")
    assert (line.detail["from"], line.detail["to"], line.detail["reason"]) == (
        "scheduled",
        "blacked_out",
        "Sunday maintenance",
    )
    # Expanding again changes nothing: the marks are the rows' state, not a side effect.
    again = await expand(db, host, event, now)
    assert (again.created, again.remarked) == (0, 0)


async def test_an_occurrence_outside_every_window_stays_scheduled(db, host, clock):
    now = clock.now()
    await add_blackout(db, now, "maintenance", "Maintenance", SUNDAY_NIGHT)
    event = await subscribed_event(db, now, weekly("sunday", at="03:30"), "maintenance")
    await expand(db, host, event, now)
    assert {r.status for r in await runs_of(db, event.id)} == {"scheduled"}


async def test_a_blackout_added_over_the_horizon_remarks_and_archiving_gives_back(db, host, clock):
    now = clock.now()
    friday = weekly("friday", at="20:00")
    event = await subscribed_event(db, now, friday, "tournament")  # named before it exists
    await expand(db, host, event, now)
    assert [r.status for r in await runs_of(db, event.id)] == ["scheduled", "scheduled"]

    night = {"kind": "weekly", "days": ["friday"], "start": "18:00", "end": "23:00"}
    async with db.begin() as conn:
        blackout_id, remarked = await staff.create_blackout(
            conn,
            {
                "slug": "tournament",
                "name": "Tournament night",
                "timezone": "Europe/Berlin",
                "periods": [night],
            },
            staff.Remarking(now, host.registry, horizon_days=14),
        )
    assert remarked.count == 2
    rows = await runs_of(db, event.id)
    assert [(r.status, r.cancel_reason) for r in rows] == [
        ("blacked_out", "Tournament night"),
        ("blacked_out", "Tournament night"),
    ]

    async with db.begin() as conn:
        back = await staff.archive_blackout(
            conn, blackout_id, staff.Remarking(now, host.registry, horizon_days=14)
        )
    assert back.count == 2
    again = await runs_of(db, event.id)
    assert [r.id for r in again] == [r.id for r in rows]  # the same rows, not new ones
    assert [(r.status, r.cancel_reason, r.ended_at) for r in again] == [
        ("scheduled", None, None),
        ("scheduled", None, None),
    ]
    lines = await log_lines(db, rows[0].id, "run.status")
    assert [(x.detail["from"], x.detail["to"]) for x in lines] == [
        ("scheduled", "blacked_out"),
        ("blacked_out", "scheduled"),
    ]


@pytest.mark.parametrize(
    ("end", "marked"),
    [("20:01", 1), ("20:00", 0)],  # the half-open period, on both sides of its end
)
async def test_an_edit_remarks_on_both_sides_of_a_period_end(db, host, clock, end, marked):
    now = clock.now()
    night = {"kind": "weekly", "days": ["friday"], "start": "18:00", "end": "23:00"}
    async with db.begin() as conn:
        blackout_id, _ = await staff.create_blackout(
            conn,
            {"slug": "t", "name": "T", "timezone": "Europe/Berlin", "periods": [night]},
            staff.Remarking(now, host.registry, horizon_days=14),
        )
    event = await subscribed_event(db, now, weekly("friday", at="20:00"), "t")
    await expand(db, host, event, now)
    assert {r.status for r in await runs_of(db, event.id)} == {"blacked_out"}
    short = {**night, "end": end}
    async with db.begin() as conn:
        remarked = await staff.update_blackout(
            conn,
            blackout_id,
            {"periods": [short]},
            staff.Remarking(now, host.registry, horizon_days=14),
        )
    statuses = [r.status for r in await runs_of(db, event.id)]
    assert statuses == ["blacked_out" if marked else "scheduled"] * 2
    assert remarked.count == (0 if marked else 2)
