"""Set-wise recording: the answers of many runs' steps share one transaction, the step after a
``done`` is claimed in that answer's transaction, and none of it changes what is recorded."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import pytest
from sqlalchemy import event

from pageant.db import runlog, steps
from pageant.db.group import OutcomeBatch
from pageant.db.log_kinds import LogKind
from pageant.engine import Engine, loop
from pageant.engine.tick import STAGES
from pageant.runs import controls
from pageant.runs.create import start_now
from pageant.support.clock import SystemClock
from tests.factories import (
    Probe,
    log_lines,
    make_host,
    phase,
    probe_step,
    publish_event,
    run_row,
    spec,
    step_rows,
)


async def _start(host, event_spec, *, scope=""):
    event = await publish_event(host.db, host.clock.now(), event_spec)
    run_id, _ = await start_now(host, event.id, scope=scope, actor="admin:test")
    return run_id


def _gate(release: asyncio.Event, entered: list[int], all_in: asyncio.Event, n: int):
    async def answer(ctx):
        entered.append(1)
        if len(entered) == n:
            all_in.set()
        await release.wait()
        return {"ok": True}

    return answer


async def test_answers_of_many_runs_share_a_transaction_and_each_is_recorded_once(
    probe_host, engine, probe
):
    release, all_in, entered = asyncio.Event(), asyncio.Event(), []
    # Every run's first step waits on one event, so their answers arrive together.
    for name in "abcdefgh":
        probe.script[name] = [_gate(release, entered, all_in, 8)]
    run_ids = [
        await _start(probe_host, spec(phase("p", probe_step(n), probe_step(f"{n}2"))))
        for n in "abcdefgh"
    ]
    tick = asyncio.create_task(engine.tick())
    await asyncio.wait_for(all_in.wait(), 10)
    release.set()
    await tick
    for run_id in run_ids:
        assert (await run_row(probe_host.db, run_id)).status == "completed"
        done = [
            ln
            for ln in await log_lines(probe_host.db, run_id, "step.status")
            if ln.detail["to"] == "done"
        ]
        rows = await step_rows(probe_host.db, run_id)
        # One line per decision, each step done once, on its first attempt.
        assert sorted(ln.step_id for ln in done) == sorted(r.id for r in rows)
        assert [r.attempts for r in rows] == [1, 1]
    keys = [ctx.idempotency_key for ctx in probe.calls]
    assert len(keys) == len(set(keys)) == 16
    batch = engine.outcomes
    # The eight creations (start now), the eight starts (with their first claims, set-wise:
    # one write), then each run's two answers and its completion went through it, and not
    # one by one: the eight first answers, released together, shared a transaction.
    assert batch.writes == 8 + 1 + 8 * 3
    assert batch.transactions <= batch.writes - 7


async def _eight_released_together(host, engine, probe, measure) -> list[list[Any]]:
    """Eight runs of two steps whose first answers are released together, ticked through;
    answers, for each committed transaction, what ``measure(statement, cursor)`` said of
    each statement it sent (None: not counted). Counted on each transaction's own
    connection: a run's loop reads on another one meanwhile, and that read's transaction
    is rolled back, not counted."""
    release, all_in, entered = asyncio.Event(), asyncio.Event(), []
    for name in "abcdefgh":
        probe.script[name] = [_gate(release, entered, all_in, 8)]
    for name in "abcdefgh":
        await _start(host, spec(phase("p", probe_step(name), probe_step(f"{name}2"))))
    sent: dict[int, list[Any]] = {}
    committed: list[list[Any]] = []

    def counted(conn, cursor, statement, parameters, context, executemany):
        value = measure(statement, cursor)
        if value is not None:
            sent.setdefault(id(conn), []).append(value)

    def on_commit(conn):
        committed.append(sent.pop(id(conn), []))

    def on_rollback(conn):
        sent.pop(id(conn), None)

    sync = host.db.sync_engine
    listeners = [
        ("after_cursor_execute", counted),
        ("commit", on_commit),
        ("rollback", on_rollback),
    ]
    for name, listener in listeners:
        event.listen(sync, name, listener)
    try:
        tick = asyncio.create_task(engine.tick())
        await asyncio.wait_for(all_in.wait(), 10)
        release.set()
        await tick
    finally:
        for name, listener in listeners:
            event.remove(sync, name, listener)
    assert len(probe.calls) == 16
    return committed


async def test_a_batch_reads_the_cursors_of_its_done_answers_in_one_statement(
    probe_host, engine, probe
):
    # Cursor reads: the statement that looks for a run's first open step.
    committed = await _eight_released_together(
        probe_host, engine, probe, lambda sql, _: 1 if "first_pending_key" in sql else None
    )
    reads = [len(values) for values in committed]
    batch = engine.outcomes
    # Some transaction recorded several answers (the eight released together) ...
    assert batch.transactions < batch.writes
    # ... and none read a cursor more than once: one read for all of a batch's runs.
    assert max(reads) == 1


async def test_one_failing_write_in_a_batch_is_its_own_and_the_others_commit(probe_host, engine):
    run_id = await _start(probe_host, spec(phase("p", probe_step("a"))))
    now = probe_host.clock.now()

    def line(text):
        async def write(conn, group):
            await runlog.write(
                conn, run_id, LogKind.ANNOUNCE, at=now, detail={"message": text}, batch=group
            )
            if text == "bad":
                raise ValueError("this write fails")
            return text

        return write

    batch = OutcomeBatch(probe_host.db, probe_host.settings.outcome_batch_size)
    answers = await asyncio.gather(
        *(batch.run(line(text)) for text in ("first", "bad", "last")), return_exceptions=True
    )
    assert answers[0] == "first" and answers[2] == "last"
    assert isinstance(answers[1], ValueError)
    written = [ln.detail["message"] for ln in await log_lines(probe_host.db, run_id, "announce")]
    assert written == ["first", "last"]  # the failed write left nothing behind
    # The shared attempt rolled back; each write then ran in its own transaction.
    assert batch.writes == 2 and batch.transactions == 2


async def test_writes_that_all_succeed_commit_in_one_transaction(probe_host, engine):
    run_id = await _start(probe_host, spec(phase("p", probe_step("a"))))
    now = probe_host.clock.now()

    async def write(conn, group):
        await runlog.write(
            conn, run_id, LogKind.ANNOUNCE, at=now, detail={"message": "x"}, batch=group
        )

    batch = OutcomeBatch(probe_host.db, probe_host.settings.outcome_batch_size)
    await asyncio.gather(*(batch.run(write) for _ in range(5)))
    assert (batch.writes, batch.transactions) == (5, 1)
    assert len(await log_lines(probe_host.db, run_id, "announce")) == 5


async def test_a_pause_during_a_perform_stops_the_step_after_it_from_being_claimed_ahead(
    probe_host, engine, probe
):
    run_id = None

    async def pause_then_ok(ctx):
        await controls.pause(probe_host, run_id, actor="admin:test")
        return {"ok": True}

    probe.script["a"] = [pause_then_ok]
    run_id = await _start(probe_host, spec(phase("p", probe_step("a"), probe_step("b"))))
    await engine.tick()
    assert probe.names() == ["a"]
    assert (await run_row(probe_host.db, run_id)).status == "paused"
    first, second = await step_rows(probe_host.db, run_id)
    assert first.status == "done"
    assert (second.status, second.attempts, second.claimed_by) == ("pending", 0, None)


async def test_steps_claimed_ahead_keep_their_order_and_their_bound(settings, db, clock):
    probe = Probe()
    # One dispatch slot, held by the run's own pass: the bound holds (see test_engine_steps).
    tuned = settings.model_copy(update={"steps_per_run_per_tick": 3, "dispatch_concurrency": 1})
    host = make_host(tuned, db, clock, [probe])
    engine = Engine(host)
    try:
        run_id = await _start(host, spec(phase("p", *[probe_step(n) for n in "abcde"])))
        await engine.tick()
        # One tick enters the phase and takes three steps; none is left claimed.
        assert probe.names() == ["a", "b", "c"]
        rows = await step_rows(db, run_id)
        assert [r.status for r in rows] == ["done", "done", "done", "pending", "pending"]
        assert (await run_row(db, run_id)).claimed_by is None
        await engine.tick()
        assert probe.names() == ["a", "b", "c", "d", "e"]
        assert (await run_row(db, run_id)).status == "completed"
    finally:
        await engine.stop()
        await host.close()


async def test_the_loop_runs_the_other_stages_on_their_own_clock(settings, db, monkeypatch):
    probe = Probe()
    calls: Counter[str] = Counter()

    def counted(stage):
        async def wrapper(host, now):
            calls[stage.__name__] += 1
            await stage(host, now)

        wrapper.__name__ = stage.__name__
        return wrapper

    monkeypatch.setattr(loop, "STAGES", tuple(counted(s) for s in STAGES))
    monkeypatch.setattr(loop, "FULL_TICK_SECONDS", 1000.0)
    # One step per pass: every step is a pass of the loop that follows its own progress.
    tuned = settings.model_copy(
        update={"steps_per_run_per_tick": 1, "poll_seconds": 1000, "dispatch_concurrency": 1}
    )
    host = make_host(tuned, db, SystemClock(), [probe])
    engine = Engine(host)
    try:
        await engine.start()
        run_id = await _start(host, spec(phase("p", *[probe_step(f"s{i}") for i in range(12)])))
        deadline = time.monotonic() + 20
        while (await run_row(db, run_id)).status != "completed":
            assert time.monotonic() < deadline, "the run did not complete"
            await asyncio.sleep(0.02)
    finally:
        await engine.stop()
        await host.close()
    assert calls["advance"] >= 12
    # Whole ticks: the first, the start's wake and the one after the run ended; not one a step.
    assert calls["reclaim"] <= 4 < calls["advance"]
    assert calls["cleanup"] >= 1


@pytest.mark.parametrize("size", [1, 3])
async def test_the_batch_size_bounds_a_transaction(probe_host, settings, size):
    from pageant.hosting import Host

    host = Host(
        settings.model_copy(update={"outcome_batch_size": size}),
        clock=probe_host.clock,
        db=probe_host.db,
        discover=False,
    )
    run_id = await _start(probe_host, spec(phase("p", probe_step("a"))))
    now = probe_host.clock.now()

    async def write(conn, group):
        await runlog.write(
            conn, run_id, LogKind.ANNOUNCE, at=now, detail={"message": "x"}, batch=group
        )

    batch = OutcomeBatch(host.db, host.settings.outcome_batch_size)
    await asyncio.gather(*(batch.run(write) for _ in range(6)))
    assert batch.writes == 6
    assert batch.transactions == 6 // size


# ── a perform's log lines, committed with its answer ─────────────────────────


async def _lines_now(db, run_id):
    return [ln.detail.get("said") for ln in await log_lines(db, run_id, "announce")]


async def test_a_performs_lines_are_committed_with_its_answer_in_one_transaction(
    probe_host, engine, probe
):
    run_id = None
    seen_during: list[list[str | None]] = []

    async def speak(ctx):
        await ctx.services.write_log("announce", {"said": "one"})
        await ctx.services.write_log("announce", {"said": "two"})
        seen_during.append(await _lines_now(probe_host.db, run_id))
        return {"ok": True}

    probe.script["a"] = [speak]
    run_id = await _start(probe_host, spec(phase("p", probe_step("a"))))
    before = engine.outcomes.transactions
    await engine.tick()
    assert seen_during == [[]]  # held while the perform ran
    assert await _lines_now(probe_host.db, run_id) == ["one", "two"]
    lines = await log_lines(probe_host.db, run_id)
    said = [ln for ln in lines if ln.kind == "announce"]
    done = [ln for ln in lines if ln.kind == "step.status" and ln.detail["to"] == "done"]
    # In the answer's own transaction: the lines, then the outcome, with nothing between.
    assert [ln.id for ln in said] == [done[0].id - 2, done[0].id - 1]
    assert {ln.step_id for ln in said} == {done[0].step_id}
    # The run's start, phase entry, the step's claim, its answer and the completion: no
    # transaction of its own for either line (each would add one).
    assert engine.outcomes.transactions - before == 5


async def test_a_failed_performs_lines_are_kept_before_its_failure(probe_host, engine, probe):
    async def speak_then_fail(ctx):
        await ctx.services.write_log("announce", {"said": "trying"})
        raise RuntimeError("the shard fell over")

    probe.script["a"] = [speak_then_fail]
    run_id = await _start(probe_host, spec(phase("p", probe_step("a"))))
    await engine.tick()
    lines = await log_lines(probe_host.db, run_id)
    said = [ln for ln in lines if ln.kind == "announce"]
    retried = [ln for ln in lines if ln.kind == "step.retry"]  # an exception is retried
    assert [ln.detail for ln in said] == [{"said": "trying"}]  # kept, and once
    assert said[0].id < retried[0].id


async def test_a_line_written_after_the_answer_is_committed_at_once(probe_host, engine, probe):
    kept: list = []

    async def keep_services(ctx):
        kept.append(ctx.services)
        return {"ok": True}

    probe.script["a"] = [keep_services]
    run_id = await _start(probe_host, spec(phase("p", probe_step("a"))))
    await engine.tick()
    # A task the plugin left running writes after the answer was recorded.
    await kept[0].write_log("announce", {"said": "late"})
    assert await _lines_now(probe_host.db, run_id) == ["late"]


# ── firings no gate waits on, and the wakes that need only advance ───────────


@pytest.mark.parametrize("dialect", ["sqlite"], indirect=True)  # the writer lock is SQLite's
async def test_a_firing_no_gate_waits_on_does_not_wait_for_the_writer(probe_host, engine):
    async with probe_host.db.begin():
        # The writer's lock is held: a firing that needed it would wait here.
        async with asyncio.timeout(2):
            answer = await probe_host.emit("core.run.started", {"event": "x", "run_id": 1})
    assert answer == {"gates_matched": 0, "gates_closed": 0}


async def test_a_start_wakes_the_engine_for_advance_alone(probe_host, engine):
    event = await publish_event(probe_host.db, probe_host.clock.now(), spec(phase("p")))
    engine._outside, engine._next_full = False, time.monotonic() + 1000
    await start_now(probe_host, event.id, scope="", actor="admin:test")
    assert engine._wake.is_set()
    assert engine._stages_due(slept_through=False) == frozenset({"advance"})
    engine.wake()  # anything else outside: the whole tick
    assert engine._stages_due(slept_through=False) is None


async def test_a_disable_committed_during_a_perform_refuses_the_step_claimed_after_it(
    probe_host, engine, probe
):
    from pageant.switchboard import board

    async def disable_then_ok(ctx):
        async with probe_host.db.begin() as conn:
            await board.set_action(
                conn,
                probe_host.registry,
                "probe.step",
                enabled=False,
                actor="admin:test",
                now=probe_host.clock.now(),
            )
        return {"ok": True}

    probe.script["a"] = [disable_then_ok]
    run_id = await _start(
        probe_host, spec(phase("p", probe_step("a"), probe_step("b", on_failure="pause")))
    )
    await engine.tick()
    # The flag was read with the run's cursor in the answer's transaction, after the
    # disable committed: the step after it is refused, never performed.
    assert probe.names() == ["a"]
    (refused,) = await log_lines(probe_host.db, run_id, "step.refused")
    assert refused.detail["code"] == "disabled"
    assert (await run_row(probe_host.db, run_id)).status == "paused"


async def test_a_batch_claims_and_finishes_its_steps_in_one_statement_each(
    probe_host, engine, probe
):
    # Per committed transaction: the rows each UPDATE of steps changed.
    committed = await _eight_released_together(
        probe_host,
        engine,
        probe,
        lambda sql, cursor: cursor.rowcount if sql.startswith("UPDATE event_run_steps") else None,
    )
    updates = [(len(rows), sum(rows)) for rows in committed]
    # The eight answers released together finished their steps, and claimed the eight steps
    # after them, in one transaction: sixteen rows, in one statement for each half.
    assert (2, 16) in updates, updates
    assert all(statements <= 2 for statements, _ in updates), updates


async def _claimed_steps(host, n: int) -> list[int]:
    ids = []
    for i in range(n):
        run_id = await _start(host, spec(phase("p", probe_step(f"s{i}"))), scope=f"r{i}")
        (made,) = await step_rows(host.db, run_id)
        ids.append(made.id)
    return ids


@pytest.mark.parametrize("together", [1, 3])
async def test_a_kept_finish_whose_claim_moved_is_told_stale_on_its_own(probe_host, together):
    # Each step is claimed as attempt 1; the second write answers for attempt 2, a claim
    # that is not the step's. Kept for the batch's one statement, its finish changed no row:
    # the batch rolls back and each write runs alone, where the stale one is told so.
    ids = await _claimed_steps(probe_host, together)
    now = probe_host.clock.now()
    async with probe_host.db.begin() as conn:
        for step_id in ids:
            assert await steps.claim_step(
                conn, step_id, seen_attempts=0, owner="me", lease=now, now=now
            )

    def finish(step_id: int, attempt: int):
        async def write(conn, group):
            if group is not None:
                steps.keep_finish(group, step_id, owner="me", attempt=attempt, now=now)
                return True
            return await steps.finish_step(
                conn, step_id, owner="me", attempt=attempt, to="done", now=now
            )

        return write

    attempts = [2 if k == (1 % together) else 1 for k in range(together)]
    batch = OutcomeBatch(probe_host.db, probe_host.settings.outcome_batch_size)
    answers = await asyncio.gather(
        *(batch.run(finish(step_id, a)) for step_id, a in zip(ids, attempts, strict=True))
    )
    assert answers == [a == 1 for a in attempts]
    async with probe_host.db.connect() as conn:
        rows = [await steps.get_step(conn, step_id) for step_id in ids]
    assert [row.status for row in rows] == ["done" if a == 1 else "running" for a in attempts]
    assert (batch.writes, batch.transactions) == (together, together)


@pytest.mark.parametrize("together", [1, 3])
async def test_a_kept_claim_whose_step_moved_loses_on_its_own(probe_host, together):
    ids = await _claimed_steps(probe_host, together)
    now = probe_host.clock.now()
    moved = ids[1 % together]
    async with probe_host.db.begin() as conn:  # another claimer took this one first
        assert await steps.claim_step(
            conn, moved, seen_attempts=0, owner="other", lease=now, now=now
        )

    def claim(step_id: int):
        async def write(conn, group):
            if group is not None:
                steps.keep_claim(group, step_id, seen_attempts=0, owner="me", lease=now, now=now)
                return True
            return await steps.claim_step(
                conn, step_id, seen_attempts=0, owner="me", lease=now, now=now
            )

        return write

    batch = OutcomeBatch(probe_host.db, probe_host.settings.outcome_batch_size)
    answers = await asyncio.gather(*(batch.run(claim(step_id)) for step_id in ids))
    assert answers == [step_id != moved for step_id in ids]
    async with probe_host.db.connect() as conn:
        rows = [await steps.get_step(conn, step_id) for step_id in ids]
    assert [row.claimed_by for row in rows] == ["other" if i == moved else "me" for i in ids]
    assert [row.attempts for row in rows] == [1] * together
