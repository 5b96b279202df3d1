"""A clean stop: nothing new is claimed, a step already in ``perform`` finishes within the
grace and its outcome is recorded, and every claim goes back; a step that outlasts the grace
is handed back unmarked (its attempt stands) and the log names it."""

from __future__ import annotations

import asyncio
import logging

from pageant.engine import Engine
from pageant.runs.create import start_now
from tests.factories import (
    Blocker,
    log_lines,
    phase,
    probe_step,
    publish_event,
    run_row,
    spec,
    step_rows,
)


async def _start(host, event_spec):
    event = await publish_event(host.db, host.clock.now(), event_spec)
    run_id, _ = await start_now(host, event.id, scope="", actor="admin:test")
    return run_id


async def _in_perform(engine: Engine, blocker: Blocker) -> None:
    await engine.tick(drain=False)
    await asyncio.wait_for(blocker.entered.wait(), 10)


async def test_a_step_in_perform_finishes_within_the_grace_and_nothing_new_starts(
    probe_host, engine, probe
):
    blocker = Blocker()
    probe.script["a"] = [blocker]
    run_id = await _start(probe_host, spec(phase("main", probe_step("a"), probe_step("b"))))
    other = await _start(probe_host, spec(phase("main", probe_step("c"))))
    await _in_perform(engine, blocker)

    stopping = asyncio.create_task(engine.stop(grace=10))
    await asyncio.sleep(0.05)
    assert engine.stopping and not stopping.done()
    blocker.release.set()
    await asyncio.wait_for(stopping, 10)

    # a's answer was recorded; b was not claimed, nor was anything new after the stop began.
    assert [(s.label, s.status, s.attempts) for s in await step_rows(probe_host.db, run_id)] == [
        ("Probe step", "done", 1),
        ("Probe step", "pending", 0),
    ]
    assert probe.names().count("b") == 0
    assert (await run_row(probe_host.db, run_id)).claimed_by is None
    # The other run was claimed and advanced in the same tick only if it got there before
    # the stop; either way nothing of it is left claimed.
    assert (await run_row(probe_host.db, other)).claimed_by is None
    # A stopped engine spawns nothing.
    await engine.tick(drain=True)
    assert probe.names().count("b") == 0


async def test_a_step_that_outlasts_the_grace_is_handed_back_unmarked(
    probe_host, engine, probe, caplog
):
    blocker = Blocker()
    probe.script["a"] = [blocker]
    run_id = await _start(probe_host, spec(phase("main", probe_step("a"), probe_step("b"))))
    await _in_perform(engine, blocker)

    with caplog.at_level(logging.WARNING, logger="pageant.engine"):
        await asyncio.wait_for(engine.stop(grace=0.1), 10)

    a, b = await step_rows(probe_host.db, run_id)
    # Not failed, not done: pending again with its attempt counted, and nobody holds it.
    assert (a.status, a.attempts, a.claimed_by, a.lease_until) == ("pending", 1, None, None)
    assert (b.status, b.attempts) == ("pending", 0)
    assert (await run_row(probe_host.db, run_id)).claimed_by is None
    [line] = [
        line
        for line in await log_lines(probe_host.db, run_id, "step.status")
        if line.detail.get("because") == "the host stopped before perform answered"
    ]
    assert line.step_id == a.id and line.detail["to"] == "pending"
    warning = [r for r in caplog.records if "still in perform" in r.getMessage()]
    assert len(warning) == 1 and f"step {a.id}" in warning[0].getMessage()


async def test_the_grace_holds_on_both_sides(probe_host, engine, probe):
    # Released just inside the grace: recorded done. (The other side is the test above.)
    blocker = Blocker()
    probe.script["a"] = [blocker]
    run_id = await _start(probe_host, spec(phase("main", probe_step("a"))))
    await _in_perform(engine, blocker)
    stopping = asyncio.create_task(engine.stop(grace=2))
    await asyncio.sleep(0.5)
    blocker.release.set()
    await asyncio.wait_for(stopping, 10)
    [a] = await step_rows(probe_host.db, run_id)
    assert a.status == "done"


async def test_the_grace_is_a_setting_with_a_30_second_default() -> None:
    from pageant.support.settings import Settings, load_settings

    assert Settings().stop_grace_seconds == 30
    assert load_settings(environ={"PAGEANT_STOP_GRACE_SECONDS": "5"}).stop_grace_seconds == 5


async def test_a_dispatch_that_begins_after_the_signal_claims_nothing(probe_host, engine, probe):
    # The run's loop looked before the signal, the claim would come after it: refused there.
    from pageant.engine.advance_stage import read_cursor
    from pageant.engine.dispatch import dispatch_step
    from pageant.states import Dispatched

    probe.script["a"] = [{"ok": False, "retry": True, "error": "busy"}]
    run_id = await _start(probe_host, spec(phase("main", probe_step("a"))))
    await engine.tick()  # a's first attempt asks for a retry: pending again, due later
    probe_host.clock.advance(probe_host.settings.retry_seconds + 1)
    run = dict((await run_row(probe_host.db, run_id))._mapping)
    async with probe_host.db.connect() as conn:
        found = await read_cursor(conn, run_id)
    assert found is not None and found[1] is not None
    step = found[1]
    assert (step["status"], step["attempts"]) == ("pending", 1)

    engine.stopping = True
    assert await dispatch_step(probe_host, run, step) is Dispatched.STOP
    [a] = await step_rows(probe_host.db, run_id)
    assert (a.status, a.attempts, a.claimed_by) == ("pending", 1, None)
    assert probe.names() == ["a"]  # only the attempt before the signal


async def test_a_step_claimed_ahead_before_the_signal_is_handed_back_untried(
    probe_host, engine, probe
):
    # a's answer claims b ahead, in its own transaction; the signal arrives as that commits.
    blocker = Blocker()
    probe.script["a"] = [blocker]
    run_id = await _start(probe_host, spec(phase("main", probe_step("a"), probe_step("b"))))
    await _in_perform(engine, blocker)
    recorded = engine.outcomes.run

    async def then_the_signal(write):
        answer = await recorded(write)
        engine.stopping = True
        return answer

    engine.outcomes.run = then_the_signal
    blocker.release.set()
    await engine.drain()

    a, b = await step_rows(probe_host.db, run_id)
    assert a.status == "done"
    # Never performed, and as it was before the claim: its attempt is not spent.
    assert probe.names() == ["a"]
    assert (b.status, b.attempts, b.claimed_by, b.lease_until) == ("pending", 0, None, None)
    lines = [
        line.detail
        for line in await log_lines(probe_host.db, run_id)
        if line.kind == "step.status" and line.step_id == b.id
    ]
    assert lines[-1]["because"] == "the host stopped before it was dispatched"
    assert lines[-1]["to"] == "pending"
