"""Catch-up after an outage: an event's ``catch_up`` policy decides its occurrences whose grace
window passed while no host ran — ``none`` misses them all (as ever), ``one`` runs the latest
inside the window late, ``all`` runs each inside the window in slot order, and one older than
the window is missed saying so. Each decision is a log sentence and a calendar reason.

Real hosts and engines on both dialects, time injected: the host is "down" while the clock
moves without a tick. Occurrences an hour apart fall across a daylight-saving change in
Europe/Berlin (the end of summer time, 25 October 2026) and America/Santiago (4 April 2027),
so two of them share a local wall time."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from pageant.db import runlog
from pageant.db.tables import event_run_log
from pageant.engine import Engine
from pageant.hosting import Host
from pageant.runs import sentences
from pageant.runs.create import create_run
from pageant.schedules.calendar import calendar_items
from tests.api.test_events_api import call
from tests.factories import set_run
from tests.scheduling import MAIN, ready_event, runs_of, utc, weekly

EVERY_DAY = weekly(
    "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", at="20:00"
)


@dataclass(frozen=True)
class Zone:
    """A zone's daylight-saving change, and occurrences an hour apart across it."""

    name: str
    #: The instant the host goes down (its last tick).
    down: datetime
    #: Three occurrences inside the outage (the last two at the same local wall time: the
    #: repeated hour), and one after it.
    hours: tuple[datetime, ...]
    #: How late each of the three starts when the host is back, three hours after ``down``.
    late_by: tuple[str, ...]


BERLIN = Zone(
    "Europe/Berlin",
    down=utc(2026, 10, 24, 23, 0),  # 01:00 CEST
    # 01:15 CEST, 02:15 CEST, 02:15 CET (summer time ended at 01:00Z), 03:15 CET.
    hours=(
        utc(2026, 10, 24, 23, 15),
        utc(2026, 10, 25, 0, 15),
        utc(2026, 10, 25, 1, 15),
        utc(2026, 10, 25, 2, 15),
    ),
    late_by=("2 h 45 min", "1 h 45 min", "45 min"),
)
SANTIAGO = Zone(
    "America/Santiago",
    down=utc(2027, 4, 4, 1, 0),  # 22:00 -03
    # 22:30 -03, 23:30 -03, 23:30 -04 (summer time ended at 03:00Z), 00:30 -04.
    hours=(
        utc(2027, 4, 4, 1, 30),
        utc(2027, 4, 4, 2, 30),
        utc(2027, 4, 4, 3, 30),
        utc(2027, 4, 4, 4, 30),
    ),
    late_by=("2 h 30 min", "1 h 30 min", "30 min"),
)
ZONES = pytest.mark.parametrize("zone", [BERLIN, SANTIAGO], ids=["berlin", "santiago"])
OUTAGE = timedelta(hours=3)


def catch_up(policy: str, within: str | None = None) -> dict[str, Any]:
    return {"policy": policy} if within is None else {"policy": policy, "within": within}


async def publish(
    db: AsyncEngine,
    now: datetime,
    tz: str,
    *,
    catching: dict[str, Any] | None,
    schedule: dict[str, Any] | None = None,
    grace: int = 300,
) -> tuple[int, int, dict[str, Any]]:
    """A ready, verified definition in ``tz`` whose spec carries ``catching`` (its
    ``catch_up``): ``(definition id, version id, spec)``."""
    spec: dict[str, Any] = {"schedule": schedule or {"kind": "manual"}, "phases": [MAIN]}
    if catching is not None:
        spec["catch_up"] = catching
    event = await ready_event(db, now, spec["schedule"], tz, grace=grace, spec=spec)
    return event.id, event.version_id, spec


async def hourly_event(host: Host, zone: Zone, catching: dict[str, Any] | None) -> int:
    """An event with a run at each of ``zone.hours``, made while the host still ran."""
    now = host.clock.now()
    definition_id, version_id, spec = await publish(host.db, now, zone.name, catching=catching)
    async with host.db.begin() as conn:
        for at in zone.hours:
            await create_run(
                conn,
                definition_id=definition_id,
                version_id=version_id,
                spec=spec,
                scheduled_for=at,
                now=now,
                source="manual",
                registry=host.registry,
            )
    return definition_id


@pytest.fixture
async def engine_of_host(host: Any) -> Any:
    engine = Engine(host)
    try:
        yield engine
    finally:
        await engine.stop()


async def settle(engine: Engine, db: AsyncEngine, definition_id: int) -> list[Any]:
    """Tick (the clock standing still) until the event's runs stop changing."""
    before: list[Any] = []
    for _ in range(20):
        await engine.tick()
        rows = [(r.id, r.status) for r in await runs_of(db, definition_id)]
        if rows == before:
            break
        before = rows
    return await runs_of(db, definition_id)


async def status_lines(db: AsyncEngine, definition_run_ids: list[int]) -> list[Any]:
    """Every ``run.status`` line of these runs, in the order they were written."""
    async with db.connect() as conn:
        rows = await conn.execute(
            select(event_run_log)
            .where(
                event_run_log.c.run_id.in_(definition_run_ids),
                event_run_log.c.kind == "run.status",
            )
            .order_by(event_run_log.c.id)
        )
        return list(rows)


async def outage(host: Host, engine: Engine, zone: Zone) -> None:
    """The host ticks at ``zone.down``, then nothing runs for three hours."""
    host.clock.set(zone.down)
    await engine.tick()
    host.clock.set(zone.down + OUTAGE)


def by_hour(rows: list[Any], zone: Zone) -> dict[datetime, Any]:
    found = {row.scheduled_for: row for row in rows}
    assert sorted(found) == list(zone.hours)
    return found


# ── none: today's behaviour, exactly ────────────────────────────────────────


@ZONES
@pytest.mark.parametrize("catching", [None, catch_up("none")], ids=["absent", "none"])
async def test_without_catch_up_every_occurrence_of_the_outage_is_missed(
    host, engine_of_host, db, zone, catching
):
    event = await hourly_event(host, zone, catching)
    await outage(host, engine_of_host, zone)
    rows = by_hour(await settle(engine_of_host, db, event), zone)

    *during, after = zone.hours
    for at in during:
        row = rows[at]
        assert (row.status, row.started_at) == ("missed", None)
        assert row.last_error == "the grace window passed before it could start"
        (line,) = await log_lines_of(db, row.id)
        assert (line.detail["from"], line.detail["to"]) == ("scheduled", "missed")
        assert "because" not in line.detail
    assert rows[after].status == "scheduled"  # not due yet: untouched


# ── one ─────────────────────────────────────────────────────────────────────


@ZONES
async def test_one_runs_the_latest_late_and_misses_the_earlier_saying_why(
    host, engine_of_host, db, zone
):
    event = await hourly_event(host, zone, catch_up("one", "3h"))
    await outage(host, engine_of_host, zone)
    now = host.clock.now()
    rows = by_hour(await settle(engine_of_host, db, event), zone)

    first, second, latest, after = zone.hours
    assert [rows[at].status for at in zone.hours] == ["missed", "missed", "completed", "scheduled"]
    late = rows[latest]
    assert late.started_at == now
    expected = (
        f"started {zone.late_by[2]} late, catching up after the host was down "
        "(catch_up: one, within 3h)"
    )
    start = await start_line(db, late.id)
    assert start.detail["because"] == expected
    assert sentences.text(start._mapping) == f"The run is starting (it was scheduled): {expected}"
    for at in (first, second):
        row = rows[at]
        assert row.started_at is None
        assert row.last_error == (
            "the host was down past its grace window, and a later occurrence "
            f"(run {late.id}) caught up instead (catch_up: one, within 3h)"
        )
        (line,) = await log_lines_of(db, row.id)
        assert line.detail["to"] == "missed"
        assert line.detail["because"] == row.last_error

    # The staff calendar shows each with its reason.
    async with db.connect() as conn:
        items = await calendar_items(
            conn, start=zone.hours[0], end=after + timedelta(minutes=1), now=now
        )
    reasons = {i["scheduled_for"]: (i["status"], i["reason"]) for i in items}
    assert reasons[latest] == ("completed", expected)
    assert reasons[first] == ("missed", rows[first].last_error)
    assert reasons[after] == ("scheduled", None)


# ── all ─────────────────────────────────────────────────────────────────────


@ZONES
async def test_all_runs_each_late_occurrence_in_slot_order_one_after_another(
    host, engine_of_host, db, zone
):
    event = await hourly_event(host, zone, catch_up("all", "3h"))
    await outage(host, engine_of_host, zone)
    rows = by_hour(await settle(engine_of_host, db, event), zone)

    *during, after = zone.hours
    assert [rows[at].status for at in during] == ["completed"] * 3
    assert rows[after].status == "scheduled"
    ids = [rows[at].id for at in during]
    lines = await status_lines(db, ids)
    # Never two at once: each starts only once the one before it has completed.
    order = [(line.run_id, line.detail["to"]) for line in lines]
    assert [entry for entry in order if entry[1] in ("starting", "completed")] == [
        (ids[0], "starting"),
        (ids[0], "completed"),
        (ids[1], "starting"),
        (ids[1], "completed"),
        (ids[2], "starting"),
        (ids[2], "completed"),
    ]
    for run_id, late_by in zip(ids, zone.late_by, strict=True):
        assert (await start_line(db, run_id)).detail["because"] == (
            f"started {late_by} late, catching up after the host was down "
            "(catch_up: all, within 3h)"
        )


@ZONES
async def test_an_occurrence_older_than_the_window_stays_missed_naming_the_window(
    host, engine_of_host, db, zone
):
    # Back at down + 3h: a 2h window reaches back to down + 1h, past the first occurrence
    # (down + 15 or 30 min) and short of the second.
    event = await hourly_event(host, zone, catch_up("all", "2h"))
    await outage(host, engine_of_host, zone)
    rows = by_hour(await settle(engine_of_host, db, event), zone)

    first, second, third, _ = zone.hours
    assert [rows[at].status for at in (first, second, third)] == [
        "missed",
        "completed",
        "completed",
    ]
    assert rows[first].last_error == (
        "the host was down past its grace window, and it is older than the catch-up window "
        "(catch_up: all, within 2h)"
    )
    (line,) = await log_lines_of(db, rows[first].id)
    assert line.detail["because"] == rows[first].last_error


# ── who decides ─────────────────────────────────────────────────────────────


async def test_a_run_a_host_held_while_it_was_due_is_missed_as_ever(host, engine_of_host, db):
    # Held by its concurrency key, not by an outage: its grace window decides.
    event = await hourly_event(host, BERLIN, catch_up("all", "3h"))
    await outage(host, engine_of_host, BERLIN)
    first = BERLIN.hours[0]
    held = next(r for r in await runs_of(db, event) if r.scheduled_for == first)
    await set_run(db, held.id, waiting_reason="concurrency")
    rows = by_hour(await settle(engine_of_host, db, event), BERLIN)
    assert rows[first].status == "missed"
    assert rows[first].last_error == "the grace window passed before it could start"
    assert [rows[at].status for at in BERLIN.hours[1:3]] == ["completed", "completed"]


async def test_two_hosts_never_both_start_one_catch_up(host, db, clock, settings):
    event = await hourly_event(host, BERLIN, catch_up("all", "3h"))
    other = Host(settings, clock=clock, db=db)
    first, second = Engine(host), Engine(other)
    try:
        await outage(host, first, BERLIN)
        for _ in range(10):
            await asyncio.gather(first.tick(), second.tick())
    finally:
        await first.stop()
        await second.stop()
        await other.close()
    rows = by_hour(await runs_of(db, event), BERLIN)
    ids = [rows[at].id for at in BERLIN.hours[:3]]
    assert [rows[at].status for at in BERLIN.hours[:3]] == ["completed"] * 3
    starts = [
        line.run_id for line in await status_lines(db, ids) if line.detail["to"] == "starting"
    ]
    assert starts == ids  # each started once, in slot order


# ── the expansion makes what no host materialised ───────────────────────────


@pytest.mark.parametrize("policy", ["all", "none"])
async def test_the_expansion_makes_the_missing_occurrences_inside_the_window(
    settings, db, clock, policy
):
    # Daily at 20:00 Berlin (19:00Z); a one-day horizon, so a four-day outage leaves days
    # no expansion ever materialised.
    short = settings.model_copy(update={"horizon_days": 1})
    host = Host(short, clock=clock, db=db)
    engine = Engine(host)
    try:
        clock.set(utc(2027, 3, 1, 12))
        catching = catch_up(policy, "2d") if policy != "none" else None
        event, _, _ = await publish(
            db, clock.now(), "Europe/Berlin", catching=catching, schedule=EVERY_DAY
        )
        await engine.tick()
        assert [r.scheduled_for for r in await runs_of(db, event)] == [utc(2027, 3, 1, 19)]

        clock.set(utc(2027, 3, 5, 12))  # back after four days
        rows = await settle(engine, db, event)
    finally:
        await engine.stop()
        await host.close()

    states = {r.scheduled_for: r.status for r in rows}
    if policy == "none":
        # As ever: nothing before now - grace is made; the one made before is missed.
        assert states == {
            utc(2027, 3, 1, 19): "missed",
            utc(2027, 3, 5, 19): "scheduled",  # the horizon ends 6 March 12:00Z
        }
        return
    # The window reaches back to 3 March 12:00Z: 3 and 4 March are made and run in order;
    # 2 March, before it, is never made; 1 March, made before the outage, is missed.
    assert states == {
        utc(2027, 3, 1, 19): "missed",
        utc(2027, 3, 3, 19): "completed",
        utc(2027, 3, 4, 19): "completed",
        utc(2027, 3, 5, 19): "scheduled",
    }


# ── helpers over the log ────────────────────────────────────────────────────


async def log_lines_of(db: AsyncEngine, run_id: int) -> list[Any]:
    async with db.connect() as conn:
        lines = await runlog.lines_of(conn, run_id)
    return [line for line in lines if line.kind == "run.status"]


async def start_line(db: AsyncEngine, run_id: int) -> Any:
    (line,) = [
        line for line in await log_lines_of(db, run_id) if line.detail.get("to") == "starting"
    ]
    return line


async def test_one_sees_the_whole_outage_however_the_sweep_s_batch_is_cut(settings, db, clock):
    # Two late runs a tick: the sweep's first batch holds only the two earliest.
    small = settings.model_copy(update={"runs_per_tick": 2})
    host = Host(small, clock=clock, db=db)
    engine = Engine(host)
    try:
        event = await hourly_event(host, BERLIN, catch_up("one", "3h"))
        await outage(host, engine, BERLIN)
        rows = by_hour(await settle(engine, db, event), BERLIN)
    finally:
        await engine.stop()
        await host.close()
    assert [rows[at].status for at in BERLIN.hours] == [
        "missed",
        "missed",
        "completed",
        "scheduled",
    ]


async def test_a_catch_up_a_person_reschedules_is_an_ordinary_run_again(
    client, tokens, host, engine_of_host, db
):
    event = await hourly_event(host, BERLIN, catch_up("all", "3h"))
    await outage(host, engine_of_host, BERLIN)
    await engine_of_host.tick(only=frozenset({"expand", "sweep_missed"}))  # decided, not run
    rows = by_hour(await runs_of(db, event), BERLIN)
    waiting = rows[BERLIN.hours[2]]
    assert (waiting.status, waiting.catch_up) == (
        "scheduled",
        "catching up after the host was down (catch_up: all, within 3h)",
    )
    later = BERLIN.down + OUTAGE + timedelta(hours=5)
    status, moved = await call(
        client,
        "POST",
        f"/api/v1/admin/runs/{waiting.id}/reschedule",
        tokens["admin"],
        {"scheduled_for": later.isoformat(), "reason": "after the server restart"},
    )
    assert status == 200, moved
    rows = {r.id: r for r in await runs_of(db, event)}
    assert rows[waiting.id].catch_up is None
    assert rows[waiting.id].scheduled_for == later
