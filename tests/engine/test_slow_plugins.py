"""One plugin's slowness costs only its own runs, against the real engine on both databases:
a perform or a revert that hangs holds neither the tick nor another plugin's run; and the
cleanup stage derives a status a stopped host never wrote, and retries lock contention
quietly."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pymysql
import pytest
from sqlalchemy.exc import OperationalError

from pageant import hookimpl
from pageant.db import resources
from pageant.engine import Engine
from pageant.switchboard import board
from tests.factories import (
    make_host,
    phase,
    run_row,
    set_run,
    spec,
    start_event,
    step,
)
from tests.ledger.games import Smith, forge


class Bell:
    """Another plugin: ``bell.ring`` tells the world something and changes nothing."""

    PLUGIN_INFO = {"owner": "bell", "contract": "^1.0"}  # noqa: RUF012 - read by the loader

    def __init__(self) -> None:
        self.rung: list[str] = []

    async def ring(self, ctx: Any) -> Any:
        self.rung.append(ctx.idempotency_key)
        return {"ok": True}

    @hookimpl
    def pageant_actions(self) -> list[dict[str, Any]]:
        return [
            {
                "id": "bell.ring",
                "label": "Ring",
                "risk": "notify",
                "budget_ms": 1_000,
                "perform": self.ring,
            }
        ]


@pytest.fixture
def smith() -> Smith:
    return Smith()


@pytest.fixture
def bell() -> Bell:
    return Bell()


@pytest.fixture
async def host(settings, db, clock, smith, bell):
    h = make_host(settings, db, clock, [smith, bell])
    async with h.db.begin() as conn:
        await board.set_action(
            conn, h.registry, "smith.forge", enabled=True, actor="admin:test", now=clock.now()
        )
    try:
        yield h
    finally:
        await h.close()


async def test_a_hanging_revert_holds_neither_the_tick_nor_another_plugins_run(host, smith, bell):
    engine = Engine(host)
    hung = asyncio.Event()
    released = asyncio.Event()

    async def hang(ctx: Any) -> Any:
        hung.set()
        await released.wait()
        return {"ok": True}

    smith.unforge = hang  # type: ignore[method-assign]  # the test's own hanging revert
    host.registry.actions["smith.forge"] = host.registry.actions["smith.forge"].model_copy(
        update={"revert": hang}
    )
    try:
        held = await start_event(host, spec(phase("p", forge(1))))
        await engine.tick()  # performs; the run completes; its give-back starts
        await asyncio.wait_for(hung.wait(), 5)
        canary = await start_event(host, spec(phase("p", step("bell.ring"))))
        # The tick that follows returns while the revert still hangs, and the canary runs.
        await asyncio.wait_for(engine.tick(drain=False), 2)
        running = engine.inflight.get(canary)
        if running is not None:
            await asyncio.wait_for(asyncio.shield(running), 2)
        assert len(bell.rung) == 1
        assert (await run_row(host.db, canary)).status == "completed"
        assert (await run_row(host.db, held)).cleanup_status == "pending"
        # A tick while the give-back is in flight does not start it a second time.
        await asyncio.wait_for(engine.tick(drain=False), 2)
        assert list(engine.cleaning) == [held]
    finally:
        released.set()
        await engine.drain()
        await engine.stop()
    assert (await run_row(host.db, held)).cleanup_status == "complete"


async def test_performs_that_hang_fill_their_own_plugins_slots_and_no_other_plugins(
    settings, db, clock, smith, bell
):
    settings = settings.model_copy(update={"dispatch_concurrency": 2, "plugin_concurrency": 1})
    host = make_host(settings, db, clock, [smith, bell])
    async with host.db.begin() as conn:
        await board.set_action(
            conn, host.registry, "smith.forge", enabled=True, actor="admin:test", now=clock.now()
        )
    engine = Engine(host)
    released = asyncio.Event()
    entered = asyncio.Event()

    async def hang(ctx: Any) -> Any:
        entered.set()
        await released.wait()
        return None

    smith.first = hang
    try:
        first = await start_event(host, spec(phase("p", forge(1))))
        second = await start_event(host, spec(phase("p", forge(1))))
        await asyncio.wait_for(engine.tick(drain=False), 2)
        # The tick hands the performs to tasks: wait (bounded) for the first to reach the
        # plugin, however slowly a loaded machine schedules it.
        await asyncio.wait_for(entered.wait(), 10)
        # The plugin's one slot is the first run's; the second waits for it, untried.
        assert len(smith.performs) == 1
        canary = await start_event(host, spec(phase("p", step("bell.ring"))))
        await asyncio.wait_for(engine.tick(drain=False), 2)
        running = engine.inflight.get(canary)
        if running is not None:
            await asyncio.wait_for(asyncio.shield(running), 2)
        assert len(bell.rung) == 1
        assert (await run_row(host.db, canary)).status == "completed"
        assert len(smith.performs) == 1
    finally:
        released.set()
        await engine.drain()
        await engine.stop()
        await host.close()
    assert len(smith.performs) == 2
    assert {(await run_row(host.db, r)).status for r in (first, second)} == {"completed"}


async def test_a_status_a_stopped_host_never_wrote_is_derived_again_after_a_start(host, smith):
    engine = Engine(host)
    run_id = await start_event(host, spec(phase("p", forge(2))))
    await engine.tick()
    await engine.stop()
    assert smith.world == {}
    # The host died after the last resource.reverted and before the status was written.
    await set_run(host.db, run_id, cleanup_status="pending")
    async with host.db.connect() as conn:
        assert await resources.cleanup_candidates(conn, host.clock.now(), limit=10) == []
    restarted = Engine(host)
    try:
        await restarted.tick()
    finally:
        await restarted.stop()
    assert (await run_row(host.db, run_id)).cleanup_status == "complete"


async def test_a_status_still_pending_for_rows_left_to_try_is_left_pending(host, smith):
    engine = Engine(host)
    smith.revert_error = "shard busy"
    run_id = await start_event(host, spec(phase("p", forge(1))))
    try:
        await engine.tick()
    finally:
        await engine.stop()
    async with host.db.connect() as conn:
        assert await resources.unsettled_ended_runs(conn, after=0, limit=10) == []
    assert (await run_row(host.db, run_id)).cleanup_status == "pending"


def _deadlock() -> OperationalError:
    return OperationalError(
        "UPDATE event_run_resources ...",
        {},
        pymysql.err.OperationalError(1213, "Deadlock found when trying to get lock"),
    )


async def test_a_deadlock_in_the_cleanup_stage_is_retried_and_logged_at_debug(
    host, smith, monkeypatch, caplog
):
    engine = Engine(host)
    real_release = resources.release
    raised: list[int] = []

    async def release_once_deadlocked(conn, resource_id, **kw):
        if not raised:
            raised.append(resource_id)
            raise _deadlock()
        return await real_release(conn, resource_id, **kw)

    monkeypatch.setattr(resources, "release", release_once_deadlocked)
    run_id = await start_event(host, spec(phase("p", forge(1))))
    caplog.set_level(logging.DEBUG, logger="pageant")
    try:
        await engine.tick()
        assert raised
        assert (await run_row(host.db, run_id)).cleanup_status == "pending"
        await engine.tick()
    finally:
        await engine.stop()
    assert (await run_row(host.db, run_id)).cleanup_status == "complete"
    assert smith.world == {}
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    contention = [r for r in caplog.records if "lock contention" in r.getMessage()]
    assert contention and all(r.levelno == logging.DEBUG for r in contention)
    assert host.metrics.deadlocks_retried.labels(where="cleaning up run")._value.get() == 1
