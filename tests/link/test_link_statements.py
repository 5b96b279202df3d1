"""The link's set-wise statements have a few texts, not one a size of their set: SQLite's
driver prepares each text, and every pooled connection keeps what it prepared, so a text a
size (the periodic check over the servers waiting here, a count that moves with every sync)
grew a host holding 1,000 syncs without end. Padded, the statements answer as before. And
a wave of syncs looks through a few of the pool's connections, not one a sync."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import event

from pageant.access.tokens import create_token
from pageant.api.app import make_app
from pageant.db import link as link_rows
from pageant.db.inlists import STEP, padded, padded_length
from pageant.link.service import LOOKS_AT_ONCE, Link
from tests.conftest import bearer
from tests.factories import make_host

SERVERS = [f"w{i}" for i in range(40)]


@pytest.fixture
async def link_host(settings, db, clock) -> Any:
    host = make_host(settings, db, clock, [])
    try:
        yield host
    finally:
        await host.close()


def _statements(db) -> list[tuple[str, Any]]:
    """Every statement run on ``db`` from now on, with its parameters, as sent."""
    seen: list[tuple[str, Any]] = []

    def note(_conn, _cursor, statement, parameters, _context, _many) -> None:
        seen.append((statement, parameters))

    event.listen(db.sync_engine, "before_cursor_execute", note)
    return seen


async def _held(link, count: int) -> None:
    for _ in range(500):
        if link.held >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{link.held} syncs held, not {count}")


async def test_the_periodic_check_has_few_statement_texts_however_many_servers_wait(
    link_host, aiohttp_client, db
):
    client = await aiohttp_client(make_app(link_host, run_engine=False))
    link = link_host.link
    token = await create_token(
        db, role="game", name="agents", now=link_host.clock.now(), servers=SERVERS, owners=[]
    )
    seen = _statements(db)
    syncs: list[asyncio.Task[Any]] = []
    try:
        for count, server in enumerate(SERVERS, start=1):
            url = f"/api/v1/link/{server}/sync"
            syncs.append(
                asyncio.create_task(client.post(url, json={"wait": 10}, headers=bearer(token)))
            )
            await _held(link, count)
            await link._check()  # the periodic check, over the `count` servers waiting
        checks = [(sql, params) for sql, params in seen if "SELECT DISTINCT" in sql]
        # Checked over every count of servers from 1 to 40 (the values are the status, the
        # servers and the instant)...
        assert {len(set(params[1:-1])) for _, params in checks} == set(range(1, 41))
        # ...in 7 texts (1, 2, 4, 8, 16, 32 and 64 values), not 40.
        assert len({sql for sql, _ in checks}) == 7

        # A command queued through another host still wakes its server's sync, and only it.
        await _queued_elsewhere(db, "w7", link_host.clock.now())
        await link._check()
        answer = await asyncio.wait_for(syncs[7], 5)
        assert [c["key"] for c in (await answer.json())["commands"]] == ["k-1"]
        assert not any(sync.done() for sync in syncs[:7] + syncs[8:])
    finally:
        for sync in syncs:
            sync.cancel()
        await asyncio.gather(*syncs, return_exceptions=True)


async def _queued_elsewhere(db, server: str, now: datetime) -> None:
    """A command for ``server`` queued as another host queues one: a row, and no wake here."""
    async with db.begin() as conn:
        await link_rows.insert_command(
            conn,
            {
                "server": server,
                "owner": "bench",
                "command": "ping",
                "key": "k-1",
                "payload": {},
                "status": "queued",
                "deadline": now + timedelta(seconds=30),
                "created_at": now,
            },
        )


@pytest.mark.parametrize(
    ("count", "length"),
    [(0, 0), (1, 1), (2, 2), (3, 4), (5, 8), (513, 1024), (1024, 1024), (1025, 2048)],
)
def test_a_list_is_padded_to_a_power_of_two_then_to_a_multiple_of_the_step(count, length):
    assert padded_length(count) == length
    values = list(range(count))
    out = padded(values)
    assert len(out) == length and out[:count] == values and set(out) == set(values)


def test_a_long_list_is_padded_by_less_than_a_step():
    assert STEP * 5 < padded_length(STEP * 5 + 1) <= STEP * 6


async def test_a_wave_of_syncs_looks_through_a_few_connections_at_once(db, clock, settings):
    link = Link(db, clock, settings)
    held = now = 0

    def checkout(*_: Any) -> None:
        nonlocal held, now
        now += 1
        held = max(held, now)

    def checkin(*_: Any) -> None:
        nonlocal now
        now -= 1

    event.listen(db.sync_engine, "checkout", checkout)
    event.listen(db.sync_engine, "checkin", checkin)
    # Sixty syncs arriving together, each looking once (nothing is due) and waiting nothing.
    answers = await asyncio.gather(*(link.take(f"w{i}", 0) for i in range(60)))
    assert answers == [[]] * 60
    assert 1 <= held <= LOOKS_AT_ONCE
