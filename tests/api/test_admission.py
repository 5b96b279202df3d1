"""The host answers at most ``http_concurrency`` requests at once through the real app; the
rest wait their turn, and an operator's probes never wait."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp import web
from sqlalchemy.ext.asyncio import AsyncEngine

from pageant.api.app import make_app
from pageant.hosting import Host
from pageant.support.clock import FakeClock
from pageant.support.settings import Settings
from tests.conftest import bearer

#: Admission is the app's own, before any database: one dialect shows it.
SQLITE = pytest.mark.parametrize("dialect", ["sqlite"], indirect=True)


class Gate:
    """A route that holds every request until released, counting how many it holds."""

    def __init__(self) -> None:
        self.inside = 0
        self.most = 0
        self.release = asyncio.Event()
        self.entered = asyncio.Event()

    async def handler(self, _request: web.Request) -> web.Response:
        self.inside += 1
        self.most = max(self.most, self.inside)
        self.entered.set()
        try:
            await self.release.wait()
        finally:
            self.inside -= 1
        return web.json_response({"ok": True})


async def gated_client(
    settings: Settings, db: AsyncEngine, clock: FakeClock, aiohttp_client: Any, limit: int
) -> tuple[Any, Gate, Host]:
    host = Host(settings.model_copy(update={"http_concurrency": limit}), clock=clock, db=db)
    app = make_app(host, run_engine=False)
    gate = Gate()
    app.router.add_get("/api/v1/admin/held", gate.handler)
    return await aiohttp_client(app), gate, host


@SQLITE
async def test_requests_past_the_limit_wait_their_turn_and_all_are_answered(
    settings, db, clock, aiohttp_client
):
    client, gate, host = await gated_client(settings, db, clock, aiohttp_client, limit=2)
    try:
        calls = [asyncio.create_task(client.get("/api/v1/admin/held")) for _ in range(5)]
        await gate.entered.wait()
        for _ in range(20):  # let every request reach the server
            await asyncio.sleep(0)
        await asyncio.sleep(0.05)
        assert gate.inside == 2  # the other three wait at admission
        gate.release.set()
        responses = await asyncio.gather(*calls)
        assert [r.status for r in responses] == [200] * 5
        assert gate.most == 2
    finally:
        gate.release.set()
        await host.close()


@SQLITE
async def test_health_and_metrics_answer_while_every_slot_is_taken(
    settings, db, clock, aiohttp_client, tokens
):
    client, gate, host = await gated_client(settings, db, clock, aiohttp_client, limit=1)
    try:
        held = asyncio.create_task(client.get("/api/v1/admin/held"))
        await gate.entered.wait()
        health = await asyncio.wait_for(client.get("/healthz"), 5)
        assert health.status == 200
        metrics = await asyncio.wait_for(client.get("/metrics", headers=bearer(tokens["admin"])), 5)
        assert metrics.status == 200
        # A request that waits a slot does wait: it is not answered while the slot is held.
        waiting = asyncio.create_task(client.get("/api/v1/admin/plugins"))
        await asyncio.sleep(0.1)
        assert not waiting.done()
        gate.release.set()
        assert (await held).status == 200
        assert (await asyncio.wait_for(waiting, 5)).status == 401  # no token: its own answer
    finally:
        gate.release.set()
        await host.close()


#: Each admission and readers' setting, with values out of its bounds and its bounds.
BOUNDED = {
    "http_concurrency": ([0, -1, 1001, "many"], [1, 1000]),
    "read_concurrency": ([0, -1, 1001, "many"], [1, 1000]),
    "console_max_age_ms": ([-1, 60_001, "soon", 1.5], [0, 60_000]),
    "console_reads_per_second": ([-1, 100_001, "fast", 2.5], [0, 100_000]),
}


@pytest.mark.parametrize(
    ("name", "bad"), [(name, bad) for name, (bads, _) in BOUNDED.items() for bad in bads]
)
def test_a_bad_admission_setting_is_refused_by_name(name, bad):
    from pageant.errors import Invalid
    from pageant.support.settings import load_settings

    with pytest.raises(Invalid) as caught:
        load_settings(flags={name: bad}, environ={})
    assert name in str(caught.value.details) + caught.value.message


@pytest.mark.parametrize(
    ("name", "edge"), [(name, edge) for name, (_, edges) in BOUNDED.items() for edge in edges]
)
def test_an_admission_settings_bounds_are_accepted(name, edge):
    from pageant.support.settings import load_settings

    loaded = load_settings(flags={}, environ={f"PAGEANT_{name.upper()}": str(edge)})
    assert getattr(loaded, name) == edge
