"""``core.discord`` and ``core.slack``: an announcement posted to a chat channel's incoming
webhook, in the shape each service reads (an embed for Discord, blocks for Slack).

How an answer is read, for both:

- 2xx: delivered.
- 429, rate limited: nothing was posted. The leg waits as long as the service asks
  (Discord's JSON ``retry_after``, Slack's ``Retry-After`` header, in seconds) and posts
  again, when that wait is at most ``announce_retry_after_max_seconds`` and fits before
  the step's deadline; otherwise the step is retried by the engine later.
- 5xx: the service failed to take it; retried.
- any other 4xx, or a redirect (never followed): the URL, its token or the payload is
  wrong, which no retry mends.
- no answer: as the webhook's, retried only when the request certainly never left (the
  connection was refused, connecting timed out); a timeout after sending is not retried,
  because the message may have been posted.

The URL is a secret (whoever holds it can post to the channel), so no error names it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from pageant.builtin_plugins.announce_text import (
    NO_SERVICES,
    announcement_of,
    clip,
    host_settings,
)
from pageant.hookspecs import Announcement, SendContext

#: The most rate-limit waits one attempt makes before leaving the rest to the engine.
MAX_WAITS = 3
#: How much of an error answer an error message quotes.
QUOTED = 200


# ── what each service is sent ────────────────────────────────────────────────


def discord_payload(shown: Announcement) -> dict[str, Any]:
    """One embed: the title (linked to the public page), the text, the time as the footer
    and the embed's timestamp. ``allowed_mentions`` empty: a message that happens to hold
    ``@everyone`` never pings a whole community."""
    embed: dict[str, Any] = {
        "title": clip(shown.title, 256),
        "description": clip(shown.body, 4096),
    }
    if shown.link:
        embed["url"] = shown.link
    if shown.when is not None:
        embed["timestamp"] = shown.when.isoformat()
    if shown.when_text:
        embed["footer"] = {"text": shown.when_text}
    return {"embeds": [embed], "allowed_mentions": {"parse": []}}


def _slack_escape(text: str) -> str:
    # Slack's mrkdwn reads these three as markup; its documentation asks for these escapes.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_payload(shown: Announcement) -> dict[str, Any]:
    """A header block with the title, a section with the text, a context line with the
    time and the link; ``text`` is what a notification shows."""
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": clip(shown.title, 150)}},
        {
            "type": "section",
            "text": {"type": "mrkdwn", "text": clip(_slack_escape(shown.body), 3000)},
        },
    ]
    context = []
    if shown.when_text:
        context.append(_slack_escape(shown.when_text))
    if shown.link:
        context.append(f"<{_slack_escape(shown.link).replace('|', '%7C')}|Event page>")
    if context:
        blocks.append(
            {"type": "context", "elements": [{"type": "mrkdwn", "text": " · ".join(context)}]}
        )
    return {"text": clip(f"{shown.title}: {shown.body}", 3000), "blocks": blocks}


def _discord_wait(headers: Mapping[str, str], body: str) -> float | None:
    """Discord answers a 429 with ``{"retry_after": seconds}``; the header is the fallback."""
    try:
        value = json.loads(body).get("retry_after")
    except (ValueError, AttributeError):
        value = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return _header_wait(headers, body)


def _header_wait(headers: Mapping[str, str], body: str) -> float | None:
    """Slack answers a 429 with a ``Retry-After`` header, in whole seconds."""
    try:
        return float(headers.get("Retry-After", ""))
    except ValueError:
        return None


@dataclass(frozen=True)
class ChatService:
    """One chat service's incoming webhook: its setting, payload and rate-limit answer."""

    name: str
    setting: str
    payload: Callable[[Announcement], dict[str, Any]]
    wait_of: Callable[[Mapping[str, str], str], float | None]


DISCORD = ChatService("Discord", "discord_webhook_url", discord_payload, _discord_wait)
SLACK = ChatService("Slack", "slack_webhook_url", slack_payload, _header_wait)


#: The chat legs by id, for saying which of them have somewhere to send.
CHAT_LEGS = {"core.discord": DISCORD, "core.slack": SLACK}


def _configured(service: ChatService, settings: Any) -> bool:
    value: Any = getattr(settings, service.setting, None)
    return bool(value.get_secret_value() if hasattr(value, "get_secret_value") else value)


def not_configured(setting: str) -> str:
    """Why a chat leg cannot send: its setting, named as the operator sets it."""
    return (
        f"{setting} is not configured: set PAGEANT_{setting.upper()} (or {setting} in the "
        "settings file) on the host"
    )


def unconfigured_setting(leg_id: str, settings: Any) -> str | None:
    """The setting a chat leg needs and the host lacks, or None (configured, or no chat leg)."""
    service = CHAT_LEGS.get(leg_id)
    if service is None or settings is None or _configured(service, settings):
        return None
    return service.setting


# ── sending ─────────────────────────────────────────────────────────────────


async def post_to_chat(service: ChatService, message: str, ctx: SendContext) -> dict[str, Any]:
    """Post the announcement to ``service``'s webhook (see the module's docstring)."""
    if ctx.verify:
        # A dry run sends nothing. A leg with nowhere to send is refused at verify by
        # core.announce, which names the setting (unconfigured_setting); the leg itself, as
        # every leg under the contract, answers a dry run ok.
        return {"ok": True}
    if ctx.services is None:
        return dict(NO_SERVICES)
    settings = host_settings(ctx)
    url = getattr(settings, service.setting).get_secret_value()
    if not url:
        return {"ok": False, "retry": False, "error": not_configured(service.setting)}
    data = json.dumps(service.payload(announcement_of(message, ctx))).encode()
    # The host's own services: its HTTP session, and its clock, which dates the deadline.
    services: Any = ctx.services
    session: aiohttp.ClientSession = await services.http_session()
    timeout = settings.webhook_timeout_seconds
    for posted in range(MAX_WAITS + 1):
        try:
            async with session.post(
                url,
                data=data,
                headers={"Content-Type": "application/json"},
                timeout=aiohttp.ClientTimeout(total=timeout),
                # A webhook that redirects is misconfigured; following it would post elsewhere.
                allow_redirects=False,
            ) as response:
                status, headers = response.status, response.headers
                body = (await response.content.read(64 * 1024)).decode(errors="replace")
        except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
            return {"ok": False, "retry": True, "error": f"not sent: {type(exc).__name__}"}
        except aiohttp.InvalidURL:
            return {
                "ok": False,
                "retry": False,
                "error": f"not sent: {service.setting} is not a URL",
            }
        except (aiohttp.ClientError, TimeoutError) as exc:
            # Anything after connecting may have reached the service: never post it twice.
            return {
                "ok": False,
                "retry": False,
                "error": f"{type(exc).__name__}: {exc or 'timed out'}".replace(
                    url, f"<{service.setting}>"
                ),
            }
        if status < 300:
            return {"ok": True}
        said = f"{service.name} answered HTTP {status}: {clip(body.strip(), QUOTED)}".rstrip(": ")
        if status != 429:
            return {"ok": False, "retry": status >= 500, "error": said}
        wait = service.wait_of(headers, body)
        # Waiting must leave a whole post's time before the step's deadline.
        spare = (ctx.deadline - services.now()).total_seconds() - timeout
        if wait is None or not math.isfinite(wait) or wait < 0:
            return {"ok": False, "retry": True, "error": f"{said} (no retry_after to honour)"}
        if wait > settings.announce_retry_after_max_seconds or wait > spare:
            return {
                "ok": False,
                "retry": True,
                "error": f"{service.name} is rate limiting for {wait:g}s, longer than this "
                "attempt may wait (announce_retry_after_max_seconds, the step's deadline)",
            }
        if posted == MAX_WAITS:
            break
        await services.sleep(wait)
    return {
        "ok": False,
        "retry": True,
        "error": f"{service.name} still rate limiting after {MAX_WAITS} waits",
    }


async def send_to_discord(message: str, ctx: SendContext) -> dict[str, Any]:
    """Post the announcement to ``discord_webhook_url`` as an embed."""
    return await post_to_chat(DISCORD, message, ctx)


async def send_to_slack(message: str, ctx: SendContext) -> dict[str, Any]:
    """Post the announcement to ``slack_webhook_url`` as blocks."""
    return await post_to_chat(SLACK, message, ctx)
