"""A run console's reader is trusted as the console is kept: a token read live less than
``console_max_age_ms`` ago is not read again for a console read — through the real app on
both dialects, the clock injected. A revoke through another process (here: straight in the
database) reaches console reads at most that late, and every other request at once; one
through this host, at once everywhere."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from pageant.access.tokens import find_token, revoke_token
from pageant.api.app import make_app
from pageant.db import tokens as token_rows
from tests.api.test_console_reads import _run
from tests.conftest import bearer
from tests.console.test_console import sign_in
from tests.factories import announce, make_host


@pytest.fixture
async def kept(settings, db, clock, probe, aiohttp_client):
    """The app over a host that keeps consoles (and trusts their readers) for one second."""
    host = make_host(settings.model_copy(update={"console_max_age_ms": 1000}), db, clock, [probe])
    try:
        yield host, await aiohttp_client(make_app(host, run_engine=False))
    finally:
        await host.close()


async def revoked_elsewhere(db: Any, name: str, now: Any) -> None:
    """Revoke the token ``name`` as another process does: in the database alone."""
    token_id = await find_token(db, name)
    async with db.begin() as conn:
        assert await token_rows.revoke(conn, token_id, actor="admin:elsewhere", now=now)


async def test_a_revoke_elsewhere_reaches_console_reads_within_the_console_age(
    kept, tokens, db, clock
):
    host, api = kept
    run_id = await _run(api, tokens, host, clock, announce("hi"))
    console = f"/api/v1/admin/runs/{run_id}"
    who = bearer(tokens["moderator"])
    assert (await api.get(console, headers=who)).status == 200
    await revoked_elsewhere(db, "test-moderator", clock.now())
    clock.advance(seconds=0.999)
    # Within the age: the console's reader is trusted as the console is kept.
    assert (await api.get(console, headers=who)).status == 200
    clock.advance(seconds=0.001)
    refused = await api.get(console, headers=who)
    assert refused.status == 401
    assert "revoked" in (await refused.json())["error"]["message"]


async def test_a_revoke_elsewhere_reaches_every_other_request_at_once(kept, tokens, db, clock):
    host, api = kept
    run_id = await _run(api, tokens, host, clock, announce("hi"))
    who = bearer(tokens["admin"])
    assert (await api.get(f"/api/v1/admin/runs/{run_id}", headers=who)).status == 200
    await revoked_elsewhere(db, "test-admin", clock.now())
    # Another read, and a write, read the token: refused at the same instant.
    assert (await api.get("/api/v1/admin/plugins", headers=who)).status == 401
    assert (await api.post(f"/api/v1/admin/runs/{run_id}/pause", headers=who)).status == 401
    # And once a request has seen it revoked, console reads no longer trust it either.
    assert (await api.get(f"/api/v1/admin/runs/{run_id}", headers=who)).status == 401


async def test_a_revoke_through_this_host_reaches_console_reads_at_once(kept, tokens, db, clock):
    host, api = kept
    run_id = await _run(api, tokens, host, clock, announce("hi"))
    console = f"/api/v1/admin/runs/{run_id}"
    who = bearer(tokens["moderator"])
    assert (await api.get(console, headers=who)).status == 200
    await revoke_token(
        db, await find_token(db, "test-moderator"), actor="admin:test", now=clock.now()
    )
    assert (await api.get(console, headers=who)).status == 401


async def test_a_token_expiring_is_refused_at_its_expiry_by_console_reads_too(kept, db, clock):
    from pageant.access.tokens import create_token

    host, api = kept
    brief = await create_token(
        db, role="admin", name="brief", now=clock.now(), expires_in=timedelta(minutes=1)
    )
    run_id = await _run(api, {"admin": brief}, host, clock, announce("hi"))
    console = f"/api/v1/admin/runs/{run_id}"
    clock.advance(seconds=59.5)
    assert (await api.get(console, headers=bearer(brief))).status == 200
    clock.advance(seconds=0.5)  # within the trusted second, but at its expiry
    refused = await api.get(console, headers=bearer(brief))
    assert refused.status == 401
    assert "expired" in (await refused.json())["error"]["message"]


async def test_with_no_console_age_every_console_read_reads_the_token(
    client, tokens, host, db, clock
):
    run_id = await _run(client, tokens, host, clock, announce("hi"))
    console = f"/api/v1/admin/runs/{run_id}"
    who = bearer(tokens["moderator"])
    assert (await client.get(console, headers=who)).status == 200
    await revoked_elsewhere(db, "test-moderator", clock.now())
    assert (await client.get(console, headers=who)).status == 401


async def test_the_web_consoles_run_page_trusts_its_session_as_the_api_does(
    kept, tokens, db, clock
):
    host, api = kept
    run_id = await _run(api, tokens, host, clock, announce("hi"))
    await sign_in(api, tokens["editor"])
    live = f"/runs/{run_id}/live"
    assert (await api.get(live, allow_redirects=False)).status == 200
    await revoked_elsewhere(db, "test-editor", clock.now())
    assert (await api.get(live, allow_redirects=False)).status == 200  # within the second
    # Any other page reads the token: the session is over, and the run page's with it.
    elsewhere = await api.get("/now", allow_redirects=False)
    assert elsewhere.status == 303 and elsewhere.headers["Location"].startswith("/sign-in")
    ended = await api.get(live, allow_redirects=False)
    assert ended.status == 303 and ended.headers["Location"].startswith("/sign-in")
