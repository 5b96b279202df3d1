"""Losing the database: /healthz answers 503 with the problem within a bounded time, API calls
answer 503 with Retry-After, and the engine logs one line when the database goes and one when
it is back - never a traceback a stage a tick - with nothing lost."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import pytest

from pageant.api.app import make_app
from pageant.api.routes.system import DATABASE_ANSWER_SECONDS
from pageant.engine import Engine
from pageant.hosting import Host
from pageant.support.settings import Settings
from tests.conftest import FIGURES, bearer
from tests.databases import MARIADB_ONLY, empty_database
from tests.dbproxy import DatabaseProxy, ThreadedProxy
from tests.engine.test_processes import _prepare
from tests.processes import Serve, until


def _loud(caplog: Any) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once it closes


@pytest.fixture
def database(dialect: str, tmp_path: Any) -> Any:
    with empty_database(dialect, tmp_path) as url:
        yield url


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
    caplog.set_level(logging.INFO, logger="pageant.engine")
    try:
        await engine.tick()
        assert _loud(caplog) == []
        await proxy.refuse()
        for _ in range(3):
            await engine.tick()
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert warnings == ["database unreachable since 12:00:00; runs wait, nothing is lost"]
        assert all(r.exc_info is None for r in caplog.records)
        await proxy.open()
        await engine.tick()
        back = [r.getMessage() for r in caplog.records if "back after" in r.getMessage()]
        assert back == ["database back after 0.0 s; 0 runs resumed"]
        await engine.tick()
        assert _loud(caplog) == []
    finally:
        await engine.stop()
        await host.close()
        await proxy.close()


# ── a real serve, its database cut and black-holed ───────────────────────────


def _get(base: str, path: str, token: str | None = None, body: Any = None) -> tuple[int, Any, Any]:
    """One request: (status, JSON body, headers), whatever the status."""
    request = urllib.request.Request(
        base + path,
        method="GET" if body is None else "POST",
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json"}
        | ({"Authorization": f"Bearer {token}"} if token else {}),
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read()), response.headers
    except urllib.error.HTTPError as answer:
        return answer.code, json.loads(answer.read()), answer.headers


def _timed_health(base: str) -> tuple[float, int, dict[str, Any]]:
    began = time.monotonic()
    status, body, _ = _get(base, "/healthz")
    return time.monotonic() - began, status, body


@MARIADB_ONLY
def test_a_served_host_rides_out_a_cut_and_a_black_holed_database(database, tmp_path) -> None:
    token = asyncio.run(_prepare(database))
    proxy = ThreadedProxy(database)
    serve = None
    try:
        # A short step lease margin: a step whose answer the cut swallowed is taken back
        # (and run again under its key) seconds later, as it would be minutes later.
        serve = Serve(
            proxy.url, tmp_path / "serve.log", poll_seconds=1, step_lease_margin_seconds=2
        )
        base = serve.base
        status, event, _ = _get(base, "/api/v1/admin/events", token, SLOW_EVENT)
        assert status == 201, event
        _get(base, f"/api/v1/admin/events/{event['id']}/publish", token, {})
        runs = [
            _get(base, f"/api/v1/admin/events/{event['id']}/runs", token, {"scope": f"s{i}"})[1][
                "id"
            ]
            for i in range(3)
        ]
        assert _timed_health(base)[1] == 200

        proxy.refuse()
        took, status, health = _timed_health(base)
        assert status == 503 and took < 3, (took, health)
        assert health["problems"][0].startswith("database: unreachable ("), health
        status, error, headers = _get(base, "/api/v1/admin/events", token, SLOW_EVENT)
        assert (status, error["error"]["code"], headers["Retry-After"]) == (
            503,
            "database_unavailable",
            "5",
        )
        time.sleep(4)  # four ticks meet the cut
        proxy.open()
        assert until(lambda: _timed_health(base)[1] == 200, timeout=30)

        proxy.black_hole()
        took, status, health = _timed_health(base)
        assert status == 503 and 2 <= took < 4, (took, health)
        assert health["problems"][0] == "database: no answer within 2 s", health
        time.sleep(4)
        proxy.open()
        assert until(lambda: _timed_health(base)[1] == 200, timeout=90)

        # Nothing lost: every run started before the outages completes after them.
        def completed() -> bool:
            return all(
                _get(base, f"/api/v1/admin/runs/{run_id}", token)[1]["run"]["status"] == "completed"
                for run_id in runs
            )

        assert until(completed, timeout=90)
    finally:
        if serve is not None:
            serve.kill()
        proxy.close()
    lines = serve.log_lines()
    # One line when it went, one when it was back, per outage: the cut, and the black hole
    # when a tick met it long enough to be asked (its statements waited and went on).
    assert [line for line in lines if line["level"] == "ERROR"] == []
    went = [line["msg"] for line in lines if line["msg"].startswith("database unreachable since")]
    back = [line["msg"] for line in lines if line["msg"].startswith("database back after")]
    assert 1 <= len(went) == len(back) <= 2, (went, back)
    assert [line for line in lines if "exc" in line] == []


SLOW_EVENT = {
    "title": "Outage",
    "spec": {
        "schedule": {"kind": "manual"},
        "phases": [
            {
                "key": "main",
                "label": "Main",
                "steps": [
                    {"action": "core.wait", "params": {"seconds": 15}},
                    {"action": "core.announce", "params": {"leg": "core.log", "message": "on"}},
                ],
            }
        ],
    },
}


def test_an_outage_is_told_from_other_database_errors() -> None:
    """Both sides of the line: what is an outage (503, one line) and what is not (a lock
    collision stays a 409 retried at DEBUG; a constraint, a client hanging up, stay what
    they were)."""
    from sqlalchemy.exc import IntegrityError, OperationalError

    from pageant.db.errors import is_unavailable

    def wrapped(orig: BaseException) -> OperationalError:
        return OperationalError("SELECT 1", {}, orig)

    refused = wrapped(Exception(2003, "Can't connect to MySQL server"))
    gone = wrapped(Exception(2013, "Lost connection to MySQL server during query"))
    socket_error = wrapped(ConnectionRefusedError(111, "Connect call failed"))
    assert is_unavailable(refused) and is_unavailable(gone) and is_unavailable(socket_error)
    assert not is_unavailable(wrapped(Exception(1213, "Deadlock found")))
    assert not is_unavailable(IntegrityError("INSERT", {}, Exception(1062, "Duplicate")))
    assert not is_unavailable(ConnectionResetError(104, "the client hung up"))
    assert not is_unavailable(ValueError("a bug"))


#: How long the served pause below lasts: long enough for a tick to be held past the watch's
#: bound (5 s) and its question (2 s), as the 20 s pause the engine once met without a line.
PAUSE_S = 12


@MARIADB_ONLY
def test_a_paused_database_under_a_served_host_is_one_warning_and_one_info(
    database, tmp_path
) -> None:
    token = asyncio.run(_prepare(database))
    proxy = ThreadedProxy(database)
    serve = None
    long_wait = {
        **SLOW_EVENT,
        "spec": {
            **SLOW_EVENT["spec"],
            "phases": [
                {
                    "key": "main",
                    "label": "Main",
                    "steps": [{"action": "core.wait", "params": {"seconds": 120}}],
                }
            ],
        },
    }
    try:
        serve = Serve(proxy.url, tmp_path / "serve.log", poll_seconds=1)
        base = serve.base
        status, event, _ = _get(base, "/api/v1/admin/events", token, long_wait)
        assert status == 201, event
        _get(base, f"/api/v1/admin/events/{event['id']}/publish", token, {})
        for i in range(3):
            _get(base, f"/api/v1/admin/events/{event['id']}/runs", token, {"scope": f"s{i}"})
        assert until(
            lambda: (
                _get(base, "/api/v1/admin/runs?status=running", token)[1]["items"].__len__() == 3
            ),
            timeout=30,
        )
        proxy.black_hole()  # a paused server: it accepts and never answers
        time.sleep(PAUSE_S)
        proxy.open()
        assert until(lambda: _timed_health(base)[1] == 200, timeout=90)
        assert until(
            lambda: any("database back after" in line["msg"] for line in serve.log_lines()),
            timeout=90,
        )
        status, text, _ = _get_text(base, "/metrics", token)
    finally:
        if serve is not None:
            serve.kill()
        proxy.close()
    lines = serve.log_lines()
    went = [line for line in lines if line["msg"].startswith("database unreachable since")]
    back = [line for line in lines if line["msg"].startswith("database back after")]
    assert len(went) == 1 and len(back) == 1, (went, back)
    assert went[0]["level"] == "WARNING" and went[0]["msg"].endswith("; runs wait, nothing is lost")
    assert back[0]["level"] == "INFO" and back[0]["runs_resumed"] == 3, back
    assert PAUSE_S - 8 <= back[0]["outage_seconds"] <= PAUSE_S + 10, back
    FIGURES.append(
        f"a {PAUSE_S} s pause under serve: {went[0]['msg']!r} ({went[0]['reason']}), then "
        f"{back[0]['msg']!r} ({back[0]['outage_seconds']} s)"
    )
    assert [line for line in lines if line["level"] == "ERROR"] == []
    assert "pageant_database_outage_seconds_count 1.0" in text


def _get_text(base: str, path: str, token: str) -> tuple[int, str, Any]:
    request = urllib.request.Request(base + path, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status, response.read().decode(), response.headers
