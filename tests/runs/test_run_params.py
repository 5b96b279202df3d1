"""Run params: declared in the spec and checked at save, given when a run starts (API, CLI),
written out where the spec refers to them (a step's params, a gate's condition, the
concurrency key), shown on the run, and fanned out by a schedule: one run per param set."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from pageant.errors import Invalid
from pageant.events.authoring import validator as specs
from tests.api.test_events_api import EVENTS, call, create, snapshot
from tests.events.test_spec import _registry
from tests.factories import announce, log_lines, phase, step_rows

SERVER = {"name": "colour", "type": "string", "label": "Server", "required": True}
BY_SERVER = {"var": "colour", "op": "eq", "value": {"param": "colour"}}


def _spec(
    *phases: dict[str, Any],
    params: list[dict[str, Any]] | None = None,
    schedule: dict[str, Any] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {"schedule": schedule or {"kind": "manual"}, "phases": list(phases)}
    if params is not None:
        out["params"] = params
    return out


def _gated() -> dict[str, Any]:
    return _spec(
        phase(
            "hunt",
            announce({"param": "colour"}),  # type: ignore[arg-type]  # a param reference where text is typed
            advance={"on": "wisps.caught", "where": BY_SERVER, "count": 2},
        ),
        phase("end", announce("done")),
        params=[SERVER, {"name": "rounds", "type": "integer", "label": "Rounds", "default": 3}],
    )


@pytest.fixture(scope="module")
def registry() -> Any:
    """Core, the installed wisps plugin and kit, as the spec tests load them."""
    return _registry(discover=True)


@pytest.fixture
def engine(host_engine: Any) -> Any:
    return host_engine


async def _published(client: Any, tokens: dict[str, str], spec: dict[str, Any], **kw: Any):
    event = await create(client, tokens["admin"], title="Hunt", spec=spec, **kw)
    status, data = await call(client, "POST", f"{EVENTS}/{event['id']}/publish", tokens["admin"])
    assert status == 200, data
    return event


# ── declarations, at save ─────────────────────────────────────────────────────


def test_declarations_are_normalised_and_validate_their_own_output(registry):
    saved = specs.validate(_gated(), registry)
    assert saved["params"] == [
        {"name": "colour", "type": "string", "label": "Server", "required": True},
        {"name": "rounds", "type": "integer", "label": "Rounds", "required": False, "default": 3},
    ]
    assert saved["phases"][0]["steps"][0]["params"]["message"] == {"param": "colour"}
    assert saved["phases"][0]["advance"]["where"] == BY_SERVER
    assert specs.validate(saved, registry) == saved
    # No params: the spec reads as it always did.
    assert "params" not in specs.validate(_spec(phase("p", announce("x"))), registry)


@pytest.mark.parametrize(
    ("params", "where", "message", "error"),
    [
        (
            [{"name": "colour", "type": "text"}],
            None,
            "x",
            'spec.params[0].type: expected one of string, integer, number, boolean; got "text"',
        ),
        (
            [{"name": "rounds", "type": "integer", "default": "three"}],
            None,
            "x",
            'spec.params[0].default: must be an integer; got "three"',
        ),
        (
            [{"name": "colour", "type": "string"}, {"name": "colour", "type": "string"}],
            None,
            "x",
            'spec.params[1].name: "colour" is already the name of spec.params[0]',
        ),
        (
            [{"name": "colour", "type": "string", "option_source": "nobody.servers"}],
            None,
            "x",
            'spec.params[0].option_source: no plugin registers "nobody.servers"',
        ),
        (
            [],
            None,
            {"param": "server"},
            'spec.phases[0].steps[0].params: "message": "server" is not a param of this event; '
            "it declares scope",
        ),
        (
            [{"name": "rounds", "type": "integer"}],
            None,
            {"param": "rounds"},
            'spec.phases[0].steps[0].params: "message": the param "rounds" is integer; '
            "this takes string",
        ),
        (
            [{"name": "colour", "type": "string"}],
            {"var": "colour", "op": "eq", "value": {"param": "server"}},
            "x",
            'spec.phases[0].advance.where.value: "server" is not a param of this event; '
            "it declares colour, scope",
        ),
        (
            [{"name": "rounds", "type": "integer"}],
            {"var": "colour", "op": "eq", "value": {"param": "rounds"}},
            "x",
            'spec.phases[0].advance.where.value: the param "rounds" is integer; '
            "this comparison takes a string",
        ),
        (
            [{"name": "colour", "type": "string"}],
            {"var": "colour", "op": "in", "value": {"param": "colour"}},
            "x",
            'spec.phases[0].advance.where.value: "in" takes a list of values, not a param',
        ),
    ],
    ids=[
        "unknown-type",
        "default-of-wrong-type",
        "duplicate",
        "unknown-option-source",
        "undeclared-in-step",
        "wrong-type-in-step",
        "undeclared-in-condition",
        "wrong-type-in-condition",
        "param-for-in",
    ],
)
def test_a_bad_declaration_or_reference_is_refused_with_its_place(
    registry, params, where, message, error
):
    advance = {"on": "wisps.caught", "where": where} if where is not None else None
    raw = _spec(phase("p", announce(message), advance=advance), params=params)
    with pytest.raises(Invalid) as refused:
        specs.validate(raw, registry)
    assert refused.value.details == [error]


async def test_a_concurrency_key_naming_an_undeclared_param_is_refused_at_publish(client, tokens):
    event = await create(
        client, tokens["admin"], title="Hunt", spec=_gated(), concurrency_key="hunt:{rounds}"
    )
    # The spec saved alone, without the param the key names: left to publish to refuse.
    without_rounds = _gated()
    without_rounds["params"] = [SERVER]
    path = f"{EVENTS}/{event['id']}"
    status, _ = await call(client, "PUT", path, tokens["admin"], {"spec": without_rounds})
    assert status == 200
    status, data = await call(client, "POST", f"{path}/publish", tokens["admin"])
    assert status == 400
    assert data["error"]["details"] == ["concurrency_key: {rounds} names no param of this event"]
    assert (await call(client, "GET", f"{EVENTS}/{event['id']}", tokens["admin"]))[1][
        "current_version"
    ] is None


async def test_a_concurrency_key_naming_an_undeclared_param_is_refused_at_save(client, tokens, db):
    admin = tokens["admin"]
    body = {"title": "Hunt", "spec": _gated(), "concurrency_key": "hunt:{server}"}
    status, data = await call(client, "POST", EVENTS, admin, body)
    assert status == 400
    assert data["error"]["details"] == [
        "body.concurrency_key: {server} names no param of this event"
    ]
    assert (await snapshot(db))["event_definitions"] == []
    # Sent alone, the key is checked against the stored spec; sent with a spec, against it.
    event = await create(client, admin, title="Hunt", spec=_gated())
    path = f"{EVENTS}/{event['id']}"
    status, data = await call(client, "PUT", path, admin, {"concurrency_key": "hunt:{server}"})
    assert status == 400
    assert data["error"]["details"] == [
        "body.concurrency_key: {server} names no param of this event"
    ]
    status, data = await call(client, "PUT", path, admin, {"concurrency_key": "hunt:{colour}"})
    assert (status, data["concurrency_key"]) == (200, "hunt:{colour}")
    with_server = _gated()
    with_server["params"] = [*with_server["params"], {**SERVER, "name": "server"}]
    both = {"spec": with_server, "concurrency_key": "hunt:{server}"}
    status, data = await call(client, "PUT", path, admin, both)
    assert (status, data["concurrency_key"]) == (200, "hunt:{server}")


# ── starting a run with values ────────────────────────────────────────────────


async def test_a_run_starts_with_its_params_and_they_are_written_out(
    client, tokens, host, engine, clock
):
    event = await _published(client, tokens, _gated(), concurrency_key="hunt:{colour}")
    path = f"{EVENTS}/{event['id']}/runs"
    status, run = await call(client, "POST", path, tokens["admin"], {"params": {"colour": "north"}})
    assert status == 201, run
    assert run["params"] == {"colour": "north", "rounds": 3}  # the default filled
    assert run["scope"] == "colour=north,rounds=3"
    assert run["concurrency_key"] == "hunt:north"
    # The same server again is held by the key; another server runs beside it.
    await engine.tick()
    status, held = await call(
        client, "POST", path, tokens["admin"], {"params": {"colour": "north"}}
    )
    assert status == 409 and 'the concurrency key "hunt:north" is held' in held["error"]["message"]
    status, south = await call(
        client, "POST", path, tokens["admin"], {"params": {"colour": "south"}}
    )
    assert status == 201 and south["concurrency_key"] == "hunt:south"
    await engine.tick()

    (announce_step, *_) = await step_rows(host.db, run["id"])
    assert announce_step.params["message"] == "north"
    # Each run's gate counts only its own server's firings.
    assert await host.emit("wisps.caught", {"colour": "south"}) == {
        "gates_matched": 1,
        "gates_closed": 0,
    }
    assert await host.emit("wisps.caught", {"colour": "north"}) == {
        "gates_matched": 1,
        "gates_closed": 0,
    }
    status, view = await call(client, "GET", f"/api/v1/admin/runs/{run['id']}", tokens["admin"])
    assert view["run"]["params"] == {"colour": "north", "rounds": 3}
    assert view["gate"]["condition"] == 'colour eq "north"' and view["gate"]["tally"] == 1
    (created,) = await log_lines(host.db, run["id"], "run.created")
    assert created.detail["params"] == {"colour": "north", "rounds": 3}


@pytest.mark.parametrize(
    ("given", "details"),
    [
        ({}, ["params.colour: required (Server)"]),
        ({"colour": 7}, ["params.colour: must be a string; got 7"]),
        (
            {"colour": "north", "server": "eu-1"},
            ["params.server: not a param of this event (it declares colour, rounds)"],
        ),
    ],
    ids=["missing", "wrong-type", "undeclared"],
)
async def test_bad_params_at_start_are_refused_and_make_no_run(
    client, tokens, host, given, details
):
    event = await _published(client, tokens, _gated())
    path = f"{EVENTS}/{event['id']}/runs"
    status, data = await call(client, "POST", path, tokens["admin"], {"params": given})
    assert (status, data["error"]["details"]) == (400, details)
    status, listed = await call(client, "GET", path, tokens["admin"])
    assert listed["items"] == []


async def test_scope_is_a_param_every_event_has(client, tokens, host, engine):
    spec = _spec(
        phase("p", announce({"param": "scope"})),  # type: ignore[arg-type]  # a param reference where text is typed
    )
    event = await _published(client, tokens, spec, concurrency_key="raid:{scope}")
    path = f"{EVENTS}/{event['id']}/runs"
    status, run = await call(client, "POST", path, tokens["admin"], {"scope": "yew"})
    assert (status, run["scope"], run["concurrency_key"]) == (201, "yew", "raid:yew")
    (only,) = await step_rows(host.db, run["id"])
    assert only.params["message"] == "yew"


# ── a schedule's fan-out ──────────────────────────────────────────────────────


async def test_a_schedule_fans_out_one_run_per_param_set(client, tokens, host, clock):
    sets = [{"colour": "eu-1"}, {"colour": "eu-2"}, {"colour": "na-1"}]
    weekly = {"kind": "weekly", "days": ["friday"], "time": "20:00", "params": sets}
    event = await _published(
        client,
        tokens,
        _spec(phase("p", announce("go")), params=[SERVER], schedule=weekly),
        concurrency_key="friday:{colour}",
    )
    status, listed = await call(client, "GET", f"{EVENTS}/{event['id']}/runs", tokens["admin"])
    runs = listed["items"]
    by_instant: dict[str, list[str]] = {}
    for run in runs:
        by_instant.setdefault(run["scheduled_for"], []).append(run["params"]["colour"])
    assert by_instant and all(sorted(v) == ["eu-1", "eu-2", "na-1"] for v in by_instant.values())
    assert {run["concurrency_key"] for run in runs} == {
        "friday:eu-1",
        "friday:eu-2",
        "friday:na-1",
    }
    # Publishing again without na-1 supersedes na-1's runs and keeps the others.
    weekly["params"] = sets[:2]
    status, data = await call(
        client,
        "PUT",
        f"{EVENTS}/{event['id']}",
        tokens["admin"],
        {"spec": _spec(phase("p", announce("go")), params=[SERVER], schedule=weekly)},
    )
    assert status == 200, data
    status, data = await call(client, "POST", f"{EVENTS}/{event['id']}/publish", tokens["admin"])
    assert status == 200, data
    status, listed = await call(client, "GET", f"{EVENTS}/{event['id']}/runs", tokens["admin"])
    live = {(r["params"]["colour"], r["status"]) for r in listed["items"]}
    assert ("na-1", "scheduled") not in live and ("na-1", "cancelled") in live
    assert ("eu-1", "scheduled") in live and ("eu-2", "scheduled") in live


def test_fan_out_sets_are_checked_like_a_start(registry):
    weekly = {
        "kind": "weekly",
        "days": ["friday"],
        "time": "20:00",
        "params": [{"colour": "eu-1"}, {"colour": "eu-1"}, {"colour": 3}, {}],
    }
    with pytest.raises(Invalid) as refused:
        specs.validate(_spec(phase("p", announce("x")), params=[SERVER], schedule=weekly), registry)
    assert refused.value.details == [
        "spec.schedule.params[1]: the same params as spec.schedule.params[0]",
        "spec.schedule.params[2].colour: must be a string; got 3",
        "spec.schedule.params[3].colour: required (Server)",
    ]


# ── verify and rehearse take params ───────────────────────────────────────────


async def test_verify_and_rehearse_take_params(client, tokens):
    spec = _spec(
        phase("p", announce({"param": "colour"})),  # type: ignore[arg-type]  # a param reference where text is typed
        params=[SERVER],
    )
    event = await _published(client, tokens, spec)
    verify = f"{EVENTS}/{event['id']}/verify"
    status, refused = await call(client, "POST", verify, tokens["admin"])
    assert (status, refused["error"]["details"]) == (400, ["params.colour: required (Server)"])
    status, verified = await call(
        client, "POST", verify, tokens["admin"], {"params": {"colour": "north"}}
    )
    assert status == 200, verified
    assert verified["verified_at"] is not None
    rehearse = f"{EVENTS}/{event['id']}/rehearse"
    status, refused = await call(client, "POST", rehearse, tokens["admin"], {"params": {}})
    assert (status, refused["error"]["details"]) == (400, ["params.colour: required (Server)"])
    status, report = await call(
        client, "POST", rehearse, tokens["admin"], {"params": {"colour": "north"}}
    )
    assert status == 200, report
    assert report["outcome"]["status"] == "completed"


async def test_the_calendar_shows_one_row_per_param_set_with_its_params(client, tokens, clock):
    sets = [{"colour": "eu-1"}, {"colour": "na-1"}]
    weekly = {"kind": "weekly", "days": ["friday"], "time": "20:00", "params": sets}
    event = await _published(
        client, tokens, _spec(phase("p", announce("go")), params=[SERVER], schedule=weekly)
    )
    start = clock.now().isoformat().replace("+00:00", "Z")
    end = (clock.now() + timedelta(days=28)).isoformat().replace("+00:00", "Z")
    window = f"from={start}&to={end}"
    status, found = await call(client, "GET", f"/api/v1/admin/calendar?{window}", tokens["admin"])
    assert status == 200, found
    items = [i for i in found["items"] if i["definition_id"] == event["id"]]
    kinds = {i["kind"] for i in items}
    assert kinds == {"materialised", "projected"}  # rows in the horizon, forecasts past it
    by_instant: dict[str, list[str]] = {}
    for item in items:
        by_instant.setdefault(item["scheduled_for"], []).append(item["params"]["colour"])
    assert all(sorted(v) == ["eu-1", "na-1"] for v in by_instant.values()), by_instant
    status, data = await call(
        client, "PUT", f"{EVENTS}/{event['id']}", tokens["admin"], {"visibility": "public"}
    )
    assert status == 200, data
    status, public = await call(client, "GET", f"/api/v1/public/events?{window}", None)
    assert status == 200, public
    assert {tuple(i["params"].items()) for i in public["items"]} == {
        (("colour", "eu-1"),),
        (("colour", "na-1"),),
    }
