"""A link plugin's steps in real runs, its agent a FakeAgent syncing over the real route:
a step's command reaches the game once by its key and its answer ends the step; an agent that
disappears makes its plugin's steps wait, spending no attempt, until it syncs again."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import select

from pageant.access.tokens import create_token
from pageant.api.app import make_app
from pageant.db.tables import event_run_resources
from pageant.engine import Engine
from pageant.switchboard import board
from pageant.testing import FakeAgent
from tests.factories import make_host, phase, run_row, spec, start_event, step, step_rows
from tests.fixture_plugins.lighthouse import Lighthouse

LIGHT = spec(phase("p", step("lighthouse.light", server="world-a", colour="red")))


@pytest.fixture
async def lighthouse() -> Lighthouse:
    return Lighthouse()


@pytest.fixture
async def link_host(settings, db, clock, lighthouse) -> Any:
    host = make_host(settings, db, clock, [lighthouse])
    async with host.db.begin() as conn:
        await board.set_action(
            conn,
            host.registry,
            "lighthouse.light",
            enabled=True,
            caps={},
            actor="admin:test",
            now=clock.now(),
        )
    try:
        yield host
    finally:
        await host.close()


@pytest.fixture
async def agent(link_host, aiohttp_client) -> Any:
    client = await aiohttp_client(make_app(link_host, run_engine=False))
    token = await create_token(
        link_host.db,
        role="game",
        name="world-a",
        now=link_host.clock.now(),
        servers=["world-a"],
        owners=["lighthouse"],
    )
    fake = FakeAgent(client, token, "world-a", answers={"light": lambda p: {"id": 5}}, wait=0.5)
    yield fake
    await fake.stop()


@pytest.fixture
async def engine(link_host) -> Any:
    e = Engine(link_host)
    try:
        yield e
    finally:
        await e.stop()


async def test_a_link_step_is_done_by_the_agent_once_and_its_resource_recorded(
    link_host, agent, engine, lighthouse
):
    await agent.start()
    run_id = await start_event(link_host, LIGHT)

    await engine.tick()
    await engine.drain()

    (made,) = await step_rows(link_host.db, run_id)
    assert (made.status, made.attempts) == ("done", 1)
    # Lit once under the step's key; given back at the run's end under the same key.
    key = made.idempotency_key
    assert agent.performed == {("light", key): 1, ("snuff", key): 1}
    assert [c["payload"] for c in agent.received] == [{"colour": "red"}] * 2
    for _ in range(100):  # the give-back runs beside the tick
        async with link_host.db.connect() as conn:
            rows = (await conn.execute(select(event_run_resources))).all()
        if rows[0].status != "confirmed":
            break
        await engine.tick()
        await asyncio.sleep(0.01)
    assert [(r.ref, r.status) for r in rows] == [("5", "reverted")], rows[0].last_error


async def test_an_agent_that_disappears_holds_its_steps_without_spending_attempts(
    link_host, agent, engine, clock
):
    assert (await agent.sync())[0] == 200
    clock.advance(16)  # silent past link_offline_seconds
    await link_host.link.watch_once()
    assert link_host.plugin_unavailable("lighthouse") == "world-a last synced 16 s ago"
    run_id = await start_event(link_host, LIGHT)

    await engine.tick()
    await engine.drain()

    (made,) = await step_rows(link_host.db, run_id)
    assert (made.status, made.attempts) == ("pending", 0)
    run = await run_row(link_host.db, run_id)
    assert run.status == "running"
    assert agent.received == []

    await agent.start()  # it comes back
    for _ in range(200):
        if link_host.plugin_unavailable("lighthouse") is None:
            break
        await engine.tick(drain=False)
        await asyncio.sleep(0.01)
    await engine.tick()
    await engine.drain()

    (made,) = await step_rows(link_host.db, run_id)
    assert (made.status, made.attempts) == ("done", 1)
    assert agent.performed[("light", made.idempotency_key)] == 1
