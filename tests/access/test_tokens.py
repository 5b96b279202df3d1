"""Tokens with a lifecycle: made, listed, used, expired and revoked — through the real app on
both dialects. No answer but a creation's ever holds a token, and none its hash."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import event, select

from pageant.access.tokens import hash_token
from pageant.db.tables import api_tokens
from tests.api.test_events_api import call

TOKENS = "/api/v1/admin/tokens"
EVENTS = "/api/v1/admin/events"


@contextmanager
def token_writes(db: Any) -> Iterator[list[str]]:
    """Every statement that writes ``api_tokens`` while the block runs."""
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith("UPDATE") and "api_tokens" in statement:
            seen.append(statement)

    event.listen(db.sync_engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(db.sync_engine, "before_cursor_execute", record)


async def _issue(client, tokens, **body):
    body.setdefault("name", "night-shift")
    body.setdefault("role", "moderator")
    status, data = await call(client, "POST", TOKENS, tokens["admin"], body)
    assert status == 201, data
    return data


async def _hashes(db) -> list[str]:
    async with db.connect() as conn:
        return list((await conn.execute(select(api_tokens.c.token_hash))).scalars())


async def test_a_token_is_shown_once_and_never_listed(client, tokens, db, clock):
    issued = await _issue(client, tokens, expires="30d")
    assert issued["token"].startswith("pgt_")
    assert (issued["role"], issued["status"], issued["created_by"]) == (
        "moderator",
        "active",
        "admin:test-admin",
    )
    assert issued["expires_at"] == "2027-03-31T12:00:00Z"
    status, listing = await call(client, "GET", TOKENS, tokens["admin"])
    assert status == 200
    assert [item["name"] for item in listing["items"]][-1] == "night-shift"
    text = json.dumps(listing)
    for secret in [*tokens.values(), issued["token"], *await _hashes(db)]:
        assert secret not in text
    assert "token" not in listing["items"][-1] and "token_hash" not in listing["items"][-1]
    # The token works, and what it is for is what was asked.
    status, _ = await call(client, "GET", EVENTS, issued["token"])
    assert status == 200
    assert hash_token(issued["token"]) in await _hashes(db)


async def test_a_revoked_token_is_refused_on_its_next_request(client, tokens, db):
    issued = await _issue(client, tokens)
    assert (await call(client, "GET", EVENTS, issued["token"]))[0] == 200

    status, revoked = await call(client, "DELETE", f"{TOKENS}/{issued['id']}", tokens["admin"])

    assert status == 200
    assert (revoked["status"], revoked["revoked_by"]) == ("revoked", "admin:test-admin")
    assert "token" not in revoked
    status, data = await call(client, "GET", EVENTS, issued["token"])
    assert (status, data["error"]["message"]) == (401, "the bearer token was revoked")
    # Revoked once; a second revoke changes nothing and says so.
    status, data = await call(client, "DELETE", f"{TOKENS}/{issued['id']}", tokens["admin"])
    assert status == 409 and "already revoked (by admin:test-admin)" in data["error"]["message"]
    # Listed only when asked for.
    _, active = await call(client, "GET", TOKENS, tokens["admin"])
    assert issued["id"] not in [item["id"] for item in active["items"]]
    _, every = await call(client, "GET", f"{TOKENS}?revoked=true", tokens["admin"])
    assert issued["id"] in [item["id"] for item in every["items"]]


async def test_an_expired_token_is_refused(client, tokens, clock):
    issued = await _issue(client, tokens, expires="1h")
    clock.advance(3599)
    assert (await call(client, "GET", EVENTS, issued["token"]))[0] == 200
    clock.advance(1)
    status, data = await call(client, "GET", EVENTS, issued["token"])
    assert (status, data["error"]["message"]) == (401, "the bearer token has expired")
    _, listing = await call(client, "GET", TOKENS, tokens["admin"])
    mine = next(item for item in listing["items"] if item["id"] == issued["id"])
    assert mine["status"] == "expired"


async def test_last_used_at_moves_at_most_once_a_minute(client, tokens, db, clock):
    issued = await _issue(client, tokens)
    assert issued["last_used_at"] is None
    with token_writes(db) as writes:
        for _ in range(10):
            assert (await call(client, "GET", EVENTS, issued["token"]))[0] == 200
        clock.advance(59)
        for _ in range(5):
            assert (await call(client, "GET", EVENTS, issued["token"]))[0] == 200
    assert len(writes) == 1  # the first use, once
    _, listing = await call(client, "GET", TOKENS, tokens["admin"])
    mine = next(item for item in listing["items"] if item["id"] == issued["id"])
    assert mine["last_used_at"] == "2027-03-01T12:00:00Z"
    clock.advance(1)
    with token_writes(db) as writes:
        for _ in range(5):
            assert (await call(client, "GET", EVENTS, issued["token"]))[0] == 200
    assert len(writes) == 1
    _, listing = await call(client, "GET", TOKENS, tokens["admin"])
    mine = next(item for item in listing["items"] if item["id"] == issued["id"])
    assert mine["last_used_at"] == "2027-03-01T12:01:00Z"


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({"name": "x", "role": "owner"}, "body.role: 'owner' is not a role"),
        ({"name": "", "role": "admin"}, "body.name: String should have at least 1 character"),
        ({"name": "x", "role": "admin", "expires": "soon"}, "body.expires: 'soon' is not a"),
        ({"name": "x", "role": "admin", "expires": "0d"}, "body.expires: '0d' is not a"),
        ({"name": "x", "role": "admin", "expires": "4000d"}, "body.expires: at most 3650 days"),
        ({"name": "x", "role": "admin", "token": "pgt_mine"}, "body.token: is not a known"),
    ],
)
async def test_a_bad_token_request_is_400_and_stores_nothing(client, tokens, db, body, detail):
    before = await _hashes(db)
    status, data = await call(client, "POST", TOKENS, tokens["admin"], body)
    assert status == 400, data
    assert any(detail in d for d in data["error"]["details"]), data
    assert await _hashes(db) == before


async def test_revoking_no_such_token_is_404(client, tokens):
    status, data = await call(client, "DELETE", f"{TOKENS}/999", tokens["admin"])
    assert (status, data["error"]["message"]) == (404, "no such token: 999")
    status, _ = await call(client, "DELETE", f"{TOKENS}/abc", tokens["admin"])
    assert status == 404
