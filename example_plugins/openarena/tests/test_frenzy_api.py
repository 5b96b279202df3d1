"""The Low-Gravity Frenzy's muster through the HTTP API and the real engine, beside another
rcon client on the same address polling ``status`` every half second: authored, published,
started and cancelled over HTTP as an operator would; the three bots are in the game within
ten seconds of the muster's start, once each, the budget meter counts the three the game
took, and the cancel gives everything back."""

# ruff: noqa: F811 - the tests name the imported arena fixture

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from arena_server import arena  # noqa: F401 - a fixture, used by name
from pageant_openarena.dedicated import Dedicated
from test_rcon_pacing import Poller, joined, poller  # noqa: F401 - poller is a fixture

from pageant.testing import Kit

FRENZY = Path(__file__).resolve().parents[1] / "events" / "frenzy.json"
MUSTER_SECONDS = 10.0
BOT = "openarena.bot"
pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def pageant_plugins(arena: Dedicated) -> list[Any]:
    return ["pageant-openarena"]  # from its entry point, pointed at ``arena``


async def tick_until(kit: Kit, client: Any, run_id: int, done: Any, within: float = 60) -> Any:
    """Tick the engine until ``done(run console)``, reading the console over HTTP."""
    for _ in range(int(within / 0.05)):
        await kit.engine.tick()
        view = await (
            await client.get(f"/api/v1/admin/runs/{run_id}", headers=kit.headers())
        ).json()
        if done(view):
            return view
        await asyncio.sleep(0.05)
    pytest.fail(f"run {run_id} did not get there: {view['run']}")


async def test_the_frenzys_bots_join_within_seconds_beside_a_polling_client(
    pageant_kit: Kit, pageant_client: Any, arena: Dedicated, poller: Poller
) -> None:
    client, admin = pageant_client, pageant_kit.headers()
    (record,) = [r for r in pageant_kit.host.plugins.loaded() if r.owner == "openarena"]
    plugin = record.plugin
    for action, body in (
        ("openarena.bots.add", {"enabled": True, "caps": {"openarena.bots": 3}}),
        ("core.lease", {"enabled": True}),
    ):
        answer = await client.put(f"/api/v1/admin/actions/{action}", json=body, headers=admin)
        assert answer.status == 200, await answer.text()
    made = await client.post(
        "/api/v1/admin/events", json=json.loads(FRENZY.read_text()), headers=admin
    )
    assert made.status == 201, await made.text()
    event_id = (await made.json())["id"]
    published = await client.post(f"/api/v1/admin/events/{event_id}/publish", headers=admin)
    assert published.status == 200, await published.text()
    started = await client.post(f"/api/v1/admin/events/{event_id}/runs", json={}, headers=admin)
    assert started.status == 201, await started.text()
    run_id = (await started.json())["id"]
    sent_before = sum(s.rcon.sent for s in plugin.servers.values())
    # From the start: the herald's say, then the muster's lease and bots (an upper bound of
    # the muster's own time, which may begin and end within one tick).
    began = time.monotonic()

    def bots_in(view: dict[str, Any]) -> bool:
        names = {r["ref"].partition("/")[2] for r in view["resources"] if r["kind"] == BOT}
        return len(names) == 3 and names <= set(joined(arena))

    view = await tick_until(pageant_kit, client, run_id, bots_in, within=30)
    took = time.monotonic() - began
    names = {r["ref"].partition("/")[2] for r in view["resources"] if r["kind"] == BOT}

    assert sorted(joined(arena)) == sorted(names)  # three, once each
    assert took <= MUSTER_SECONDS, took
    assert poller.answered > 0
    # The claim is the muster's: the checks below read the server without the poller, whose
    # two requests a second would, after ten seconds, take every slot of the ration.
    poller.stop()
    (meter,) = view["budget"]
    assert (meter["dimension"], meter["consumed"]) == ("openarena.bots", 3)
    assert await plugin.read_cvar("g_gravity") == "300"

    cancelled = await client.post(
        f"/api/v1/admin/runs/{run_id}/cancel", json={"reason": "test over"}, headers=admin
    )
    # The bots may have fragged five times already and ended the run: either way, cleanup.
    assert cancelled.status in (200, 409), await cancelled.text()
    view = await tick_until(
        pageant_kit, client, run_id, lambda v: v["run"]["cleanup_status"] == "complete"
    )
    assert {r["status"] for r in view["resources"]} == {"reverted"}
    assert await plugin.read_cvar("g_gravity") == "800"
    assert {c.name for c in await plugin.servers["main"].clients() if c.bot} == set()
    sent = sum(s.rcon.sent for s in plugin.servers.values()) - sent_before
    print(f"\nmuster to three bots: {took:.1f} s; the run sent {sent} rcon datagrams")
