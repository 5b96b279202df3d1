"""World events on a real OpenArena server: a private ``ioq3ded`` per test, the
pageant-openarena plugin loaded from its entry point, and the real engine on both
databases, each event authored, published and started through the HTTP API (the real app
over the walk's host). The Low-Gravity Frenzy start to finish, and one event with a
``server`` param on two servers at once; then the faults a real server has: it is killed
and comes back empty, an admin changes a leased cvar by hand, the password is wrong.
(Killing pageant itself mid-muster is ``test_openarena_crash.py``.)

Bots fight in real time, so these walks take tens of seconds; without ``ioq3ded`` they are
skipped, and under ``CI`` they fail."""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from pageant_openarena.dedicated import INSTALL, Dedicated, find_engine
from sqlalchemy.ext.asyncio import AsyncEngine

from pageant.engine import Engine
from pageant.hosting import Host
from pageant.support.clock import SystemClock
from pageant.support.settings import Settings
from tests.factories import phase, spec, step, wait
from tests.walks.test_shard_walk import (
    console,
    enable,
    ended_and_clean,
    publish,
    serve_api,
    start,
)

FRENZY = Path(__file__).resolve().parents[2] / "example_plugins/openarena/events/frenzy.json"
ENV = "PAGEANT_PLUGIN_OPENARENA_"
#: How long one wait of a walk may take (real seconds): three bots log five frags in 20 to
#: 60 s on a quiet machine, and slower while the rest of the suite shares the cores (one
#: run of the whole suite on a slow day took more than 150 s).
PATIENCE_SECONDS = 240
# The walks' own waits are the bounds that should trip, naming what they waited for; the suite's
# blanket timeout (pyproject) is shorter than one of them, so it is lifted here to cover the
# longest walk (two such waits) with room to report.
pytestmark = pytest.mark.timeout(2 * PATIENCE_SECONDS + 60)
BOT_ROW = re.compile(r"^\s*\d+\s+-?\d+\s+\d+\s+(\S+)\s+bot\s+\d+\s*$", re.MULTILINE)


def need_engine() -> None:
    """Skip without ``ioq3ded``; under ``CI``, where it is installed, fail instead."""
    if find_engine() is None:
        why = f"ioq3ded (OpenArena's server) is not installed; on Debian: {INSTALL}"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)


@pytest.fixture
async def arena(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Dedicated]:
    """A private server, and the plugin's settings pointing at it."""
    need_engine()
    server = Dedicated(tmp_path / "arena")
    await server.start()
    for name in list(os.environ):
        if name.startswith(ENV):
            monkeypatch.delenv(name)
    for name, value in {
        "rcon_port": server.port,
        "rcon_password": server.password,
        "log_path": server.log_path,
        "state_dir": tmp_path,
        "rcon_timeout_seconds": 2.0,
        "probe_seconds": 2.0,
        "log_poll_seconds": 0.2,
    }.items():
        monkeypatch.setenv(ENV + name.upper(), str(value))
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def walk(
    settings: Settings, db: AsyncEngine, aiohttp_client: Any
) -> AsyncIterator[Callable[..., Any]]:
    """``host, engine, plugin = await walk()``: every installed plugin through the real
    loader, on the real clock (the bots fight in real time), its API served."""
    made: list[tuple[Host, Engine]] = []

    async def build() -> tuple[Host, Engine, Any]:
        host = Host(settings, clock=SystemClock(), db=db)
        engine = Engine(host)
        made.append((host, engine))
        await host.start_plugins()
        await serve_api(host, aiohttp_client)
        (record,) = [r for r in host.plugins.loaded() if r.owner == "openarena"]
        assert record.distribution == "pageant-openarena"
        return host, engine, record.plugin

    yield build
    for host, engine in made:
        for record in host.plugins.loaded():
            if record.owner == "openarena":
                await record.plugin.stop()
        await engine.stop()
        await host.close()


async def run_until(
    host: Host,
    engine: Engine,
    run_id: int,
    done: Any,
    *,
    game: Callable[[], str] = lambda: "",
) -> dict[str, Any]:
    """Tick the engine (a fifth of a second apart, the plugin hearing its log between)
    until ``done(console)``; a wait that runs out says where the run is, and ``game()``
    what the game did meanwhile."""
    view: dict[str, Any] = {}
    try:
        async with asyncio.timeout(PATIENCE_SECONDS):
            while True:
                await engine.tick()
                view = await console(host, run_id)
                if done(view):
                    return view
                await asyncio.sleep(0.2)
    except TimeoutError:
        run = view.get("run", {})
        pytest.fail(
            f"run {run_id} did not get there within {PATIENCE_SECONDS} s: it is"
            f" {run.get('status')} in phase {run.get('current_phase')}{game()}"
        )


def kills(server: Dedicated) -> int:
    """How many frags the server's game log holds so far."""
    return sum(1 for line in server.log_path.read_text().splitlines() if " Kill: " in line)


async def bots_on(server: Dedicated) -> list[str]:
    return sorted(BOT_ROW.findall(await server.rcon().command("status", idempotent=True)))


async def gravity(server: Dedicated) -> str:
    answer = await server.rcon().command("g_gravity", idempotent=True)
    found = re.search(r'is:"([^"]*)"', answer)
    assert found is not None, answer
    return found[1]


def in_phase(key: str) -> Callable[[dict[str, Any]], bool]:
    return lambda view: view["run"]["current_phase"] == key


async def test_the_low_gravity_frenzy_runs_on_a_real_server_and_leaves_it_as_it_found_it(
    walk: Any, arena: Dedicated
) -> None:
    host, engine, _ = await walk()
    await enable(host, "openarena.bots.add", {"openarena.bots": 3})
    await enable(host, "core.lease")
    # The shipped file, as an operator would send it: the API validates and saves it.
    event_id = await publish(host, json.loads(FRENZY.read_text()))
    began = time.monotonic()
    run_id = (await host.api("POST", f"/events/{event_id}/runs", {}))["id"]  # type: ignore[attr-defined]  # set by serve_api()

    await run_until(host, engine, run_id, in_phase("hunt"))
    bots = await bots_on(arena)
    assert len(bots) == 3, bots
    assert await gravity(arena) == "300"

    def logged() -> str:  # read if the wait runs out: did the bots frag at all?
        return f"; the game logged {kills(arena)} kills"

    view = await run_until(host, engine, run_id, ended_and_clean, game=logged)
    took = time.monotonic() - began

    assert view["run"]["status"] == "completed", view["run"]
    assert await bots_on(arena) == []
    assert await gravity(arena) == "800"
    assert view["run"]["cleanup_status"] == "complete"
    assert len(view["resources"]) == 4  # three bots and the lease
    assert {r["status"] for r in view["resources"]} == {"reverted"}
    (meter,) = view["budget"]
    assert (meter["dimension"], meter["consumed"], meter["cap"]) == ("openarena.bots", 3, 3)
    frags = kills(arena)
    assert frags >= 5  # the gate closed on real kills from the game log
    tallied = [line for line in view["log"] if line["kind"] == "condition.evaluated"]
    assert len(tallied) == 5
    # The wind-down named the top fragger: one of the three bots the run added.
    console_text = (arena.folder / "console.txt").read_text()
    said = re.search(r"say The Frenzy is over: (\S+) fragged the most", console_text)
    assert said is not None and said[1] in bots, console_text[-2000:]
    print(f"\nthe Frenzy took {took:.1f} s of wall time; the server logged {frags} kills")


async def test_a_killed_server_holds_the_run_degraded_and_its_return_is_reconciled(
    walk: Any, arena: Dedicated
) -> None:
    host, engine, _ = await walk()
    await enable(host, "openarena.bots.add")
    await enable(host, "core.lease")
    lease = step("core.lease", lease="openarena.cvar", target="g_gravity", value="300", minutes=10)
    run_id = await start(
        host,
        spec(
            phase("muster", lease, step("openarena.bots.add", count=2, skill=1)),
            # The plugin notices a dead server within probe_seconds + rcon_timeout_seconds
            # x (1 + rcon_retries) = 8 s, before the reinforcement is due.
            phase("reinforce", wait(12), step("openarena.bots.add", count=1, skill=1, bot="Tony")),
        ),
    )
    await run_until(host, engine, run_id, in_phase("reinforce"))
    assert len(await bots_on(arena)) == 2
    arena.kill()

    def held(view: dict[str, Any]) -> bool:
        # The console says what the run waits on at once; the engine marks the health when
        # the held step falls due.
        waiting = (view["run"]["waiting_on"] or {}).get("reason")
        return waiting == "unavailable" and view["run"]["health"] == "degraded"

    view = await run_until(host, engine, run_id, held)
    assert "does not answer RCON within 2 s" in view["run"]["waiting_on"]["sentence"]
    reinforce = view["steps"][-1]
    assert (reinforce["status"], reinforce["attempts"]) == ("pending", 0)

    await arena.start()  # back, empty: no bots, gravity 800
    view = await run_until(host, engine, run_id, ended_and_clean)

    assert view["run"]["status"] == "completed"
    statuses = sorted((r["kind"], r["status"]) for r in view["resources"])
    assert statuses == [
        ("openarena.bot", "orphaned"),  # gone with the server: reconciled, never reverted
        ("openarena.bot", "orphaned"),
        ("openarena.bot", "reverted"),  # the reinforcement, added after the return
        ("openarena.cvar", "reverted"),  # 800 again: the restarted server put it back
    ]
    (cvar,) = [r for r in view["resources"] if r["kind"] == "openarena.cvar"]
    assert (cvar["payload"]["restored_by"], cvar["revert_attempts"]) == ("game", 0)
    assert await bots_on(arena) == []
    assert await gravity(arena) == "800"


async def test_an_admins_change_to_the_leased_cvar_is_left_in_place_and_drifted(
    walk: Any, arena: Dedicated
) -> None:
    host, engine, _ = await walk()
    await enable(host, "core.lease")
    lease = step("core.lease", lease="openarena.cvar", target="g_gravity", value="300", minutes=10)
    run_id = await start(host, spec(phase("low", lease, wait(3)), phase("end", wait(1))))
    await run_until(host, engine, run_id, lambda v: v["steps"][0]["status"] == "done")
    assert await gravity(arena) == "300"
    await arena.rcon().command("g_gravity 500", idempotent=True)  # the admin, by hand

    view = await run_until(host, engine, run_id, ended_and_clean)

    (held,) = view["resources"]
    assert (held["kind"], held["ref"], held["status"]) == ("openarena.cvar", "g_gravity", "drifted")
    assert await gravity(arena) == "500"  # their change stands
    kinds = [line["kind"] for line in view["log"]]
    assert "resource.drifted" in kinds and "resource.reverted" not in kinds


async def test_a_wrong_password_fails_the_step_once_naming_the_setting(
    walk: Any, arena: Dedicated, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV + "RCON_PASSWORD", "not-the-password")
    host, engine, _ = await walk()
    await enable(host, "openarena.bots.add")
    run_id = await start(host, spec(phase("muster", step("openarena.bots.add", count=1, skill=1))))

    view = await run_until(host, engine, run_id, lambda v: v["steps"][0]["status"] == "failed")

    (failed,) = view["steps"]
    assert failed["attempts"] == 1
    assert failed["last_error"] == (
        f"the OpenArena server main (127.0.0.1:{arena.port}) refused the rcon password: "
        "check PAGEANT_PLUGIN_OPENARENA_RCON_PASSWORD (rcon_password)"
    )
    assert await bots_on(arena) == []


async def test_two_servers_each_get_the_steps_that_name_them(
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
    one, two = Dedicated(tmp_path / "one"), Dedicated(tmp_path / "two")
    await one.start()
    await two.start()
    table = {
        "rcon_password": one.password,
        "state_dir": str(tmp_path),
        "rcon_timeout_seconds": 2.0,
        "servers": [
            {"id": "arena1", "rcon_port": one.port, "log_path": str(one.log_path)},
            {"id": "arena2", "rcon_port": two.port, "log_path": str(two.log_path)},
        ],
    }
    host = Host(settings.with_plugin_tables({"openarena": table}), clock=SystemClock(), db=db)
    engine = Engine(host)
    try:
        await host.start_plugins()
        await serve_api(host, aiohttp_client)
        await enable(host, "openarena.bots.add")
        await enable(host, "core.lease")
        lease = step(
            "core.lease", lease="openarena.cvar", target="arena2:g_gravity", value="300", minutes=5
        )
        add = step("openarena.bots.add", count=1, skill=1, bot="Tony", server="arena2")
        run_id = await start(host, spec(phase("second", lease, add, wait(2))))
        await run_until(host, engine, run_id, lambda v: v["steps"][1]["status"] == "done")
        assert [n[:5] for n in await bots_on(two)] == ["Tony-"]
        assert (await gravity(two), await bots_on(one), await gravity(one)) == ("300", [], "800")

        view = await run_until(host, engine, run_id, ended_and_clean)

        assert {r["status"] for r in view["resources"]} == {"reverted"}
        refs = {r["kind"]: r["ref"] for r in view["resources"]}
        assert refs["openarena.cvar"] == "arena2:g_gravity"
        assert refs["openarena.bot"].startswith("arena2/Tony-")
        assert (await bots_on(two), await gravity(two)) == ([], "800")
    finally:
        for record in host.plugins.loaded():
            if record.owner == "openarena":
                await record.plugin.stop()
        await engine.stop()
        await host.close()
        await one.stop()
        await two.stop()


FRENZY_ON_SERVER = FRENZY.with_name("frenzy-on-server.json")


# One database is enough here: what this proves is that each run's gate counts only its own
# server's frags, and the walk above already runs the whole Frenzy on both databases.
@pytest.mark.parametrize("dialect", ["sqlite"], indirect=True)
async def test_one_frenzy_runs_on_two_servers_at_once_and_each_gate_counts_its_own_frags(
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
    engine = Engine(host)
    try:
        await host.start_plugins()
        await serve_api(host, aiohttp_client)
        api = host.api  # type: ignore[attr-defined]  # set by serve_api()
        await enable(host, "openarena.bots.add", {"openarena.bots": 3})
        frenzy = json.loads(FRENZY_ON_SERVER.read_text())
        # Both runs come from one occurrence of a schedule that fans out over the servers:
        # once, at the current minute (inside the grace), so the engine's first tick makes
        # and starts them. The shipped file, its schedule so changed, through the API (which
        # checks each {"param": "server"} against the param's declaration), then verified
        # for each server, as a scheduled start needs.
        now = host.clock.now()
        fanned = {
            "kind": "once",
            "at": now.strftime("%Y-%m-%dT%H:%M"),
            "params": [{"server": name} for name in arenas],
        }
        event_id = await publish(host, {**frenzy, "spec": {**frenzy["spec"], "schedule": fanned}})
        for name in arenas:
            await api("POST", f"/events/{event_id}/verify", {"params": {"server": name}})
        await engine.tick()
        made = (await api("GET", f"/events/{event_id}/runs"))["items"]
        runs = {run["params"]["server"]: run["id"] for run in made}
        assert sorted(runs) == sorted(arenas)  # one run per server, from one occurrence

        # Tick both runs until both have ended; while a run hunts, note every frag the
        # other server logs, so the test knows there were foreign frags to refuse.
        foreign = dict.fromkeys(arenas, 0)
        seen = {name: kills(server) for name, server in arenas.items()}
        views: dict[str, dict[str, Any]] = {}
        try:
            async with asyncio.timeout(PATIENCE_SECONDS):
                while not (views and all(ended_and_clean(v) for v in views.values())):
                    await engine.tick()
                    views = {name: await console(host, run_id) for name, run_id in runs.items()}
                    logged = {name: kills(server) for name, server in arenas.items()}
                    for name, view in views.items():
                        if view["run"]["current_phase"] == "hunt":
                            (other,) = set(arenas) - {name}
                            foreign[name] += logged[other] - seen[other]
                    seen = logged
                    await asyncio.sleep(0.2)
        except TimeoutError:
            where = {
                name: (view["run"]["status"], view["run"]["current_phase"], kills(arenas[name]))
                for name, view in views.items()
            }
            pytest.fail(f"not both ended in {PATIENCE_SECONDS} s: (status, phase, kills) {where}")

        for name, view in views.items():
            assert view["run"]["status"] == "completed", view["run"]
            assert view["run"]["params"] == {"server": name}
            assert view["run"]["concurrency_key"] == f"frenzy:{name}"  # side by side
            # The gate counted five frags, every one from its own server's log.
            tallied = [line for line in view["log"] if line["kind"] == "condition.evaluated"]
            assert [line["detail"]["values"] for line in tallied] == [{"server": name}] * 5
            assert {line["detail"]["condition"] for line in tallied} == {f'server eq "{name}"'}
            # The bots went to the run's server and were given back there.
            bots = [r for r in view["resources"] if r["kind"] == "openarena.bot"]
            assert len(bots) == 3 and all(r["ref"].startswith(name + "/") for r in bots), bots
            assert {r["status"] for r in view["resources"]} == {"reverted"}
            (meter,) = view["budget"]
            assert (meter["consumed"], meter["cap"]) == (3, 3)  # each run its own budget
            console_text = (arenas[name].folder / "console.txt").read_text()
            assert "say The Frenzy is over: " in console_text
        assert all(n > 0 for n in foreign.values()), foreign  # each gate had frags to refuse
        assert all(kills(server) >= 5 for server in arenas.values())
        for server in arenas.values():
            assert await bots_on(server) == []
    finally:
        for record in host.plugins.loaded():
            if record.owner == "openarena":
                await record.plugin.stop()
        await engine.stop()
        await host.close()
        for server in arenas.values():
            await server.stop()
