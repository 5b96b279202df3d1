"""Campaigns: an occurrence of B whose spec requires an outcome of A within a window starts
when a run of A ended so, is held while a run of A is going (or due) and starts once it
completes, and is skipped — the reason recorded — when A's run ended otherwise, when no run
of A ended inside the window, or when its own grace window ends while it is held.

Real hosts and engines on both dialects, time injected."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from pageant.db.tables import event_definitions
from pageant.engine import Engine
from pageant.gates.phase import elapsed
from pageant.hosting import Host
from pageant.runs import controls
from pageant.runs.console import run_view
from pageant.runs.create import create_run
from pageant.schedules.calendar import calendar_items
from tests.engine.test_catch_up import log_lines_of, start_line
from tests.factories import run_row, set_run, tick_beside_another_host
from tests.scheduling import MAIN, ready_event

#: A phase that keeps A's run going for half an hour: a gate that opens after 30 min.
LONG = {**MAIN, "advance": {"after": "30m"}}
HOUR = 3600


@pytest.fixture
async def engine(host: Host) -> Any:
    engine = Engine(host)
    try:
        yield engine
    finally:
        await engine.stop()


async def slug_of(db: AsyncEngine, definition_id: int) -> str:
    async with db.connect() as conn:
        d = event_definitions.c
        return (await conn.execute(select(d.slug).where(d.id == definition_id))).scalar_one()


async def event_with(
    host: Host, phases: list[dict[str, Any]], *, grace: int = HOUR, **extra: Any
) -> tuple[int, int, dict[str, Any]]:
    spec = {"schedule": {"kind": "manual"}, "phases": phases, **extra}
    event = await ready_event(
        host.db, host.clock.now(), spec["schedule"], "UTC", grace=grace, spec=spec
    )
    return event.id, event.version_id, spec


async def occurrence(host: Host, event: tuple[int, int, dict[str, Any]], at: datetime) -> int:
    """A run of the schedule at ``at`` (what the expansion makes)."""
    definition_id, version_id, spec = event
    async with host.db.begin() as conn:
        run_id, _ = await create_run(
            conn,
            definition_id=definition_id,
            version_id=version_id,
            spec=spec,
            scheduled_for=at,
            now=host.clock.now(),
            source="schedule",
            registry=host.registry,
        )
    return run_id


async def campaign(
    host: Host, *, outcome: str = "completed", within: str = "7d", grace: int = HOUR
) -> tuple[tuple[int, int, dict[str, Any]], tuple[int, int, dict[str, Any]], str]:
    """A (its runs last 30 min) and B, which requires A's ``outcome`` ``within``."""
    a = await event_with(host, [LONG])
    slug = await slug_of(host.db, a[0])
    requires = {"event": slug, "outcome": outcome, "within": within}
    b = await event_with(host, [MAIN], grace=grace, requires=requires)
    return a, b, slug


async def settle(engine: Engine) -> None:
    for _ in range(6):
        await engine.tick()


async def test_b_is_held_while_a_runs_and_starts_once_a_completes(host, engine, db):
    t0 = host.clock.now()
    a, b, slug = await campaign(host)
    a_run = await occurrence(host, a, t0)
    b_run = await occurrence(host, b, t0 + timedelta(minutes=10))
    await settle(engine)
    assert (await run_row(db, a_run)).status == "running"

    host.clock.set(t0 + timedelta(minutes=10))
    await settle(engine)
    held = await run_row(db, b_run)
    assert (held.status, held.waiting_reason) == ("scheduled", "requires")
    # The run console says what it waits for, derived from the rows as the engine saw them.
    view = await run_view(host, b_run)
    assert view["waiting_on"]["sentence"] == f"waiting for {slug} (run {a_run}) to complete"
    assert view["waiting_on"]["required_run_id"] == a_run
    # The staff calendar shows the chain and why it is held.
    async with db.connect() as conn:
        items = await calendar_items(
            conn, start=t0, end=t0 + timedelta(hours=1), now=host.clock.now()
        )
    (item,) = [i for i in items if i["run_id"] == b_run]
    assert item["requires"] == {"event": slug, "outcome": "completed", "within": "7d"}
    assert item["reason"] == f"held: waiting for {slug} (run {a_run}) to complete"

    host.clock.set(t0 + timedelta(minutes=31))
    await settle(engine)
    done_a, started = await run_row(db, a_run), await run_row(db, b_run)
    assert done_a.status == "completed"
    assert started.status == "completed"
    ago = elapsed((started.started_at - done_a.ended_at).total_seconds())
    assert (await start_line(db, b_run)).detail["because"] == (
        f"started: {slug} completed {ago} ago (run {a_run})"
    )


async def test_b_is_skipped_when_a_is_cancelled_saying_so(host, engine, db):
    t0 = host.clock.now()
    a, b, slug = await campaign(host)
    a_run = await occurrence(host, a, t0)
    b_run = await occurrence(host, b, t0 + timedelta(minutes=5))
    host.clock.set(t0 + timedelta(minutes=5))
    await settle(engine)
    assert (await run_row(db, b_run)).waiting_reason == "requires"

    await controls.cancel(host, a_run, actor="admin:test", reason="the boss server fell over")
    await settle(engine)
    skipped = await run_row(db, b_run)
    reason = f"skipped: {slug} run {a_run} was cancelled"
    assert (skipped.status, skipped.cancel_reason, skipped.started_at) == ("skipped", reason, None)
    (line,) = await log_lines_of(db, b_run)
    assert (line.detail["to"], line.detail["because"]) == ("skipped", reason)


async def test_b_is_skipped_when_no_a_ran_in_the_window(host, engine, db):
    t0 = host.clock.now()
    _, b, slug = await campaign(host, within="7d")
    b_run = await occurrence(host, b, t0)
    await settle(engine)
    skipped = await run_row(db, b_run)
    assert skipped.status == "skipped"
    assert skipped.cancel_reason == f"skipped: no completed {slug} in the last 7d"


@pytest.mark.parametrize(
    ("ended_before", "status"),
    [(timedelta(days=7), "completed"), (timedelta(days=7, seconds=1), "skipped")],
    ids=["at-the-window-s-edge", "just-past-it"],
)
async def test_the_window_is_measured_back_from_b_s_instant(host, engine, db, ended_before, status):
    t0 = host.clock.now()
    a, b, slug = await campaign(host, within="7d")
    a_run = await occurrence(host, a, t0 - timedelta(days=8))
    await set_run(db, a_run, status="completed", ended_at=t0 - ended_before)
    b_run = await occurrence(host, b, t0)
    await settle(engine)
    row = await run_row(db, b_run)
    assert row.status == status
    if status == "completed":
        assert (await start_line(db, b_run)).detail["because"] == (
            f"started: {slug} completed {elapsed(ended_before.total_seconds())} ago (run {a_run})"
        )
    else:
        assert row.cancel_reason == f"skipped: no completed {slug} in the last 7d"


async def test_an_outcome_other_than_the_one_asked_skips_naming_it(host, engine, db):
    t0 = host.clock.now()
    a, b, slug = await campaign(host, outcome="completed")
    a_run = await occurrence(host, a, t0 - timedelta(days=1))
    await set_run(db, a_run, status="failed", ended_at=t0 - timedelta(hours=20))
    b_run = await occurrence(host, b, t0)
    await settle(engine)
    assert (await run_row(db, b_run)).cancel_reason == f"skipped: {slug} run {a_run} was failed"


async def test_ended_is_met_by_a_cancelled_run(host, engine, db):
    t0 = host.clock.now()
    a, b, slug = await campaign(host, outcome="ended")
    a_run = await occurrence(host, a, t0 - timedelta(days=1))
    await set_run(db, a_run, status="cancelled", ended_at=t0 - timedelta(hours=2))
    b_run = await occurrence(host, b, t0)
    await settle(engine)
    assert (await run_row(db, b_run)).status == "completed"
    assert (await start_line(db, b_run)).detail["because"] == (
        f"started: {slug} cancelled 2 h ago (run {a_run})"
    )


async def test_the_grace_window_bounds_the_hold(host, engine, db):
    t0 = host.clock.now()
    a, b, slug = await campaign(host, grace=600)
    a_run = await occurrence(host, a, t0)
    b_run = await occurrence(host, b, t0 + timedelta(minutes=1))
    host.clock.set(t0 + timedelta(minutes=1))
    await settle(engine)
    assert (await run_row(db, b_run)).waiting_reason == "requires"
    # Still held at the window's last second...
    host.clock.set(t0 + timedelta(minutes=11))
    await settle(engine)
    assert (await run_row(db, b_run)).status == "scheduled"
    # ...and skipped past it, saying what it waited for; A goes on.
    host.clock.set(t0 + timedelta(minutes=11, seconds=1))
    await settle(engine)
    row = await run_row(db, b_run)
    assert (row.status, row.cancel_reason) == (
        "skipped",
        f"skipped: the grace window ended while waiting for {slug} to complete",
    )
    assert (await run_row(db, a_run)).status == "running"


async def test_a_person_s_start_now_is_not_held(host, engine, db):
    t0 = host.clock.now()
    _, b, _ = await campaign(host)
    definition_id, version_id, spec = b
    async with db.begin() as conn:
        run_id, _ = await create_run(
            conn,
            definition_id=definition_id,
            version_id=version_id,
            spec=spec,
            scheduled_for=t0,
            now=t0,
            source="manual",
            registry=host.registry,
        )
    await settle(engine)
    assert (await run_row(db, run_id)).status == "completed"


async def test_two_hosts_deciding_at_once_start_b_once(host, db, clock, settings):
    t0 = clock.now()
    a, b, slug = await campaign(host)
    a_run = await occurrence(host, a, t0 - timedelta(hours=1))
    await set_run(db, a_run, status="completed", ended_at=t0 - timedelta(minutes=20))
    b_runs = [await occurrence(host, b, t0 + timedelta(seconds=i)) for i in range(3)]
    clock.set(t0 + timedelta(seconds=3))
    await tick_beside_another_host(host, settings, db, clock, 6)
    for run_id in b_runs:
        assert (await run_row(db, run_id)).status == "completed"
        starts = [
            line for line in await log_lines_of(db, run_id) if line.detail["to"] == "starting"
        ]
        assert len(starts) == 1
        assert starts[0].detail["because"].startswith(f"started: {slug} completed 20 min")


async def test_two_hosts_deciding_a_skip_at_once_skip_b_once(host, db, clock, settings):
    t0 = clock.now()
    _, b, slug = await campaign(host)
    b_runs = [await occurrence(host, b, t0 + timedelta(seconds=i)) for i in range(3)]
    clock.set(t0 + timedelta(seconds=3))
    await tick_beside_another_host(host, settings, db, clock, 4)
    for run_id in b_runs:
        lines = await log_lines_of(db, run_id)
        assert [line.detail["to"] for line in lines] == ["skipped"]
        assert lines[0].detail["because"] == f"skipped: no completed {slug} in the last 7d"
