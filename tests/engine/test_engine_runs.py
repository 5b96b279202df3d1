"""Runs: creation through the occurrence key, claims, phases, and how a run ends."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import event as sa_event
from sqlalchemy import func, insert, select
from sqlalchemy.exc import IntegrityError

from pageant.db import due, runs
from pageant.db.tables import event_run_steps, event_runs
from pageant.engine import advance_stage
from pageant.errors import Conflict, NotFound
from pageant.runs.create import (
    create_run,
    materialise_phase,
    new_idempotency_keys,
    rematerialise_first_phase,
    start_now,
)
from pageant.states import RUN_FAIL, Health, Outcome
from tests.factories import (
    add_version,
    announce,
    log_kinds,
    log_lines,
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

TWO_PHASES = spec(
    phase("muster", announce("The champion stirs"), probe_step("a")),
    phase("wind-down", probe_step("b")),
)


async def _create(host, event, when, *, scope="", key=None):
    async with host.db.begin() as conn:
        return await create_run(
            conn,
            definition_id=event.id,
            version_id=event.version_id,
            spec=TWO_PHASES,
            scheduled_for=when,
            now=host.clock.now(),
            source="schedule",
            scope=scope,
            concurrency_key=key,
            registry=host.registry,
        )


# ── creation ──────────────────────────────────────────────────────────────────


async def test_start_now_pins_the_published_version_and_materialises_the_first_phase(
    probe_host, clock
):
    event = await publish_event(probe_host.db, clock.now(), TWO_PHASES)
    run_id, created = await start_now(probe_host, event.id, scope="", actor="admin:ada")
    assert created
    row = await run_row(probe_host.db, run_id)
    assert (row.status, row.version_id, row.source) == ("scheduled", event.version_id, "manual")
    assert row.scheduled_for == clock.now()
    made = await step_rows(probe_host.db, run_id)
    assert [(s.phase, s.seq, s.action) for s in made] == [
        ("muster", 0, "core.announce"),
        ("muster", 1, "probe.step"),
    ]
    assert all(len(s.idempotency_key) == 32 for s in made)
    assert len({s.idempotency_key for s in made}) == 2
    created_line = (await log_lines(probe_host.db, run_id, "run.created"))[0]
    assert created_line.actor == "admin:ada"


async def test_steps_default_on_failure_by_risk_and_take_the_declared_version(probe_host, clock):
    event_spec = spec(
        phase(
            "p",
            probe_step("a"),
            step("probe.change", name="b"),
            step("probe.burn", name="c"),
            step("gone.action"),
            step("probe.step", name="d", on_failure="abort_run"),
        )
    )
    event = await publish_event(probe_host.db, clock.now(), event_spec)
    run_id, _ = await start_now(probe_host, event.id, scope="", actor="admin:a")
    made = await step_rows(probe_host.db, run_id)
    assert [s.on_failure for s in made] == ["skip", "pause", "abort_run", "pause", "abort_run"]
    assert [s.action_version for s in made] == [1, 1, 1, 1, 1]
    assert made[3].label == "gone.action"


async def test_the_occurrence_key_makes_a_second_create_a_no_op(probe_host, clock):
    event = await publish_event(probe_host.db, clock.now(), TWO_PHASES)
    when = clock.now() + timedelta(days=1)
    first = await _create(probe_host, event, when)
    second = await _create(probe_host, event, when)
    assert first == (first[0], True)
    assert second == (first[0], False)
    other_scope = await _create(probe_host, event, when, scope="north")
    assert other_scope[1] and other_scope[0] != first[0]
    async with probe_host.db.connect() as conn:
        count = (
            await conn.execute(select(func.count()).where(event_run_steps.c.run_id == first[0]))
        ).scalar()
    assert count == 2
    assert await log_kinds(probe_host.db, first[0]) == ["run.created", "run.waiting"]


async def test_the_idempotent_insert_still_raises_on_other_errors(probe_host, clock):
    # ON DUPLICATE KEY UPDATE / ON CONFLICT DO NOTHING must not swallow a NOT NULL or a
    # foreign-key violation the way INSERT IGNORE would.
    event = await publish_event(probe_host.db, clock.now(), TWO_PHASES)
    values = {
        "definition_id": event.id,
        "version_id": 999_999,
        "scope": "",
        "scheduled_for": clock.now(),
        "source": "manual",
        "status": "scheduled",
        "created_at": clock.now(),
    }
    with pytest.raises(IntegrityError):
        async with probe_host.db.begin() as conn:
            await runs.insert_run(conn, values)
    with pytest.raises(IntegrityError):
        async with probe_host.db.begin() as conn:
            await runs.insert_run(conn, {**values, "version_id": event.version_id, "source": None})


async def test_materialising_a_phase_twice_keeps_the_rows_and_their_keys(probe_host, clock):
    event = await publish_event(probe_host.db, clock.now(), TWO_PHASES)
    run_id, _ = await _create(probe_host, event, clock.now())
    before = [(s.id, s.idempotency_key) for s in await step_rows(probe_host.db, run_id)]
    async with probe_host.db.begin() as conn:
        await materialise_phase(conn, run_id=run_id, phase=TWO_PHASES["phases"][0])
    after = [(s.id, s.idempotency_key) for s in await step_rows(probe_host.db, run_id)]
    assert after == before


async def test_a_republish_rematerialises_an_unstarted_run_and_never_a_started_one(
    probe_host, clock, engine
):
    event = await publish_event(probe_host.db, clock.now(), TWO_PHASES)
    waiting_run, _ = await _create(probe_host, event, clock.now() + timedelta(hours=1))
    started_run, _ = await start_now(probe_host, event.id, scope="", actor="admin:a")
    await engine.tick()
    new_spec = spec(phase("fresh", probe_step("x"), probe_step("y"), probe_step("z")))
    version_2 = await add_version(probe_host.db, event, clock.now(), new_spec)
    async with probe_host.db.begin() as conn:
        assert await rematerialise_first_phase(
            conn, run_id=waiting_run, version_id=version_2, spec=new_spec, now=clock.now()
        )
        assert not await rematerialise_first_phase(
            conn, run_id=waiting_run, version_id=version_2, spec=new_spec, now=clock.now()
        )
        assert not await rematerialise_first_phase(
            conn, run_id=started_run, version_id=version_2, spec=new_spec, now=clock.now()
        )
    remade = await step_rows(probe_host.db, waiting_run)
    assert [(s.phase, s.params["name"]) for s in remade] == [
        ("fresh", "x"),
        ("fresh", "y"),
        ("fresh", "z"),
    ]
    assert (await run_row(probe_host.db, waiting_run)).version_id == version_2
    assert (await run_row(probe_host.db, started_run)).version_id == event.version_id


async def test_start_now_refusals(probe_host, clock):
    with pytest.raises(NotFound):
        await start_now(probe_host, 424242, scope="", actor="admin:a")
    draft = await publish_event(probe_host.db, clock.now(), TWO_PHASES, published=False)
    with pytest.raises(Conflict, match="no published version"):
        await start_now(probe_host, draft.id, scope="", actor="admin:a")
    archived = await publish_event(probe_host.db, clock.now(), TWO_PHASES, state="archived")
    with pytest.raises(Conflict, match="archived"):
        await start_now(probe_host, archived.id, scope="", actor="admin:a")


# ── the lifecycle ─────────────────────────────────────────────────────────────


async def test_a_started_run_walks_every_phase_to_completed(probe_host, clock, engine, probe):
    event = await publish_event(probe_host.db, clock.now(), TWO_PHASES)
    run_id, _ = await start_now(probe_host, event.id, scope="", actor="admin:a")
    await engine.tick()
    row = await run_row(probe_host.db, run_id)
    assert (row.status, row.health, row.claimed_by, row.lease_until) == (
        "completed",
        "ok",
        None,
        None,
    )
    assert row.ended_at == clock.now()
    assert probe.names() == ["a", "b"]
    assert await log_kinds(probe_host.db, run_id) == [
        "run.created",
        "run.status",  # scheduled -> starting
        "run.status",  # starting -> running
        "phase.entered",
        "announce",
        "step.status",
        "step.status",
        "phase.completed",
        "phase.entered",
        "step.status",
        "phase.completed",
        "run.status",  # running -> ending
        "run.status",  # ending -> completed
    ]
    assert {s.status for s in await step_rows(probe_host.db, run_id)} == {"done"}


async def test_an_empty_phase_advances_at_once(probe_host, clock, engine):
    event = await publish_event(
        probe_host.db, clock.now(), spec(phase("empty"), phase("last", probe_step("a")))
    )
    run_id, _ = await start_now(probe_host, event.id, scope="", actor="admin:a")
    await engine.tick()
    assert (await run_row(probe_host.db, run_id)).status == "completed"


async def test_a_run_still_in_flight_hands_its_claim_back(probe_host, clock, engine):
    event = await publish_event(
        probe_host.db, clock.now(), spec(phase("p", wait(60), probe_step("later")))
    )
    run_id, _ = await start_now(probe_host, event.id, scope="", actor="admin:a")
    await engine.tick()
    row = await run_row(probe_host.db, run_id)
    assert row.status == "running"
    assert (row.claimed_by, row.lease_until) == (None, None)


async def test_a_live_lease_is_not_reenterable_even_by_its_owner(probe_host, clock):
    event = await publish_event(probe_host.db, clock.now(), TWO_PHASES)
    run_id, _ = await start_now(probe_host, event.id, scope="", actor="admin:a")
    await set_run(probe_host.db, run_id, status="running", current_phase="muster")
    now = clock.now()
    lease = now + timedelta(seconds=900)
    async with probe_host.db.begin() as conn:
        assert await runs.claim_tick(conn, run_id, owner="me", lease=lease, now=now)
    async with probe_host.db.begin() as conn:
        assert not await runs.claim_tick(conn, run_id, owner="me", lease=lease, now=now)
        just_before = lease - timedelta(microseconds=1)
        assert not await runs.claim_tick(conn, run_id, owner="other", lease=lease, now=just_before)
    async with probe_host.db.begin() as conn:
        assert await runs.claim_tick(conn, run_id, owner="other", lease=lease, now=lease)
    assert (await run_row(probe_host.db, run_id)).claimed_by == "other"


async def test_an_expired_run_lease_is_reclaimed_and_the_run_advanced(probe_host, clock, engine):
    event = await publish_event(probe_host.db, clock.now(), TWO_PHASES)
    run_id, _ = await start_now(probe_host, event.id, scope="", actor="admin:a")
    await set_run(
        probe_host.db,
        run_id,
        status="starting",
        claimed_by="dead-host",
        lease_until=clock.now() + timedelta(seconds=10),
    )
    await engine.tick()
    assert (await run_row(probe_host.db, run_id)).status == "starting"  # lease still live
    clock.advance(10)
    await engine.tick()
    assert (await run_row(probe_host.db, run_id)).status == "completed"


async def test_a_pinned_version_that_cannot_be_read_fails_the_run(probe_host, clock, engine):
    event = await publish_event(probe_host.db, clock.now(), {"schedule": {}, "phases": []})
    run_id, _ = await start_now(probe_host, event.id, scope="", actor="admin:a")
    await engine.tick()
    row = await run_row(probe_host.db, run_id)
    assert row.status == "failed"
    assert "pinned version" in row.last_error and "cannot be read" in row.last_error


async def test_a_current_phase_missing_from_the_version_fails_the_run(probe_host, clock, engine):
    event = await publish_event(probe_host.db, clock.now(), TWO_PHASES)
    run_id, _ = await start_now(probe_host, event.id, scope="", actor="admin:a")
    await set_run(probe_host.db, run_id, status="running", current_phase="vanished")
    await engine.tick()
    row = await run_row(probe_host.db, run_id)
    assert row.status == "failed"
    assert row.last_error == 'phase "vanished" is not in the pinned version'
    assert {s.status for s in await step_rows(probe_host.db, run_id)} == {"cancelled"}


async def test_a_run_found_in_ending_completes(probe_host, clock, engine):
    event = await publish_event(probe_host.db, clock.now(), TWO_PHASES)
    run_id, _ = await start_now(probe_host, event.id, scope="", actor="admin:a")
    await set_run(probe_host.db, run_id, status="ending", current_phase="wind-down")
    await engine.tick()
    assert (await run_row(probe_host.db, run_id)).status == "completed"
    assert (await log_lines(probe_host.db, run_id, "run.status"))[-1].detail == {
        "from": "ending",
        "to": "completed",
    }


def _run_updates(db, into: list[str]):
    """Listen for every UPDATE of a run row sent on ``db``; answers the listener."""

    def seen(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith("UPDATE EVENT_RUNS"):
            into.append(statement)

    sa_event.listen(db.sync_engine, "before_cursor_execute", seen)
    return seen


async def test_a_run_whose_last_phase_ends_completes_in_one_compare_and_set(probe_host, clock):
    event = await publish_event(probe_host.db, clock.now(), TWO_PHASES)
    run_id, _ = await start_now(probe_host, event.id, scope="", actor="admin:a")
    await set_run(probe_host.db, run_id, status="running", current_phase="wind-down")
    last = TWO_PHASES["phases"][1]
    updates: list[str] = []
    seen = _run_updates(probe_host.db, updates)
    try:
        outcome = await advance_stage._complete(probe_host, run_id, now=clock.now(), last=(last, 1))
    finally:
        sa_event.remove(probe_host.db.sync_engine, "before_cursor_execute", seen)
    assert outcome is Outcome.COMPLETED
    # running -> ending -> completed is one statement: ``ending`` is committed in no
    # transaction of its own, and the run's row is written once.
    assert len(updates) == 1
    row = await run_row(probe_host.db, run_id)
    assert (row.status, row.claimed_by, row.waiting_reason) == ("completed", None, None)
    assert row.ended_at is not None
    # Its lines still tell each move: the phase done, then ending, then completed.
    assert [ln.detail for ln in await log_lines(probe_host.db, run_id, "run.status")][-2:] == [
        {"from": "running", "to": "ending"},
        {"from": "ending", "to": "completed"},
    ]
    completed = await log_lines(probe_host.db, run_id, "phase.completed")
    assert [(ln.phase, ln.detail.get("index")) for ln in completed] == [("wind-down", 1)]


async def test_a_run_paused_before_its_end_is_not_completed_and_nothing_is_written(
    probe_host, clock
):
    event = await publish_event(probe_host.db, clock.now(), TWO_PHASES)
    run_id, _ = await start_now(probe_host, event.id, scope="", actor="admin:a")
    await set_run(probe_host.db, run_id, status="paused", current_phase="wind-down")
    lines = await log_lines(probe_host.db, run_id)
    outcome = await advance_stage._complete(
        probe_host, run_id, now=clock.now(), last=(TWO_PHASES["phases"][1], 1)
    )
    # The compare-and-set is the fence: a control that won keeps the run as it left it.
    assert outcome is Outcome.TAKEN
    assert (await run_row(probe_host.db, run_id)).status == "paused"
    assert len(await log_lines(probe_host.db, run_id)) == len(lines)


async def test_terminal_statuses_are_written_once(probe_host, clock):
    event = await publish_event(probe_host.db, clock.now(), TWO_PHASES)
    run_id, _ = await start_now(probe_host, event.id, scope="", actor="admin:a")
    async with probe_host.db.begin() as conn:
        assert await runs.cancel_run(conn, run_id, reason="test", now=clock.now())
        assert not await runs.end_run(conn, run_id, RUN_FAIL, now=clock.now())
        assert not await runs.cancel_run(conn, run_id, reason="again", now=clock.now())
    row = await run_row(probe_host.db, run_id)
    assert (row.status, row.cancel_reason) == ("cancelled", "test")


# ── scheduled runs: due, grace, missed ───────────────────────────────────────


async def test_a_scheduled_run_starts_when_due_and_not_before(probe_host, clock, engine):
    event = await publish_event(probe_host.db, clock.now(), TWO_PHASES)
    run_id, _ = await _create(probe_host, event, clock.now() + timedelta(seconds=30))
    clock.advance(29.999)
    await engine.tick()
    row = await run_row(probe_host.db, run_id)
    assert (row.status, row.waiting_reason) == ("scheduled", "not_due")
    clock.advance(0.001)
    await engine.tick()
    assert (await run_row(probe_host.db, run_id)).status == "completed"


async def test_a_run_starts_at_the_last_instant_of_its_grace(probe_host, clock, engine):
    event = await publish_event(probe_host.db, clock.now(), TWO_PHASES, grace_seconds=60)
    run_id, _ = await _create(probe_host, event, clock.now())
    clock.advance(60)
    await engine.tick()
    assert (await run_row(probe_host.db, run_id)).status == "completed"


async def test_a_run_past_its_grace_is_missed_with_its_steps_cancelled(probe_host, clock, engine):
    event = await publish_event(probe_host.db, clock.now(), TWO_PHASES, grace_seconds=60)
    run_id, _ = await _create(probe_host, event, clock.now())
    clock.advance(60.001)
    await engine.tick()
    row = await run_row(probe_host.db, run_id)
    assert (row.status, row.ended_at) == ("missed", clock.now())
    assert {s.status for s in await step_rows(probe_host.db, run_id)} == {"cancelled"}
    assert (await log_lines(probe_host.db, run_id, "run.status"))[-1].detail["to"] == "missed"


# ── the concurrency key ───────────────────────────────────────────────────────


async def test_a_held_concurrency_key_keeps_a_run_scheduled_and_says_so_once(
    probe_host, clock, engine
):
    holder_event = await publish_event(
        probe_host.db, clock.now(), spec(phase("p", wait(120))), concurrency_key="arena"
    )
    other_event = await publish_event(
        probe_host.db, clock.now(), TWO_PHASES, concurrency_key="arena", grace_seconds=600
    )
    holder, _ = await start_now(probe_host, holder_event.id, scope="", actor="admin:a")
    await engine.tick()
    blocked, _ = await _create(probe_host, other_event, clock.now(), key="arena")
    for _ in range(3):
        await engine.tick()
        clock.advance(10)
    row = await run_row(probe_host.db, blocked)
    assert (row.status, row.waiting_reason) == ("scheduled", "concurrency")
    waits = await log_lines(probe_host.db, blocked, "run.waiting")
    assert len(waits) == 1
    assert waits[0].detail["holder_run_id"] == holder
    with pytest.raises(Conflict, match=f"held by run {holder}"):
        await start_now(probe_host, other_event.id, scope="", actor="admin:a")
    clock.advance(120)
    await engine.tick()
    assert (await run_row(probe_host.db, holder)).status == "completed"
    await engine.tick()
    assert (await run_row(probe_host.db, blocked)).status == "completed"


async def test_the_unique_index_refuses_a_second_live_holder(probe_host, clock):
    # The look for a holder is only a courtesy; the index on concurrency_lock is the guard.
    event = await publish_event(probe_host.db, clock.now(), TWO_PHASES, concurrency_key="arena")
    first, _ = await _create(probe_host, event, clock.now(), key="arena")
    second, _ = await _create(probe_host, event, clock.now() - timedelta(seconds=1), key="arena")
    now, lease = clock.now(), clock.now() + timedelta(minutes=15)
    async with probe_host.db.begin() as conn:
        assert await runs.claim_start(conn, first, owner="a", lease=lease, now=now)
    with pytest.raises(IntegrityError):
        async with probe_host.db.begin() as conn:
            await runs.claim_start(conn, second, owner="b", lease=lease, now=now)
    assert (await run_row(probe_host.db, second)).status == "scheduled"


async def test_a_run_that_loses_the_key_race_stays_scheduled_and_waits(
    probe_host, clock, engine, monkeypatch
):
    event = await publish_event(probe_host.db, clock.now(), TWO_PHASES, concurrency_key="arena")
    racer, _ = await _create(probe_host, event, clock.now() - timedelta(seconds=1), key="arena")
    async with probe_host.db.begin() as conn:
        # Another host's run took the key after this run was read as due.
        await conn.execute(
            insert(event_runs).values(
                definition_id=event.id,
                version_id=event.version_id,
                scope="elsewhere",
                scheduled_for=clock.now(),
                source="manual",
                status="running",
                concurrency_key="arena",
                current_phase="muster",
                claimed_by="other-host",
                lease_until=clock.now() + timedelta(minutes=5),
                created_at=clock.now(),
            )
        )
    # The holder appears between the engine's look and its claim: the look sees nothing.
    looks = []
    real_holder = runs.concurrency_holder

    async def late_holder(conn, key, run_id):
        looks.append(key)
        return None if len(looks) == 1 else await real_holder(conn, key, run_id)

    monkeypatch.setattr(runs, "concurrency_holder", late_holder)
    await engine.tick()
    assert len(looks) == 2  # the look, then the lookup after the index refused the claim
    row = await run_row(probe_host.db, racer)
    assert (row.status, row.waiting_reason) == ("scheduled", "concurrency")


async def test_each_run_is_judged_due_by_its_own_steps(probe_host, clock, engine, probe):
    # A parked step in one run must not make another run's due step look blocked (the
    # due query once cross-joined every run into its "an earlier step is open" check).
    probe.script["cue"] = [{"ok": True, "park": True}]
    parked = await start_now(
        probe_host,
        (await publish_event(probe_host.db, clock.now(), spec(phase("p", probe_step("cue"))))).id,
        scope="",
        actor="admin:a",
    )
    await engine.tick()
    later = await publish_event(
        probe_host.db, clock.now(), spec(phase("p", wait(5), probe_step("b"))), title="later"
    )
    later_run, _ = await start_now(probe_host, later.id, scope="", actor="admin:a")
    await engine.tick()
    clock.advance(5)
    async with probe_host.db.connect() as conn:
        found = await due.find_due(conn, clock.now(), limit=10, busy=[])
    assert [row.id for row in found] == [later_run]
    assert parked[0] != later_run


async def test_health_only_escalates(probe_host, clock):
    event = await publish_event(probe_host.db, clock.now(), TWO_PHASES)
    run_id, _ = await start_now(probe_host, event.id, scope="", actor="admin:a")
    async with probe_host.db.begin() as conn:
        at = clock.now()
        for to, changed in [
            (Health.DEGRADED, True),
            (Health.DEGRADED, False),
            (Health.STALLED, True),
            (Health.DEGRADED, False),
            (Health.STALLED, False),
        ]:
            got = await runs.escalate_health(conn, run_id, to, because=f"to {to}", at=at)
            assert got is changed, to
    assert (await run_row(probe_host.db, run_id)).health == "stalled"
    lines = await log_lines(probe_host.db, run_id, "run.health")
    # Logged once per change, by the call that made it.
    assert [(line.detail["to"], line.detail["because"]) for line in lines] == [
        ("degraded", "to degraded"),
        ("stalled", "to stalled"),
    ]


async def test_the_waiting_reason_changes_only_when_it_differs(probe_host, clock):
    # IS DISTINCT FROM (<=> on MariaDB): NULL counts as a value, so "still no reason" and
    # "still the same reason" both match no row, and the line is logged once per change.
    event = await publish_event(probe_host.db, clock.now(), TWO_PHASES)
    run_id, _ = await start_now(probe_host, event.id, scope="", actor="admin:a")
    now = clock.now()
    async with probe_host.db.begin() as conn:
        assert not await runs.set_waiting(conn, run_id, None, None)
        assert await runs.set_waiting(conn, run_id, "parked", now)
        assert not await runs.set_waiting(conn, run_id, "parked", now)
        assert await runs.set_waiting(conn, run_id, "backoff", now)
        assert await runs.set_waiting(conn, run_id, None, None)
        assert not await runs.set_waiting(conn, run_id, None, None)


@pytest.mark.parametrize("count", [0, 1, 100])
def test_a_phases_keys_are_drawn_together_and_each_its_own(count):
    keys = new_idempotency_keys(count)
    assert len(keys) == count == len(set(keys))
    assert all(len(key) == 32 and int(key, 16) >= 0 for key in keys)
