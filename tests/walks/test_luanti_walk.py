"""World events on a real Luanti server through the game link: a private ``minetestserver``
with the ``pageant_bridge`` mod syncing with a real ``pageant serve`` (the pageant-luanti
plugin loaded from its entry point), each event published and started through the HTTP API.

Beacon Night start to finish; then the faults a game that calls out has: the world is
stopped with beacons out and the run cancelled while it is down; pageant is ``kill -9``ed
holding a one-minute lease; 500 digs happen while pageant restarts; an admin changes the
leased setting by hand.

Happenings are made on the server side through the mod's test channel
(:mod:`tests.walks.luanti_world`): every dig is a real node placed and dug with
``minetest.dig_node()``; beacons are counted by walking the world's loaded entities. Without
``minetestserver`` these walks are skipped, and under ``CI`` they fail.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_cli import pageant
from tests.databases import empty_database
from tests.processes import Serve, api_call
from tests.walks.luanti_world import GROUND, World, free_port, need_server

EVENT = Path(__file__).resolve().parents[2] / "example_plugins/luanti/events/beacon-night.json"
PLACES = "altar=0,9,0;chest=6,9,0"
#: How long one wait of a walk may take (real seconds), on a machine the suite shares.
PATIENCE_SECONDS = 120
pytestmark = pytest.mark.timeout(4 * PATIENCE_SECONDS)
DIRT = {"node": "default:dirt", "y": GROUND + 1}


@pytest.fixture
def migrated(dialect: str, tmp_path: Path) -> Iterator[str]:
    need_server()
    with empty_database(dialect, tmp_path) as url:
        result = pageant("db", "upgrade", "--database-url", url)
        assert result.exit_code == 0, result.output
        yield url


def token(url: str, *args: str) -> str:
    result = pageant("token", "create", *args, env={"PAGEANT_DATABASE_URL": url})
    assert result.exit_code == 0, result.output
    return result.output.strip().splitlines()[-1]


class Stage:
    """A database, an admin token, one ``pageant serve`` on a fixed port (a restart keeps
    the URL the world syncs with) and one world syncing with it."""

    def __init__(self, url: str, tmp_path: Path) -> None:
        self.url, self.tmp_path = url, tmp_path
        self.port = free_port(socket.SOCK_STREAM)
        self.admin = token(url, "--role", "admin", "--name", "walk")
        game = token(
            url, "--role", "game", "--name", "world", "--server", "world", "--owner", "luanti"
        )
        self.serves: list[Serve] = []
        self.world = World(tmp_path / "luanti", f"http://127.0.0.1:{self.port}", "world", game)

    def serve(self) -> Serve:
        host = Serve(
            self.url,
            self.tmp_path / f"serve-{len(self.serves)}.log",
            port=self.port,
            poll_seconds=0.2,
            step_lease_margin_seconds=1,
            run_lease_seconds=2,
            link_offline_seconds=5,
            plugin_luanti_places=PLACES,
        )
        self.serves.append(host)
        return host

    @property
    def base(self) -> str:
        return self.serves[-1].base

    def api(self, method: str, path: str, body: Any = None) -> Any:
        return api_call(self.base, method, path, self.admin, body)

    def start(self, event: dict[str, Any]) -> int:
        for action in ("luanti.spawn", "luanti.give", "core.lease"):
            self.api("PUT", f"/api/v1/admin/actions/{action}", {"enabled": True})
        made = self.api("POST", "/api/v1/admin/events", event)
        self.api("POST", f"/api/v1/admin/events/{made['id']}/publish")
        return int(self.api("POST", f"/api/v1/admin/events/{made['id']}/runs")["id"])

    def run(self, run_id: int) -> dict[str, Any]:
        return self.api("GET", f"/api/v1/admin/runs/{run_id}")

    def link(self) -> dict[str, Any]:
        (plugin,) = [
            p for p in self.api("GET", "/api/v1/admin/plugins")["items"] if p["owner"] == "luanti"
        ]
        return plugin["link"]

    def close(self) -> None:
        for host in self.serves:
            host.kill()
        self.world.stop()


@pytest.fixture
def stage(migrated: str, tmp_path: Path) -> Iterator[Stage]:
    made = Stage(migrated, tmp_path)
    try:
        yield made
    finally:
        made.close()


def until(what: str, condition: Callable[[], Any], timeout: float = PATIENCE_SECONDS) -> Any:
    """Poll ``condition`` until it answers something true; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.2)
    pytest.fail(f"{what} did not happen within {timeout} s")


def beacon_night() -> dict[str, Any]:
    return json.loads(EVENT.read_text())


def diamonds(world: World) -> int:
    return int(world.ask("chest", x=6, y=9, z=0)["items"].get("default:diamond", 0))


def test_beacon_night_on_a_real_world_lights_three_beacons_and_gives_everything_back(
    stage: Stage,
) -> None:
    stage.serve()
    world = stage.world
    world.start()
    began = time.monotonic()
    run_id = stage.start(beacon_night())

    until(
        "three beacons and time_speed 720",
        lambda: len(world.beacons()) == 3 and world.setting("time_speed") == "720",
    )
    beacons = world.beacons()
    until("the dig phase", lambda: stage.run(run_id)["run"]["current_phase"] == "dig")
    world.ask("dig", x=20, z=20, node="default:stone", y=GROUND + 1)  # not dirt: not counted
    world.ask("dig", x=21, z=20, **DIRT)
    assert stage.run(run_id)["run"]["current_phase"] == "dig"
    world.ask("dig", x=22, z=20, **DIRT)
    until("the reward in the chest", lambda: diamonds(world) == 3)
    assert world.beacons() == beacons  # lit all night: their blocks stay loaded
    view = until(
        "the run's end and its cleanup",
        lambda: (v := stage.run(run_id))["run"]["cleanup_status"] == "complete" and v,
    )
    wall = time.monotonic() - began

    assert view["run"]["status"] == "completed"
    assert world.beacons() == []
    assert world.setting("time_speed") == "72"
    assert diamonds(world) == 0
    held = sorted((r["kind"], r["status"]) for r in view["resources"])
    assert held == sorted(
        [("luanti.entity", "reverted")] * 3
        + [("luanti.item", "reverted"), ("luanti.setting", "reverted")]
    ), held
    assert (
        sorted(
            r["ref"].partition("/")[2] for r in view["resources"] if r["kind"] == "luanti.entity"
        )
        == beacons
    )
    print(f"Beacon Night on a real world: {wall:.1f} s")
