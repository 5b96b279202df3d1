"""The Discord and Slack announce legs against a local receiver that answers as each
service does: the payload each is sent, rate limits honoured within their bound, and which
failures are retried."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from aiohttp import web
from pydantic import SecretStr

from pageant.engine import Engine
from pageant.errors import Invalid
from pageant.runs.create import start_now
from pageant.support.settings import load_settings
from tests.api.test_events_api import EVENTS, call, create
from tests.console.test_console import sign_in
from tests.factories import announce, log_lines, make_host, phase, publish_event, spec, step_rows
from tests.scheduling import spec_with

DISCORD_PATH = "/api/webhooks/1234/discord-token-secret"
SLACK_PATH = "/services/T0/B0/slack-token-secret"


@dataclass
class Service:
    """What the receiver answers for one service, and what it was sent."""

    leg: str
    setting: str
    path: str
    #: Answers to give in order, (status, headers, body); then the service's success.
    script: list[tuple[int, dict[str, str], str]] = field(default_factory=list)
    got: list[dict[str, Any]] = field(default_factory=list)
    delay: float = 0.0

    def success(self) -> tuple[int, dict[str, str], str]:
        # Discord answers an incoming webhook with 204 No Content, Slack with 200 "ok".
        return (204, {}, "") if self.leg == "core.discord" else (200, {}, "ok")

    def rate_limited(self, seconds: float) -> tuple[int, dict[str, str], str]:
        if self.leg == "core.discord":
            body = {"message": "You are being rate limited.", "retry_after": seconds}
            return 429, {"Content-Type": "application/json"}, json.dumps(body)
        return 429, {"Retry-After": f"{seconds:g}"}, "rate_limited"


@pytest.fixture(params=["core.discord", "core.slack"])
async def service(request, aiohttp_server) -> Service:
    """A real HTTP server on 127.0.0.1 playing Discord or Slack."""
    leg = request.param
    if leg == "core.discord":
        chosen = Service(leg, "discord_webhook_url", DISCORD_PATH)
    else:
        chosen = Service(leg, "slack_webhook_url", SLACK_PATH)

    async def hook(request: web.Request) -> web.Response:
        chosen.got.append({"body": await request.json(), "type": request.content_type})
        await asyncio.sleep(chosen.delay)
        status, headers, text = chosen.script.pop(0) if chosen.script else chosen.success()
        return web.Response(status=status, headers=headers, text=text)

    app = web.Application()
    app.router.add_post(chosen.path, hook)
    server = await aiohttp_server(app)
    chosen.path = str(server.make_url(chosen.path))
    return chosen


def _closed_port_url(path: str) -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}{path}"


async def _announce(settings, db, clock, service: Service, event_spec=None, **changes):
    """Run one announce step on ``service``'s leg; answers (host, run id, the step row)."""
    update = {service.setting: SecretStr(service.path), **changes}
    host = make_host(settings.model_copy(update=update), db, clock)
    event_spec = event_spec or spec(phase("p", announce("The Champion stirs", leg=service.leg)))
    event = await publish_event(
        db,
        clock.now(),
        event_spec,
        title="Champion Muster",
        timezone="Europe/Berlin",
        visibility="public",
    )
    run_id, _ = await start_now(host, event.id, scope="", actor="admin:test")
    async with Engine(host) as engine:
        await engine.tick()
    (made,) = await step_rows(db, run_id)
    return host, run_id, made, event


async def test_each_service_is_sent_its_own_shape_of_the_rendered_template(
    settings, db, clock, service
):
    template = {"title": "{title} tonight", "body": "{message}! Starts {when}."}
    event_spec = {
        **spec(phase("p", announce("The Champion stirs", leg=service.leg))),
        "announcement": template,
    }
    host, _run_id, made, event = await _announce(
        settings,
        db,
        clock,
        service,
        event_spec,
        public_page_url="https://example.org/events/{slug}",
    )
    try:
        assert made.status == "done"
        (sent,) = service.got
        assert sent["type"] == "application/json"
        body = sent["body"]
        # 2027-03-01 12:00 UTC is 13:00 in Berlin (CET).
        text = "The Champion stirs! Starts Mon 1 Mar 2027, 13:00 CET."
        link = f"https://example.org/events/{event.slug}"
        if service.leg == "core.discord":
            (embed,) = body["embeds"]
            assert embed == {
                "title": "Champion Muster tonight",
                "description": text,
                "url": link,
                "timestamp": datetime(2027, 3, 1, 12, tzinfo=UTC).isoformat(),
                "footer": {"text": "Mon 1 Mar 2027, 13:00 CET"},
            }
            assert body["allowed_mentions"] == {"parse": []}
        else:
            header, section, context = body["blocks"]
            assert header == {
                "type": "header",
                "text": {"type": "plain_text", "text": "Champion Muster tonight"},
            }
            assert section == {"type": "section", "text": {"type": "mrkdwn", "text": text}}
            assert context["elements"] == [
                {"type": "mrkdwn", "text": f"Mon 1 Mar 2027, 13:00 CET · <{link}|Event page>"}
            ]
            assert body["text"] == f"Champion Muster tonight: {text}"
    finally:
        await host.close()


async def test_a_rate_limit_within_the_bound_is_waited_out_and_posted_again(
    settings, db, clock, service
):
    service.script = [service.rate_limited(2)]
    host, run_id, made, _ = await _announce(
        settings, db, clock, service, announce_retry_after_max_seconds=2
    )
    try:
        assert (made.status, made.attempts) == ("done", 1)
        assert len(service.got) == 2
        assert service.got[0]["body"] == service.got[1]["body"]
        assert clock.sleeps == [2]  # exactly what the service asked, on the host's clock
        assert await log_lines(db, run_id, "step.retry") == []
    finally:
        await host.close()


async def test_a_service_that_keeps_rate_limiting_is_left_to_the_engine_after_three_waits(
    settings, db, clock, service
):
    service.script = [service.rate_limited(1)] * 4
    host, _run_id, made, _ = await _announce(
        settings, db, clock, service, announce_retry_after_max_seconds=2
    )
    try:
        assert (made.status, made.attempts) == ("pending", 1)
        assert (len(service.got), clock.sleeps) == (4, [1, 1, 1])
        assert "still rate limiting after 3 waits" in made.last_error
    finally:
        await host.close()


async def test_a_rate_limit_past_the_bound_is_left_to_the_engine_retry(
    settings, db, clock, service
):
    service.script = [service.rate_limited(3)]
    host, run_id, made, _ = await _announce(
        settings, db, clock, service, announce_retry_after_max_seconds=2
    )
    try:
        assert (made.status, made.attempts) == ("pending", 1)
        assert len(service.got) == 1
        assert clock.sleeps == []
        assert "rate limiting for 3s" in made.last_error
        assert len(await log_lines(db, run_id, "step.retry")) == 1
    finally:
        await host.close()


async def test_a_rate_limit_that_would_pass_the_deadline_is_not_waited(
    settings, db, clock, service
):
    # core.announce has ten seconds; with a 5-second post timeout, a 6-second wait cannot fit.
    service.script = [service.rate_limited(6)]
    host, _run_id, made, _ = await _announce(
        settings, db, clock, service, announce_retry_after_max_seconds=60
    )
    try:
        assert (made.status, made.attempts) == ("pending", 1)
        assert (len(service.got), clock.sleeps) == (1, [])
    finally:
        await host.close()


@pytest.mark.parametrize(
    ("status", "retried"), [(302, False), (400, False), (404, False), (500, True), (503, True)]
)
async def test_a_client_error_fails_for_good_and_a_server_error_is_retried(
    settings, db, clock, service, status, retried, caplog
):
    caplog.set_level(logging.DEBUG)
    service.script = [(status, {}, "invalid_token" if status < 500 else "oops")]
    host, run_id, made, _ = await _announce(settings, db, clock, service)
    try:
        assert made.attempts == 1
        assert made.status == ("pending" if retried else "failed")
        assert f"HTTP {status}" in made.last_error
        assert len(service.got) == 1
        assert len(await log_lines(db, run_id, "step.retry")) == (1 if retried else 0)
        # The URL is a secret: no error and no log line names it.
        lines = await log_lines(db, run_id)
        assert "token-secret" not in made.last_error
        assert not any("token-secret" in json.dumps(line.detail) for line in lines)
        # (The receiver's own access log is the service's, not pageant's.)
        ours = [r.getMessage() for r in caplog.records if r.name != "aiohttp.access"]
        assert ours and not any("token-secret" in line for line in ours)
    finally:
        await host.close()


async def test_a_post_that_never_left_is_retried(settings, db, clock, service):
    service.path = _closed_port_url("/hook")
    host, _run_id, made, _ = await _announce(settings, db, clock, service)
    try:
        assert (made.status, made.attempts) == ("pending", 1)
        assert made.last_error.startswith("not sent")
    finally:
        await host.close()


async def test_a_post_that_timed_out_after_leaving_is_not_retried(settings, db, clock, service):
    # The receiver answers well after the timeout; a second on a loaded machine to connect
    # and send means the request has surely left.
    service.delay = 2.5
    host, _run_id, made, _ = await _announce(
        settings, db, clock, service, webhook_timeout_seconds=1.0
    )
    try:
        assert (made.status, made.attempts) == ("failed", 1)
        assert len(service.got) == 1
    finally:
        await host.close()


async def test_an_unconfigured_chat_leg_fails_for_good(settings, db, clock, service):
    service.path = ""
    host, _run_id, made, _ = await _announce(settings, db, clock, service)
    try:
        assert made.status == "failed"
        assert made.last_error.startswith(f"{service.setting} is not configured: set PAGEANT_")
        assert service.got == []
    finally:
        await host.close()


def test_a_refused_secret_setting_is_named_and_never_shown():
    with pytest.raises(Invalid) as caught:
        load_settings(environ={"PAGEANT_DISCORD_WEBHOOK_URL": "ftp://host/token-secret"})
    (detail,) = caught.value.details
    assert detail.startswith("discord_webhook_url (from environment variable")
    assert "token-secret" not in detail
    settings = load_settings(environ={"PAGEANT_SLACK_WEBHOOK_URL": f"https://h{SLACK_PATH}"})
    assert "token-secret" not in repr(settings)
    assert "token-secret" not in settings.model_dump_json()


async def test_a_plugin_author_kit_posts_through_the_same_leg(service):
    """``pageant.testing``'s kit lends a step's services outside a run: no event stands
    behind the call, so the message goes as written under a title naming the run."""
    from pageant.testing import assert_ok, kit_host

    async with kit_host([], settings={service.setting: service.path}) as kit:
        assert_ok(await kit.perform("core.announce", {"leg": service.leg, "message": "Hi"}))
    body = service.got[0]["body"]
    if service.leg == "core.discord":
        assert body["embeds"] == [{"title": "Announcement: pageant-testing", "description": "Hi"}]
    else:
        assert body["blocks"][0]["text"]["text"] == "Announcement: pageant-testing"
        assert body["blocks"][1]["text"]["text"] == "Hi"
        assert len(body["blocks"]) == 2  # no time, no link: no context line


async def test_verify_refuses_a_chat_leg_with_nowhere_to_send_naming_the_setting(
    client, tokens, host
):
    event_spec = spec_with(
        {"kind": "manual"},
        {
            "key": "herald",
            "label": "Herald",
            "steps": [
                {"action": "core.announce", "params": {"leg": "core.discord", "message": "hi"}}
            ],
        },
    )
    event = await create(client, tokens["admin"], title="Loud", spec=event_spec)
    status, _ = await call(client, "POST", f"{EVENTS}/{event['id']}/publish", tokens["admin"])
    assert status == 200
    status, data = await call(client, "POST", f"{EVENTS}/{event['id']}/verify", tokens["admin"])
    assert status == 400, data
    assert any(
        "discord_webhook_url is not configured: set PAGEANT_DISCORD_WEBHOOK_URL" in d
        for d in data["error"]["details"]
    ), data
    # The editor's leg picker says so beside the leg, and not beside a configured one.
    await host.start_plugins()
    await sign_in(client, tokens["admin"])
    html = await (await client.get(f"/events/{event['id']}")).text()
    assert "Discord channel (not configured: discord_webhook_url is not set)" in html
    assert "Run log (not configured" not in html
