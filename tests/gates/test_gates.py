"""Phase gates in the engine: a gate opens at phase entry, an ``after`` gate is closed by the
tick at its deadline, an ``on`` gate by the emit path's conditional increment, a gate is an
additional condition and never a replacement, a held gate stalls the run once, and a tally
is a database fact that survives a restart."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import insert, select, update
from sqlalchemy.dialects import mysql, sqlite

from pageant import hookimpl
from pageant.db import due
from pageant.db import phase_gates as gate_rows
from pageant.db.tables import event_run_phase_gates, event_runs
from pageant.engine import Engine
from pageant.errors import Forbidden, Invalid, NotFound
from pageant.gates import conditions
from pageant.gates import phase as gates
from pageant.hosting import Host
from pageant.runs import controls
from pageant.runs.console import console
from pageant.runs.create import start_now
from pageant.support.settings import Settings
from tests.factories import (
    announce,
    log_lines,
    make_host,
    phase,
    publish_event,
    run_row,
    set_run,
    spec,
    step,
    step_rows,
    wait,
)

NORTH = {"var": "colour", "op": "eq", "value": "north"}
TWO_NORTH = {"on": "wisps.caught", "where": NORTH, "count": 2, "dormant": False}
STALL = 3600


@pytest.fixture
def settings(db_url: str) -> Settings:
    # A long poll, so every sleep the engine asks for is a due instant, never the cap.
    return Settings(database_url=db_url, poll_seconds=100_000, stall_seconds=STALL)


async def _start(host: Host, *phases: dict[str, Any]) -> int:
    event = await publish_event(host.db, host.clock.now(), spec(*phases))
    run_id, _ = await start_now(host, event.id, scope="", actor="admin:test")
    return run_id


async def _gate(host: Host, run_id: int, phase_key: str) -> Any:
    async with host.db.connect() as conn:
        row = await gate_rows.gate_of(conn, run_id, phase_key)
    return row


async def _kinds(host: Host, run_id: int) -> list[str]:
    """The run's log kinds, leaving out ``run.waiting`` (its own tests cover it)."""
    return [line.kind for line in await log_lines(host.db, run_id) if line.kind != "run.waiting"]


def _after(kinds: list[str], first: str) -> list[str]:
    return kinds[kinds.index(first) :]


# ── opening ───────────────────────────────────────────────────────────────────


async def test_a_gate_opens_when_its_phase_is_entered(host, engine, clock):
    run_id = await _start(host, phase("muster", announce("hi"), advance=TWO_NORTH))
    await engine.tick()
    gate = await _gate(host, run_id, "muster")
    assert (gate.kind, gate.trigger_id, gate.condition) == ("on", "wisps.caught", NORTH)
    assert (gate.tally, gate.needed, gate.entered_at, gate.deadline) == (0, 2, clock.now(), None)
    assert gate.satisfied_at is None
    (entered,) = await log_lines(host.db, run_id, "phase.entered")
    assert entered.detail["gate"] == {
        "kind": "on",
        "trigger_id": "wisps.caught",
        "condition": 'colour eq "north"',
        "tally": 0,
        "needed": 2,
    }
    # A phase without advance has no gate row and no gate in its line.
    plain = await _start(host, phase("main", announce("hi")))
    await engine.tick()
    assert await _gate(host, plain, "main") is None
    (entered,) = await log_lines(host.db, plain, "phase.entered")
    assert "gate" not in entered.detail


async def test_opening_a_gate_twice_keeps_its_clock_and_tally(host, engine, clock):
    run_id = await _start(host, phase("muster", announce("hi"), advance=TWO_NORTH))
    await engine.tick()
    await host.emit("wisps.caught", {"colour": "north"})
    clock.advance(60)
    async with host.db.begin() as conn:
        again = await gates.enter_phase(
            conn, run_id=run_id, phase={"key": "muster", "advance": TWO_NORTH}, now=clock.now()
        )
    assert again is not None
    gate = await _gate(host, run_id, "muster")
    assert (gate.tally, gate.entered_at) == (1, clock.now() - timedelta(seconds=60))


# ── after: closed by the tick at its deadline ─────────────────────────────────


async def test_an_after_gate_holds_until_its_deadline_and_not_a_moment_less(host, engine, clock):
    entered = clock.now()
    run_id = await _start(
        host,
        phase("muster", announce("gather"), advance={"after": "30m"}),
        phase("wind-down", announce("bye")),
    )
    await engine.tick()
    gate = await _gate(host, run_id, "muster")
    assert (gate.kind, gate.deadline) == ("after", entered + timedelta(minutes=30))
    # The engine asks to sleep exactly until the deadline, not a poll later.
    assert await engine.next_sleep() == 1800

    clock.advance(1799)
    await engine.tick()
    assert (await run_row(host.db, run_id)).current_phase == "muster"
    assert await engine.next_sleep() == 1

    clock.advance(1)
    await engine.tick()
    run = await run_row(host.db, run_id)
    assert run.status == "completed"
    gate = await _gate(host, run_id, "muster")
    assert (gate.satisfied_at, gate.satisfied_by) == (gate.deadline, "deadline")
    kinds = await _kinds(host, run_id)
    assert _after(kinds, "phase.gate")[:4] == [
        "phase.gate",
        "phase.advanced",
        "phase.completed",
        "phase.entered",
    ]
    (advanced,) = await log_lines(host.db, run_id, "phase.advanced")
    assert advanced.detail == {
        "because": "deadline",
        "kind": "after",
        "after": "30m",
        "deadline": "2027-03-01T12:30:00Z",
        "waited_seconds": 1800,
    }
    assert len(await log_lines(host.db, run_id, "phase.gate")) == 1


async def test_a_deadline_that_passed_while_steps_ran_lets_the_phase_go_at_once(
    host, engine, clock
):
    run_id = await _start(
        host,
        phase("muster", step("core.cue", message="spawn it"), advance={"after": "1m"}),
        phase("end", announce("bye")),
    )
    await engine.tick()
    clock.advance(600)
    await engine.tick()
    assert (await run_row(host.db, run_id)).current_phase == "muster"  # held by the cue
    # The console already reads the deadline as the fact it is.
    view = await console(host, run_id)
    assert (view["gate"]["satisfied_by"], view["gate"]["satisfied_at"]) == (
        "deadline",
        clock.now() - timedelta(seconds=540),
    )
    cue = (await step_rows(host.db, run_id))[0]
    await controls.confirm(host, run_id, cue.id, actor="moderator:m")
    await engine.tick()
    assert (await run_row(host.db, run_id)).status == "completed"


# ── on: closed by the emit path ───────────────────────────────────────────────


async def test_an_on_gate_counts_matches_and_near_misses_do_not_count(host, engine, clock):
    run_id = await _start(
        host, phase("muster", announce("gather"), advance=TWO_NORTH), phase("end", announce("x"))
    )
    await engine.tick()
    clock.advance(60)
    assert await host.emit("wisps.caught", {"colour": "north", "weight": 2}) == {
        "gates_matched": 1,
        "gates_closed": 0,
    }
    clock.advance(60)
    assert await host.emit("wisps.caught", {"colour": "south", "weight": 9.5}) == {
        "gates_matched": 0,
        "gates_closed": 0,
    }
    gate = await _gate(host, run_id, "muster")
    # A near miss writes nothing to the gate: it keeps its last counted firing, and the
    # console reads the trigger's last firing beside it.
    missed_at = clock.now()
    assert (gate.tally, gate.last_event_at, gate.last_event_counted) == (
        1,
        missed_at - timedelta(seconds=60),
        True,
    )
    view = (await console(host, run_id))["gate"]
    assert (view["last_event_at"], view["last_event_counted"]) == (missed_at, False)
    await engine.tick()
    assert (await run_row(host.db, run_id)).current_phase == "muster"

    clock.advance(60)
    assert await host.emit("wisps.caught", {"colour": "north"}) == {
        "gates_matched": 1,
        "gates_closed": 1,
    }
    gate = await _gate(host, run_id, "muster")
    assert (gate.tally, gate.satisfied_by, gate.satisfied_at) == (2, "tally", clock.now())
    assert gate.last_event_counted is True

    evaluated = await log_lines(host.db, run_id, "condition.evaluated")
    assert [(e.detail["matched"], e.detail["tally"], e.detail["values"]) for e in evaluated] == [
        (True, 1, {"colour": "north"}),  # only the variable the condition names
        (True, 2, {"colour": "north"}),
    ]
    assert all(e.detail["condition"] == 'colour eq "north"' for e in evaluated)
    (closed,) = await log_lines(host.db, run_id, "phase.gate")
    assert (closed.detail["satisfied_by"], closed.detail["tally"]) == ("tally", 2)

    await engine.tick()
    assert (await run_row(host.db, run_id)).status == "completed"
    (advanced,) = await log_lines(host.db, run_id, "phase.advanced")
    assert (advanced.detail["because"], advanced.detail["waited_seconds"]) == ("tally", 180)
    kinds = await _kinds(host, run_id)
    assert _after(kinds, "condition.evaluated")[:5] == [
        "condition.evaluated",
        "condition.evaluated",
        "phase.gate",
        "phase.advanced",
        "phase.completed",
    ]


async def test_a_gate_without_a_condition_counts_every_firing(host, engine):
    run_id = await _start(host, phase("p", advance={"on": "wisps.caught", "where": None}))
    await engine.tick()
    assert await host.emit("wisps.caught", {}) == {"gates_matched": 1, "gates_closed": 1}
    (line,) = await log_lines(host.db, run_id, "condition.evaluated")
    assert (line.detail["values"], line.detail["condition"]) == ({}, None)
    await engine.tick()
    assert (await run_row(host.db, run_id)).status == "completed"


async def test_a_gate_is_an_additional_condition_never_a_replacement(host, engine):
    run_id = await _start(
        host,
        phase(
            "muster",
            step("core.cue", message="spawn it"),
            advance={"on": "wisps.caught", "count": 1},
        ),
        phase("end", announce("bye")),
    )
    await engine.tick()
    # A firing during the phase's first step counts: the tally started at entry...
    assert await host.emit("wisps.caught", {"colour": "ember"}) == {
        "gates_matched": 1,
        "gates_closed": 1,
    }
    await engine.tick()
    # ...but the phase is held by its parked step all the same.
    run = await run_row(host.db, run_id)
    assert (run.current_phase, run.waiting_reason) == ("muster", "parked")
    cue = (await step_rows(host.db, run_id))[0]
    await controls.confirm(host, run_id, cue.id, actor="moderator:m")
    await engine.tick()
    assert (await run_row(host.db, run_id)).status == "completed"


async def test_a_firing_counts_only_for_open_gates_of_live_runs(host, engine):
    live = await _start(host, phase("p", advance={"on": "wisps.caught", "count": 5}))
    await engine.tick()
    cancelled = await _start(host, phase("p", advance={"on": "wisps.caught", "count": 5}))
    await engine.tick()
    await controls.cancel(host, cancelled, actor="admin:a", reason="not tonight")
    assert await host.emit("wisps.caught", {}) == {"gates_matched": 1, "gates_closed": 0}
    assert (await _gate(host, live, "p")).tally == 1
    assert (await _gate(host, cancelled, "p")).tally == 0
    assert await log_lines(host.db, cancelled, "condition.evaluated") == []


async def test_an_unknown_trigger_or_a_bad_payload_writes_nothing(host, engine):
    run_id = await _start(host, phase("p", advance=TWO_NORTH))
    await engine.tick()
    before = await _kinds(host, run_id)
    with pytest.raises(NotFound, match=r"no such trigger: 'wisps\.lost'"):
        await host.emit("wisps.lost", {"colour": "north"})
    with pytest.raises(Invalid) as refused:
        await host.emit("wisps.caught", {"colour": 3, "shape": "round"})
    assert refused.value.details == [
        'body.colour: expected a string for "colour", got 3',
        'body.shape: "shape" is not a variable of "wisps.caught"',
    ]
    assert await _kinds(host, run_id) == before
    gate = await _gate(host, run_id, "p")
    assert (gate.tally, gate.last_event_at) == (0, None)


async def test_concurrent_firings_count_exactly_to_the_gate(host, engine):
    run_id = await _start(host, phase("p", advance={"on": "wisps.caught", "count": 3}))
    await engine.tick()
    answers = await asyncio.gather(*[host.emit("wisps.caught", {}) for _ in range(6)])
    assert sum(a["gates_matched"] for a in answers) == 3
    assert sum(a["gates_closed"] for a in answers) == 1
    gate = await _gate(host, run_id, "p")
    assert (gate.tally, gate.satisfied_by) == (3, "tally")
    evaluated = await log_lines(host.db, run_id, "condition.evaluated")
    assert sorted(e.detail["tally"] for e in evaluated) == [1, 2, 3]
    assert len(await log_lines(host.db, run_id, "phase.gate")) == 1


async def test_a_tally_survives_a_restart(host, engine, settings, db, clock):
    run_id = await _start(host, phase("p", advance=TWO_NORTH), phase("end", announce("x")))
    await engine.tick()
    await host.emit("wisps.caught", {"colour": "north"})
    await engine.stop()

    # A new host and engine on the same database: nothing kept in memory carries over.
    again = Host(settings, clock=clock, db=db)
    try:
        async with Engine(again) as restarted:
            await restarted.tick()
            assert (await run_row(db, run_id)).current_phase == "p"
            assert (await _gate(again, run_id, "p")).tally == 1
            assert await again.emit("wisps.caught", {"colour": "north"}) == {
                "gates_matched": 1,
                "gates_closed": 1,
            }
            await restarted.tick()
        assert (await run_row(db, run_id)).status == "completed"
    finally:
        await again.close()


async def test_a_closing_firing_wakes_the_engine(host, engine, monkeypatch):
    await _start(host, phase("p", advance={"on": "wisps.caught", "count": 2}))
    await engine.tick()
    wakes: list[dict[str, Any]] = []
    monkeypatch.setattr(engine, "wake", lambda **how: wakes.append(how))
    await host.emit("wisps.caught", {})
    assert wakes == []  # counted, not closed: nothing for the engine to do
    await host.emit("wisps.caught", {})
    assert wakes == [{"advance_only": True}]  # the gate's run moves on: advance's tick


# ── the emit path through a plugin's context ──────────────────────────────────


class Shard:
    """A game plugin that fires its own trigger through the context it was handed."""

    PLUGIN_INFO = {"owner": "shard", "contract": "^1.0"}  # noqa: RUF012 - read by the loader

    def __init__(self) -> None:
        self.context: Any = None

    @hookimpl
    def pageant_triggers(self) -> list[dict[str, Any]]:
        variable = {"name": "location", "type": "string", "description": "Where.", "example": "Yew"}
        return [{"id": "shard.boss_up", "label": "A boss spawned", "variables": [variable]}]

    @hookimpl
    def pageant_startup(self, context: Any) -> None:
        self.context = context


async def test_a_plugin_fires_through_its_context(settings, db, clock):
    shard = Shard()
    host = make_host(settings, db, clock, [shard])
    try:
        await host.start_plugins()
        where = {"var": "location", "op": "contains", "value": "Yew"}
        run_id = await _start(host, phase("p", advance={"on": "shard.boss_up", "where": where}))
        async with Engine(host) as engine:
            await engine.tick()
            assert await shard.context.emit("shard.boss_up", {"location": "Britain"}) == {
                "gates_matched": 0,
                "gates_closed": 0,
            }
            assert await shard.context.emit("shard.boss_up", {"location": "Yew (10, 20)"}) == {
                "gates_matched": 1,
                "gates_closed": 1,
            }
            with pytest.raises(Invalid, match="does not fit"):
                await shard.context.emit("shard.boss_up", {"location": 7})
            await engine.tick()
        assert (await run_row(db, run_id)).status == "completed"
        lines = await log_lines(db, run_id, "condition.evaluated")
        assert [line.actor for line in lines] == ["plugin:shard"]
        assert [line.detail["values"] for line in lines] == [{"location": "Yew (10, 20)"}]
    finally:
        await host.close()


# ── the conditional increment, on both servers ────────────────────────────────


def _set_clause(statement: Any, dialect: Any) -> list[str]:
    sql = str(statement.compile(dialect=dialect))
    assignments = sql.split(" SET ", 1)[1].split(" WHERE ", 1)[0]
    return [part.split("=", 1)[0].strip() for part in assignments.split(", ") if "=" in part]


@pytest.mark.parametrize("server", [mysql.dialect(), sqlite.dialect()], ids=["mariadb", "sqlite"])
def test_the_count_sets_the_tally_last(server):
    columns = _set_clause(gate_rows._COUNT, server)
    assert columns[-1] == "tally", columns
    assert columns.index("satisfied_at") < columns.index("tally")
    assert columns.index("satisfied_by") < columns.index("tally")


async def _two_count_gate(db: Any, clock: Any) -> int:
    event = await publish_event(db, clock.now(), spec(phase("p", announce("x"))))
    async with db.begin() as conn:
        run_id = (
            await conn.execute(
                insert(event_runs).values(
                    definition_id=event.id,
                    version_id=event.version_id,
                    scheduled_for=clock.now(),
                    source="manual",
                    status="running",
                    current_phase="p",
                    created_at=clock.now(),
                )
            )
        ).inserted_primary_key[0]
        return (
            await conn.execute(
                insert(event_run_phase_gates).values(
                    run_id=run_id,
                    phase="p",
                    kind="on",
                    trigger_id="wisps.caught",
                    needed=2,
                    tally=0,
                    entered_at=clock.now(),
                )
            )
        ).inserted_primary_key[0]


async def _state(db: Any, gate_id: int) -> tuple[int, Any]:
    async with db.connect() as conn:
        row = await gate_rows.gate_by_id(conn, gate_id)
    return row.tally, row.satisfied_by


async def test_the_misordered_set_closes_a_two_count_gate_on_its_first_firing_on_mariadb(
    db, clock, dialect
):
    """The defect the order prevents, shown on the server: the increment first, and
    MariaDB's CASE reads the new tally."""
    assignments = gate_rows.count_assignments()
    misordered = (
        update(event_run_phase_gates)
        .where(*gate_rows.COUNT_WHERE)
        .ordered_values(assignments[-1], *assignments[:-1])
    )
    gate_id = await _two_count_gate(db, clock)
    async with db.begin() as conn:
        await conn.execute(misordered, {"gate_id": gate_id, "now": clock.now()})
    if dialect == "mariadb":
        assert await _state(db, gate_id) == (1, "tally")  # closed one firing early
    else:
        assert await _state(db, gate_id) == (1, None)  # SQLite reads the old row throughout

    # The statement as written agrees on both: open after one, closed after two, then shut.
    gate_id = await _two_count_gate(db, clock)
    for expected, counted in (((1, None), True), ((2, "tally"), True), ((2, "tally"), False)):
        async with db.begin() as conn:
            assert await gate_rows.count_firing(conn, gate_id, clock.now()) is counted
        assert await _state(db, gate_id) == expected


# ── the due query agrees with is_open ─────────────────────────────────────────


@pytest.mark.parametrize(
    ("row", "open_"),
    [
        (None, True),
        ({"kind": "on", "trigger_id": "wisps.caught"}, False),
        ({"kind": "on", "trigger_id": "wisps.caught", "satisfied_by": "tally"}, True),
        ({"kind": "after", "deadline": 1}, False),
        ({"kind": "after", "deadline": 0}, True),
        ({"kind": "after", "deadline": 0, "satisfied_by": "deadline"}, True),
        ({"kind": "on", "trigger_id": "wisps.caught", "satisfied_by": "forced"}, True),
    ],
    ids=["no-row", "on-open", "on-tally", "after-ahead", "after-now", "after-closed", "forced"],
)
async def test_the_due_query_agrees_with_is_open(host, engine, clock, row, open_):
    gated = {"key": "p", "advance": {"on": "wisps.caught"}}
    run_id = await _start(host, phase("p", announce("x"), advance={"on": "wisps.caught"}))
    await engine.tick()
    async with host.db.begin() as conn:
        await conn.execute(
            event_run_phase_gates.delete().where(event_run_phase_gates.c.run_id == run_id)
        )
        if row is not None:
            values = dict(row)
            if "deadline" in values:
                values["deadline"] = clock.now() + timedelta(seconds=values["deadline"])
            if "satisfied_by" in values:
                values["satisfied_at"] = clock.now()
            await conn.execute(
                insert(event_run_phase_gates).values(
                    run_id=run_id, phase="p", entered_at=clock.now(), **values
                )
            )
    async with host.db.connect() as conn:
        assert await gates.is_open(conn, run_id=run_id, phase=gated, now=clock.now()) is open_
        found = await due.find_due(conn, clock.now(), limit=10, busy=[], stall_seconds=STALL)
    assert (run_id in [r.id for r in found]) is open_


# ── stalls ────────────────────────────────────────────────────────────────────


async def test_a_held_gate_stalls_the_run_once_at_stall_seconds(host, engine, clock):
    run_id = await _start(host, phase("p", announce("x"), advance=TWO_NORTH))
    await engine.tick()
    assert await engine.next_sleep() == STALL  # it wakes for the stall, exactly

    clock.advance(STALL - 1)
    await engine.tick()
    assert (await run_row(host.db, run_id)).health == "ok"
    assert await engine.next_sleep() == 1

    clock.advance(1)
    await engine.tick()
    assert (await run_row(host.db, run_id)).health == "stalled"
    (line,) = await log_lines(host.db, run_id, "run.health")
    assert line.detail["to"] == "stalled"
    assert line.detail["because"] == "phase p has waited 1 h on its gate"
    assert line.detail["gate"]["tally"] == 0

    # Held, never advanced: and logged once however long it stays held.
    for _ in range(3):
        clock.advance(600)
        await engine.tick()
    assert len(await log_lines(host.db, run_id, "run.health")) == 1
    assert (await run_row(host.db, run_id)).current_phase == "p"
    assert await engine.next_sleep() == 100_000


async def test_a_degraded_run_escalates_to_stalled(host, engine, clock):
    run_id = await _start(host, phase("p", announce("x"), advance=TWO_NORTH))
    await engine.tick()
    await set_run(host.db, run_id, health="degraded")
    clock.advance(STALL)
    await engine.tick()
    assert (await run_row(host.db, run_id)).health == "stalled"


async def test_a_gate_that_opens_in_time_never_stalls(host, engine, clock):
    run_id = await _start(host, phase("p", announce("x"), advance={"after": "30m"}))
    await engine.tick()
    clock.advance(STALL * 2)
    await engine.tick()
    run = await run_row(host.db, run_id)
    assert (run.status, run.health) == ("completed", "ok")


# ── what the run says while it waits ──────────────────────────────────────────


async def test_a_gates_sentence_read_later_says_the_later_time(host, engine, clock):
    # Nothing of the run changes between the two reads; only the clock moves, and the
    # sentence with it: a console is never answered from an earlier build.
    run_id = await _start(host, phase("muster", announce("x"), advance=TWO_NORTH))
    await engine.tick()
    clock.advance(60)
    await host.emit("wisps.caught", {"colour": "north"})
    clock.advance(300)
    first = (await console(host, run_id))["run"]["waiting_on"]["sentence"]
    assert first.endswith("since 12:00 UTC (6 min)")
    clock.advance(240)
    later = (await console(host, run_id))["run"]["waiting_on"]["sentence"]
    assert later.endswith("since 12:00 UTC (10 min)")


async def test_waiting_on_names_the_gate_in_a_sentence_logged_once(host, engine, clock):
    run_id = await _start(host, phase("muster", announce("x"), advance=TWO_NORTH))
    await engine.tick()
    clock.advance(60)
    await host.emit("wisps.caught", {"colour": "north"})
    clock.advance(300)
    view = await console(host, run_id)
    waiting = view["run"]["waiting_on"]
    assert waiting["reason"] == "gate"
    assert waiting["sentence"] == (
        'waiting on wisps.caught where colour eq "north" — seen 1 of 2 since 12:00 UTC (6 min)'
    )
    await host.emit("wisps.caught", {"colour": "south"})
    view = await console(host, run_id)
    assert view["run"]["waiting_on"]["sentence"].endswith(
        '(6 min); the last firing, at 12:06 UTC, did not match (colour "south")'
    )
    assert view["gate"] == {
        "kind": "on",
        "phase": "muster",
        "condition": 'colour eq "north"',
        "trigger_id": "wisps.caught",
        "tally": 1,
        "needed": 2,
        "entered_at": clock.now() - timedelta(seconds=360),
        "deadline": None,
        "last_event_at": clock.now(),
        "last_event_counted": False,
        "satisfied_at": None,
        "satisfied_by": None,
    }
    await engine.tick()
    waits = await log_lines(host.db, run_id, "run.waiting")
    assert [w.detail["reason"] for w in waits] == ["gate"]


async def test_a_wait_that_ends_a_gated_phase_hands_over_to_the_gate_in_the_log(
    host, engine, clock
):
    # The wait is the phase's last step, so it holds the run; when the hold runs out while
    # the gate still holds, the log must say the run now waits on the gate.
    run_id = await _start(host, phase("muster", announce("x"), wait(2), advance=TWO_NORTH))
    await engine.tick()
    assert (await run_row(host.db, run_id)).waiting_reason == "not_due"
    clock.advance(2)
    await engine.tick()
    row = await run_row(host.db, run_id)
    assert (row.waiting_reason, row.hold_until) == ("gate", None)
    waits = await log_lines(host.db, run_id, "run.waiting")
    assert [w.detail["reason"] for w in waits] == ["not_due", "gate"]
    # Cleared once: the run is not due again until the gate or its stall clock says so.
    async with host.db.connect() as conn:
        found = await due.find_due(conn, clock.now(), limit=10, busy=[], stall_seconds=STALL)
    assert [r.id for r in found] == []


async def test_an_after_gate_says_until_when(host, engine, clock):
    run_id = await _start(host, phase("p", announce("x"), advance={"after": "30m"}))
    await engine.tick()
    view = await console(host, run_id)
    assert view["run"]["waiting_on"]["sentence"] == (
        "waiting until 12:30 UTC (after 30m from 12:00 UTC)"
    )
    assert view["run"]["waiting_on"]["until"] == clock.now() + timedelta(minutes=30)
    assert (view["gate"]["kind"], view["gate"]["condition"]) == ("after", None)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0 s"),
        (59, "59 s"),
        (60, "1 min"),
        (3599, "59 min"),
        (3600, "1 h"),
        (3660, "1 h 1 min"),
        (86_399, "23 h 59 min"),
        (86_400, "1 d"),
        (90_000, "1 d 1 h"),
    ],
)
def test_elapsed_reads_as_a_person_says_it(seconds, text):
    assert gates.elapsed(seconds) == text


def test_the_console_condition_is_the_grammars_own_rendering():
    gate = {"kind": "on", "condition": {"any": [NORTH, {"not": NORTH}]}}
    assert gates.condition_text(gate) == conditions.render(gate["condition"])


async def test_the_gate_row_keeps_no_payload_and_the_log_the_declared_one(host, engine):
    run_id = await _start(host, phase("p", advance=TWO_NORTH))
    await engine.tick()
    await host.emit("wisps.caught", {"colour": "north", "weight": 12.5})
    async with host.db.connect() as conn:
        row = (
            await conn.execute(
                select(event_run_phase_gates).where(event_run_phase_gates.c.run_id == run_id)
            )
        ).one()
    assert 12.5 not in [v for v in row._mapping.values()]
    (line,) = await log_lines(host.db, run_id, "condition.evaluated")
    # The condition's values explain the count; the payload (checked against the trigger's
    # declared variables) is what the firing's sentence names.
    assert line.detail["values"] == {"colour": "north"}
    assert line.detail["payload"] == {"colour": "north", "weight": 12.5}


async def test_a_plugin_emits_only_its_own_owners_triggers(host, engine):
    """``context.emit`` is a game reporting its own game: another owner's trigger, core's
    lifecycle among them, is refused and counts for no gate."""
    run_id = await _start(host, phase("p", advance=TWO_NORTH))
    await engine.tick()
    before = await _kinds(host, run_id)
    wisps = host.context_for("wisps[wisps]", "wisps")
    with pytest.raises(Forbidden) as refused:
        await wisps.emit("core.run.completed", {"event": "x", "run_id": run_id})
    assert refused.value.message == (
        "plugin 'wisps' may fire only its own triggers (wisps.*); "
        "core.run.completed belongs to 'core'"
    )
    with pytest.raises(Forbidden, match=r"wisps\.caught belongs to 'wisps'"):
        await host.context_for("shard[shard]", "shard").emit("wisps.caught", {"colour": "north"})
    assert await _kinds(host, run_id) == before
    # Its own trigger goes through the same emit path.
    assert await wisps.emit("wisps.caught", {"colour": "north"}) == {
        "gates_matched": 1,
        "gates_closed": 0,
    }
