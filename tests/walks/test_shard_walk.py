"""Walks of a world event on the simulated shard, through the real engine on both databases:
the shard going down mid-phase, a cap breached, a game master changing a leased value
mid-event. The shard plugin is loaded from its installed entry point, and what it holds is
counted in its own world. Each event is authored, published, started, steered and read
through the HTTP API (the real app over the same host); the engine is ticked by hand on an
injected clock. (Killing the host mid-phase is ``test_shard_crash.py``.)"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from pageant.access.tokens import create_token
from pageant.api.app import make_app
from pageant.engine import Engine
from pageant.hosting import Host
from pageant.support.clock import FakeClock
from pageant.support.settings import Settings
from tests.factories import phase, spec, step, wait

ENV = "PAGEANT_PLUGIN_SHARD_"
#: How long a walk may wait (real seconds) for the shard to come back.
PATIENCE_SECONDS = 30


def spawn(creature: str, count: int) -> dict[str, Any]:
    return step("shard.spawn", region="yew", creature=creature, count=count)


@pytest.fixture
def faults(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """Set the shard's own settings for one walk (before the host is built): none leak in
    from the caller's environment."""
    for name in list(os.environ):
        if name.startswith(ENV):
            monkeypatch.delenv(name)

    def set_faults(**values: Any) -> None:
        for name, value in values.items():
            monkeypatch.setenv(ENV + name.upper(), str(value))

    return set_faults


class Api:
    """The admin HTTP API of the walk's host, as an admin's token calls it."""

    def __init__(self, client: Any, token: str) -> None:
        self.client = client
        self.headers = {"Authorization": f"Bearer {token}"}

    async def __call__(self, method: str, path: str, body: Any = None) -> Any:
        response = await self.client.request(
            method, f"/api/v1/admin{path}", json=body, headers=self.headers
        )
        data = await response.json()
        assert response.status < 300, data
        return data


async def serve_api(host: Host, aiohttp_client: Any) -> None:
    """Serve ``host``'s HTTP API (the real app; its engine is the walk's own, ticked by
    hand) and keep an admin's handle on it as ``host.api``."""
    token = await create_token(host.db, role="admin", name="walk", now=host.clock.now())
    client = await aiohttp_client(make_app(host, run_engine=False))
    host.api = Api(client, token)  # type: ignore[attr-defined]  # the walk's own handle


@pytest.fixture
async def walk(
    settings: Settings, db: AsyncEngine, clock: FakeClock, faults: Any, aiohttp_client: Any
) -> AsyncIterator[Any]:
    """Build the host (every installed plugin, through the real loader) and its API once the
    test has set its faults: ``host, engine, shard = await walk()``; ``host.api`` calls it."""
    made: list[tuple[Host, Engine]] = []

    async def build() -> tuple[Host, Engine, Any]:
        host = Host(settings, clock=clock, db=db)
        engine = Engine(host)
        made.append((host, engine))
        await host.start_plugins()
        (record,) = [r for r in host.plugins.loaded() if r.owner == "shard"]
        assert record.distribution == "pageant-shard"
        await serve_api(host, aiohttp_client)
        return host, engine, record.plugin

    yield build
    for host, engine in made:
        for record in host.plugins.loaded():
            if record.owner == "shard":
                await record.plugin.stop()
        await engine.stop()
        await host.close()


async def enable(host: Host, action_id: str, caps: dict[str, int | None] | None = None) -> None:
    body: dict[str, Any] = {"enabled": True}
    if caps is not None:
        body["caps"] = caps
    await host.api("PUT", f"/actions/{action_id}", body)  # type: ignore[attr-defined]  # set by serve_api()


async def publish(host: Host, event: dict[str, Any]) -> int:
    """Create the event (``title``, ``spec`` and any other field of the API's) and publish
    it, through the API; answers its id."""
    api = host.api  # type: ignore[attr-defined]  # set by serve_api()
    created = await api("POST", "/events", {"title": "Walk", **event})
    await api("POST", f"/events/{created['id']}/publish")
    return int(created["id"])


async def start(host: Host, event_spec: dict[str, Any], **params: Any) -> int:
    """Create the event, publish it and start a run now (with ``params``), through the
    API."""
    event_id = await publish(host, {"spec": event_spec})
    run = await host.api("POST", f"/events/{event_id}/runs", {"params": params})  # type: ignore[attr-defined]  # set by serve_api()
    return int(run["id"])


async def console(host: Host, run_id: int) -> dict[str, Any]:
    """The run console, as ``GET /api/v1/admin/runs/{id}`` answers it."""
    return dict(await host.api("GET", f"/runs/{run_id}"))  # type: ignore[attr-defined]  # set by serve_api()


async def tick_until(host: Host, engine: Engine, run_id: int, done: Any, ticks: int = 60) -> Any:
    """Tick (moving the fake clock a few seconds each time) until ``done(console)``."""
    for _ in range(ticks):
        await engine.tick()
        view = await console(host, run_id)
        if done(view):
            return view
        host.clock.advance(5)  # type: ignore[attr-defined]  # a FakeClock, typed as a Clock
    raise AssertionError(f"run {run_id} never got there: {view['run']}")


def ended_and_clean(view: dict[str, Any]) -> bool:
    run = view["run"]
    return run["status"] in ("completed", "failed", "cancelled") and run["cleanup_status"] != (
        "pending"
    )


async def test_the_shard_down_mid_phase_holds_world_writes_and_the_run_completes_after(
    walk: Any, faults: Any
) -> None:
    # Down right after the first spawn, until the test restarts it.
    faults(fault_down_after=1, fault_down_seconds=3600)
    host, engine, shard = await walk()
    await enable(host, "shard.spawn")
    boot = shard.world.boot_id
    run_id = await start(host, spec(phase("muster", spawn("guardian", 3), spawn("wolf", 2))))

    def held(view: dict[str, Any]) -> bool:
        return (view["run"]["waiting_on"] or {}).get("reason") == "unavailable"

    view = await tick_until(host, engine, run_id, held)

    # Degraded and waiting: the second spawn was not tried, nothing failed.
    assert not shard.world.up
    assert view["run"]["health"] == "degraded"
    assert f"shard {boot} is restarting" in view["run"]["waiting_on"]["sentence"]
    first, second = view["steps"]
    assert (first["status"], second["status"], second["attempts"]) == ("done", "pending", 0)
    assert len(shard.world.creatures) == 3

    view = await tick_until(host, engine, run_id, held)  # still held, however long it takes
    assert len(shard.world.creatures) == 3
    shard.simulation.restart_now()
    async with asyncio.timeout(PATIENCE_SECONDS):
        while not shard.world.up:  # noqa: ASYNC110 - the plugin's own clock, not ours
            await asyncio.sleep(0.05)
    assert shard.world.boot_id != boot

    view = await tick_until(host, engine, run_id, ended_and_clean)

    assert view["run"]["status"] == "completed"
    assert [(s["status"], s["attempts"]) for s in view["steps"]] == [("done", 1), ("done", 1)]
    assert view["run"]["cleanup_status"] == "complete"
    assert {r["status"] for r in view["resources"]} == {"reverted"}
    # Counted in the shard's world: each spawn ran once, and everything was taken back.
    assert sorted(len(serials) for serials in shard.world.spawned.values()) == [2, 3]
    assert shard.world.next_serial == 6
    assert shard.world.creatures == {}


async def test_a_spawn_past_the_cap_is_refused_and_says_why(walk: Any, faults: Any) -> None:
    host, engine, shard = await walk()
    await enable(host, "shard.spawn", {"shard.creatures": 5})
    run_id = await start(host, spec(phase("muster", spawn("guardian", 3), spawn("wolf", 3))))

    view = await tick_until(host, engine, run_id, lambda v: v["run"]["status"] == "paused")

    first, second = view["steps"]
    assert (first["status"], second["status"]) == ("done", "refused")
    assert (
        second["last_error"] == 'asks for 3 of "shard.creatures"; 3 of 5 is already spent this run'
    )
    (refused,) = [line for line in view["log"] if line["kind"] == "step.refused"]
    assert refused["detail"]["code"] == "cap"
    assert (refused["detail"]["asked"], refused["detail"]["consumed"]) == (3, 3)
    (meter,) = view["budget"]
    assert (meter["dimension"], meter["consumed"], meter["cap"]) == ("shard.creatures", 3, 5)
    assert len(shard.world.creatures) == 3  # the refused spawn never reached the shard
    assert len(shard.world.spawned) == 1


async def test_a_game_masters_change_to_a_leased_value_is_drifted_and_left_alone(
    walk: Any, faults: Any
) -> None:
    faults(fault_gm_after_seconds=0, fault_gm_value="0.5")
    host, engine, shard = await walk()
    await enable(host, "core.lease")
    lease = step("core.lease", lease="shard.config", target="xp_rate", value="2.0", minutes=30)
    run_id = await start(host, spec(phase("boost", lease, wait(60))))

    view = await tick_until(host, engine, run_id, ended_and_clean)

    assert view["run"]["status"] == "completed"
    (held,) = view["resources"]
    assert (held["kind"], held["ref"], held["status"]) == ("shard.config", "xp_rate", "drifted")
    assert "left alone" in view["cleanup_summary"]
    assert shard.world.config["xp_rate"] == "0.5"  # the game master's value stands
    kinds = [line["kind"] for line in view["log"]]
    assert "resource.drifted" in kinds and "resource.reverted" not in kinds


async def test_without_the_game_master_the_lease_is_put_back(walk: Any, faults: Any) -> None:
    host, engine, shard = await walk()
    await enable(host, "core.lease")
    lease = step("core.lease", lease="shard.config", target="xp_rate", value="2.0", minutes=30)
    run_id = await start(host, spec(phase("boost", lease, wait(60))))

    view = await tick_until(host, engine, run_id, ended_and_clean)

    (held,) = view["resources"]
    assert held["status"] == "reverted"
    assert shard.world.config["xp_rate"] == "1.0"


# ── a slow game and a cancel ──────────────────────────────────────────────────


async def test_a_spawn_the_slow_shard_applies_after_its_revert_makes_nothing(walk, faults):
    # The probe's scenario: the shard makes a spawn 6 s after the request, the step's
    # budget is 1 s, the run is cancelled and cleaned up before the shard gets to it (in
    # about 1.2 s; the 6 s leave a loaded machine room).
    delay = 6
    faults(fault_apply_delay_seconds=delay)
    host, engine, shard = await walk()
    await enable(host, "shard.spawn")
    host.registry.actions["shard.spawn"] = host.registry.actions["shard.spawn"].model_copy(
        update={"budget_ms": 1_000}
    )
    run_id = await start(host, spec(phase("muster", spawn("guardian", 2))))
    loop = asyncio.get_running_loop()
    requested = loop.time()
    await engine.tick()  # the perform times out at 1 s; the step waits for its retry
    (row,) = (await console(host, run_id))["steps"]
    assert (row["status"], row["attempts"]) == ("pending", 1)
    await host.api("POST", f"/runs/{run_id}/cancel", {"reason": "called off"})  # type: ignore[attr-defined]  # set by serve_api()
    await engine.tick()  # cleanup: the placeholder's key is reverted
    view = await console(host, run_id)
    assert (view["run"]["status"], view["run"]["cleanup_status"]) == ("cancelled", "complete")
    assert loop.time() - requested < delay
    # the placeholder recorded for the unanswered spawn is named by the step's key
    (placeholder,) = view["resources"]
    assert (placeholder["kind"], placeholder["status"]) == ("@step", "reverted")
    assert shard.world.is_reverted(placeholder["ref"])
    # The shard now gets to the request it was sent at the start.
    await asyncio.sleep(delay + 0.2 - (loop.time() - requested))
    assert shard.world.creatures == {}
    assert shard.world.spawned == {}
