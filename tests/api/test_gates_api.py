"""Gates through the HTTP API: authoring them (grammar errors named, dormancy), firing
triggers from a game server (roles, payload checks, nothing written on refusal), forcing a
gate (the advance control), and a walk of a three-phase event from authoring to completed."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from pageant.api.app import all_routes, make_app
from pageant.db.tables import event_run_log, event_run_phase_gates, event_versions
from pageant.hosting import Host
from tests.api.test_events_api import EVENTS, call, create
from tests.factories import announce, phase, spec, step

FIRE = "/api/v1/triggers/{}/fire"
RUNS = "/api/v1/admin/runs"
NORTH = {"var": "colour", "op": "eq", "value": "north"}


@pytest.fixture
def engine(host_engine: Any) -> Any:
    return host_engine


async def _gated_run(client, tokens, engine, *phases: dict[str, Any]) -> int:
    """An event of ``phases``, published and started through the API, ticked once."""
    event = await create(client, tokens["admin"], title="Wisp hunt", spec=spec(*phases))
    status, data = await call(client, "POST", f"{EVENTS}/{event['id']}/publish", tokens["admin"])
    assert status == 200, data
    status, run = await call(client, "POST", f"{EVENTS}/{event['id']}/runs", tokens["admin"])
    assert status == 201, run
    await engine.tick()
    return run["id"]


async def _console(client, tokens, run_id: int) -> dict[str, Any]:
    status, view = await call(client, "GET", f"{RUNS}/{run_id}", tokens["moderator"])
    assert status == 200, view
    return view


async def _written(db: Any) -> tuple[list[Any], list[Any]]:
    """Every gate row and log line: what a refused request must leave as it was."""
    async with db.connect() as conn:
        gates = [tuple(r) for r in await conn.execute(select(event_run_phase_gates))]
        log = [tuple(r) for r in await conn.execute(select(event_run_log))]
        await conn.rollback()
    return gates, log


# ── authoring gates ───────────────────────────────────────────────────────────


async def test_a_gated_spec_saves_normalised(client, tokens):
    event = await create(
        client,
        tokens["editor"],
        spec=spec(
            phase("muster", announce("hi"), advance={"on": "wisps.caught", "where": NORTH}),
            phase("hold", advance={"after": "120m"}),
        ),
    )
    first, second = event["spec"]["phases"]
    assert first["advance"] == {"on": "wisps.caught", "where": NORTH, "count": 1, "dormant": False}
    assert second["advance"] == {"after": "2h"}
    # Saved back as read, it is unchanged (the validator accepts its own output).
    status, again = await call(
        client, "PUT", f"{EVENTS}/{event['id']}", tokens["editor"], {"spec": event["spec"]}
    )
    assert (status, again["spec"]) == (200, event["spec"])


async def test_grammar_errors_name_the_variable_or_operator_and_write_nothing(client, tokens, db):
    where = {
        "all": [
            {"var": "regoin", "op": "eq", "value": "Yew"},
            {"var": "colour", "op": "gt", "value": "a"},
            {"var": "weight", "op": "lte", "value": "heavy"},
            {"var": "colour", "op": "like", "value": "n%"},
        ]
    }
    body = {
        "title": "Bad gates",
        "spec": spec(
            phase("muster", advance={"on": "wisps.caught", "where": where, "count": 1001}),
            phase("hold", advance={"after": "1h30m"}),
        ),
    }
    before = await _written(db)
    status, data = await call(client, "POST", EVENTS, tokens["admin"], body)
    assert (status, data["error"]["code"]) == (400, "invalid")
    assert data["error"]["details"] == [
        "spec.phases[0].advance.count: expected a whole number from 1 to 1000; got 1001",
        'spec.phases[0].advance.where.all[0].var: "regoin" is not a variable of "wisps.caught"',
        'spec.phases[0].advance.where.all[1].op: "gt" cannot be applied to a string',
        'spec.phases[0].advance.where.all[2].value: expected a number for "weight", got "heavy"',
        'spec.phases[0].advance.where.all[3].op: "like" is not an operator; a string takes '
        "eq, ne, contains, starts_with, in",
        'spec.phases[1].advance.after: expected a duration such as "30m" (a whole number of s, '
        'm, h or d) from 1s to 30d; got "1h30m"',
    ]
    assert await _written(db) == before


@pytest.mark.parametrize(
    ("advance", "ok"),
    [
        ({"on": "wisps.caught", "count": 1}, True),
        ({"on": "wisps.caught", "count": 0}, False),
        ({"on": "wisps.caught", "count": 1000}, True),
        ({"on": "wisps.caught", "count": 1001}, False),
        ({"after": "1s"}, True),
        ({"after": "0s"}, False),
        ({"after": "30d"}, True),
        ({"after": "721h"}, False),
    ],
)
async def test_gate_bounds_hold_on_both_sides_through_the_api(client, tokens, advance, ok):
    body = {"title": "Bounds", "spec": spec(phase("p", advance=advance))}
    status, data = await call(client, "POST", EVENTS, tokens["admin"], body)
    assert status == (201 if ok else 400), data


async def test_a_gate_on_an_unregistered_trigger_saves_dormant_and_will_not_publish(
    client, tokens, db, settings, clock, aiohttp_client
):
    event = await create(
        client,
        tokens["admin"],
        spec=spec(phase("p", advance={"on": "wisps.caught", "where": NORTH, "count": 2})),
    )
    bare_host = Host(settings, discover=False, clock=clock, db=db)  # wisps uninstalled
    try:
        bare = await aiohttp_client(make_app(bare_host, run_engine=False))
        path = f"{EVENTS}/{event['id']}"
        status, saved = await call(bare, "PUT", path, tokens["admin"], {"spec": event["spec"]})
        assert status == 200, saved
        assert saved["spec"]["phases"][0]["advance"] == {
            "on": "wisps.caught",
            "where": NORTH,
            "count": 2,
            "dormant": True,
        }
        # A new gate on a trigger nobody registers saves dormant too, its where unchecked.
        fresh = spec(phase("p", advance={"on": "shard.boss_up", "where": {"var": "x"}}))
        status, saved = await call(bare, "PUT", path, tokens["admin"], {"spec": fresh})
        assert status == 200 and saved["spec"]["phases"][0]["advance"]["dormant"] is True
        status, data = await call(bare, "POST", f"{path}/publish", tokens["admin"])
        assert (status, data["error"]["code"]) == (409, "dormant")
        assert data["error"]["details"] == ["spec.phases[0].advance: shard.boss_up"]
        async with db.connect() as conn:
            assert (await conn.execute(select(event_versions))).all() == []
    finally:
        await bare_host.close()
    # With the plugin installed, the first gate publishes again.
    status, _ = await call(client, "PUT", path, tokens["admin"], {"spec": event["spec"]})
    status, published = await call(client, "POST", f"{path}/publish", tokens["admin"])
    assert status == 200, published


# ── firing ────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("role", "expected"),
    [("game", 200), ("admin", 200), ("editor", 403), ("moderator", 403), (None, 401)],
)
async def test_who_may_fire(client, tokens, db, role, expected):
    before = await _written(db)
    status, data = await call(
        client, "POST", FIRE.format("wisps.caught"), tokens[role] if role else None, {}
    )
    assert status == expected, data
    if expected == 200:
        assert data == {"gates_matched": 0, "gates_closed": 0}
    elif expected == 403:
        assert data["error"]["message"] == "requires role admin or game"
    assert await _written(db) == before


@pytest.mark.parametrize(
    ("body", "status", "details"),
    [
        (
            {"colour": "north", "shape": "round"},
            400,
            ['body.shape: "shape" is not a variable of "wisps.caught"'],
        ),
        ({"colour": 7}, 400, ['body.colour: expected a string for "colour", got 7']),
        ({"weight": True}, 400, ['body.weight: expected a number for "weight", got true']),
        ({"colour": None}, 400, ['body.colour: expected a string for "colour", got null']),
        (["north"], 400, ['body: expected an object of "wisps.caught"\'s variables']),
        (b"{", 400, None),
    ],
    ids=["undeclared", "wrong-type", "bool-for-number", "null", "not-an-object", "malformed"],
)
async def test_a_payload_that_does_not_fit_is_refused_and_writes_nothing(
    client, tokens, engine, db, body, status, details
):
    run_id = await _gated_run(
        client, tokens, engine, phase("p", advance={"on": "wisps.caught", "where": NORTH})
    )
    before = await _written(db)
    answer_status, answer = await call(
        client, "POST", FIRE.format("wisps.caught"), tokens["game"], body
    )
    assert (answer_status, answer["error"]["code"]) == (status, "invalid"), answer
    if details is not None:
        assert answer["error"]["details"] == details
    assert await _written(db) == before
    view = await _console(client, tokens, run_id)
    assert (view["gate"]["tally"], view["gate"]["last_event_at"]) == (0, None)


async def test_an_unknown_trigger_is_404_whatever_the_body(client, tokens, db):
    before = await _written(db)
    for body in ({"colour": "north"}, b"{"):
        status, data = await call(client, "POST", FIRE.format("wisps.lost"), tokens["game"], body)
        assert (status, data["error"]["code"]) == (404, "not_found")
        assert (
            data["error"]["message"]
            == "no such trigger: 'wisps.lost' (no installed plugin registers it)"
        )
    assert await _written(db) == before


@pytest.mark.parametrize("role", ["game", "admin"])
async def test_no_token_fires_a_core_lifecycle_trigger(client, tokens, engine, db, role):
    """A gate waiting on ``core.run.completed`` trusts that a run completed: a token that
    could fire it would advance the gate for an event that never ran."""
    waits = {"on": "core.run.completed", "where": {"var": "event", "op": "eq", "value": "muster"}}
    run_id = await _gated_run(client, tokens, engine, phase("wait", advance=waits))
    before = await _written(db)
    status, data = await call(
        client,
        "POST",
        FIRE.format("core.run.completed"),
        tokens[role],
        {"event": "muster", "run_id": 999, "status": "completed"},
    )
    assert status == 403, data
    assert data["error"]["message"] == (
        "core.run.completed is one of pageant's own lifecycle triggers: the host fires it "
        "when a run moves, and no token may fire it"
    )
    assert await _written(db) == before
    await engine.tick()
    assert (await _console(client, tokens, run_id))["run"]["current_phase"] == "wait"


async def test_a_game_token_is_refused_on_every_other_route(client, tokens):
    """The ``game`` role fires triggers and can do nothing else; a new route that forgot its
    roles would show up here."""
    checked = 0
    for route in all_routes():
        if route.roles is None:
            continue  # public: the same for everyone
        if route.path in ("/api/v1/triggers/{trigger_id}/fire", "/api/v1/triggers/fire"):
            assert set(route.roles) == {"admin", "game"}
            continue
        assert "game" not in route.roles, route.path
        path = route.path.replace("{", "").replace("}", "")  # any value: the role comes first
        for name in ("id", "run_id", "step_id", "number", "source_id"):
            path = path.replace(name, "1")
        status, data = await call(client, route.method, path, tokens["game"], {})
        assert (status, data["error"]["code"]) == (403, "forbidden"), (route.method, path)
        checked += 1
    assert checked >= 20


# ── forcing a gate ────────────────────────────────────────────────────────────


async def _advance(client, tokens, run_id, body=None, role="moderator"):
    return await call(client, "POST", f"{RUNS}/{run_id}/advance", tokens[role], body)


async def test_a_moderator_forces_a_held_gate_and_it_is_logged_once(client, tokens, engine, clock):
    run_id = await _gated_run(
        client,
        tokens,
        engine,
        phase("muster", announce("hi"), advance={"on": "wisps.caught", "count": 2}),
        phase("end", announce("bye")),
    )
    await call(client, "POST", FIRE.format("wisps.caught"), tokens["game"], {})
    clock.advance(120)
    status, run = await _advance(client, tokens, run_id, {"reason": "the shard crashed"})
    assert status == 200, run
    assert run["current_phase"] == "muster"  # the engine moves it, through its one path
    view = await _console(client, tokens, run_id)
    assert (view["gate"]["satisfied_by"], view["gate"]["satisfied_at"]) == (
        "forced",
        "2027-03-01T12:02:00Z",
    )
    status, again = await _advance(client, tokens, run_id, {"reason": "twice"})
    assert status == 409
    assert again["error"]["message"] == (
        f"phase 'muster' of run {run_id} is already past its gate "
        "(satisfied by forced at 2027-03-01T12:02:00Z)"
    )

    await engine.tick()
    view = await _console(client, tokens, run_id)
    assert view["run"]["status"] == "completed"
    advanced = [line for line in view["log"] if line["kind"] == "phase.advanced"]
    assert len(advanced) == 1
    (line,) = advanced
    assert line["actor"] == "moderator:test-moderator"
    assert line["detail"] == {
        "because": "forced",
        "reason": "the shard crashed",
        "kind": "on",
        "trigger_id": "wisps.caught",
        "condition": None,
        "tally": 1,
        "needed": 2,
        "waited_seconds": 120,
    }
    kinds = [line["kind"] for line in view["log"]]
    assert not [k for k in kinds if k.startswith("control.")]
    assert "phase.gate" not in kinds


async def test_advance_refuses_a_phase_held_by_a_step(client, tokens, engine, db):
    run_id = await _gated_run(
        client,
        tokens,
        engine,
        phase("muster", step("core.cue", message="spawn it"), advance={"after": "10m"}),
    )
    cue = (await _console(client, tokens, run_id))["steps"][0]
    before = await _written(db)
    status, data = await _advance(client, tokens, run_id, {"reason": "go"})
    assert status == 409
    assert data["error"]["message"] == (
        f"phase 'muster' is held by step {cue['id']} ({cue['label']}), which is parked, not by its "
        "gate; advance forces a gate, never a step: confirm or skip the step"
    )
    assert await _written(db) == before


async def test_advance_refuses_a_gate_already_past_and_a_phase_without_one(
    client, tokens, engine, clock
):
    run_id = await _gated_run(
        client,
        tokens,
        engine,
        phase("muster", step("core.cue", message="go"), advance={"after": "1m"}),
    )
    clock.advance(60)
    status, data = await _advance(client, tokens, run_id, {"reason": "go"})
    assert status == 409 and "held by step" in data["error"]["message"]
    cue = (await _console(client, tokens, run_id))["steps"][0]
    await call(client, "POST", f"{RUNS}/{run_id}/steps/{cue['id']}/confirm", tokens["admin"])
    status, data = await _advance(client, tokens, run_id, {"reason": "go"})
    assert status == 409
    assert data["error"]["message"] == (
        f"phase 'muster' of run {run_id} is already past its gate "
        "(satisfied by deadline at 2027-03-01T12:01:00Z)"
    )

    plain = await _gated_run(client, tokens, engine, phase("p", step("core.cue", message="x")))
    status, data = await _advance(client, tokens, plain, {"reason": "go"})
    assert data["error"]["message"] == (
        f"phase 'p' of run {plain} has no gate; it advances when its steps are done"
    )


async def test_advance_refuses_a_run_that_is_not_live(client, tokens, engine):
    done = await _gated_run(client, tokens, engine, phase("p", announce("x")))
    status, data = await _advance(client, tokens, done, {"reason": "go"})
    assert status == 409
    assert data["error"]["message"] == (
        f"run {done} is completed; advance acts on a running or paused run"
    )


async def test_a_forced_gate_of_a_paused_run_advances_on_resume(client, tokens, engine):
    run_id = await _gated_run(
        client,
        tokens,
        engine,
        phase("p", announce("x"), advance={"on": "wisps.caught"}),
        phase("end", announce("bye")),
    )
    await call(client, "POST", f"{RUNS}/{run_id}/pause", tokens["moderator"])
    status, run = await _advance(client, tokens, run_id, {"reason": "wrap up"})
    assert (status, run["status"]) == (200, "paused")
    await engine.tick()
    assert (await _console(client, tokens, run_id))["run"]["current_phase"] == "p"
    await call(client, "POST", f"{RUNS}/{run_id}/resume", tokens["moderator"])
    await engine.tick()
    assert (await _console(client, tokens, run_id))["run"]["status"] == "completed"


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (None, "body: required"),
        ({}, "body.reason: Field required"),
        ({"reason": ""}, "body.reason: String should have at least 1 character"),
        ({"reason": "   "}, "body.reason: a reason is required"),
        ({"reason": "x", "force": True}, "body.force: is not a known field"),
    ],
)
async def test_advance_needs_a_reason(client, tokens, engine, db, body, detail):
    run_id = await _gated_run(client, tokens, engine, phase("p", advance={"on": "wisps.caught"}))
    before = await _written(db)
    status, data = await _advance(client, tokens, run_id, body)
    assert status == 400
    assert data["error"]["details"][0].startswith(detail), data
    assert await _written(db) == before


async def test_who_may_force_a_gate(client, tokens, engine):
    run_id = await _gated_run(client, tokens, engine, phase("p", advance={"on": "wisps.caught"}))
    for role in ("editor", "game"):
        status, data = await _advance(client, tokens, run_id, {"reason": "x"}, role=role)
        assert (status, data["error"]["message"]) == (403, "requires role admin or moderator")
    status, _ = await call(client, "POST", f"{RUNS}/{run_id}/advance", None, {"reason": "x"})
    assert status == 401
    status, data = await _advance(client, tokens, 999_999, {"reason": "x"})
    assert status == 404
    status, _ = await _advance(client, tokens, run_id, {"reason": "x"}, role="admin")
    assert status == 200


# ── the walk ──────────────────────────────────────────────────────────────────


async def test_a_walk_through_a_three_phase_gated_event(client, tokens, engine, clock):
    admin, game = tokens["admin"], tokens["game"]
    muster = phase(
        "muster",
        announce("The wisps gather"),
        advance={"on": "wisps.caught", "where": {"var": "colour", "op": "eq", "value": "north"}},
    )
    muster["advance"]["count"] = 2
    hold = phase("hold", announce("Hold the line"), advance={"after": "10m"})
    wind_down = phase("wind-down", announce("The wisps scatter"))

    # A misspelt variable is refused at save, naming it.
    broken = spec(
        phase("muster", advance={"on": "wisps.caught", "where": {**NORTH, "var": "colur"}})
    )
    status, data = await call(client, "POST", EVENTS, admin, {"title": "Wisps", "spec": broken})
    assert status == 400
    assert data["error"]["details"] == [
        'spec.phases[0].advance.where.var: "colur" is not a variable of "wisps.caught"'
    ]

    run_id = await _gated_run(client, tokens, engine, muster, hold, wind_down)
    view = await _console(client, tokens, run_id)
    assert view["run"]["waiting_on"]["sentence"] == (
        'waiting on wisps.caught where colour eq "north" — seen 0 of 2 since 12:00 UTC (0 s)'
    )

    fire = FIRE.format("wisps.caught")
    clock.advance(60)
    assert await call(client, "POST", fire, game, {"colour": "north", "weight": 1.5}) == (
        200,
        {"gates_matched": 1, "gates_closed": 0},
    )
    clock.advance(60)
    assert await call(client, "POST", fire, game, {"colour": "south", "weight": 3}) == (
        200,
        {"gates_matched": 0, "gates_closed": 0},
    )
    await engine.tick()
    view = await _console(client, tokens, run_id)
    assert view["run"]["current_phase"] == "muster"
    assert view["gate"]["tally"] == 1 and view["gate"]["last_event_counted"] is False
    # A near miss writes nothing to the gate or its log: the trigger's last firing says it.
    assert view["gate"]["last_event_at"] == "2027-03-01T12:02:00Z"
    assert view["run"]["waiting_on"]["sentence"] == (
        'waiting on wisps.caught where colour eq "north" — seen 1 of 2 since 12:00 UTC '
        '(2 min); the last firing, at 12:02 UTC, did not match (colour "south")'
    )
    clock.advance(60)
    assert await call(client, "POST", fire, game, {"colour": "north"}) == (
        200,
        {"gates_matched": 1, "gates_closed": 1},
    )

    await engine.tick()
    view = await _console(client, tokens, run_id)
    assert view["run"]["current_phase"] == "hold"
    assert view["run"]["waiting_on"]["sentence"] == (
        "waiting until 12:13 UTC (after 10m from 12:03 UTC)"
    )
    assert view["gate"]["kind"] == "after" and view["gate"]["deadline"] == "2027-03-01T12:13:00Z"

    clock.advance(600)
    await engine.tick()
    view = await _console(client, tokens, run_id)
    assert view["run"]["status"] == "completed"
    story = [
        (line["kind"], line["phase"])
        for line in view["log"]
        if line["kind"].startswith(("phase.", "condition.")) or line["kind"] == "run.status"
    ]
    assert story == [
        ("run.status", None),  # scheduled -> starting
        ("run.status", None),  # starting -> running
        ("phase.entered", "muster"),
        ("condition.evaluated", "muster"),
        ("condition.evaluated", "muster"),
        ("phase.gate", "muster"),
        ("phase.advanced", "muster"),
        ("phase.completed", "muster"),
        ("phase.entered", "hold"),
        ("phase.gate", "hold"),
        ("phase.advanced", "hold"),
        ("phase.completed", "hold"),
        ("phase.entered", "wind-down"),
        ("phase.completed", "wind-down"),
        ("run.status", None),  # running -> ending
        ("run.status", None),  # ending -> completed
    ]
    evaluated = [line for line in view["log"] if line["kind"] == "condition.evaluated"]
    assert [(e["detail"]["matched"], e["detail"]["values"]) for e in evaluated] == [
        (True, {"colour": "north"}),
        (True, {"colour": "north"}),
    ]
    assert {e["actor"] for e in evaluated} == {"game:test-game"}
    said = [line["detail"]["message"] for line in view["log"] if line["kind"] == "announce"]
    assert said == ["The wisps gather", "Hold the line", "The wisps scatter"]
