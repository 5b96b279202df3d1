"""Losing the database: /healthz answers 503 with the problem within a bounded time, API calls
answer 503 with Retry-After, and the engine logs one line when the database goes and one when
it is back - never a traceback a stage a tick - with nothing lost."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from pageant.api.app import make_app
from pageant.api.routes.system import DATABASE_ANSWER_SECONDS
from pageant.engine import Engine
from pageant.hosting import Host
from pageant.settings import Settings
from tests.conftest import bearer
from tests.databases import MARIADB_ONLY
from tests.dbproxy import DatabaseProxy


def _loud(caplog: Any) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once it closes


@pytest.fixture
async def proxy() -> AsyncIterator[DatabaseProxy]:
    proxy = DatabaseProxy("127.0.0.1", _closed_port())
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.close()


async def _client(url: str, aiohttp_client: Any, clock: Any) -> Any:
    host = Host(Settings(database_url=url), discover=False, clock=clock)
    return await aiohttp_client(make_app(host, run_engine=False))


@pytest.mark.parametrize("how", ["refused", "black-holed"])
async def test_healthz_and_the_api_answer_503_within_the_bound(
    proxy, aiohttp_client, clock, caplog, how
):
    if how == "refused":
        await proxy.refuse()
        port = _closed_port()
    else:
        await proxy.black_hole()
        port = proxy.port
    client = await _client(
        f"mysql+asyncmy://pageant@127.0.0.1:{port}/pageant", aiohttp_client, clock
    )

    began = time.monotonic()
    answer = await client.get("/healthz")
    took = time.monotonic() - began
    body = await answer.json()
    assert answer.status == 503 and body["status"] == "unhealthy"
    expected = (
        "database: unreachable ("
        if how == "refused"
        else f"database: no answer within {DATABASE_ANSWER_SECONDS:g} s"
    )
    assert body["problems"][0].startswith(expected), body
    assert took < DATABASE_ANSWER_SECONDS + 1
    if how == "black-holed":
        assert took >= DATABASE_ANSWER_SECONDS  # it did wait for the database, that long

    # An API call that needs the database: 503, come back later; a public one likewise.
    for path, headers in (
        ("/api/v1/admin/events", bearer("pgt_any")),
        ("/api/v1/public/events", {}),
    ):
        answer = await client.get(path, headers=headers)
        assert answer.status == 503, await answer.text()
        assert answer.headers["Retry-After"] == "5"
        assert (await answer.json())["error"]["code"] == "database_unavailable"
    assert _loud(caplog) == []


@MARIADB_ONLY
async def test_the_engine_logs_one_line_when_the_database_goes_and_one_when_it_is_back(
    db_url, db, clock, caplog
):
    proxy = DatabaseProxy.before(db_url)
    await proxy.start()
    host = Host(Settings(database_url=proxy.url_of(db_url)), discover=False, clock=clock)
    engine = Engine(host)
    try:
        await engine.tick()
        assert _loud(caplog) == []
        await proxy.refuse()
        for _ in range(3):
            await engine.tick()
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert [r.getMessage().split(" (")[0] for r in errors] == ["the database is unreachable"], [
            r.getMessage() for r in errors
        ]
        assert all(r.exc_info is None for r in caplog.records)
        await proxy.open()
        await engine.tick()
        back = [r.getMessage() for r in caplog.records if "is back" in r.getMessage()]
        assert len(back) == 1 and back[0].startswith("the database is back after ")
        await engine.tick()
        assert len(_loud(caplog)) == 1
    finally:
        await engine.stop()
        await host.close()
        await proxy.close()
