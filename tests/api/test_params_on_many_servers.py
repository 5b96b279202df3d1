"""One event, many servers, through the HTTP API: the shipped ``frenzy-on-server.json``
created, published and started for two servers with the real OpenArena plugin configured
for two (no game is needed until a step is dispatched); ``{"param": ...}`` references
checked at save against the params' declarations, never against the option source's
values; the values a run is given checked against the sources when it starts — by a person
(400) or by a schedule's fan-out at its occurrence (that one run refused, the others go on);
and the save's warning for a gate that counts every server's frags."""

from __future__ import annotations

import copy
import json
import os
import socket
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from pageant.api.app import make_app
from pageant.engine import Engine
from pageant.hosting import Host
from pageant.support.settings import Settings
from tests.api.test_events_api import EVENTS, call

ON_SERVER = (
    Path(__file__).resolve().parents[2] / "example_plugins/openarena/events/frenzy-on-server.json"
)
ENV = "PAGEANT_PLUGIN_OPENARENA_"
SERVERS = "openarena.options.servers"


def frenzy() -> dict[str, Any]:
    """The shipped event, as an operator would POST it."""
    return json.loads(ON_SERVER.read_text())


def free_udp_port() -> int:
    """A port nothing listens on: no game is needed to save, publish or start."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def arena_table(tmp_path: Path, ids: tuple[str, ...]) -> dict[str, Any]:
    return {
        "rcon_password": "secret",
        "state_dir": str(tmp_path),
        "rcon_timeout_seconds": 0.2,
        "rcon_retries": 0,
        "probe_seconds": 300,
        "servers": [{"id": ident, "rcon_port": free_udp_port()} for ident in ids],
    }


@pytest.fixture
async def arenas(
    settings: Settings,
    db: AsyncEngine,
    clock: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    aiohttp_client: Any,
) -> AsyncIterator[Callable[..., Any]]:
    """``client, host = await arenas("arena1", "arena2")``: the real app over a host with
    the OpenArena plugin configured for those servers (a restart with other settings is
    another call, on the same database)."""
    for name in list(os.environ):
        if name.startswith(ENV):
            monkeypatch.delenv(name)
    made: list[Host] = []

    async def build(*ids: str) -> tuple[Any, Host]:
        table = arena_table(tmp_path, ids)
        host = Host(settings.with_plugin_tables({"openarena": table}), clock=clock, db=db)
        made.append(host)
        client = await aiohttp_client(make_app(host, run_engine=False))
        return client, host

    yield build
    # The plugin watches its servers in a task of its own (contract 1.1 has no shutdown
    # hook): stopped here, before the app closes its host.
    for host in made:
        for record in host.plugins.loaded():
            if record.owner == "openarena":
                await record.plugin.stop()


async def _create(client: Any, token: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    return await call(client, "POST", EVENTS, token, body)


async def _publish(client: Any, token: str, event_id: int) -> dict[str, Any]:
    status, data = await call(client, "POST", f"{EVENTS}/{event_id}/publish", token)
    assert status == 200, data
    return data


# ── save: a reference is checked against its declaration ─────────────────────


async def test_the_shipped_frenzy_on_server_is_created_published_and_started_for_two_servers(
    arenas, tokens
):
    client, _ = await arenas("arena1", "arena2")
    admin = tokens["admin"]
    status, event = await _create(client, admin, frenzy())
    assert status == 201, event
    assert event["warnings"] == []
    steps = [s for p in event["spec"]["phases"] for s in p["steps"]]
    assert {json.dumps(s["params"]["server"]) for s in steps} == {'{"param": "server"}'}
    await _publish(client, admin, event["id"])

    runs = {}
    for server in ("arena1", "arena2"):
        status, run = await call(
            client, "POST", f"{EVENTS}/{event['id']}/runs", admin, {"params": {"server": server}}
        )
        assert status == 201, run
        runs[server] = run
    assert {s: (r["params"], r["concurrency_key"]) for s, r in runs.items()} == {
        "arena1": ({"server": "arena1"}, "frenzy:arena1"),
        "arena2": ({"server": "arena2"}, "frenzy:arena2"),
    }
    for server, run in runs.items():
        status, view = await call(client, "GET", f"/api/v1/admin/runs/{run['id']}", admin)
        assert status == 200, view
        (herald,) = view["steps"]
        assert herald["params"]["server"] == server


async def test_a_server_the_settings_do_not_name_refuses_the_start_naming_it(arenas, tokens):
    client, _ = await arenas("arena1", "arena2")
    admin = tokens["admin"]
    status, event = await _create(client, admin, frenzy())
    assert status == 201, event
    await _publish(client, admin, event["id"])
    runs = f"{EVENTS}/{event['id']}/runs"
    status, refused = await call(client, "POST", runs, admin, {"params": {"server": "arena3"}})
    assert status == 400, refused
    assert refused["error"]["details"] == [
        f'params.server: "arena3" is not a value of {SERVERS} (it offers "arena1", "arena2" '
        'now), which the param "server" takes'
    ]
    assert (await call(client, "GET", runs, admin))[1]["items"] == []
    # Either side of the line: a server the settings name starts.
    status, run = await call(client, "POST", runs, admin, {"params": {"server": "arena2"}})
    assert status == 201, run
    # Verify and rehearse take the params a run would have, and check them so.
    for route in ("verify", "rehearse"):
        path = f"{EVENTS}/{event['id']}/{route}"
        status, refused = await call(client, "POST", path, admin, {"params": {"server": "arena3"}})
        assert status == 400, (route, refused)
        assert any('"arena3"' in d or "'arena3'" in d for d in refused["error"]["details"]), refused


def _with_param(declaration: dict[str, Any], *, where: bool = True) -> dict[str, Any]:
    body = frenzy()
    body["spec"]["params"] = [declaration]
    if not where:
        del body["spec"]["phases"][2]["advance"]["where"]
    return body


TAKES_SERVERS = (
    f'takes a value of {SERVERS}; the param "server" names another option source or none, '
    f'and has no default: declare it with "option_source": "{SERVERS}"'
)


@pytest.mark.parametrize(
    ("declaration", "details"),
    [
        (
            {"name": "server", "type": "string", "label": "Server", "required": True},
            [f'spec.phases[{i}].steps[0].params: "server": {TAKES_SERVERS}' for i in range(4)],
        ),
        (
            {"name": "server", "type": "string", "default": "arena9"},
            [
                f"spec.params[0].default: 'arena9' is not a value of {SERVERS}; "
                'expected one of "arena1", "arena2"'
            ],
        ),
        (
            {"name": "server", "type": "integer", "option_source": SERVERS},
            [
                'spec.phases[0].steps[0].params: "server": the param "server" is integer; '
                "this takes string",
                'spec.phases[1].steps[0].params: "server": the param "server" is integer; '
                "this takes string",
                'spec.phases[2].steps[0].params: "server": the param "server" is integer; '
                "this takes string",
                'spec.phases[2].advance.where.value: the param "server" is integer; '
                "this comparison takes a string",
                'spec.phases[3].steps[0].params: "server": the param "server" is integer; '
                "this takes string",
            ],
        ),
        (
            {"name": "arena", "type": "string", "option_source": SERVERS},
            [
                'spec.phases[0].steps[0].params: "server": "server" is not a param of this '
                "event; it declares arena, scope",
                'spec.phases[1].steps[0].params: "server": "server" is not a param of this '
                "event; it declares arena, scope",
                'spec.phases[2].steps[0].params: "server": "server" is not a param of this '
                "event; it declares arena, scope",
                'spec.phases[2].advance.where.value: "server" is not a param of this event; '
                "it declares arena, scope",
                'spec.phases[3].steps[0].params: "server": "server" is not a param of this '
                "event; it declares arena, scope",
            ],
        ),
    ],
    ids=["no-source-no-default", "default-not-a-server", "wrong-type", "undeclared"],
)
async def test_a_reference_that_does_not_fit_its_declaration_is_refused_at_save(
    arenas, tokens, declaration, details
):
    client, _ = await arenas("arena1", "arena2")
    status, data = await _create(client, tokens["admin"], _with_param(declaration))
    assert status == 400, data
    assert data["error"]["details"] == details
    assert (await call(client, "GET", EVENTS, tokens["admin"]))[1]["items"] == []


async def test_a_param_without_the_source_is_taken_on_a_default_that_is_a_server(arenas, tokens):
    client, _ = await arenas("arena1", "arena2")
    admin = tokens["admin"]
    declaration = {"name": "server", "type": "string", "default": "arena2"}
    status, event = await _create(client, admin, _with_param(declaration))
    assert status == 201, event
    await _publish(client, admin, event["id"])
    runs = f"{EVENTS}/{event['id']}/runs"
    # The default is a server; a value given at start is checked against the steps' source.
    status, refused = await call(client, "POST", runs, admin, {"params": {"server": "arena7"}})
    assert status == 400 and refused["error"]["details"] == [
        f'params.server: "arena7" is not a value of {SERVERS} (it offers "arena1", "arena2" '
        "now), which spec.phases[0].steps[0].params.server takes"
    ]
    status, run = await call(client, "POST", runs, admin)
    assert (status, run["params"]) == (201, {"server": "arena2"})


async def test_a_fan_out_naming_a_server_the_settings_do_not_is_refused_at_save(arenas, tokens):
    client, _ = await arenas("arena1", "arena2")
    body = frenzy()
    body["spec"]["schedule"] = {
        "kind": "weekly",
        "days": ["friday"],
        "time": "20:00",
        "params": [{"server": "arena1"}, {"server": "arena9"}],
    }
    status, data = await _create(client, tokens["admin"], body)
    assert status == 400, data
    assert data["error"]["details"] == [
        f"spec.schedule.params[1].server: 'arena9' is not a value of {SERVERS}; "
        'expected one of "arena1", "arena2"'
    ]


# ── save: the warning for a gate that counts every server ────────────────────

WARNING_ID = "gate-unscoped:hunt:server"


async def test_a_frag_gate_without_where_server_is_warned_of_until_acknowledged(arenas, tokens):
    client, _ = await arenas("arena1", "arena2")
    admin = tokens["admin"]
    body = frenzy()
    del body["spec"]["phases"][2]["advance"]["where"]
    status, event = await _create(client, admin, body)
    assert status == 201, event  # a warning never refuses the save
    assert event["warnings"] == [
        {
            "id": WARNING_ID,
            "path": "spec.phases[2].advance",
            "message": "spec.phases[2].advance: this gate counts openarena.frag from every "
            'server: the steps take the server the run\'s param "server" chooses, and the '
            'gate\'s where does not name "server"; add '
            '{"var": "server", "op": "eq", "value": {"param": "server"}} to count only the '
            f'run\'s own, or acknowledge "{WARNING_ID}"',
        }
    ]
    path = f"{EVENTS}/{event['id']}"
    # Every read of the event says it too, and publishing is not refused by it.
    assert [w["id"] for w in (await call(client, "GET", path, admin))[1]["warnings"]] == [
        WARNING_ID
    ]
    assert (await _publish(client, admin, event["id"]))["warnings"][0]["id"] == WARNING_ID
    acknowledged = copy.deepcopy(event["spec"])
    acknowledged["acknowledge"] = [WARNING_ID]
    status, saved = await call(client, "PUT", path, admin, {"spec": acknowledged})
    assert status == 200, saved
    assert (saved["warnings"], saved["spec"]["acknowledge"]) == ([], [WARNING_ID])
    # Acknowledging another gate's warning does not silence this one.
    acknowledged["acknowledge"] = ["gate-unscoped:muster:server"]
    status, saved = await call(client, "PUT", path, admin, {"spec": acknowledged})
    assert [w["id"] for w in saved["warnings"]] == [WARNING_ID]


async def test_the_warning_follows_a_param_of_another_name_through_the_steps(arenas, tokens):
    """A param ``arena`` that the steps take as ``server``: the frag's ``server`` stands for
    it, so the gate without ``where server`` is warned of all the same."""
    client, _ = await arenas("arena1", "arena2")
    body = json.loads(json.dumps(frenzy()).replace('{"param": "server"}', '{"param": "arena"}'))
    body["spec"]["params"][0]["name"] = "arena"
    body["concurrency_key"] = "frenzy:{arena}"
    del body["spec"]["phases"][2]["advance"]["where"]
    status, event = await _create(client, tokens["admin"], body)
    assert status == 201, event
    assert [w["id"] for w in event["warnings"]] == [WARNING_ID]
    assert 'the run\'s param "arena" chooses' in event["warnings"][0]["message"]
    # With the gate scoped to the run's server, nothing to warn of.
    body["spec"]["phases"][2]["advance"]["where"] = {
        "var": "server",
        "op": "eq",
        "value": {"param": "arena"},
    }
    status, saved = await call(
        client, "PUT", f"{EVENTS}/{event['id']}", tokens["admin"], {"spec": body["spec"]}
    )
    assert (status, saved["warnings"]) == (200, [])


async def test_an_acknowledgement_that_is_not_a_list_of_ids_is_refused(arenas, tokens):
    client, _ = await arenas("arena1", "arena2")
    body = frenzy()
    body["spec"]["acknowledge"] = ["", 7]
    status, data = await _create(client, tokens["admin"], body)
    assert status == 400
    assert data["error"]["details"] == [
        'spec.acknowledge[0]: expected a warning id such as "gate-unscoped:hunt:server"; got ""',
        'spec.acknowledge[1]: expected a warning id such as "gate-unscoped:hunt:server"; got 7',
    ]


# ── a schedule's fan-out, at its occurrence ──────────────────────────────────


async def _fanned_out(client: Any, admin: str, *, keyed: bool = True) -> str:
    """The Frenzy on a schedule that fans out over both servers once, at 13:00 (an hour
    after the test clock's now), published and verified: answers its runs' path. Without
    its concurrency key (``keyed`` false) its runs are due together as plain starts, which
    the engine would claim set-wise."""
    body = frenzy()
    if not keyed:
        del body["concurrency_key"]
    body["spec"]["schedule"] = {
        "kind": "once",
        "at": "2027-03-01T13:00",
        "params": [{"server": "arena1"}, {"server": "arena2"}],
    }
    status, event = await _create(client, admin, body)
    assert status == 201, event
    status, data = await call(
        client, "PUT", "/api/v1/admin/actions/openarena.bots.add", admin, {"enabled": True}
    )
    assert status == 200, data
    await _publish(client, admin, event["id"])
    status, verified = await call(
        client,
        "POST",
        f"{EVENTS}/{event['id']}/verify",
        admin,
        {"params": {"server": "arena1"}},
    )
    assert status == 200, verified
    runs = f"{EVENTS}/{event['id']}/runs"
    listed = (await call(client, "GET", runs, admin))[1]["items"]
    assert sorted((r["params"]["server"], r["status"]) for r in listed) == [
        ("arena1", "scheduled"),
        ("arena2", "scheduled"),
    ]
    return runs


async def _tick_at_the_occurrence(host: Host, clock: Any) -> None:
    engine = Engine(host)
    try:
        clock.set(datetime(2027, 3, 1, 13, 0, tzinfo=UTC))
        await engine.tick()
    finally:
        await engine.stop()


async def test_a_fan_out_fires_a_run_per_server_at_its_occurrence_each_with_its_server(
    arenas, tokens, clock
):
    client, host = await arenas("arena1", "arena2")
    admin = tokens["admin"]
    runs = await _fanned_out(client, admin)
    await _tick_at_the_occurrence(host, clock)
    listed = (await call(client, "GET", runs, admin))[1]["items"]
    assert sorted((r["params"]["server"], r["status"]) for r in listed) == [
        ("arena1", "running"),
        ("arena2", "running"),
    ]
    for run in listed:
        status, view = await call(client, "GET", f"/api/v1/admin/runs/{run['id']}", admin)
        assert status == 200, view
        # Every step it has made so far targets its own server, written out.
        assert view["steps"] and {s["params"]["server"] for s in view["steps"]} == {
            run["params"]["server"]
        }


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "claimed-together"])
async def test_a_fan_out_fires_a_run_per_server_and_a_removed_server_refuses_only_its_own(
    arenas, tokens, clock, keyed
):
    client, _ = await arenas("arena1", "arena2")
    admin = tokens["admin"]
    runs = await _fanned_out(client, admin, keyed=keyed)

    # The operator takes arena2 out of the settings and restarts pageant.
    client, host = await arenas("arena1")
    await _tick_at_the_occurrence(host, clock)
    listed = (await call(client, "GET", runs, admin))[1]["items"]
    by_server = {r["params"]["server"]: r for r in listed}
    assert by_server["arena1"]["status"] in ("starting", "running"), by_server["arena1"]
    refused = by_server["arena2"]
    because = (
        f'not started: params.server: "arena2" is not a value of {SERVERS} (it offers '
        '"arena1" now), which the param "server" takes'
    )
    assert (refused["status"], refused["last_error"]) == ("failed", because)
    status, view = await call(client, "GET", f"/api/v1/admin/runs/{refused['id']}", admin)
    assert status == 200, view
    assert [s["status"] for s in view["steps"]] == ["cancelled"]
    (line,) = [entry for entry in view["log"] if entry["kind"] == "run.status"]
    assert line["detail"] == {
        "from": "scheduled",
        "to": "failed",
        "because": because,
        "cancelled_steps": 1,
    }
    # The calendar shows each server's occurrence as it went.
    window = "from=2027-03-01T00:00:00Z&to=2027-03-02T00:00:00Z"
    status, found = await call(client, "GET", f"/api/v1/admin/calendar?{window}", admin)
    assert status == 200, found
    assert sorted((i["params"]["server"], i["status"]) for i in found["items"]) == [
        ("arena1", by_server["arena1"]["status"]),
        ("arena2", "failed"),
    ]
