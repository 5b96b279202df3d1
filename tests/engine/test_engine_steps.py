"""Steps: claims, the action context, retries, dispositions, refusals, parking, holds,
reclaims and the fence that drops a stale answer."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from pageant.db import runs, steps
from pageant.db.tables import event_run_steps
from pageant.engine import Engine
from pageant.engine.advance_stage import read_cursor
from pageant.engine.dispatch import Claim, dispatch_step
from pageant.runs import controls
from pageant.runs.create import start_now
from tests.factories import (
    Blocker,
    count_calls,
    log_lines,
    make_host,
    phase,
    probe_step,
    publish_event,
    run_row,
    set_run,
    spec,
    step,
    step_rows,
    wait,
)

RETRY = {"ok": False, "retry": True, "error": "shard busy"}
FATAL = {"ok": False, "retry": False, "error": "no such region"}


async def _start(host, event_spec, **kw):
    event = await publish_event(host.db, host.clock.now(), event_spec, **kw)
    run_id, _ = await start_now(host, event.id, scope="", actor="admin:test")
    return run_id


async def _statuses(host, run_id):
    return [s.status for s in await step_rows(host.db, run_id)]


# ── the claim and the context ─────────────────────────────────────────────────


async def test_a_dispatch_hands_the_action_its_context(probe_host, clock, engine, probe):
    run_id = await _start(probe_host, spec(phase("p", probe_step("a"))))
    await engine.tick()
    (ctx,) = probe.calls
    (made,) = await step_rows(probe_host.db, run_id)
    assert ctx.params == {"name": "a"}
    assert ctx.idempotency_key == made.idempotency_key
    assert ctx.verify is False
    assert ctx.deadline == clock.now() + timedelta(milliseconds=5_000)
    assert (ctx.run.id, ctx.run.scope) == (run_id, "")
    assert ctx.run.slug.startswith("event-")
    assert (ctx.services.run_id, ctx.services.step_id) == (run_id, made.id)
    assert made.attempts == 1 and made.claimed_by == probe_host.identity


async def test_a_claim_increments_attempts_and_leases_budget_plus_margin(
    probe_host, clock, engine, probe
):
    blocker = Blocker()
    probe.script["slow"] = [blocker]
    run_id = await _start(probe_host, spec(phase("p", probe_step("slow"))))
    await engine.tick(drain=False)
    await blocker.entered.wait()
    (made,) = await step_rows(probe_host.db, run_id)
    assert (made.status, made.attempts) == ("running", 1)
    margin = probe_host.settings.step_lease_margin_seconds
    assert made.lease_until == clock.now() + timedelta(seconds=5 + margin)
    blocker.release.set()
    await engine.drain()
    assert await _statuses(probe_host, run_id) == ["done"]


async def test_a_step_claim_is_a_compare_and_set(probe_host, clock):
    run_id = await _start(probe_host, spec(phase("p", probe_step("a"))))
    (made,) = await step_rows(probe_host.db, run_id)
    now, lease = clock.now(), clock.now() + timedelta(minutes=1)
    async with probe_host.db.begin() as conn:
        assert await steps.claim_step(
            conn, made.id, seen_attempts=0, owner="one", lease=lease, now=now
        )
        assert not await steps.claim_step(
            conn, made.id, seen_attempts=0, owner="two", lease=lease, now=now
        )
        assert not await steps.claim_step(
            conn, made.id, seen_attempts=1, owner="two", lease=lease, now=now
        )
    (after,) = await step_rows(probe_host.db, run_id)
    assert (after.claimed_by, after.attempts) == ("one", 1)


# ── retries and the attempt ceiling ──────────────────────────────────────────


async def test_a_retry_backs_off_flat_and_degrades_the_run_from_the_first(
    probe_host, clock, engine, probe
):
    probe.script["a"] = [RETRY]
    run_id = await _start(probe_host, spec(phase("p", probe_step("a"), probe_step("b"))))
    await engine.tick()
    made = await step_rows(probe_host.db, run_id)
    assert (made[0].status, made[0].attempts, made[0].last_error) == ("pending", 1, "shard busy")
    assert made[0].due_at == clock.now() + timedelta(seconds=60)
    row = await run_row(probe_host.db, run_id)
    assert (row.status, row.health, row.waiting_reason) == ("running", "degraded", "backoff")
    (retry,) = await log_lines(probe_host.db, run_id, "step.retry")
    assert (retry.detail["attempt"], retry.detail["of"]) == (1, 3)
    clock.advance(59.999)
    await engine.tick()
    assert probe.names() == ["a"]
    clock.advance(0.001)
    await engine.tick()
    assert probe.names() == ["a", "a", "b"]
    assert (await run_row(probe_host.db, run_id)).status == "completed"
    # the same key on every retry
    assert probe.calls[0].idempotency_key == probe.calls[1].idempotency_key


async def test_the_attempt_ceiling_holds_on_both_sides(probe_host, clock, engine, probe):
    probe.script["a"] = [RETRY, RETRY, RETRY]
    run_id = await _start(probe_host, spec(phase("p", probe_step("a"), probe_step("b"))))
    await engine.tick()
    clock.advance(60)
    await engine.tick()
    (first, _) = await step_rows(probe_host.db, run_id)
    assert (first.status, first.attempts) == ("pending", 2)  # attempt 2 of 3 still retries
    clock.advance(60)
    await engine.tick()
    (first, second) = await step_rows(probe_host.db, run_id)
    assert (first.status, first.attempts) == ("failed", 3)  # attempt 3 of 3 does not
    assert second.status == "done"  # notify: on_failure skip, the run carries on
    assert len(await log_lines(probe_host.db, run_id, "step.retry")) == 2


async def test_a_perform_that_raises_or_times_out_is_a_retry(probe_host, clock, engine, probe):
    async def boom(ctx):
        raise RuntimeError("socket closed")

    probe.script["a"] = [boom]
    run_id = await _start(probe_host, spec(phase("p", probe_step("a"))))
    await engine.tick()
    (made,) = await step_rows(probe_host.db, run_id)
    line = boom.__code__.co_firstlineno + 1
    assert (made.status, made.last_error) == (
        "pending",
        f"RuntimeError: socket closed at tests/engine/test_engine_steps.py:{line} in boom",
    )


# ── dispositions ─────────────────────────────────────────────────────────────


async def test_skip_disposition_fails_the_step_and_carries_on_degraded(
    probe_host, clock, engine, probe
):
    probe.script["a"] = [FATAL]
    run_id = await _start(probe_host, spec(phase("p", probe_step("a"), probe_step("b"))))
    await engine.tick()
    assert await _statuses(probe_host, run_id) == ["failed", "done"]
    row = await run_row(probe_host.db, run_id)
    assert (row.status, row.health) == ("completed", "degraded")
    failed = (await log_lines(probe_host.db, run_id, "step.status"))[0]
    assert failed.detail["to"] == "failed" and failed.detail["on_failure"] == "skip"


async def test_pause_disposition_stops_the_run_for_a_person(probe_host, clock, engine, probe):
    probe.script["a"] = [FATAL]
    run_id = await _start(
        probe_host, spec(phase("p", probe_step("a", on_failure="pause"), probe_step("b")))
    )
    await engine.tick()
    assert await _statuses(probe_host, run_id) == ["failed", "pending"]
    row = await run_row(probe_host.db, run_id)
    assert (row.status, row.waiting_reason) == ("paused", "paused")
    assert "no such region" in row.last_error
    assert probe.names() == ["a"]


async def test_abort_disposition_cancels_pending_steps_and_fails_the_run(
    probe_host, clock, engine, probe
):
    probe.script["a"] = [FATAL]
    run_id = await _start(
        probe_host,
        spec(phase("p", probe_step("a", on_failure="abort_run"), probe_step("b"))),
        concurrency_key="k",
    )
    await engine.tick()
    assert await _statuses(probe_host, run_id) == ["failed", "cancelled"]
    row = await run_row(probe_host.db, run_id)
    assert (row.status, row.concurrency_lock, row.claimed_by) == ("failed", None, None)
    status = (await log_lines(probe_host.db, run_id, "run.status"))[-1]
    assert status.detail["to"] == "failed" and status.detail["cancelled_steps"] == 1


# ── refusals ──────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("action", "run_status", "later"),
    [("probe.change", "paused", "pending"), ("probe.burn", "failed", "cancelled")],
)
async def test_change_and_irreversible_steps_are_refused_until_the_switchboard(
    probe_host, clock, engine, probe, action, run_status, later
):
    run_id = await _start(probe_host, spec(phase("p", step(action, name="x"), probe_step("b"))))
    await engine.tick()
    assert probe.calls == []  # nothing reached the plugin
    assert await _statuses(probe_host, run_id) == ["refused", later]
    assert (await run_row(probe_host.db, run_id)).status == run_status
    (refused,) = await log_lines(probe_host.db, run_id, "step.refused")
    assert refused.detail["code"] == "disabled" and refused.detail["to"] == "refused"


async def test_a_step_whose_action_is_gone_is_refused_unavailable(probe_host, clock, engine):
    run_id = await _start(probe_host, spec(phase("p", step("gone.action"))))
    await engine.tick()
    assert await _statuses(probe_host, run_id) == ["refused"]
    (refused,) = await log_lines(probe_host.db, run_id, "step.refused")
    assert refused.detail["code"] == "unavailable"
    assert (await run_row(probe_host.db, run_id)).status == "paused"


# ── parking ───────────────────────────────────────────────────────────────────


async def test_a_parked_step_waits_for_a_person_and_survives_any_reclaim(
    probe_host, clock, engine, probe
):
    probe.script["cue"] = [{"ok": True, "park": True}]
    run_id = await _start(probe_host, spec(phase("p", probe_step("cue"), probe_step("after"))))
    await engine.tick()
    parked = (await step_rows(probe_host.db, run_id))[0]
    assert (parked.status, parked.lease_until) == ("running", None)
    clock.advance(days=3)
    await engine.tick()
    assert (await step_rows(probe_host.db, run_id))[0].status == "running"
    row = await run_row(probe_host.db, run_id)
    assert (row.status, row.waiting_reason) == ("running", "parked")
    assert probe.names() == ["cue"]
    await controls.confirm(probe_host, run_id, parked.id, actor="moderator:m")
    await engine.tick()
    assert probe.names() == ["cue", "after"]
    assert (await run_row(probe_host.db, run_id)).status == "completed"


# ── holds ─────────────────────────────────────────────────────────────────────


async def test_hold_for_delays_the_next_step(probe_host, clock, engine, probe):
    run_id = await _start(probe_host, spec(phase("p", wait(30), probe_step("a"))))
    await engine.tick()
    made = await step_rows(probe_host.db, run_id)
    assert made[1].due_at == clock.now() + timedelta(seconds=30)
    clock.advance(29)
    await engine.tick()
    assert probe.names() == []
    clock.advance(1)
    await engine.tick()
    assert probe.names() == ["a"]


async def test_a_wait_ending_a_phase_holds_the_next_phase_across_a_crash(
    probe_host, settings, db, clock, probe
):
    run_id = await _start(probe_host, spec(phase("one", wait(45)), phase("two", probe_step("a"))))
    async with Engine(probe_host) as first:
        await first.tick()
    row = await run_row(db, run_id)
    assert (row.current_phase, row.hold_until) == ("one", clock.now() + timedelta(seconds=45))
    # A new process (another host) picks the run up: the wait is on the row, not in memory.
    restarted = make_host(settings, db, clock, [probe])
    try:
        async with Engine(restarted) as second:
            clock.advance(44)
            await second.tick()
            assert probe.names() == []
            assert (await run_row(db, run_id)).current_phase == "one"
            clock.advance(1)
            await second.tick()
        assert probe.names() == ["a"]
        assert (await run_row(db, run_id)).status == "completed"
    finally:
        await restarted.close()


# ── reclaim ───────────────────────────────────────────────────────────────────


async def test_a_dead_dispatch_is_reclaimed_with_attempts_intact_and_the_same_key(
    probe_host, clock, engine, probe
):
    run_id = await _start(probe_host, spec(phase("p", probe_step("a"))))
    (made,) = await step_rows(probe_host.db, run_id)
    # A process claimed the step and died before answering.
    lease = clock.now() + timedelta(seconds=65)
    async with probe_host.db.begin() as conn:
        assert await steps.claim_step(
            conn, made.id, seen_attempts=0, owner="dead", lease=lease, now=clock.now()
        )
    await engine.tick()
    assert probe.calls == []  # the lease is live: nobody touches it
    clock.advance(65)
    await engine.tick()
    (after,) = await step_rows(probe_host.db, run_id)
    assert (after.status, after.attempts) == ("done", 2)
    assert probe.calls[0].idempotency_key == made.idempotency_key
    released = [
        ln
        for ln in await log_lines(probe_host.db, run_id, "step.status")
        if ln.detail["to"] == "pending"
    ]
    assert released[0].detail["attempt"] == 1
    assert (await run_row(probe_host.db, run_id)).health == "degraded"


async def test_a_dead_hosts_run_claims_go_with_its_first_expired_step(probe_host, clock, engine):
    """The run claims a dead host held outlast its step claims by far (``run_lease_seconds``
    against a step's time limit and margin): they are taken back with its first expired
    step, so its runs go on then, and a live host's run claim is left alone."""
    event_spec = spec(phase("p", probe_step("a")))
    in_flight, between, other = [await _start(probe_host, event_spec) for _ in range(3)]
    now = clock.now()
    run_lease = now + timedelta(seconds=probe_host.settings.run_lease_seconds)
    for run_id, owner in ((in_flight, "dead"), (between, "dead"), (other, "alive")):
        await set_run(
            probe_host.db,
            run_id,
            status="running",
            current_phase="p",
            claimed_by=owner,
            lease_until=run_lease,
        )
    (made,) = await step_rows(probe_host.db, in_flight)
    async with probe_host.db.begin() as conn:
        assert await steps.claim_step(
            conn, made.id, seen_attempts=0, owner="dead", lease=now + timedelta(seconds=65), now=now
        )
    clock.advance(65)
    await engine.tick()
    assert (await run_row(probe_host.db, in_flight)).status == "completed"
    assert (await run_row(probe_host.db, between)).status == "completed"
    alive = await run_row(probe_host.db, other)
    assert (alive.status, alive.claimed_by) == ("running", "alive")


async def test_a_reclaim_at_the_ceiling_fails_the_step_with_its_disposition(
    probe_host, clock, engine
):
    run_id = await _start(
        probe_host, spec(phase("p", probe_step("a", on_failure="pause"), probe_step("b")))
    )
    await set_run(probe_host.db, run_id, status="running", current_phase="p")
    made = await step_rows(probe_host.db, run_id)
    for attempt in range(3):
        async with probe_host.db.begin() as conn:
            if attempt:
                await steps.release_expired_step(
                    conn, made[0].id, owner="dead", attempt=attempt, now=clock.now()
                )
            await steps.claim_step(
                conn,
                made[0].id,
                seen_attempts=attempt,
                owner="dead",
                lease=clock.now(),
                now=clock.now(),
            )
    await engine.tick()
    after = await step_rows(probe_host.db, run_id)
    assert (after[0].status, after[0].attempts) == ("failed", 3)
    assert "lease expired" in after[0].last_error
    assert (await run_row(probe_host.db, run_id)).status == "paused"


async def test_a_stale_answer_is_logged_and_dropped(probe_host, clock, engine, probe):
    late = Blocker({"ok": False, "retry": False, "error": "late and wrong"})
    successor = Blocker({"ok": True})
    probe.script["a"] = [late, successor]
    run_id = await _start(probe_host, spec(phase("p", probe_step("a"))))
    await engine.tick(drain=False)
    await late.entered.wait()
    # The first dispatch hangs past its lease; the reclaim gives the step back, and a
    # second dispatch (same host, attempt 2) takes it while the first is still out.
    clock.advance(5 + probe_host.settings.step_lease_margin_seconds)
    await engine.tick(drain=False)
    (made,) = await step_rows(probe_host.db, run_id)
    assert (made.status, made.attempts) == ("pending", 1)
    run = dict((await run_row(probe_host.db, run_id))._mapping, slug="s")
    second = asyncio.create_task(
        dispatch_step(probe_host, run, await _cursor_step(probe_host, run_id))
    )
    await successor.entered.wait()
    late.release.set()  # the stale answer lands while attempt 2 is in flight
    await engine.drain()
    (made,) = await step_rows(probe_host.db, run_id)
    assert (made.status, made.attempts, made.last_error) == ("running", 2, None)
    (stale,) = await log_lines(probe_host.db, run_id, "step.stale")
    assert (stale.detail["attempt"], stale.detail["outcome"]) == (1, "failed")
    successor.release.set()
    assert await second == "continue"
    (made,) = await step_rows(probe_host.db, run_id)
    assert (made.status, made.attempts) == ("done", 2)
    assert [c.idempotency_key for c in probe.calls] == [made.idempotency_key] * 2


async def _cursor_step(host, run_id):
    async with host.db.connect() as conn:
        _, found = await read_cursor(conn, run_id)
    return found


@pytest.mark.parametrize(
    ("statuses", "cursor"),
    [
        (["done", "done", "pending", "pending"], 2),  # the first pending, none running
        (["done", "running", "pending", "pending"], 1),  # running before the first pending
        (["failed", "done", "running", "done"], 2),  # running, nothing pending after it
        (["done", "pending", "done", "running"], 1),  # pending again before a running step
        (["done", "failed", "skipped", "done"], None),  # nothing open: the phase is settled
    ],
)
async def test_the_cursor_is_the_phases_lowest_open_step(probe_host, statuses, cursor):
    # Read from the first pending step and the first running one, whichever comes first.
    run_id = await _start(probe_host, spec(phase("p", *[probe_step(n) for n in "abcd"])))
    made = await step_rows(probe_host.db, run_id)
    await set_run(probe_host.db, run_id, status="running", current_phase="p")
    async with probe_host.db.begin() as conn:
        for row, status in zip(made, statuses, strict=True):
            await conn.execute(
                event_run_steps.update().where(event_run_steps.c.id == row.id).values(status=status)
            )
    found = await _cursor_step(probe_host, run_id)
    assert (found and found["id"]) == (None if cursor is None else made[cursor].id)


async def test_outcome_writes_are_fenced_by_owner_and_attempt(probe_host, clock):
    run_id = await _start(probe_host, spec(phase("p", probe_step("a"))))
    (made,) = await step_rows(probe_host.db, run_id)
    now = clock.now()
    async with probe_host.db.begin() as conn:
        await steps.claim_step(
            conn, made.id, seen_attempts=0, owner="me", lease=now + timedelta(minutes=1), now=now
        )
    claim = Claim("me", 1)
    async with probe_host.db.begin() as conn:
        for owner, attempt in (("other", 1), ("me", 2), ("me", 0)):
            assert not await steps.finish_step(
                conn, made.id, owner=owner, attempt=attempt, to="done", now=now
            )
            assert not await steps.park_step(conn, made.id, owner=owner, attempt=attempt)
        assert await steps.finish_step(
            conn, made.id, owner=claim.owner, attempt=claim.attempt, to="done", now=now
        )
        # write-once: the same claim cannot record a second outcome
        assert not await steps.finish_step(
            conn, made.id, owner="me", attempt=1, to="failed", error="x", now=now
        )
    (after,) = await step_rows(probe_host.db, run_id)
    assert (after.status, after.last_error) == ("done", None)


async def test_the_reclaim_never_takes_a_step_parked_under_it(probe_host, clock):
    run_id = await _start(probe_host, spec(phase("p", probe_step("a"))))
    (made,) = await step_rows(probe_host.db, run_id)
    now = clock.now()
    async with probe_host.db.begin() as conn:
        await steps.claim_step(conn, made.id, seen_attempts=0, owner="me", lease=now, now=now)
        assert await steps.park_step(conn, made.id, owner="me", attempt=1)
        assert not await steps.release_expired_step(conn, made.id, owner="me", attempt=1, now=now)
        assert not await steps.finish_step(
            conn, made.id, owner="me", attempt=1, to="failed", now=now, expired=True
        )
    (after,) = await step_rows(probe_host.db, run_id)
    assert (after.status, after.lease_until) == ("running", None)


# ── the bound and the pause between steps ─────────────────────────────────────


async def test_steps_per_tick_bounds_one_run_while_no_slot_is_free(settings, db, clock, probe):
    # One dispatch slot, held by the run's own pass: a run waiting for it would wait.
    tuned = settings.model_copy(update={"steps_per_run_per_tick": 2, "dispatch_concurrency": 1})
    host = make_host(tuned, db, clock, [probe])
    try:
        run_id = await _start(
            host, spec(phase("p", probe_step("a"), probe_step("b"), probe_step("c")))
        )
        async with Engine(host) as engine:
            await engine.tick()
            assert probe.names() == ["a", "b"]
            assert (await run_row(db, run_id)).claimed_by is None  # handed back at the bound
            await engine.tick()
            assert probe.names() == ["a", "b", "c"]
        assert (await run_row(db, run_id)).status == "completed"
    finally:
        await host.close()


async def _claims_of_one_pass(
    settings, db, clock, probe, monkeypatch, **update: Any
) -> tuple[list, int]:
    """Run a phase of five steps in one tick with ``steps_per_run_per_tick`` 2 and
    ``update``; answer the steps the probe saw and how many times the run was claimed."""
    tuned = settings.model_copy(update={"steps_per_run_per_tick": 2, **update})
    host = make_host(tuned, db, clock, [probe])
    try:
        await _start(host, spec(phase("p", *[probe_step(n) for n in "abcde"])))
        claims = count_calls(monkeypatch, runs, "claim_tick")
        async with Engine(host) as engine:
            await engine.tick()
    finally:
        await host.close()
    return probe.names(), claims.calls


async def test_with_a_slot_free_a_pass_goes_past_the_bound(settings, db, clock, probe, monkeypatch):
    # No run waits for a dispatch slot (16, one held): the run is not claimed afresh
    # every two steps for the sake of runs that are not there.
    names, claims = await _claims_of_one_pass(settings, db, clock, probe, monkeypatch)
    assert names == ["a", "b", "c", "d", "e"]
    assert claims == 0  # its start was its claim: never handed back and claimed again


async def test_a_pass_past_the_bound_ends_when_half_its_claim_is_spent(
    settings, db, clock, probe, monkeypatch
):
    # Each step takes 6 s of a 20 s claim. A step is claimed with the answer before it, so
    # whether it is taken is judged as that answer's step begins: "c", the first past the
    # bound, at 6 s (14 s of the claim left), "d" at 12 s (8 s left: not taken).
    async def slow(ctx):
        clock.advance(6)
        return {"ok": True}

    probe.script.update({n: [slow] for n in "abcde"})
    names, claims = await _claims_of_one_pass(
        settings, db, clock, probe, monkeypatch, run_lease_seconds=20
    )
    assert names == ["a", "b", "c"]
    assert claims == 0


async def test_a_pause_lands_between_two_steps_of_one_tick(probe_host, clock, engine, probe):
    async def pause_me(ctx):
        await controls.pause(probe_host, ctx.run.id, actor="moderator:m", reason="smoke")
        return {"ok": True}

    probe.script["a"] = [pause_me]
    run_id = await _start(probe_host, spec(phase("p", probe_step("a"), probe_step("b"))))
    await engine.tick()
    assert probe.names() == ["a"]
    assert await _statuses(probe_host, run_id) == ["done", "pending"]
    assert (await run_row(probe_host.db, run_id)).status == "paused"


async def test_an_answer_to_a_cancelled_run_is_still_recorded(probe_host, clock, engine, probe):
    blocker = Blocker()
    probe.script["a"] = [blocker]
    run_id = await _start(probe_host, spec(phase("p", probe_step("a"), probe_step("b"))))
    await engine.tick(drain=False)
    await blocker.entered.wait()
    await controls.cancel(probe_host, run_id, actor="admin:a", reason="wrong night")
    blocker.release.set()
    await engine.drain()
    # What happened in the world is on the record; nothing after it was dispatched.
    assert await _statuses(probe_host, run_id) == ["done", "cancelled"]
    assert probe.names() == ["a"]
    assert (await run_row(probe_host.db, run_id)).status == "cancelled"
    await asyncio.sleep(0)
