"""Timing and concurrency: the engine sleeps until the next due instant, wakes on demand,
dispatches runs side by side, and two engines on one database never do one step twice."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import insert, update

from pageant.db import steps
from pageant.db.tables import event_run_log, event_run_phase_gates
from pageant.engine import Engine, loop
from pageant.engine import advance_stage as advance
from pageant.engine.tick import STAGES
from pageant.runs.create import start_now
from pageant.support.clock import FakeClock, SystemClock
from tests.factories import (
    Blocker,
    Probe,
    announce,
    log_lines,
    make_host,
    phase,
    probe_step,
    publish_event,
    run_row,
    set_run,
    spec,
    step_rows,
    wait,
)


async def _start(host, event_spec, **kw):
    event = await publish_event(host.db, host.clock.now(), event_spec, **kw)
    run_id, _ = await start_now(host, event.id, scope="", actor="admin:test")
    return run_id


async def _eventually(check, *, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.01)


# ── the next due instant ──────────────────────────────────────────────────────


@pytest.fixture
async def slow_poll_host(settings, db, clock, probe):
    host = make_host(settings.model_copy(update={"poll_seconds": 1000}), db, clock, [probe])
    try:
        yield host
    finally:
        await host.close()


async def test_with_nothing_due_the_engine_sleeps_the_poll(engine):
    assert await engine.next_sleep() == 15


async def test_it_sleeps_until_a_held_step_is_due_capped_by_the_poll(probe_host, engine):
    await _start(probe_host, spec(phase("p", wait(12), probe_step("a"))))
    await engine.tick()
    assert await engine.next_sleep() == 12
    other = await _start(probe_host, spec(phase("p", wait(100), probe_step("a"))))
    await engine.tick()
    assert other and await engine.next_sleep() == 12
    probe_host.clock.advance(12)
    await engine.tick()
    assert await engine.next_sleep() == 15  # 88 s left, capped


async def test_it_sleeps_until_each_kind_of_due_instant(slow_poll_host, clock, db):
    async with Engine(slow_poll_host) as engine:
        run_id = await _start(slow_poll_host, spec(phase("p", probe_step("a"))))
        await set_run(db, run_id, scheduled_for=clock.now() + timedelta(seconds=7.5))
        assert await engine.next_sleep() == 7.5
        await set_run(
            db,
            run_id,
            status="running",
            current_phase="p",
            hold_until=clock.now() + timedelta(seconds=6.25),
        )
        assert await engine.next_sleep() == 6.25
        await set_run(db, run_id, lease_until=clock.now() + timedelta(seconds=5))
        assert await engine.next_sleep() == 5
        (made,) = await step_rows(db, run_id)
        async with db.begin() as conn:
            await steps.claim_step(
                conn,
                made.id,
                seen_attempts=0,
                owner="x",
                lease=clock.now() + timedelta(seconds=4),
                now=clock.now(),
            )
        assert await engine.next_sleep() == 4
        async with db.begin() as conn:
            await conn.execute(
                insert(event_run_phase_gates).values(
                    run_id=run_id,
                    phase="p",
                    kind="after",
                    entered_at=clock.now(),
                    deadline=clock.now() + timedelta(seconds=3),
                )
            )
        assert await engine.next_sleep() == 3


async def test_instants_already_past_never_make_it_spin(probe_host, engine, probe):
    probe.script["cue"] = [{"ok": True, "park": True}]
    run_id = await _start(probe_host, spec(phase("p", probe_step("cue"), probe_step("b"))))
    await engine.tick()
    made = await step_rows(probe_host.db, run_id)
    async with probe_host.db.begin() as conn:
        await steps.hold_next_step(conn, run_id, "p", 0, probe_host.clock.now())
    assert made[1].status == "pending"
    probe_host.clock.advance(1)
    assert await engine.next_sleep() == 15


class StandingClock(FakeClock):
    """A fake clock whose sleep never ends by itself: only a wake ends it, and the test
    moves time. Every requested sleep is kept in ``sleeps``."""

    def __init__(self) -> None:
        super().__init__(datetime(2027, 3, 1, 12, 0, tzinfo=UTC), advance_on_sleep=False)

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        await asyncio.Event().wait()


async def test_the_loop_asks_to_sleep_exactly_until_the_due_instant(settings, db, probe):
    clock = StandingClock()
    host = make_host(settings, db, clock, [probe])
    run_id = await _start(host, spec(phase("p", wait(12), probe_step("after"))))
    engine = Engine(host)
    try:
        await engine.start()
        await _eventually(lambda: _asked(clock, 12))
        assert probe.names() == []
        clock.advance(12)
        engine.wake()
        await _eventually(lambda: _status_is(db, run_id, "completed"))
        assert probe.names() == ["after"]
    finally:
        await engine.stop()
        await host.close()


class InstantClock(StandingClock):
    """A standing clock whose sleep of no time at all returns at once."""

    async def sleep(self, seconds: float) -> None:
        if seconds > 0:
            await super().sleep(seconds)
        self.sleeps.append(seconds)
        await asyncio.sleep(0)


async def test_an_instant_that_passes_during_a_tick_is_not_slept_through(settings, db, probe):
    # The tick reads what is due, and only then the instant of the next step comes: the read
    # of the next instant, made after it, must still find it (already past), or the loop
    # sleeps a whole poll while that step waits.
    clock = InstantClock()
    host = make_host(settings, db, clock, [probe])
    run_id = await _start(host, spec(phase("p", wait(2), probe_step("after"))))
    engine = Engine(host)
    ticked = engine.tick
    jumped: list[int] = []  # where in the clock's sleeps the jump came

    async def slow_tick(**kw):
        await ticked(**kw)
        after = [row for row in await step_rows(db, run_id) if row.status == "pending"]
        if not jumped and after and not engine.inflight and not engine._wake.is_set():
            # The wait is done and the loop goes to sleep next: this tick took 3 s.
            clock.advance(3)
            jumped.append(len(clock.sleeps))

    engine.tick = slow_tick
    try:
        await engine.start()
        await _eventually(lambda: _status_is(db, run_id, "completed"))
        assert probe.names() == ["after"]
        # The sleep after that tick was none, not the poll's 15 s.
        assert jumped and clock.sleeps[jumped[0]] == 0, clock.sleeps
    finally:
        await engine.stop()
        await host.close()


async def _asked(clock, seconds):
    return bool(clock.sleeps) and clock.sleeps[-1] == seconds


async def _status_is(db, run_id, status):
    return (await run_row(db, run_id)).status == status


async def test_a_wake_ends_a_real_sleep_at_once(settings, db, probe):
    host = make_host(settings.model_copy(update={"poll_seconds": 60}), db, SystemClock(), [probe])
    engine = Engine(host)
    try:
        await engine.start()
        await _eventually(lambda: _slept(engine))
        began = time.monotonic()
        run_id = await _start(host, spec(phase("p", probe_step("a"))))  # start_now wakes it
        await _eventually(lambda: _status_is(db, run_id, "completed"), timeout=5)
        assert time.monotonic() - began < 2
    finally:
        await engine.stop()
        await host.close()


async def _slept(engine):
    return engine.last_sleep is not None


async def test_a_real_time_walk_holds_a_two_second_wait_for_about_two_seconds(settings, db):
    host = make_host(settings, db, SystemClock())
    engine = Engine(host)
    try:
        await engine.start()
        began = time.monotonic()
        run_id = await _start(
            host, spec(phase("p", announce("doors open"), wait(2), announce("doors close")))
        )
        await _eventually(lambda: _status_is(db, run_id, "completed"), timeout=10)
        took = time.monotonic() - began
        # Never shorter than the wait; and far less than one poll interval longer, so the
        # engine slept until the wait's instant rather than until its next poll. The upper
        # bound leaves room for a loaded machine: precision is measured by the benchmarks.
        slack = host.settings.poll_seconds / 3
        assert 2 <= took < 2 + slack, (took, slack)
        messages = [ln.detail["message"] for ln in await log_lines(db, run_id, "announce")]
        assert messages == ["doors open", "doors close"]
        gap = [ln.at for ln in await log_lines(db, run_id, "announce")]
        assert timedelta(seconds=2) <= gap[1] - gap[0] < timedelta(seconds=2 + slack)
    finally:
        await engine.stop()
        await host.close()


# ── concurrency ───────────────────────────────────────────────────────────────


async def test_two_overlapping_engines_never_dispatch_one_step_twice(settings, db, clock):
    probe = Probe()

    async def yield_then_ok(ctx):
        await asyncio.sleep(0)
        return {"ok": True}

    for name in "abcdef":
        probe.script[name] = [yield_then_ok] * 3
    hosts = [make_host(settings, db, clock, [probe]) for _ in range(2)]
    assert hosts[0].identity != hosts[1].identity
    engines = [Engine(h) for h in hosts]
    try:
        run_ids = [
            await _start(
                hosts[0],
                spec(
                    phase("p", *[probe_step(n) for n in "abc"]),
                    phase("q", *[probe_step(n) for n in "def"]),
                ),
            )
            for _ in range(4)
        ]
        for _ in range(6):
            await asyncio.gather(engines[0].tick(), engines[1].tick())
        for run_id in run_ids:
            assert (await run_row(db, run_id)).status == "completed"
        keys = [ctx.idempotency_key for ctx in probe.calls]
        assert len(keys) == len(set(keys)) == 24
        claimers = {s.claimed_by for r in run_ids for s in await step_rows(db, r)}
        assert claimers <= {h.identity for h in hosts}
    finally:
        for e in engines:
            await e.stop()
        for h in hosts:
            await h.close()


async def test_a_slow_perform_holds_only_its_own_run(probe_host, clock, engine, probe):
    blocker = Blocker()
    probe.script["slow"] = [blocker]
    slow_run = await _start(probe_host, spec(phase("p", probe_step("slow"))))
    quick_run = await _start(probe_host, spec(phase("p", wait(5), probe_step("quick"))))
    # The two runs' first claims are concurrent; on MariaDB they may deadlock, and the engine
    # leaves the loser to its next tick, so tick until each one has got where it should.
    await _tick_until(engine, lambda: _entered_one(blocker))
    await _tick_until(engine, lambda: _waiting_on_hold(probe_host.db, engine, quick_run))
    clock.advance(5)
    # The slow run is still mid-perform.
    await _tick_until(engine, lambda: _status_is(probe_host.db, quick_run, "completed"))
    assert (await run_row(probe_host.db, slow_run)).status == "running"
    blocker.release.set()
    await engine.drain()
    assert (await run_row(probe_host.db, slow_run)).status == "completed"


async def _not_inflight(engine, run_id):
    return run_id not in engine.inflight


async def _entered_one(blocker):
    return blocker.entered.is_set()


async def _waiting_on_hold(db, engine, run_id):
    """The run's wait step is done and nothing of it is being dispatched."""
    first = (await step_rows(db, run_id))[0]
    return first.status == "done" and await _not_inflight(engine, run_id)


async def _tick_until(engine, check, *, timeout=5.0):
    """Tick (without draining) until ``check()`` holds, at most ``timeout`` real seconds."""
    deadline = time.monotonic() + timeout
    while True:
        await engine.tick(drain=False)
        for _ in range(10):
            if await check():
                return
            await asyncio.sleep(0.01)
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")


async def test_dispatch_concurrency_bounds_the_performs_in_flight(settings, db, clock, probe):
    host = make_host(settings.model_copy(update={"dispatch_concurrency": 2}), db, clock, [probe])
    blockers = {name: Blocker() for name in "abc"}
    for name, blocker in blockers.items():
        probe.script[name] = [blocker]
    try:
        for name in "abc":
            await _start(host, spec(phase("p", probe_step(name))))
        async with Engine(host) as engine:
            await engine.tick(drain=False)
            await _eventually(lambda: _entered(blockers, 2))
            await asyncio.sleep(0.05)
            assert sum(b.entered.is_set() for b in blockers.values()) == 2
            first = next(b for b in blockers.values() if b.entered.is_set())
            first.release.set()
            await _eventually(lambda: _entered(blockers, 3))
            for b in blockers.values():
                b.release.set()
            await engine.drain()
    finally:
        await host.close()


async def _entered(blockers, n):
    return sum(b.entered.is_set() for b in blockers.values()) == n


# ── error boundaries ──────────────────────────────────────────────────────────


async def test_a_failing_stage_does_not_stop_the_others(probe_host, engine, monkeypatch):
    async def broken(host, now):
        raise RuntimeError("stage on fire")

    monkeypatch.setattr(loop, "STAGES", (broken, *STAGES))
    run_id = await _start(probe_host, spec(phase("p", probe_step("a"))))
    await engine.tick()
    assert (await run_row(probe_host.db, run_id)).status == "completed"


async def test_a_run_that_blows_up_does_not_stop_the_others(probe_host, engine, monkeypatch):
    bad = await _start(probe_host, spec(phase("p", probe_step("a"))))
    good = await _start(probe_host, spec(phase("p", probe_step("b"))))
    real = advance.move_run

    async def sometimes(host, run, progress, **how):
        if run["id"] == bad:
            raise RuntimeError("bad row")
        return await real(host, run, progress, **how)

    monkeypatch.setattr(advance, "move_run", sometimes)
    await engine.tick()
    # MariaDB may answer two runs' writes in one tick with a deadlock, which the engine
    # retries on its next tick; the bad run raises on every tick and still stops nothing.
    await engine.tick()
    assert (await run_row(probe_host.db, good)).status == "completed"
    bad_row = await run_row(probe_host.db, bad)
    # Started with the good one (set-wise), then its loop raised: the claim is handed back.
    assert (bad_row.status, bad_row.claimed_by) == ("running", None)


# ── prune ─────────────────────────────────────────────────────────────────────


async def _backdate_log(db, run_id: int, at: datetime) -> None:
    async with db.begin() as conn:
        await conn.execute(
            update(event_run_log).where(event_run_log.c.run_id == run_id).values(at=at)
        )


async def test_prune_deletes_old_logs_of_ended_runs_only_every_six_hours(probe_host, clock, engine):
    old = await _start(probe_host, spec(phase("p", probe_step("a"))))
    recent = await _start(probe_host, spec(phase("p", probe_step("a"))), title="second")
    live = await _start(probe_host, spec(phase("p", wait(600))), title="third")
    await engine.tick()
    now = clock.now()
    await set_run(probe_host.db, old, ended_at=now - timedelta(days=90, seconds=1))
    await set_run(probe_host.db, recent, ended_at=now - timedelta(days=89))
    await set_run(probe_host.db, live, created_at=now - timedelta(days=200))
    # A run's lines are written before it ends; the live run's are as old as the others.
    await _backdate_log(probe_host.db, old, now - timedelta(days=91))
    await _backdate_log(probe_host.db, recent, now - timedelta(days=91))
    await _backdate_log(probe_host.db, live, now - timedelta(days=199))
    clock.advance(hours=6)
    await engine.tick()
    assert await log_lines(probe_host.db, old) == []
    assert await log_lines(probe_host.db, recent) != []
    assert await log_lines(probe_host.db, live) != []
    # "recent" becomes eligible now, but the last prune was just now: six hours must pass.
    await set_run(probe_host.db, recent, ended_at=clock.now() - timedelta(days=91))
    clock.advance(hours=6, seconds=-1)
    await engine.tick()
    assert await log_lines(probe_host.db, recent) != []
    clock.advance(1)
    await engine.tick()
    assert await log_lines(probe_host.db, recent) == []


# ── the app starts and stops it ───────────────────────────────────────────────


async def test_the_app_starts_the_engine_and_stops_it_cleanly(host, aiohttp_client):
    from pageant.api.app import make_app

    client = await aiohttp_client(make_app(host, run_engine=True))
    assert isinstance(host.engine, Engine)
    session = await host.engine.http_session()
    assert host.engine._task is not None and not host.engine._task.done()
    await client.close()
    assert session.closed
    assert host.engine._task is None


async def test_the_prune_stage_keeps_its_instant_per_engine(probe_host, clock, engine):
    # The last prune's instant is the stage's, kept per engine (one start of the host): the
    # engine that pruned waits six hours, a new engine on the same host prunes at once.
    old = await _start(probe_host, spec(phase("p", probe_step("a"))))
    await engine.tick()
    now = clock.now()
    await set_run(probe_host.db, old, ended_at=now - timedelta(days=91))
    await _backdate_log(probe_host.db, old, now - timedelta(days=92))
    clock.advance(hours=1)
    await engine.tick()
    assert await log_lines(probe_host.db, old) != []
    await engine.stop()
    restarted = Engine(probe_host)
    try:
        await restarted.tick()
    finally:
        await restarted.stop()
    assert await log_lines(probe_host.db, old) == []
