"""The core actions with their real bodies: announce to the run log and to webhooks, wait,
and the cue that parks for a person."""

from __future__ import annotations

import asyncio
import socket

import pytest
from aiohttp import web

from pageant.engine import Engine
from pageant.runs import controls
from pageant.runs.create import start_now
from tests.factories import (
    announce,
    log_lines,
    make_host,
    phase,
    publish_event,
    run_row,
    spec,
    step,
    step_rows,
)


async def _run(host, event_spec):
    event = await publish_event(host.db, host.clock.now(), event_spec)
    run_id, _ = await start_now(host, event.id, scope="", actor="admin:test")
    async with Engine(host) as engine:
        await engine.tick()
    return run_id


@pytest.fixture
async def receiver(aiohttp_server):
    """A real HTTP server on 127.0.0.1 that keeps what it was sent."""
    got: list[dict] = []
    behaviour = {"status": 200, "delay": 0.0}

    async def hook(request: web.Request) -> web.Response:
        got.append({"body": await request.json(), "type": request.content_type})
        await asyncio.sleep(behaviour["delay"])
        return web.json_response({}, status=behaviour["status"])

    app = web.Application()
    app.router.add_post("/hook", hook)
    server = await aiohttp_server(app)
    return server, got, behaviour


def _closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"


async def _webhook_host(settings, db, clock, urls, timeout=5.0):
    changed = settings.model_copy(
        update={"webhook_urls": tuple(urls), "webhook_timeout_seconds": timeout}
    )
    return make_host(changed, db, clock)


async def test_announce_to_the_log_leg_writes_the_run_log(probe_host):
    run_id = await _run(probe_host, spec(phase("p", announce("The gates open"))))
    (line,) = await log_lines(probe_host.db, run_id, "announce")
    made = (await step_rows(probe_host.db, run_id))[0]
    assert line.detail == {"leg": "core.log", "message": "The gates open"}
    assert (line.step_id, line.phase) == (made.id, "p")


async def test_announce_to_an_unknown_leg_fails_without_retry(probe_host):
    run_id = await _run(probe_host, spec(phase("p", announce("x", leg="nobody.leg"))))
    (made,) = await step_rows(probe_host.db, run_id)
    assert (made.status, made.attempts) == ("failed", 1)
    assert "nobody.leg" in made.last_error


async def test_the_webhook_leg_posts_json_to_every_url(settings, db, clock, receiver):
    server, got, _ = receiver
    url = str(server.make_url("/hook"))
    host = await _webhook_host(settings, db, clock, [url, url])
    try:
        run_id = await _run(host, spec(phase("p", announce("Boss up", leg="core.webhook"))))
        (made,) = await step_rows(db, run_id)
        assert made.status == "done"
        assert len(got) == 2
        body = got[0]["body"]
        assert got[0]["type"] == "application/json"
        assert body["message"] == "Boss up"
        assert body["idempotency_key"] == made.idempotency_key
        assert body["run"]["id"] == run_id
    finally:
        await host.close()


async def test_a_webhook_that_was_never_sent_is_retried(settings, db, clock):
    host = await _webhook_host(settings, db, clock, [_closed_port_url()])
    try:
        run_id = await _run(host, spec(phase("p", announce("x", leg="core.webhook"))))
        (made,) = await step_rows(db, run_id)
        assert (made.status, made.attempts) == ("pending", 1)
        assert "not sent" in made.last_error
        assert len(await log_lines(db, run_id, "step.retry")) == 1
    finally:
        await host.close()


@pytest.mark.parametrize("how", ["http error", "timeout", "one of two refused"])
async def test_a_webhook_that_left_is_never_retried(settings, db, clock, receiver, how):
    server, got, behaviour = receiver
    url = str(server.make_url("/hook"))
    urls, timeout = [url], 5.0
    if how == "http error":
        behaviour["status"] = 500
    elif how == "timeout":
        # The receiver answers well after the timeout; the timeout itself leaves a loaded
        # machine a second to connect and send, so the request has surely left.
        behaviour["delay"], timeout = 2.5, 1.0
    else:
        urls = [url, _closed_port_url()]
    host = await _webhook_host(settings, db, clock, urls, timeout)
    try:
        run_id = await _run(host, spec(phase("p", announce("x", leg="core.webhook"))))
        (made,) = await step_rows(db, run_id)
        assert (made.status, made.attempts) == ("failed", 1)
        assert len(got) == 1  # exactly one delivery, and no second attempt
        assert await log_lines(db, run_id, "step.retry") == []
        assert (await run_row(db, run_id)).status == "completed"  # notify: skip
    finally:
        await host.close()


async def test_the_webhook_leg_without_urls_fails_for_good(probe_host):
    run_id = await _run(probe_host, spec(phase("p", announce("x", leg="core.webhook"))))
    (made,) = await step_rows(probe_host.db, run_id)
    assert (made.status, made.last_error) == ("failed", "no webhook_urls are configured")


async def test_the_cue_announces_then_parks_until_confirmed(probe_host, clock):
    run_id = await _run(
        probe_host,
        spec(phase("p", step("core.cue", message="Spawn the champion"), announce("after"))),
    )
    cue, after = await step_rows(probe_host.db, run_id)
    assert (cue.status, cue.lease_until, after.status) == ("running", None, "pending")
    (said,) = await log_lines(probe_host.db, run_id, "announce")
    assert said.detail["message"] == "Spawn the champion"
    await controls.confirm(probe_host, run_id, cue.id, actor="moderator:m", note="done in game")
    async with Engine(probe_host) as engine:
        await engine.tick()
    assert (await run_row(probe_host.db, run_id)).status == "completed"
    cue = (await step_rows(probe_host.db, run_id))[0]
    assert (cue.status, cue.note) == ("done", "done in game")


async def test_the_wait_refuses_a_hold_out_of_range(probe_host):
    run_id = await _run(probe_host, spec(phase("p", step("core.wait", seconds=86_401))))
    (made,) = await step_rows(probe_host.db, run_id)
    assert made.status == "failed" and "86400" in made.last_error


async def test_the_engine_keeps_one_http_session_and_closes_it(probe_host):
    engine = Engine(probe_host)
    first = await engine.http_session()
    assert await engine.http_session() is first
    await engine.stop()
    assert first.closed
