"""MariaDB's plans for the reads that look for a run's first open step: they read the run's
phase through the (run_id, phase, seq) index, or the cursor's through (run_id, phase,
status, seq), however young the table's statistics are; and
the compare-and-set UPDATEs of a step or a run find their row by primary key.

A new database's statistics say the steps table is (nearly) empty until InnoDB next
recounts it; planned from them, these correlated reads walked the whole index for every run
(a 20-run workload's cursor read took 14 ms, and the due-run read 200 ms, where the index
answers in well under one).
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import event, text

from pageant.db import due, runs, steps
from pageant.db.tables import RUN_PHASE_SEQ_INDEX, RUN_PHASE_STATUS_INDEX
from pageant.engine import Engine
from pageant.runs.create import start_now
from tests.databases import MARIADB_ONLY
from tests.factories import make_host, phase, probe_step, publish_event, spec


async def _explain(db: Any, statement: Any, params: dict[str, Any]) -> list[dict[str, Any]]:
    """MariaDB's EXPLAIN of ``statement`` as the engine executes it (same SQL, same binds)."""

    def explained(conn, cursor, sql, parameters, context, executemany):
        return "EXPLAIN " + sql, parameters

    async with db.connect() as conn:
        sync = conn.sync_connection
        event.listen(sync, "before_cursor_execute", explained, retval=True)
        try:
            # The rows are EXPLAIN's, not the statement's: read them from the driver's cursor.
            cursor = (await conn.execute(statement, params)).cursor
            names = [column[0] for column in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
        finally:
            event.remove(sync, "before_cursor_execute", explained)


async def _runs_midway(settings, db, clock, probe) -> list[int]:
    """Three runs a third of the way through a phase of 30 steps, planned from statistics
    taken while the steps table was empty (as in a new database)."""
    async with db.begin() as conn:
        await conn.execute(text("ANALYZE TABLE event_run_steps"))
    # One dispatch slot: each pass hands its claim back at the bound (no slot is free).
    tuned = settings.model_copy(update={"steps_per_run_per_tick": 10, "dispatch_concurrency": 1})
    host = make_host(tuned, db, clock, [probe])
    engine = Engine(host)
    try:
        event_ = await publish_event(
            db, clock.now(), spec(phase("p", *[probe_step(f"s{i}") for i in range(30)]))
        )
        ids = [
            (await start_now(host, event_.id, scope=f"r{i}", actor="admin:test"))[0]
            for i in range(3)
        ]
        await engine.tick()
    finally:
        await engine.stop()
        await host.close()
    assert len(probe.calls) == 30
    return ids


def _step_reads(plan: list[dict[str, Any]], *aliases: str) -> dict[str, tuple[str, str]]:
    return {row["table"]: (row["type"], row["key"]) for row in plan if row["table"] in aliases}


@MARIADB_ONLY
async def test_a_runs_cursor_reads_its_phase_through_the_phase_status_index(
    settings, db, clock, probe
):
    ids = await _runs_midway(settings, db, clock, probe)
    plan = await _explain(db, runs._CURSORS, {"run_ids": ids})
    firsts = ("first_pending_key", "first_running_key")
    assert _step_reads(plan, *firsts) == dict.fromkeys(firsts, ("ref", RUN_PHASE_STATUS_INDEX))
    chosen = ("first_pending", "first_running", "event_run_steps")
    assert _step_reads(plan, *chosen) == dict.fromkeys(chosen, ("eq_ref", "PRIMARY")), plan


@MARIADB_ONLY
async def test_a_runs_cursor_does_not_read_the_steps_its_phase_has_finished(
    settings, db, clock, probe
):
    # A third of the way through, each run has ten finished steps before its cursor. Read
    # in seq order, the cursor walked them, and more at each later step (this read counted
    # 90 index entries read next for the three runs); read as the first entry of each open
    # status, it reads no entry past the one it looks up.
    ids = await _runs_midway(settings, db, clock, probe)
    async with db.connect() as conn:
        await conn.execute(text("FLUSH STATUS"))
        found = await runs.read_cursors(conn, ids)
        counts = dict(
            (await conn.execute(text("SHOW SESSION STATUS LIKE 'Handler_read_next'"))).all()
        )
    assert sorted(found) == sorted(ids)
    assert all(step is not None and step["seq"] == 10 for _, step in found.values())
    assert int(counts["Handler_read_next"]) == 0


@MARIADB_ONLY
async def test_the_due_runs_read_reads_each_phase_through_the_phase_index(
    settings, db, clock, probe
):
    await _runs_midway(settings, db, clock, probe)
    params = {"now": clock.now(), "limit": 100, "busy": [0], "stall_cutoff": None}
    plan = await _explain(db, due._DUE_ACTIVE, params)
    reads = _step_reads(plan, "s", "before_s")
    assert reads and set(reads.values()) <= {
        ("ref", RUN_PHASE_SEQ_INDEX),
        ("index_subquery", RUN_PHASE_SEQ_INDEX),
    }, plan


def _by_id(step_id: int, run_id: int, now: Any) -> dict[str, tuple[Any, dict[str, Any]]]:
    """The compare-and-set UPDATEs every step goes through, with the binds the engine gives."""
    return {
        "claim a step": (
            steps._CLAIM,
            {"step_id": step_id, "seen_attempts": 0, "now": now, "owner": "x", "lease": now},
        ),
        "finish a step": (
            steps._FINISH,
            {
                "step_id": step_id,
                "owner": "x",
                "attempt": 1,
                "to": "done",
                "error": None,
                "now": now,
            },
        ),
        "claim a run": (
            runs._CLAIM_TICK,
            {"run_id": run_id, "owner": "x", "lease": now, "now": now},
        ),
    }


@MARIADB_ONLY
@pytest.mark.parametrize("which", ["claim a step", "finish a step", "claim a run"])
async def test_a_compare_and_set_finds_its_row_by_primary_key(which, settings, db, clock, probe):
    # Planned from young statistics, a step's claim was a range over (status, due_at): it
    # locked every pending step's index entry, and two hosts' claims deadlocked on them.
    ids = await _runs_midway(settings, db, clock, probe)
    async with db.connect() as conn:
        pending = text(
            "SELECT MIN(id) FROM event_run_steps WHERE run_id = :r AND status = 'pending'"
        )
        step_id = (await conn.execute(pending, {"r": ids[0]})).scalar_one()
    statement, params = _by_id(step_id, ids[0], clock.now())[which]
    plan = await _explain(db, statement, params)
    assert [(row["type"], row["key"]) for row in plan] == [("range", "PRIMARY")], plan
