"""Signing in to the web console: where the sign-in sends you afterwards (a same-origin path
of safe characters, nothing else), and when the session cookie is ``Secure`` (served over
HTTPS, or behind a trusted proxy that says the browser used HTTPS)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from pageant.console.session import COOKIE
from tests.console.test_console import csrf_of


async def _sign_in(client: Any, token: str, headers: dict[str, str] | None = None, **data: str):
    page = await client.get("/sign-in")
    return await client.post(
        "/sign-in",
        data={"csrf_token": csrf_of(await page.text()), "token": token, **data},
        headers=headers or {},
        allow_redirects=False,
    )


def _errors(caplog: Any) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


# ── next ─────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    "nxt",
    [
        "//evil.example/x",
        "/\t/evil.example/phish",
        "/\r/evil.example",
        "/\n/evil.example",
        "/\r\nSet-Cookie: x=1",
        "/\x0b/evil.example",
        "/\x0c/evil.example",
        "/\\evil.example",
        "\\\\evil.example",
        "/ /evil.example",
        "https://evil.example/",
        "javascript:alert(1)",
        "evil.example",
        "/caf\u00e9",
        "",
    ],
)
async def test_a_next_that_is_not_a_safe_same_origin_path_goes_to_the_default_page(
    client, tokens, caplog, nxt
):
    answer = await _sign_in(client, tokens["admin"], next=nxt)
    assert answer.status == 303
    assert answer.headers["Location"] == "/now"
    form = await client.get("/sign-in", params={"next": nxt})
    assert form.status == 200
    assert 'name="next" value="/now"' in await form.text()
    assert _errors(caplog) == []


@pytest.mark.parametrize(
    "nxt", ["/events", "/runs/12", "/calendar?from=2026-12-01&scope=north", "/events/3/edit"]
)
async def test_a_same_origin_path_is_where_sign_in_goes(client, tokens, nxt):
    answer = await _sign_in(client, tokens["admin"], next=nxt)
    assert answer.headers["Location"] == nxt


# ── Secure ───────────────────────────────────────────────────────────────────


def _session_cookie(answer: Any) -> str:
    return next(h for h in answer.headers.getall("Set-Cookie") if h.startswith(COOKIE))


@pytest.mark.parametrize(
    "headers",
    [
        {"X-Forwarded-Proto": "https"},
        {"X-Forwarded-Proto": "http, https"},
        {"Forwarded": "for=192.0.2.1;proto=https"},
        {"Forwarded": "proto=http, for=192.0.2.1;proto=https"},
    ],
)
async def test_behind_a_trusted_proxy_a_forwarded_https_makes_the_cookie_secure(
    client, host, tokens, headers
):
    host.settings = host.settings.model_copy(update={"trusted_proxy": True})
    answer = await _sign_in(client, tokens["admin"], headers, next="/now")
    assert "Secure" in _session_cookie(answer)
    nonce = (await client.get("/sign-in", headers=headers)).headers["Set-Cookie"]
    assert "Secure" in nonce


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"X-Forwarded-Proto": "http"},
        {"X-Forwarded-Proto": "https, http"},
        {"Forwarded": "proto=https, for=192.0.2.1;proto=http"},
    ],
)
async def test_behind_a_trusted_proxy_plain_http_stays_not_secure(client, host, tokens, headers):
    host.settings = host.settings.model_copy(update={"trusted_proxy": True})
    answer = await _sign_in(client, tokens["admin"], headers, next="/now")
    cookie = _session_cookie(answer)
    assert "HttpOnly" in cookie and "Secure" not in cookie


@pytest.mark.parametrize("headers", [{"X-Forwarded-Proto": "https"}, {"Forwarded": "proto=https"}])
async def test_without_a_trusted_proxy_forwarded_headers_are_ignored(client, tokens, headers):
    """Off by default: any client can send these headers, and a cookie marked ``Secure`` on
    a plain-HTTP host would never come back."""
    answer = await _sign_in(client, tokens["admin"], headers, next="/now")
    assert "Secure" not in _session_cookie(answer)
