"""One event on two real OpenArena servers, through the HTTP API alone: the shipped
``frenzy-on-server.json`` is created with ``POST /api/v1/admin/events`` as it is, given a
gravity lease that follows the run's server, published and started once per server with
``POST .../runs``, and watched through ``GET /api/v1/admin/runs/{id}`` while the app's own
engine runs it on the real clock. Each run's bots and gravity land on its own server only,
and each gate counts its own server's frags, though the other server's bots frag beside it.

Nothing here calls the host's internals: what an operator can do over HTTP is what the walk
does (the token is made as ``pageant token create`` makes it). Two real ``ioq3ded``s; without
them it is skipped, and under ``CI`` it fails."""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from pageant_openarena.dedicated import INSTALL, Dedicated, find_engine
from sqlalchemy.ext.asyncio import AsyncEngine

from pageant.access.tokens import create_token
from pageant.api.app import make_app
from pageant.hosting import Host
from pageant.support.clock import SystemClock
from pageant.support.settings import Settings

ON_SERVER = (
    Path(__file__).resolve().parents[2] / "example_plugins/openarena/events/frenzy-on-server.json"
)
ENV = "PAGEANT_PLUGIN_OPENARENA_"
EVENTS = "/api/v1/admin/events"
#: How long the walk may wait for both runs (real seconds): three bots log five frags in 20
#: to 60 s on a quiet machine, slower while other tests share the cores.
PATIENCE_SECONDS = 240
pytestmark = pytest.mark.timeout(2 * PATIENCE_SECONDS + 60)
BOT_ROW = re.compile(r"^\s*\d+\s+-?\d+\s+\d+\s+(\S+)\s+bot\s+\d+\s*$", re.MULTILINE)


def need_engine() -> None:
    """Skip without ``ioq3ded``; under ``CI``, where it is installed, fail instead."""
    if find_engine() is None:
        why = f"ioq3ded (OpenArena's server) is not installed; on Debian: {INSTALL}"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)


async def bots_on(server: Dedicated) -> list[str]:
    return sorted(BOT_ROW.findall(await server.rcon().command("status", idempotent=True)))


async def gravity(server: Dedicated) -> str:
    answer = await server.rcon().command("g_gravity", idempotent=True)
    found = re.search(r'is:"([^"]*)"', answer)
    assert found is not None, answer
    return found[1]


def kills(server: Dedicated) -> int:
    return sum(1 for line in server.log_path.read_text().splitlines() if " Kill: " in line)


class Api:
    """The HTTP API as an operator's script calls it: each call answers its JSON, and a
    status other than the one expected fails the walk with the answer."""

    def __init__(self, client: Any, token: str) -> None:
        self.client = client
        self.headers = {"Authorization": f"Bearer {token}"}

    async def __call__(self, method: str, path: str, body: Any = None, *, status: int = 200):
        response = await self.client.request(method, path, headers=self.headers, json=body)
        answer = await response.json()
        assert response.status == status, (method, path, answer)
        return answer


def ended_and_clean(view: dict[str, Any]) -> bool:
    run = view["run"]
    return run["status"] in ("completed", "failed", "cancelled") and run["cleanup_status"] not in (
        "pending",
        None,
    )


# One database is enough: the engine's storage is proved on both elsewhere; what this proves
# is that the routes alone take one event to two real servers, each run to its own.
@pytest.mark.parametrize("dialect", ["sqlite"], indirect=True)
async def test_the_frenzy_on_server_runs_on_two_real_servers_through_the_api_alone(
    settings: Settings,
    db: AsyncEngine,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    aiohttp_client: Any,
) -> None:
    need_engine()
    for name in list(os.environ):
        if name.startswith(ENV):
            monkeypatch.delenv(name)
    arenas = {"arena1": Dedicated(tmp_path / "one"), "arena2": Dedicated(tmp_path / "two")}
    for server in arenas.values():
        await server.start()
    table = {
        "rcon_password": arenas["arena1"].password,
        "state_dir": str(tmp_path),
        "rcon_timeout_seconds": 2.0,
        "log_poll_seconds": 0.2,
        "servers": [
            {"id": name, "rcon_port": server.port, "log_path": str(server.log_path)}
            for name, server in arenas.items()
        ],
    }
    host = Host(settings.with_plugin_tables({"openarena": table}), clock=SystemClock(), db=db)
    try:
        client = await aiohttp_client(make_app(host, run_engine=True))
        token = await create_token(db, role="admin", name="walk", now=host.clock.now())
        api = Api(client, token)
        await api(
            "PUT",
            "/api/v1/admin/actions/openarena.bots.add",
            {"enabled": True, "caps": {"openarena.bots": 3}},
        )
        await api("PUT", "/api/v1/admin/actions/core.lease", {"enabled": True})

        # The shipped file, as it is.
        event = await api("POST", EVENTS, json.loads(ON_SERVER.read_text()), status=201)
        assert event["warnings"] == []
        # Gravity follows the run's server through a second param: a lease's target is one
        # text (arena2:g_gravity), so the run is given it as its own value.
        spec = event["spec"]
        spec["params"].append({"name": "gravity", "type": "string", "label": "Gravity target"})
        spec["phases"][1]["steps"].insert(
            0,
            {
                "action": "core.lease",
                "params": {
                    "lease": "openarena.cvar",
                    "target": {"param": "gravity"},
                    "value": "300",
                    "minutes": 10,
                },
            },
        )
        path = f"{EVENTS}/{event['id']}"
        await api("PUT", path, {"spec": spec})
        await api("POST", f"{path}/publish")

        def start(name: str) -> Any:
            params = {"server": name, "gravity": f"{name}:g_gravity"}
            return api("POST", f"{path}/runs", {"params": params}, status=201)

        runs = {"arena1": (await start("arena1"))["id"]}

        async def view(name: str) -> dict[str, Any]:
            return await api("GET", f"/api/v1/admin/runs/{runs[name]}")

        async def until(done: Any, what: str) -> None:
            try:
                async with asyncio.timeout(PATIENCE_SECONDS):
                    while not await done():  # noqa: ASYNC110 - the API and the game, polled
                        await asyncio.sleep(0.5)
            except TimeoutError:
                states = {n: (await view(n))["run"] for n in runs}
                where = {n: (r["status"], r["current_phase"]) for n, r in states.items()}
                pytest.fail(f"{what} not within {PATIENCE_SECONDS} s: {where}")

        async def hunting(name: str) -> bool:
            return (await view(name))["run"]["current_phase"] in ("hunt", "wind-down") or (
                ended_and_clean(await view(name))
            )

        # The first run alone: its bots and its gravity are on arena1, and arena2 is untouched.
        await until(lambda: hunting("arena1"), "arena1's run hunting")
        assert len(await bots_on(arenas["arena1"])) == 3
        assert await gravity(arenas["arena1"]) == "300"
        assert (await bots_on(arenas["arena2"]), await gravity(arenas["arena2"])) == ([], "800")

        runs["arena2"] = (await start("arena2"))["id"]
        foreign = dict.fromkeys(arenas, 0)
        seen = {name: kills(server) for name, server in arenas.items()}

        async def both_ended() -> bool:
            nonlocal seen
            views = {name: await view(name) for name in runs}
            logged = {name: kills(server) for name, server in arenas.items()}
            for name, got in views.items():
                if got["run"]["current_phase"] == "hunt":
                    (other,) = set(arenas) - {name}
                    foreign[name] += logged[other] - seen[other]
            seen = logged
            return all(ended_and_clean(got) for got in views.values())

        await until(both_ended, "both runs ended and clean")

        for name in arenas:
            got = await view(name)
            assert got["run"]["status"] == "completed", got["run"]
            assert got["run"]["params"] == {"server": name, "gravity": f"{name}:g_gravity"}
            assert got["run"]["concurrency_key"] == f"frenzy:{name}"
            # The gate counted five frags, every one from its own server's log.
            tallied = [line for line in got["log"] if line["kind"] == "condition.evaluated"]
            assert [line["detail"]["values"] for line in tallied] == [{"server": name}] * 5
            assert {line["detail"]["condition"] for line in tallied} == {f'server eq "{name}"'}
            # Its bots and its lease were on its own server, and were given back there.
            refs = sorted((r["kind"], r["ref"]) for r in got["resources"])
            assert [k for k, _ in refs] == ["openarena.bot"] * 3 + ["openarena.cvar"], refs
            assert all(ref.startswith(f"{name}/") for kind, ref in refs if kind == "openarena.bot")
            assert ("openarena.cvar", f"{name}:g_gravity") in refs
            assert {r["status"] for r in got["resources"]} == {"reverted"}
        assert all(n > 0 for n in foreign.values()), foreign  # each gate had frags to refuse
        for server in arenas.values():
            assert (await bots_on(server), await gravity(server)) == ([], "800")
    finally:
        for record in host.plugins.loaded():
            if record.owner == "openarena":
                await record.plugin.stop()
        for server in arenas.values():
            await server.stop()
