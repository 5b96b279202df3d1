"""The expansion stage: each ready event's published schedule becomes scheduled runs up to the
horizon, in the event's own zone, once, and cheaply when nothing is new. Driven through the
real engine's tick (or the stage itself) on both dialects, with time injected."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import pytest
from sqlalchemy import event as sa_event
from sqlalchemy import insert, update

from pageant.db import schedules
from pageant.db.tables import event_definitions, event_runs, event_versions
from pageant.engine import Engine
from pageant.engine.expand import RETRY_AFTER, expand
from pageant.schedules.reconcile import NEVER
from tests.factories import log_lines, make_host
from tests.scheduling import (
    expanded_until,
    instants,
    monthly,
    once,
    ready_event,
    runs_of,
    set_expanded_until,
    utc,
    weekly,
)

GAP_30 = {"kind": "gap", "shift_minutes": 30}
FOLD = {"kind": "fold", "shift_minutes": 0}


# ── real zones ────────────────────────────────────────────────────────────────


async def test_friday_at_eight_in_berlin_keeps_its_wall_time_across_the_march_change(
    engine, db, clock
):
    clock.set(utc(2027, 3, 20, 12))
    event = await ready_event(db, clock.now(), weekly("friday", at="20:00"))
    await engine.tick()
    rows = await runs_of(db, event.id)
    assert instants(rows) == [
        (utc(2027, 3, 26, 19), "2027-03-26T20:00", None),  # still winter time (+01:00)
        (utc(2027, 4, 2, 18), "2027-04-02T20:00", None),  # summer time (+02:00)
    ]
    for row in rows:
        assert (row.status, row.scope, row.source) == ("scheduled", "", "schedule")
        assert row.version_id == event.version_id


async def test_friday_at_eight_in_berlin_keeps_its_wall_time_across_the_october_change(
    engine, db, clock
):
    clock.set(utc(2027, 10, 25, 12))
    event = await ready_event(db, clock.now(), weekly("friday", at="20:00"))
    await engine.tick()
    assert instants(await runs_of(db, event.id)) == [
        (utc(2027, 10, 29, 18), "2027-10-29T20:00", None),
        (utc(2027, 11, 5, 19), "2027-11-05T20:00", None),
    ]


async def test_a_slot_in_the_spring_gap_runs_at_three_and_says_so_on_the_run_and_its_log(
    engine, db, clock
):
    clock.set(utc(2027, 3, 20, 12))
    event = await ready_event(db, clock.now(), weekly("sunday", at="02:30"))
    await engine.tick()
    plain, shifted = await runs_of(db, event.id)
    assert instants([plain, shifted]) == [
        (utc(2027, 3, 21, 1, 30), "2027-03-21T02:30", None),
        (utc(2027, 3, 28, 1, 0), "2027-03-28T02:30", GAP_30),  # 03:00 on the wall
    ]
    (created,) = await log_lines(db, shifted.id, "run.created")
    assert created.detail["dst_adjusted"] == GAP_30
    assert created.detail["scheduled_for"] == "2027-03-28T01:00:00Z"
    (created,) = await log_lines(db, plain.id, "run.created")
    assert "dst_adjusted" not in created.detail


async def test_a_slot_in_the_autumn_fold_runs_once_at_the_first_of_the_two(engine, db, clock):
    clock.set(utc(2027, 10, 25, 12))
    event = await ready_event(db, clock.now(), weekly("sunday", at="02:30"))
    await engine.tick()
    rows = await runs_of(db, event.id)
    assert instants(rows) == [
        (utc(2027, 10, 31, 0, 30), "2027-10-31T02:30", FOLD),  # not also 01:30Z
        (utc(2027, 11, 7, 1, 30), "2027-11-07T02:30", None),
    ]
    (created,) = await log_lines(db, rows[0].id, "run.created")
    assert created.detail["dst_adjusted"] == FOLD


@pytest.mark.parametrize(
    ("tz", "schedule", "now", "expected"),
    [
        (
            "Asia/Tokyo",
            weekly("monday", "thursday", at="09:00"),
            utc(2027, 3, 20, 12),
            [
                (utc(2027, 3, 22, 0), "2027-03-22T09:00", None),
                (utc(2027, 3, 25, 0), "2027-03-25T09:00", None),
                (utc(2027, 3, 29, 0), "2027-03-29T09:00", None),
                (utc(2027, 4, 1, 0), "2027-04-01T09:00", None),
            ],
        ),
        (
            "Australia/Sydney",
            weekly("sunday", at="02:30"),
            utc(2027, 3, 28, 12),
            [
                (utc(2027, 4, 3, 15, 30), "2027-04-04T02:30", FOLD),
                (utc(2027, 4, 10, 16, 30), "2027-04-11T02:30", None),
            ],
        ),
        (
            "Australia/Sydney",
            weekly("sunday", at="02:30"),
            utc(2027, 9, 28, 12),
            [
                (utc(2027, 10, 2, 16, 0), "2027-10-03T02:30", GAP_30),
                (utc(2027, 10, 9, 15, 30), "2027-10-10T02:30", None),
            ],
        ),
        (
            "Australia/Lord_Howe",
            weekly("sunday", at="02:15"),
            utc(2027, 9, 28, 12),
            [
                (
                    utc(2027, 10, 2, 15, 30),
                    "2027-10-03T02:15",
                    {"kind": "gap", "shift_minutes": 15},
                ),
                (utc(2027, 10, 9, 15, 15), "2027-10-10T02:15", None),
            ],
        ),
        (
            "Australia/Lord_Howe",
            weekly("sunday", at="01:45"),
            utc(2027, 3, 28, 12),
            [
                (utc(2027, 4, 3, 14, 45), "2027-04-04T01:45", FOLD),
                (utc(2027, 4, 10, 15, 15), "2027-04-11T01:45", None),
            ],
        ),
    ],
    ids=["tokyo", "sydney-fold", "sydney-gap", "lord-howe-gap", "lord-howe-fold"],
)
async def test_each_zone_materialises_its_own_instants(
    engine, db, clock, tz, schedule, now, expected
):
    clock.set(now)
    event = await ready_event(db, clock.now(), schedule, tz)
    await engine.tick()
    assert instants(await runs_of(db, event.id)) == expected


async def test_monthly_last_and_fourth_friday_enter_the_horizon_month_by_month(engine, db, clock):
    clock.set(utc(2027, 1, 1))
    last = await ready_event(db, clock.now(), monthly(-1, "friday", "20:00"))
    fourth = await ready_event(db, clock.now(), monthly(4, "friday", "20:00"))
    await engine.tick()
    # 29 January is past the horizon (15 January): nothing yet, and the stage knows when.
    assert await runs_of(db, last.id) == []
    assert await expanded_until(db, last.id) == utc(2027, 1, 29, 19)
    assert await expanded_until(db, fourth.id) == utc(2027, 1, 22, 19)
    while clock.now() < utc(2027, 3, 13):
        clock.advance(timedelta(days=1).total_seconds())
        await engine.tick()
    # January has five Fridays, February four, March four.
    assert [r.scheduled_for for r in await runs_of(db, last.id)] == [
        utc(2027, 1, 29, 19),
        utc(2027, 2, 26, 19),
        utc(2027, 3, 26, 19),
    ]
    assert [r.scheduled_for for r in await runs_of(db, fourth.id)] == [
        utc(2027, 1, 22, 19),
        utc(2027, 2, 26, 19),
        utc(2027, 3, 26, 19),
    ]


# ── the window: from now - grace to the horizon ───────────────────────────────


async def test_a_once_in_the_past_makes_nothing_ever(engine, db, clock):
    event = await ready_event(db, clock.now(), once("2027-02-27T20:00"))
    await engine.tick()
    assert await runs_of(db, event.id) == []
    assert await expanded_until(db, event.id) == NEVER


@pytest.mark.parametrize(("ago", "made"), [(300, True), (301, False)])
async def test_a_once_inside_its_grace_window_is_materialised_and_one_past_it_is_not(
    engine, db, clock, ago, made
):
    # Clock 12:00Z; 13:00 Berlin. Grace 300 s: 11:55:00Z is the earliest instant made.
    clock.set(utc(2027, 3, 1, 12, 0) + timedelta(seconds=ago - 300))
    event = await ready_event(db, clock.now(), once("2027-03-01T12:55"), grace=300)
    await engine.tick()
    rows = await runs_of(db, event.id)
    if made:
        (row,) = rows
        assert row.scheduled_for == utc(2027, 3, 1, 11, 55)
        assert row.status != "scheduled"  # due at once: the same tick started it
    else:
        assert rows == []


async def test_a_once_beyond_the_horizon_waits_until_the_horizon_reaches_it(engine, db, clock):
    event = await ready_event(db, clock.now(), once("2027-06-04T20:00"))
    await engine.tick()
    assert await runs_of(db, event.id) == []
    assert await expanded_until(db, event.id) == utc(2027, 6, 4, 18)
    clock.set(utc(2027, 6, 4, 18) - timedelta(days=14, seconds=1))
    await engine.tick()
    assert await runs_of(db, event.id) == []
    clock.advance(2)
    await engine.tick()
    assert [r.scheduled_for for r in await runs_of(db, event.id)] == [utc(2027, 6, 4, 18)]
    assert await expanded_until(db, event.id) == NEVER


async def test_the_horizon_bound_holds_on_both_halves(engine, db, clock):
    # Mondays 13:00 Berlin = 12:00Z; now is Monday 1 March 12:00Z, the horizon 15 March 12:00Z.
    event = await ready_event(db, clock.now(), weekly("monday", at="13:00"))
    await engine.tick()
    assert [r.scheduled_for for r in await runs_of(db, event.id)] == [
        utc(2027, 3, 1, 12),  # at now exactly: inside
        utc(2027, 3, 8, 12),
    ]  # 15 March 12:00Z is the horizon itself: outside, not yet made
    assert await expanded_until(db, event.id) == utc(2027, 3, 15, 12)


# ── idempotent, cheap, bounded ────────────────────────────────────────────────


async def test_expanding_again_gives_back_the_same_rows_and_logs_nothing_new(engine, db, clock):
    event = await ready_event(db, clock.now(), weekly("wednesday", "sunday", at="02:30"))
    await engine.tick()
    first = await runs_of(db, event.id)
    await engine.tick()
    await set_expanded_until(db, event.id, None)  # force a full re-expansion
    await engine.tick()
    again = await runs_of(db, event.id)
    assert [r.id for r in again] == [r.id for r in first]
    assert len(first) == 4
    for row in again:
        assert [line.kind for line in await log_lines(db, row.id)] == ["run.created", "run.waiting"]


async def test_an_idle_tick_reads_no_definition(probe_host, engine, db, clock):
    for day in ("monday", "wednesday", "friday"):
        await ready_event(db, clock.now(), weekly(day, at="20:00"))
    await engine.tick()
    statements: list[str] = []

    def seen(_conn, _cursor, statement, *_):
        if not statement.lstrip().upper().startswith(("BEGIN", "COMMIT", "ROLLBACK")):
            statements.append(statement)

    sa_event.listen(db.sync_engine, "before_cursor_execute", seen)
    try:
        clock.advance(60)
        await expand(probe_host, clock.now())
    finally:
        sa_event.remove(db.sync_engine, "before_cursor_execute", seen)
    # The two index reads of the candidates (never expanded; inside the horizon), no more.
    assert len(statements) == 2
    assert all(s.lstrip().upper().startswith("SELECT") for s in statements)


async def test_a_weekly_event_is_read_again_only_when_its_next_occurrence_enters_the_horizon(
    probe_host, db, clock
):
    event = await ready_event(db, clock.now(), weekly("friday", at="20:00"))
    await expand(probe_host, clock.now())
    beyond = await expanded_until(db, event.id)
    assert beyond == utc(2027, 3, 19, 19)  # the first Friday past the 15 March horizon
    clock.set(beyond - timedelta(days=14, microseconds=1))
    await expand(probe_host, clock.now())
    assert len(await runs_of(db, event.id)) == 2
    clock.set(beyond - timedelta(days=14) + timedelta(microseconds=1))
    await expand(probe_host, clock.now())
    assert [r.scheduled_for for r in await runs_of(db, event.id)][-1] == beyond
    assert await expanded_until(db, event.id) == utc(2027, 3, 26, 19)


@pytest.mark.parametrize(("events", "left"), [(2, 0), (3, 1)])
async def test_a_tick_expands_at_most_runs_per_tick_definitions_and_wakes_for_the_rest(
    settings, db, clock, probe, events, left
):
    host = make_host(settings.model_copy(update={"runs_per_tick": 2}), db, clock, [probe])
    engine = Engine(host)
    woken = []
    engine.wake = lambda: woken.append(True)  # type: ignore[method-assign]  # the test's own wake, to see it called
    try:
        made = [
            await ready_event(db, clock.now(), weekly("friday", at="20:00")) for _ in range(events)
        ]
        await expand(host, clock.now())
        untouched = [e for e in made if await expanded_until(db, e.id) is None]
        assert len(untouched) == left
        assert woken == [True]  # a full batch: there may be more
        await expand(host, clock.now())
        assert all([await expanded_until(db, e.id) is not None for e in made])
        assert woken == [True]  # the second batch was not full
    finally:
        await engine.stop()
        await host.close()


async def test_one_bad_event_never_stops_the_others_and_is_set_aside(probe_host, db, clock, caplog):
    good = await ready_event(db, clock.now(), weekly("friday", at="20:00"))
    bad = await ready_event(db, clock.now(), weekly("friday", at="20:00"))
    async with db.begin() as conn:  # a zone the installed tzdata does not know
        await conn.execute(
            update(event_versions)
            .where(event_versions.c.id == bad.version_id)
            .values(timezone="Mars/Olympus")
        )
    with caplog.at_level(logging.ERROR, logger="pageant.engine"):
        await expand(probe_host, clock.now())
    assert len(await runs_of(db, good.id)) == 2
    assert await runs_of(db, bad.id) == []
    assert f"could not expand the schedule of event {bad.id}" in caplog.text
    horizon = clock.now() + timedelta(days=14)
    assert await expanded_until(db, bad.id) == horizon + RETRY_AFTER

    caplog.clear()
    clock.advance(RETRY_AFTER.total_seconds() - 1)
    with caplog.at_level(logging.ERROR, logger="pageant.engine"):
        await expand(probe_host, clock.now())
    assert caplog.text == ""  # set aside: not retried every tick
    clock.advance(2)
    with caplog.at_level(logging.ERROR, logger="pageant.engine"):
        await expand(probe_host, clock.now())
    assert f"could not expand the schedule of event {bad.id}" in caplog.text


async def test_the_published_version_expands_never_the_working_copy(engine, db, clock):
    clock.set(utc(2027, 3, 20, 12))
    event = await ready_event(db, clock.now(), weekly("friday", at="20:00"))
    async with db.begin() as conn:  # an unpublished edit: another day, time and zone
        await conn.execute(
            update(event_definitions)
            .where(event_definitions.c.id == event.id)
            .values(
                timezone="Asia/Tokyo",
                spec={"schedule": weekly("monday", at="10:00"), "phases": []},
            )
        )
    await engine.tick()
    assert [r.occurrence_local for r in await runs_of(db, event.id)] == [
        "2027-03-26T20:00",
        "2027-04-02T20:00",
    ]


@pytest.mark.parametrize("state", ["draft", "archived"])
async def test_only_ready_events_expand(engine, db, clock, state):
    event = await ready_event(db, clock.now(), weekly("friday", at="20:00"), state=state)
    await engine.tick()
    assert await runs_of(db, event.id) == []


async def test_two_hosts_expanding_at_once_make_each_occurrence_once(settings, db, clock, probe):
    events = [
        await ready_event(db, clock.now(), weekly("monday", "friday", at=f"{h:02d}:00"))
        for h in (9, 20)
    ]
    hosts = [make_host(settings, db, clock, [probe]) for _ in range(2)]
    try:
        await asyncio.gather(*(expand(h, clock.now()) for h in hosts))
    finally:
        for h in hosts:
            await h.close()
    for event in events:
        rows = await runs_of(db, event.id)
        assert len(rows) == len({r.scheduled_for for r in rows}) == 4
        for row in rows:
            assert len(await log_lines(db, row.id, "run.created")) == 1


async def test_the_expansion_claim_is_taken_once(db, clock):
    # The compare-and-set carries the value it read, so on MariaDB (matched rows) as on
    # SQLite a second claimer that read the same candidate matches nothing.
    event = await ready_event(db, clock.now(), weekly("friday", at="20:00"))
    for seen, until, taken in [
        (None, utc(2027, 3, 19, 19), True),
        (None, utc(2027, 3, 19, 19), False),
        (utc(2027, 3, 19, 19), utc(2027, 3, 26, 19), True),
    ]:
        async with db.begin() as conn:
            claimed = await schedules.claim_expansion(
                conn, event.id, version_id=event.version_id, seen=seen, until=until
            )
        assert claimed is taken
    assert await expanded_until(db, event.id) == utc(2027, 3, 26, 19)
    async with db.begin() as conn:  # another version was published meanwhile
        assert not await schedules.claim_expansion(
            conn, event.id, version_id=event.version_id + 1, seen=utc(2027, 3, 26, 19), until=NEVER
        )


async def test_a_row_whose_slot_now_falls_at_another_instant_is_moved_not_doubled(
    engine, db, clock
):
    # As if made under older tz data: Friday 20:00 Berlin stored at 20:00Z.
    clock.set(utc(2027, 3, 20, 12))
    event = await ready_event(db, clock.now(), weekly("friday", at="20:00"))
    async with db.begin() as conn:
        stale = (
            await conn.execute(
                insert(event_runs).values(
                    definition_id=event.id,
                    version_id=event.version_id,
                    scope="",
                    scheduled_for=utc(2027, 3, 26, 20),
                    occurrence_local="2027-03-26T20:00",
                    source="schedule",
                    status="scheduled",
                    created_at=clock.now(),
                )
            )
        ).inserted_primary_key[0]
    await engine.tick()
    rows = await runs_of(db, event.id)
    assert [(r.id, r.scheduled_for) for r in rows] == [
        (stale, utc(2027, 3, 26, 19)),
        (rows[1].id, utc(2027, 4, 2, 18)),
    ]
    (moved,) = await log_lines(db, stale, "run.moved")
    assert moved.detail["from"] == "2027-03-26T20:00:00Z"
    assert moved.detail["to"] == "2027-03-26T19:00:00Z"
    assert moved.detail["slot"] == "2027-03-26T20:00"
