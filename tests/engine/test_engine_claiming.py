"""Claiming set-wise: the advance stage claims the due runs, and their ready steps, in one
transaction — every run it can start, as many steps as there are dispatch slots, skipping
what another claimer holds."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import select

from pageant.db.tables import event_runs
from pageant.engine import Engine, advance_stage
from pageant.engine.advance_stage import advance
from pageant.engine.claiming import claim_due
from pageant.runs.create import start_now
from tests.databases import MARIADB_ONLY
from tests.factories import (
    Probe,
    log_kinds,
    log_lines,
    make_host,
    phase,
    probe_step,
    publish_event,
    run_row,
    spec,
    step_rows,
    wait,
)


async def _start(host, event_spec, *, scope=""):
    event = await publish_event(host.db, host.clock.now(), event_spec, title=f"e {scope}")
    run_id, _ = await start_now(host, event.id, scope=scope, actor="admin:test")
    return run_id


async def _one_step_runs(host, n):
    """``n`` runs of one probe step each (``s0``, ``s1``, ...), due to start now."""
    return [
        await _start(host, spec(phase("p", probe_step(f"s{i}"))), scope=f"r{i}") for i in range(n)
    ]


async def _waiting_runs(host, engine, clock, n):
    """``n`` runs each past a 5 s wait, their next step pending and due now."""
    run_ids = [
        await _start(host, spec(phase("p", wait(5), probe_step(f"s{i}"))), scope=f"r{i}")
        for i in range(n)
    ]
    await engine.tick()
    clock.advance(6)
    return run_ids


async def _due_rows(host):
    from pageant.db import due

    async with host.db.connect() as conn:
        found = await due.find_due(conn, host.clock.now(), limit=50, busy=[])
    return [dict(row._mapping) for row in found]


def recording(monkeypatch) -> list[tuple[dict, set]]:
    """What each set-wise claim of the advance stage answered, as it answered it."""
    answers: list[tuple[dict, set]] = []

    async def recorded(host, found):
        claimed, tried = await claim_due(host, found)
        answers.append(
            ({run_id: got.ahead.claimed is not None for run_id, got in claimed.items()}, tried)
        )
        return claimed, tried

    monkeypatch.setattr(advance_stage, "claim_due", recorded)
    return answers


async def test_runs_due_together_are_claimed_with_their_steps_in_one_transaction(
    probe_host, engine, clock, probe, monkeypatch
):
    run_ids = await _waiting_runs(probe_host, engine, clock, 4)
    answers = recording(monkeypatch)
    before = engine.outcomes.transactions
    await engine.tick()
    # One claim for the four runs, each with the step after its wait.
    assert answers == [(dict.fromkeys(run_ids, True), set(run_ids))]
    assert sorted(probe.names()) == ["s0", "s1", "s2", "s3"]  # each performed once
    for run_id in run_ids:
        row = await run_row(probe_host.db, run_id)
        assert (row.status, row.claimed_by, row.waiting_reason) == ("completed", None, None)
        _, after = await step_rows(probe_host.db, run_id)
        assert (after.status, after.attempts) == ("done", 1)
        done = [
            ln
            for ln in await log_lines(probe_host.db, run_id, "step.status")
            if ln.detail.get("to") == "done"
        ]
        assert len(done) == 2  # the wait and the step after it, each once
    # The claim, the four answers (together or not) and the four completions: the claims
    # cost one transaction, not four.
    assert engine.outcomes.transactions - before <= 1 + 4 + 4


@pytest.fixture
async def two_slots(settings, db, clock):
    """A host with two dispatch slots, its engine and the probe its steps call."""
    probe = Probe()
    host = make_host(settings.model_copy(update={"dispatch_concurrency": 2}), db, clock, [probe])
    engine = Engine(host)
    try:
        yield host, engine, probe
    finally:
        await engine.stop()
        await host.close()


async def test_no_more_running_runs_are_claimed_than_there_are_dispatch_slots(
    two_slots, clock, monkeypatch
):
    host, engine, probe = two_slots
    await _waiting_runs(host, engine, clock, 5)
    answers = recording(monkeypatch)
    await engine.tick()
    claimed, tried = answers[0]
    assert len(claimed) == len(tried) == 2
    # The rest are left to the runs' own tasks: every run moved on in that tick.
    assert sorted(probe.names()) == ["s0", "s1", "s2", "s3", "s4"]


async def test_every_run_due_to_start_is_started_in_one_claim_however_few_slots_are_free(
    two_slots, monkeypatch
):
    host, engine, probe = two_slots
    run_ids = await _one_step_runs(host, 5)
    answers = recording(monkeypatch)
    await engine.tick()
    claimed, tried = answers[0]
    # All five started together; only two steps claimed with them, one a free slot.
    assert set(claimed) == set(tried) == set(run_ids)
    assert sorted(claimed.values()) == [False, False, False, True, True]
    # The other three took their steps in their own tasks, in that same tick.
    assert sorted(probe.names()) == ["s0", "s1", "s2", "s3", "s4"]
    for run_id in run_ids:
        assert (await run_row(host.db, run_id)).status == "completed"
        statuses = await log_lines(host.db, run_id, "run.status")
        assert [ln.detail["to"] for ln in statuses][:2] == ["starting", "running"]


async def test_a_crash_between_the_sets_start_and_a_runs_first_look_leaves_it_resumable(
    two_slots, clock
):
    host, engine, probe = two_slots
    run_ids = await _one_step_runs(host, 5)
    # The set's start commits; the host dies before any run's task looks at its run.
    claimed, _ = await claim_due(host, await _due_rows(host))
    assert set(claimed) == set(run_ids)
    assert not probe.calls
    await engine.tick()  # the runs' claims are live: nothing moves
    assert not probe.calls
    clock.advance(host.settings.run_lease_seconds)
    await engine.tick()
    # Past the claims' lease each run is claimed again and goes on from its start.
    assert sorted(probe.names()) == ["s0", "s1", "s2", "s3", "s4"]
    for run_id in run_ids:
        assert (await run_row(host.db, run_id)).status == "completed"
        statuses = await log_lines(host.db, run_id, "run.status")
        assert [ln.detail["to"] for ln in statuses] == [
            "starting",
            "running",
            "ending",
            "completed",
        ]


async def test_a_scan_starts_more_due_runs_than_runs_per_tick_and_advances_no_more(
    settings, db, clock, monkeypatch
):
    probe = Probe()
    host = make_host(settings.model_copy(update={"runs_per_tick": 2}), db, clock, [probe])
    engine = Engine(host)
    try:
        # Two runs under way (each waits on a step due later), then five due to start.
        await _waiting_runs(host, engine, clock, 2)
        run_ids = [
            await _start(host, spec(phase("p", probe_step(f"s{i}"))), scope=f"r{i}")
            for i in range(5)
        ]
        monkeypatch.setattr(advance_stage, "STARTS_PER_SCAN", 4)
        answers = recording(monkeypatch)
        await advance(host, host.clock.now())
        await engine.drain()
    finally:
        await engine.stop()
        await host.close()
    claimed, _ = answers[0]
    # The scan took both running runs (runs_per_tick bounds them) and as many due starts as
    # STARTS_PER_SCAN lets in, all started in its one claim: four, not two.
    started = [run_id for run_id in run_ids if run_id in claimed]
    assert len(started) == 4
    assert len(claimed) == 2 + 4


async def test_a_run_cancelled_after_the_scan_is_left_out_of_its_set_and_the_others_start(
    probe_host, engine
):
    from pageant.runs import controls

    run_ids = [
        await _start(probe_host, spec(phase("p", probe_step(f"s{i}"))), scope=f"r{i}")
        for i in range(4)
    ]
    found = await _due_rows(probe_host)
    # Between the scan and the claim a person cancels one: the set's one compare-and-set
    # changes three rows of the four it names, and the claim reads which are its own.
    await controls.cancel(probe_host, run_ids[1], actor="admin:test", reason="not tonight")
    claimed, tried = await claim_due(probe_host, found)
    assert set(claimed) == {run_ids[0], run_ids[2], run_ids[3]}
    assert tried == set(run_ids)
    cancelled = await run_row(probe_host.db, run_ids[1])
    assert (cancelled.status, cancelled.started_at, cancelled.claimed_by) == (
        "cancelled",
        None,
        None,
    )
    for run_id in (run_ids[0], run_ids[2], run_ids[3]):
        row = await run_row(probe_host.db, run_id)
        assert (row.status, row.current_phase) == ("running", "p")
        assert row.claimed_by == probe_host.identity
        statuses = await log_lines(probe_host.db, run_id, "run.status")
        assert [ln.detail["to"] for ln in statuses] == ["starting", "running"]
        assert len(await log_lines(probe_host.db, run_id, "phase.entered")) == 1


async def test_the_starts_of_a_set_look_for_open_gates_once(probe_host, engine, monkeypatch):
    from pageant.db import phase_gates

    for i in range(4):
        await _start(probe_host, spec(phase("p", probe_step(f"s{i}"))), scope=f"r{i}")
    read: list[str] = []
    reads: list[list[str]] = []
    open_on = phase_gates.open_on

    async def counted(conn, trigger_ids):
        read.extend(trigger_ids)
        reads.append(sorted(trigger_ids))
        return await open_on(conn, trigger_ids)

    monkeypatch.setattr(phase_gates, "open_on", counted)
    await engine.tick()
    # No gate waits: one read of each start trigger for the four starts, not four.
    assert read.count("core.run.started") == read.count("core.phase.entered") == 1
    # A lifecycle firing's triggers are looked for in one read: the set's two start triggers
    # together, and a run's end (ending, completed) together; the four runs' ends, asked
    # for at about the same moment, share reads (one each at most).
    assert ["core.phase.entered", "core.run.started"] in reads
    ends = [r for r in reads if "core.run.completed" in r]
    assert ends and all(r == ["core.run.completed", "core.run.ending"] for r in ends)
    assert 1 <= len(ends) <= 4
    assert len(reads) == 1 + len(ends)


async def test_the_starts_of_a_set_fire_before_any_of_those_runs_moves_on(
    probe_host, engine, probe
):
    run_ids = [
        await _start(probe_host, spec(phase("p", probe_step(f"s{i}"))), scope=f"r{i}")
        for i in range(4)
    ]
    fired: list[tuple[str, int]] = []
    open_among, fire = probe_host.firings.open_among, probe_host.firings.fire

    async def every(triggers, **how):
        return set(triggers)  # as if a gate waited on every trigger

    async def recorded(firings, **how):
        fired.extend((f.trigger_id, f.payload["run_id"]) for f in firings)
        return await fire(firings, **how)

    probe_host.firings.open_among, probe_host.firings.fire = every, recorded
    try:
        await engine.tick()
    finally:
        probe_host.firings.open_among, probe_host.firings.fire = open_among, fire
    first_end = min(i for i, (t, _) in enumerate(fired) if t == "core.run.ending")
    assert sorted(fired[:first_end]) == sorted(
        (t, r) for r in run_ids for t in ("core.run.started", "core.phase.entered")
    )
    assert sorted(probe.names()) == ["s0", "s1", "s2", "s3"]


async def test_a_lone_due_run_is_left_to_its_own_task(probe_host, engine, clock):
    await _waiting_runs(probe_host, engine, clock, 1)
    assert await claim_due(probe_host, await _due_rows(probe_host)) == ({}, set())


@MARIADB_ONLY  # SKIP LOCKED is MariaDB's
async def test_a_run_another_transaction_holds_is_skipped_not_waited_for(probe_host, engine, clock):
    run_ids = await _waiting_runs(probe_host, engine, clock, 3)
    held = run_ids[1]
    rows = await _due_rows(probe_host)
    async with probe_host.db.begin() as other:
        # Another host's claim of one run, in flight.
        await other.execute(
            select(event_runs.c.id).where(event_runs.c.id == held).with_for_update()
        )
        async with asyncio.timeout(5):
            claimed, tried = await claim_due(probe_host, rows)
    assert set(claimed) == {run_ids[0], run_ids[2]}
    assert held in tried  # tried, not claimed: not handed to a task either
    row = await run_row(probe_host.db, held)
    assert row.claimed_by is None
    await advance(probe_host, clock.now())  # the next pass takes it
    await engine.drain()
    assert (await run_row(probe_host.db, held)).status == "completed"


async def test_runs_started_together_start_in_one_transaction_as_each_would_alone(
    probe_host, engine, probe, monkeypatch
):
    answers: list[dict] = []

    async def recorded(host, found):
        claimed, tried = await claim_due(host, found)
        answers.append(
            {
                run_id: (got.status, got.started_into, got.ahead.claimed is not None)
                for run_id, got in claimed.items()
            }
        )
        return claimed, tried

    monkeypatch.setattr(advance_stage, "claim_due", recorded)
    together = [
        await _start(probe_host, spec(phase("p", probe_step(f"a{i}"))), scope=f"r{i}")
        for i in range(3)
    ]
    before = engine.outcomes.transactions
    await engine.tick()
    # One claim started the three, each into its first phase with its first step claimed.
    assert answers[0] == dict.fromkeys(together, ("running", "p", True))
    assert sorted(probe.names()) == ["a0", "a1", "a2"]
    # The claim, three answers and three completions at most.
    assert engine.outcomes.transactions - before <= 1 + 3 + 3
    # A run started alone, by its own task, leaves the same log.
    alone = await _start(probe_host, spec(phase("p", probe_step("b"))), scope="alone")
    await engine.tick()
    assert answers[-1] == {}
    expected = await log_kinds(probe_host.db, alone)
    for run_id in together:
        assert (await run_row(probe_host.db, run_id)).status == "completed"
        assert await log_kinds(probe_host.db, run_id) == expected


async def test_a_set_that_fails_leaves_every_run_to_its_own_task(
    probe_host, engine, probe, monkeypatch
):
    from pageant.db import runs

    async def breaks(*args, **kwargs):
        return 0  # as if a run of the set was not as its claim left it: Lost

    monkeypatch.setattr(runs, "enter_first_phases", breaks)
    run_ids = [
        await _start(probe_host, spec(phase("p", probe_step(f"a{i}"))), scope=f"r{i}")
        for i in range(3)
    ]
    await engine.tick()
    # The set rolled back whole; each run was then started by its own task, as ever.
    assert sorted(probe.names()) == ["a0", "a1", "a2"]
    for run_id in run_ids:
        row = await run_row(probe_host.db, run_id)
        assert (row.status, row.claimed_by) == ("completed", None)
