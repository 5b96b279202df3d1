"""A ``kill -9`` of a real ``pageant serve`` in the middle of game traffic loses no firing it
acknowledged, and counts none twice: every keyed firing is sent again to a restarted host,
and each gate's tally then equals the distinct firings sent for its server."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from sqlalchemy import select

from pageant.db.tables import event_run_phase_gates
from tests.conftest import FIGURES
from tests.databases import empty_database
from tests.engine.test_processes import _prepare, _sync, read
from tests.processes import Serve, until

SERVERS = ("eu-1", "eu-2", "na-1", "na-2")
FIRINGS = 800
KILL_AFTER = 250
SENDERS = 8
SPEC = {
    "params": [{"name": "colour", "type": "string", "label": "Server", "required": True}],
    "schedule": {"kind": "manual"},
    "phases": [
        {
            "key": "hunt",
            "label": "Hunt",
            "steps": [],
            "advance": {
                "on": "wisps.caught",
                "where": {"var": "colour", "op": "eq", "value": {"param": "colour"}},
                "count": 1000,
            },
        }
    ],
}


@pytest.fixture
def database(dialect: str, tmp_path: Path) -> Iterator[str]:
    with empty_database(dialect, tmp_path) as url:
        yield url


@pytest.fixture
def hosts() -> Iterator[list[Serve]]:
    started: list[Serve] = []
    try:
        yield started
    finally:
        for serve in started:
            serve.kill()


async def _call(session: Any, base: str, method: str, path: str, token: str, body: Any) -> Any:
    headers = {"Authorization": f"Bearer {token}"}
    async with session.request(method, base + path, json=body, headers=headers) as response:
        return response.status, await response.json()


async def _seed(base: str, token: str) -> dict[str, int]:
    async with aiohttp.ClientSession() as session:
        status, event = await _call(
            session, base, "POST", "/api/v1/admin/events", token, {"title": "Hunt", "spec": SPEC}
        )
        assert status == 201, event
        events = f"/api/v1/admin/events/{event['id']}"
        status, data = await _call(session, base, "POST", f"{events}/publish", token, None)
        assert status == 200, data
        runs = {}
        for server in SERVERS:
            body = {"params": {"colour": server}}
            status, run = await _call(session, base, "POST", f"{events}/runs", token, body)
            assert status == 201, run
            runs[server] = run["id"]
    return runs


def _firing(i: int) -> tuple[str, str]:
    return f"k{i}", SERVERS[(i * 3) % len(SERVERS)]


async def _load(base: str, game: str, serve: Serve) -> tuple[Counter[str], int]:
    """SENDERS concurrent senders of keyed firings; the host is killed once KILL_AFTER are
    acknowledged. Answers the acknowledged firings per server and how many were sent."""
    acked: Counter[str] = Counter()
    sent = 0
    queue = list(range(FIRINGS))
    headers = {"Authorization": f"Bearer {game}"}

    async def sender(session: aiohttp.ClientSession) -> None:
        nonlocal sent
        while queue:
            key, server = _firing(queue.pop(0))
            sent += 1
            try:
                async with session.post(
                    f"{base}/api/v1/triggers/wisps.caught/fire",
                    json={"colour": server},
                    headers={**headers, "Idempotency-Key": key},
                ) as response:
                    if response.status == 200:
                        await response.json()
                        acked[server] += 1
            except (TimeoutError, aiohttp.ClientError):
                return  # the host is gone
            if sum(acked.values()) >= KILL_AFTER and serve.process.poll() is None:
                serve.kill()

    timeout = aiohttp.ClientTimeout(total=10)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        await asyncio.gather(*(sender(session) for _ in range(SENDERS)))
    return acked, sent


async def _resend(base: str, game: str, sent: int) -> None:
    async with aiohttp.ClientSession() as session:
        for start in range(0, sent, 100):
            batch = []
            for i in range(start, min(sent, start + 100)):
                key, server = _firing(i)
                batch.append({"trigger": "wisps.caught", "payload": {"colour": server}, "id": key})
            status, answers = await _call(
                session, base, "POST", "/api/v1/triggers/fire", game, batch
            )
            assert status == 200 and {a["status"] for a in answers} == {200}, answers


def _tallies(database: str, runs: dict[str, int]) -> dict[str, int]:
    g = event_run_phase_gates.c
    found = {row.run_id: row.tally for row in read(database, select(g.run_id, g.tally))}
    return {server: found.get(run_id, -1) for server, run_id in runs.items()}


def test_a_kill_9_under_load_loses_no_acknowledged_firing_and_a_resend_counts_once(
    request, database, tmp_path, hosts
) -> None:
    admin = _sync(_prepare(database))
    game = _sync(_game_token(database))
    settings = {"poll_seconds": 1}
    hosts.append(Serve(database, tmp_path / "first.log", **settings))
    runs = _sync(_seed(hosts[0].base, admin))
    assert until(lambda: min(_tallies(database, runs).values()) == 0, timeout=30), (
        "the runs never opened their gates"
    )
    acked, sent = _sync(_load(hosts[0].base, game, hosts[0]))
    assert hosts[0].process.poll() is not None, "the kill came after the load (proves nothing)"
    assert sent < FIRINGS or sum(acked.values()) < FIRINGS
    after_kill = _tallies(database, runs)
    for server in SERVERS:
        assert after_kill[server] >= acked[server], (server, after_kill, acked)

    hosts.append(Serve(database, tmp_path / "second.log", **settings))
    _sync(_resend(hosts[1].base, game, sent))
    expected = Counter(_firing(i)[1] for i in range(sent))
    assert _tallies(database, runs) == dict(expected)
    FIGURES.append(
        f"{request.node.name}: {sent} firings sent, {sum(acked.values())} acknowledged before "
        f"the kill, {sum(after_kill.values())} counted at the kill; after the resend "
        f"{sum(expected.values())} counted, each once"
    )


async def _game_token(url: str) -> str:
    from datetime import UTC, datetime

    from pageant.access.tokens import create_token
    from pageant.db.engine import create_engine

    engine = create_engine(url)
    try:
        return await create_token(engine, role="game", name="arena", now=datetime.now(UTC))
    finally:
        await engine.dispose()
