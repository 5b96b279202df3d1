"""The plan of a firing's read of the open gates it can count for: through the
(trigger_id, match_key, satisfied_at) index, touching the gates of the keys the firing
carries, never every open gate of the trigger — on MariaDB also on a new database, whose
statistics say the gates table is (nearly) empty, and on SQLite, whose planner without
statistics would take the (trigger_id, satisfied_at) index and read every open gate."""

from __future__ import annotations

import pytest
from sqlalchemy import event as sa_event
from sqlalchemy import insert, text

from pageant.db import phase_gates as gate_rows
from pageant.db.tables import event_run_phase_gates, event_runs
from pageant.gates.matching import firing_keys, gate_key
from tests.databases import MARIADB_ONLY
from tests.db.test_mariadb_plans import _explain
from tests.factories import phase, publish_event, spec

MATCH_INDEX = "ix_event_run_phase_gates_trigger_id_match_key_satisfied_at"


async def _open_gates(db, clock, count: int) -> None:
    """``count`` running runs, each with an open gate on its own colour."""
    event = await publish_event(db, clock.now(), spec(phase("hunt")))
    now = clock.now()
    async with db.begin() as conn:
        for i in range(count):
            run_id = (
                await conn.execute(
                    insert(event_runs).values(
                        definition_id=event.id,
                        version_id=event.version_id,
                        scope=f"s{i}",
                        scheduled_for=now,
                        source="manual",
                        status="running",
                        current_phase="hunt",
                        created_at=now,
                    )
                )
            ).inserted_primary_key[0]
            condition = {"var": "colour", "op": "eq", "value": f"s{i}"}
            await conn.execute(
                insert(event_run_phase_gates).values(
                    run_id=run_id,
                    phase="hunt",
                    kind="on",
                    trigger_id="wisps.caught",
                    condition=condition,
                    match_key=gate_key(condition),
                    needed=1000,
                    tally=0,
                    entered_at=now,
                )
            )


@MARIADB_ONLY
async def test_a_firing_reads_its_gates_through_the_match_key_index(db, clock):
    async with db.begin() as conn:
        await conn.execute(text("ANALYZE TABLE event_run_phase_gates"))
    await _open_gates(db, clock, 300)
    keys = firing_keys({"colour": "s7", "weight": 1.0})
    plan = await _explain(db, gate_rows._OPEN_ON, {"trigger_id": "wisps.caught", "keys": keys})
    gates = [row for row in plan if row["table"] == "event_run_phase_gates"]
    assert [(row["type"], row["key"]) for row in gates] == [("range", MATCH_INDEX)], plan
    async with db.connect() as conn:
        found = await gate_rows.open_on_gates(conn, "wisps.caught", keys)
    assert [row.condition["value"] for row in found] == ["s7"]


@pytest.mark.parametrize("dialect", ["sqlite"], indirect=True)
async def test_a_firing_reads_its_gates_through_the_match_key_index_on_sqlite(db, clock):
    await _open_gates(db, clock, 300)
    keys = firing_keys({"colour": "s7", "weight": 1.0})
    seen: list[tuple[str, object]] = []

    def note(conn, cursor, statement, parameters, context, executemany) -> None:
        seen.append((statement, parameters))

    sa_event.listen(db.sync_engine, "before_cursor_execute", note)
    try:
        async with db.connect() as conn:
            found = await gate_rows.open_on_gates(conn, "wisps.caught", keys)
    finally:
        sa_event.remove(db.sync_engine, "before_cursor_execute", note)
    assert [row.condition["value"] for row in found] == ["s7"]
    ((statement, parameters),) = seen
    async with db.connect() as conn:
        plan = [
            row[3]
            for row in await conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters)
        ]
    gates = [step for step in plan if " event_run_phase_gates " in f"{step} "]
    assert gates == [
        f"SEARCH event_run_phase_gates USING INDEX {MATCH_INDEX} "
        "(trigger_id=? AND match_key=? AND satisfied_at=?)"
    ], plan
