"""Starts arriving together are created together: one transaction for the burst, each start
still answered on its own (created, the same run again, or its own refusal), and a run made
in a shared transaction exactly the run a start alone makes; a schedule's fan-out makes its
runs' steps the same way."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import event as sa_event
from sqlalchemy import update

from pageant.api.app import make_app
from pageant.db import budgets
from pageant.db.tables import event_versions
from pageant.engine import Engine
from pageant.engine.expand import expand
from pageant.errors import Conflict, Invalid, NotFound
from pageant.hosting import Host
from pageant.runs.create import start_now
from tests.conftest import bearer
from tests.factories import announce, log_lines, phase, publish_event, spec, step, step_rows
from tests.scheduling import ready_event, runs_of, spec_with, weekly

COLOUR = {"name": "colour", "type": "string", "label": "Colour", "required": True}


def _summoning() -> dict[str, Any]:
    """Two phases, params written into a step, and a step that spends (a budget to pin).
    The summoned colour is written, not the param: a param taken where an option source's
    value is taken is checked against the source first (a test below)."""
    out = spec(
        phase(
            "hunt",
            announce({"param": "colour"}),  # type: ignore[arg-type]  # a param reference
            step("wisps.summon", colour="north", count=3),
        ),
        phase("end", announce("done")),
    )
    out["params"] = [COLOUR]
    return out


@pytest.fixture
def engine(host_engine: Any) -> Any:
    """``host``'s engine, attached (its group commit takes the starts) but never ticking."""
    return host_engine


async def _start(host: Host, event_id: int, **kw: Any) -> Any:
    return await start_now(host, event_id, actor="admin:test", **kw)


async def test_many_starts_at_once_are_one_transaction_and_each_gets_its_own_run(
    host, engine, clock
):
    event = await publish_event(host.db, clock.now(), _summoning())
    before = engine.outcomes.transactions

    answers = await asyncio.gather(
        *(_start(host, event.id, params={"colour": f"c{i}"}) for i in range(20))
    )

    assert engine.outcomes.transactions - before == 1
    assert all(created for _, created in answers)
    run_ids = [run_id for run_id, _ in answers]
    assert len(set(run_ids)) == 20
    for i, run_id in enumerate(run_ids):
        rows = await step_rows(host.db, run_id)
        assert [(s.phase, s.seq, s.action) for s in rows] == [
            ("hunt", 0, "core.announce"),
            ("hunt", 1, "wisps.summon"),
        ]
        assert rows[0].params["message"] == f"c{i}"
        (created,) = await log_lines(host.db, run_id, "run.created")
        assert created.detail["params"] == {"colour": f"c{i}"}


async def test_starts_whose_values_an_option_source_checks_are_checked_and_made_together(
    host, engine, clock
):
    """A start whose param a step takes from an option source is planned once, checked
    against the source outside the transaction, and made in a second pass: a burst of them
    costs two transactions, not one each, and a value the source does not offer is refused
    alone."""
    summoning = _summoning()
    summoning["params"] = [{**COLOUR, "option_source": "wisps.options.colours"}]
    summoning["phases"][0]["steps"][1]["params"]["colour"] = {"param": "colour"}
    event = await publish_event(host.db, clock.now(), summoning)
    before = engine.outcomes.transactions

    colours = ["north", "south", "ember", "violet"]
    answers = await asyncio.gather(
        *(_start(host, event.id, params={"colour": c}, scope=c) for c in colours),
        return_exceptions=True,
    )

    made, (refused,) = answers[:3], answers[3:]
    assert all(isinstance(a, tuple) and a[1] for a in made), answers
    assert isinstance(refused, Invalid) and refused.details == [
        'params.colour: "violet" is not a value of wisps.options.colours (it offers "north", '
        '"south", "ember" now), which the param "colour" takes'
    ]
    assert engine.outcomes.transactions - before == 2
    for colour, (run_id, _) in zip(colours, made, strict=False):  # type: ignore[misc]  # the made answers are tuples, as asserted
        summon = (await step_rows(host.db, run_id))[1]
        assert summon.params["colour"] == colour


async def test_a_bad_start_among_good_ones_is_refused_alone(host, engine, clock):
    event = await publish_event(host.db, clock.now(), _summoning())
    draft = await publish_event(host.db, clock.now(), published=False)
    before = engine.outcomes.transactions

    answers = await asyncio.gather(
        _start(host, event.id, params={"colour": "north"}),
        _start(host, event.id, params={"colour": 7}),
        _start(host, 999_999),
        _start(host, draft.id),
        _start(host, event.id, params={"colour": "south"}),
        return_exceptions=True,
    )

    good = [answers[0], answers[4]]
    assert all(isinstance(a, tuple) and a[1] for a in good)
    assert isinstance(answers[1], Invalid)
    assert any("params.colour" in detail for detail in answers[1].details)
    assert isinstance(answers[2], NotFound) and "no such event: 999999" in str(answers[2])
    assert isinstance(answers[3], Conflict) and "no published version" in str(answers[3])
    # The refusals wrote nothing and sank nothing: one transaction made both good runs.
    assert engine.outcomes.transactions - before == 1
    for run_id, _ in good:  # type: ignore[misc]  # the good answers are tuples, as asserted
        assert len(await step_rows(host.db, run_id)) == 2


async def test_two_starts_of_one_key_together_make_one_run_and_one_conflict(host, engine, clock):
    event = await publish_event(
        host.db, clock.now(), spec(phase("p", announce("hi"))), concurrency_key="arena"
    )

    answers = await asyncio.gather(
        _start(host, event.id, scope="north"),
        _start(host, event.id, scope="south"),
        return_exceptions=True,
    )

    (made,) = [a for a in answers if isinstance(a, tuple)]
    (refused,) = [a for a in answers if isinstance(a, BaseException)]
    assert made[1] is True
    assert isinstance(refused, Conflict)
    assert f'the concurrency key "arena" is held by run {made[0]} (scheduled)' in str(refused)
    assert refused.details == [f"holder_run_id: {made[0]}"]


async def test_a_start_just_after_another_of_its_key_is_refused_before_the_engine_starts_it(
    host, clock
):
    event = await publish_event(
        host.db, clock.now(), spec(phase("p", announce("hi"))), concurrency_key="arena"
    )
    first, _ = await _start(host, event.id, scope="north")
    clock.advance(1)
    with pytest.raises(Conflict, match=f"held by run {first} \\(scheduled\\)"):
        await _start(host, event.id, scope="south")


async def test_identical_starts_together_answer_the_same_run(host, engine, clock):
    event = await publish_event(
        host.db, clock.now(), spec(phase("p", announce("hi"))), concurrency_key="arena"
    )

    answers = await asyncio.gather(*(_start(host, event.id) for _ in range(3)))

    assert len({run_id for run_id, _ in answers}) == 1
    assert sorted(created for _, created in answers) == [False, False, True]
    assert len(await step_rows(host.db, answers[0][0])) == 1


async def _made(host: Host, run_id: int) -> dict[str, Any]:
    """What a start made, without the ids and instants that differ between two runs."""
    steps = [
        (s.phase, s.seq, s.label, s.action, s.action_version, s.params, s.on_failure, s.status)
        for s in await step_rows(host.db, run_id)
    ]
    async with host.db.connect() as conn:
        budget = [(b.dimension, b.cap, b.consumed) for b in await budgets.budget_of(conn, run_id)]
    lines = [
        (line.kind, line.actor, {k: v for k, v in line.detail.items() if k != "scheduled_for"})
        for line in await log_lines(host.db, run_id)
    ]
    return {"steps": steps, "budget": budget, "lines": lines}


async def test_a_run_made_in_a_shared_transaction_is_the_run_a_start_alone_makes(host, clock):
    event = await publish_event(host.db, clock.now(), _summoning())
    alone, _ = await _start(host, event.id, params={"colour": "north"})
    clock.advance(1)
    engine = Engine(host)
    try:
        together = await asyncio.gather(
            *(_start(host, event.id, params={"colour": c}) for c in ("north", "south"))
        )
    finally:
        await engine.stop()

    shared = await _made(host, together[0][0])
    assert shared["budget"] == [("wisps.wisps", None, 0)]
    assert len(shared["steps"]) == 2
    assert [kind for kind, _, _ in shared["lines"]] == ["run.created"]
    assert await _made(host, alone) == shared


async def test_a_schedules_fan_out_makes_its_runs_steps_in_one_insert(host, db, clock):
    sets = [{"colour": c} for c in ("north", "south", "east")]
    fanned = spec_with(weekly("friday", at="20:00") | {"params": sets}, *_summoning()["phases"])
    fanned["params"] = [COLOUR]
    event = await ready_event(db, clock.now(), fanned["schedule"], tz="UTC")
    async with db.begin() as conn:
        await conn.execute(
            update(event_versions)
            .where(event_versions.c.id == event.version_id)
            .values(spec=fanned)
        )
    inserts: list[str] = []

    def seen(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith("INSERT INTO EVENT_RUN_STEPS"):
            inserts.append(statement)

    sa_event.listen(db.sync_engine, "before_cursor_execute", seen)
    try:
        await expand(host, clock.now())
    finally:
        sa_event.remove(db.sync_engine, "before_cursor_execute", seen)

    made = await runs_of(db, event.id)
    assert len(made) >= 3 and len(made) % 3 == 0
    assert len(inserts) == 1
    for run in made:
        rows = await step_rows(db, run.id)
        assert [s.params["message"] for s in rows if s.action == "core.announce"] == [
            run.params["colour"]
        ]
        kinds = [line.kind for line in await log_lines(db, run.id)]
        assert kinds == ["run.created", "run.waiting"]


async def test_starts_of_one_event_together_read_its_rows_once(host, engine, db, clock):
    event = await publish_event(db, clock.now(), _summoning())
    reads: list[str] = []

    def seen(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if "FROM event_definitions" in statement or "FROM event_versions" in statement:
            reads.append(statement)

    sa_event.listen(db.sync_engine, "before_cursor_execute", seen)
    try:
        await asyncio.gather(
            *(_start(host, event.id, params={"colour": f"c{i}"}) for i in range(10))
        )
    finally:
        sa_event.remove(db.sync_engine, "before_cursor_execute", seen)
    # The event and its version, once each, for all ten.
    assert len(reads) == 2


async def test_concurrent_start_requests_each_get_their_own_status(
    host, engine, tokens, clock, aiohttp_client
):
    api = await aiohttp_client(make_app(host, run_engine=False))
    keyed = await publish_event(
        host.db, clock.now(), spec(phase("p", announce("hi"))), concurrency_key="arena"
    )
    free = await publish_event(host.db, clock.now(), _summoning())
    before = engine.outcomes.transactions

    async def post(event_id: int, body: dict[str, Any]) -> int:
        path = f"/api/v1/admin/events/{event_id}/runs"
        response = await api.post(path, json=body, headers=bearer(tokens["admin"]))
        return response.status

    statuses = await asyncio.gather(
        post(keyed.id, {"scope": "north"}),
        post(keyed.id, {"scope": "south"}),
        post(free.id, {"params": {"colour": "north"}}),
        post(free.id, {"params": {"colour": 7}}),
        post(free.id, {"params": {"colour": "south"}}),
    )

    assert sorted(statuses[:2]) == [201, 409]
    assert statuses[2:] == [201, 400, 201]
    # Shared: fewer transactions than requests (how many depends on when each arrived).
    assert 1 <= engine.outcomes.transactions - before < 5
