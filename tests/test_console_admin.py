"""The web console's admin pages over the real app and a real database (both dialects): the
switchboard (every staff role reads it, an admin changes it, bad caps shown at their field),
and the tokens page (admin only: list, make one shown once, revoke)."""

from __future__ import annotations

import re

from tests.test_console import csrf_of, form_of, page_csrf, sign_in
from tests.test_events_api import call

SUMMON = "/switchboard/wisps.summon"


async def test_the_switchboard_lists_every_action_with_its_risk_state_and_dimensions(
    client, tokens
):
    await sign_in(client, tokens["moderator"])
    page = await client.get("/switchboard")
    assert page.status == 200
    html = await page.text()
    row = re.search(r'<tr data-action="wisps.summon">(.*?)</tr>', html, re.S).group(1)
    assert "wisps" in row and "risk-change" in row and ">full<" in row
    assert "✗ disabled" in row and "the default for its risk" in row
    assert "Wisps summoned" in row and "no cap" in row
    core = re.search(r'<tr data-action="core.announce">(.*?)</tr>', html, re.S).group(1)
    assert "✓ enabled" in core and "spends nothing" in core
    assert "Changing them needs the role admin." in html


async def test_only_an_admin_sees_the_switchboards_form_and_may_post_it(client, tokens):
    await sign_in(client, tokens["editor"])
    html = await (await client.get(SUMMON)).text()
    assert 'id="switch"' not in html and "needs the role admin" in html
    answer = await client.post(
        SUMMON, data={"csrf_token": csrf_of(html), "enabled": "yes", "cap-wisps.wisps": "5"}
    )
    assert answer.status == 403
    _status, data = await call(client, "GET", "/api/v1/admin/actions", tokens["admin"])
    summon = next(i for i in data["items"] if i["id"] == "wisps.summon")
    assert (summon["enabled"], summon["caps"]) == (False, {})


async def test_an_admin_enables_and_caps_an_action_and_sees_the_history(client, tokens):
    await sign_in(client, tokens["admin"])
    html = await (await client.get(SUMMON)).text()
    fields = dict(form_of(html, "switch"))
    assert fields["enabled"] == "no" and fields["cap-wisps.wisps"] == ""
    fields.update({"enabled": "yes", "cap-wisps.wisps": "30"})
    answer = await client.post(SUMMON, data=fields, allow_redirects=False)
    assert answer.status == 303 and answer.headers["Location"] == f"{SUMMON}?saved=1"
    _status, data = await call(client, "GET", "/api/v1/admin/actions", tokens["admin"])
    summon = next(i for i in data["items"] if i["id"] == "wisps.summon")
    assert (summon["enabled"], summon["caps"]) == (True, {"wisps.wisps": 30})
    assert summon["updated_by"] == "admin:test-admin"
    html = await (await client.get(f"{SUMMON}?saved=1")).text()
    assert "Saved." in html and "at most 30 wisps" in html
    history = re.search(r'<table class="list" id="history">(.*?)</table>', html, re.S).group(1)
    assert "admin:test-admin" in history and "<code>wisps.wisps</code>: 30" in history
    assert "the default" in history
    # emptied: no cap, and a second history line, newest first
    fields = dict(form_of(html, "switch"))
    assert fields["cap-wisps.wisps"] == "30"
    fields["cap-wisps.wisps"] = ""
    assert (await client.post(SUMMON, data=fields)).status == 200
    _status, data = await call(
        client, "GET", "/api/v1/admin/actions/wisps.summon/history", tokens["admin"]
    )
    assert [h["caps"] for h in data["items"]] == [{"wisps.wisps": 30}, {}]


async def test_a_bad_cap_is_shown_at_its_field_and_nothing_is_written(client, tokens):
    await sign_in(client, tokens["admin"])
    fields = dict(form_of(await (await client.get(SUMMON)).text(), "switch"))
    fields.update({"enabled": "yes", "cap-wisps.wisps": "lots"})
    answer = await client.post(SUMMON, data=fields)
    assert answer.status == 400
    html = await answer.text()
    assert re.search(
        r'id="cap-wisps.wisps"[^>]*value="lots"[^>]*aria-invalid="true"'
        r'[^>]*aria-describedby="err-cap-wisps.wisps-1"',
        html,
    )
    assert 'id="err-cap-wisps.wisps-1">⚠ Expected a whole number' in html
    assert "Nothing was changed" in html
    _status, data = await call(
        client, "GET", "/api/v1/admin/actions/wisps.summon/history", tokens["admin"]
    )
    assert data["items"] == []


async def test_an_unknown_action_is_a_404_page(client, tokens):
    await sign_in(client, tokens["admin"])
    answer = await client.get("/switchboard/nobody.nothing")
    assert answer.status == 404
    assert "registers the action &#39;nobody.nothing&#39;" in await answer.text()


async def test_the_tokens_page_is_admin_only_and_not_in_other_roles_navigation(client, tokens):
    await sign_in(client, tokens["moderator"])
    assert 'href="/tokens"' not in await (await client.get("/now")).text()
    answer = await client.get("/tokens")
    assert answer.status == 403 and "needs the role admin" in await answer.text()
    csrf = await page_csrf(client)
    refused = await client.post("/tokens", data={"csrf_token": csrf, "name": "x", "role": "admin"})
    assert refused.status == 403
    _status, data = await call(client, "GET", "/api/v1/admin/tokens", tokens["admin"])
    assert "x" not in [t["name"] for t in data["items"]]


async def test_an_admin_makes_a_token_shown_once_that_works_then_revokes_it(client, tokens):
    await sign_in(client, tokens["admin"])
    html = await (await client.get("/tokens")).text()
    assert 'href="/tokens"' in html
    row = re.search(r'<tr data-token="\d+">(.*?)</tr>', html, re.S).group(1)
    assert "test-admin" in row and "active" in row
    fields = dict(form_of(html, "new-token-form"))
    fields.update({"name": "night-shift", "role": "moderator", "expires": "12h"})
    answer = await client.post("/tokens", data=fields)
    assert answer.status == 201
    html = await answer.text()
    token = re.search(r'id="new-token" readonly value="(pgt_[^"]+)"', html).group(1)
    assert "shown this once" in html
    status, data = await call(client, "GET", "/api/v1/admin/runs", token)
    assert status == 200
    status, data = await call(client, "GET", "/api/v1/admin/tokens", tokens["admin"])
    made = next(t for t in data["items"] if t["name"] == "night-shift")
    assert made["role"] == "moderator" and made["expires_at"] == "2027-03-02T00:00:00Z"
    listing = await (await client.get("/tokens")).text()
    assert token not in listing
    answer = await client.post(
        f"/tokens/{made['id']}/revoke",
        data={"csrf_token": csrf_of(listing)},
        allow_redirects=False,
    )
    assert answer.status == 303
    status, _ = await call(client, "GET", "/api/v1/admin/runs", token)
    assert status == 401
    html = await (await client.get(answer.headers["Location"])).text()
    assert f"Token {made['id']} is revoked." in html
    row = re.search(rf'<tr data-token="{made["id"]}">(.*?)</tr>', html, re.S).group(1)
    assert "revoked" in row and "admin:test-admin" in row and "<button" not in row
    again = await client.post(f"/tokens/{made['id']}/revoke", data={"csrf_token": csrf_of(html)})
    assert again.status == 409 and "was already revoked" in await again.text()


async def test_a_bad_token_request_is_shown_at_its_fields(client, tokens):
    await sign_in(client, tokens["admin"])
    csrf = await page_csrf(client, "/tokens")
    answer = await client.post(
        "/tokens", data={"csrf_token": csrf, "name": " ", "role": "king", "expires": "soon"}
    )
    assert answer.status == 400
    html = await answer.text()
    assert 'id="err-expires-1">⚠ &#39;soon&#39; is not a duration' in html
    answer = await client.post(
        "/tokens", data={"csrf_token": csrf, "name": " ", "role": "king", "expires": ""}
    )
    html = await answer.text()
    assert answer.status == 400
    assert 'id="err-name-1">⚠ expected 1 to 100 characters' in html
    assert 'id="err-role-1">⚠ &#39;king&#39; is not a role' in html
    assert 'aria-invalid="true" aria-describedby="err-name-1"' in html
    _status, data = await call(client, "GET", "/api/v1/admin/tokens", tokens["admin"])
    assert len(data["items"]) == len(tokens)
