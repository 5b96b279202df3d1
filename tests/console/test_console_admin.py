"""The web console's admin pages over the real app and a real database (both dialects): the
switchboard (every staff role reads it, an admin changes it, bad caps shown at their field),
and the tokens page (admin only: list, make one shown once, revoke)."""

from __future__ import annotations

import re

from tests.api.test_events_api import call
from tests.console.test_console import csrf_of, form_of, page_csrf, sign_in

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


# ── verify and rehearse in the editor ──────────────────────────────────────────


def _summon(count: int) -> dict:
    return {"action": "wisps.summon", "params": {"colour": "north", "count": count}}


async def _wisps_event(client, tokens, *steps: dict, advance: dict | None = None) -> int:
    from tests.api.test_events_api import EVENTS, create
    from tests.scheduling import spec_with

    main = {"key": "main", "label": "Main", "steps": list(steps)}
    if advance is not None:
        main["advance"] = advance
    event = await create(
        client, tokens["admin"], title="Wisps", spec=spec_with({"kind": "manual"}, main)
    )
    status, data = await call(client, "POST", f"{EVENTS}/{event['id']}/publish", tokens["admin"])
    assert status == 200, data
    return event["id"]


async def test_verify_shows_every_problem_at_the_field_its_path_names(client, tokens):
    event_id = await _wisps_event(client, tokens, _summon(5))
    await sign_in(client, tokens["editor"])
    html = await (await client.get(f"/events/{event_id}")).text()
    assert ">Verify v1</button>" in html and ">Rehearse v1</button>" in html
    answer = await client.post(f"/events/{event_id}/verify", data={"csrf_token": csrf_of(html)})
    assert answer.status == 400
    html = await answer.text()
    assert "did not pass verification; nothing was recorded" in html
    # at the step's own field, and in the summary at the top
    assert re.search(
        r'id="err-spec-phases_0-steps_0-1">⚠ wisps.summon is a change action, disabled', html
    )
    # numbered as the form numbers it, and linked to the switchboard row that fixes it
    assert (
        "<li><strong>Phase 1, step 1</strong>: wisps.summon is a change action, disabled "
        'by default (its risk) <a href="/switchboard/wisps.summon">Change it on the '
        "switchboard</a></li>"
    ) in html
    _status, data = await call(client, "GET", f"/api/v1/admin/events/{event_id}", tokens["admin"])
    assert data["version_verified"] is False


async def test_verify_records_the_version_verified_and_shows_the_spend(client, tokens):
    event_id = await _wisps_event(client, tokens, _summon(5), _summon(7))
    status, data = await call(
        client,
        "PUT",
        "/api/v1/admin/actions/wisps.summon",
        tokens["admin"],
        {"enabled": True, "caps": {"wisps.wisps": 30}},
    )
    assert status == 200, data
    await sign_in(client, tokens["editor"])
    csrf = await page_csrf(client, f"/events/{event_id}")
    answer = await client.post(f"/events/{event_id}/verify", data={"csrf_token": csrf})
    assert answer.status == 200
    html = await answer.text()
    assert "Version 1 passed verification and is recorded verified." in html
    assert "✓ Verified</strong> v1" in html and "editor:test-editor" in html
    spend = re.search(r'<div id="verified">(.*?)</div>', html, re.S).group(1)
    assert "12 wisps" in spend and "30 wisps" in spend
    assert 'href="/switchboard/wisps.summon"' in spend
    assert '<meter min="0" max="30" value="12"' in spend
    status, data = await call(client, "GET", f"/api/v1/admin/events/{event_id}", tokens["admin"])
    assert data["version_verified"] is True


async def test_a_moderator_may_not_verify_or_rehearse(client, tokens):
    event_id = await _wisps_event(client, tokens, _summon(5))
    await sign_in(client, tokens["moderator"])
    html = await (await client.get(f"/events/{event_id}")).text()
    assert "Verify v1" not in html and "Rehearse v1" not in html
    for what in ("verify", "rehearse"):
        answer = await client.post(f"/events/{event_id}/{what}", data={"csrf_token": csrf_of(html)})
        assert answer.status == 403


async def test_verify_before_publishing_says_so_on_the_editor(client, tokens, host):
    from tests.factories import publish_event

    event = await publish_event(host.db, host.clock.now(), published=False)
    await sign_in(client, tokens["admin"])
    html = await (await client.get(f"/events/{event.id}")).text()
    assert "Publish a version first" in html
    answer = await client.post(f"/events/{event.id}/verify", data={"csrf_token": csrf_of(html)})
    assert answer.status == 409
    assert "has no published version; publish it, then verify" in await answer.text()


async def test_rehearse_draws_the_timeline_the_spend_and_the_stall(client, tokens):
    gate = {"on": "wisps.caught", "count": 1}
    event_id = await _wisps_event(client, tokens, _summon(5), _summon(40), advance=gate)
    await call(
        client,
        "PUT",
        "/api/v1/admin/actions/wisps.summon",
        tokens["admin"],
        {"enabled": True, "caps": {"wisps.wisps": 30}},
    )
    await sign_in(client, tokens["admin"])
    csrf = await page_csrf(client, f"/events/{event_id}")
    answer = await client.post(f"/events/{event_id}/rehearse", data={"csrf_token": csrf})
    assert answer.status == 200, await answer.text()
    html = await answer.text()
    assert "Rehearsed version 1" in html and "nothing was performed" in html
    drawn = re.search(r'<div id="rehearsal">(.*)</div>\s*</section>', html, re.S).group(1)
    assert drawn.count('class="tl-phase"') == 1
    assert drawn.count('class="tl-step"') == 2
    assert re.search(r'class="tl-bar[^"]* l-\d+ w-\d+"', drawn)
    assert "45 wisps" in drawn and "⚠ over the cap" in drawn
    assert "Refusals" in drawn and "wisps.summon" in drawn
    status, data = await call(
        client,
        "POST",
        f"/api/v1/admin/events/{event_id}/rehearse",
        tokens["admin"],
    )
    assert status == 200
    assert len(data["refusals"]) == drawn.count("<li>✗")


def test_the_axis_words_and_bars():
    from pageant.console.rehearsal import _bar, drawn
    from pageant.console.timeline import duration

    assert [duration(s) for s in (0, 45, 300, 5400, 200000)] == [
        "0 s",
        "45 s",
        "5 min",
        "1 h 30 min",
        "2 d 7 h",
    ]
    assert _bar(30, 60, 120) == {
        "left": 25,
        "width": 25,
        "from": "30 s",
        "to": "1 min",
        "open": False,
    }
    assert _bar(119.9, None, 120)["width"] == 1
    report = {
        "outcome": {"status": "running", "health": "stalled", "ended_seconds": None},
        "timeline": {"phases": [{"key": "a", "entered_seconds": 0, "left_seconds": None}]},
        "stalls": [{"phase": "a", "stalled_seconds": 600}],
    }
    out = drawn(report)
    assert out["span"] == 600 and out["ticks"][-1]["words"] == "10 min"
    assert out["placed"][0]["bar"]["open"] and out["stall_marks"][0]["at"] == 100


async def test_rehearse_marks_where_the_run_stalls_at_a_gate_nobody_fires(client, tokens):
    gate = {"on": "wisps.caught", "count": 1}
    event_id = await _wisps_event(
        client,
        tokens,
        {"action": "core.announce", "params": {"leg": "core.log", "message": "hi"}},
        advance=gate,
    )
    await sign_in(client, tokens["editor"])
    csrf = await page_csrf(client, f"/events/{event_id}")
    html = await (
        await client.post(f"/events/{event_id}/rehearse", data={"csrf_token": csrf})
    ).text()
    drawn = re.search(r'<div id="rehearsal">(.*)</div>\s*</section>', html, re.S).group(1)
    assert '<span class="status h-stalled">stalled</span>' in drawn
    assert 'class="tl-bar open l-0 w-100"' in drawn and 'class="tl-stall l-100"' in drawn
    assert "stalled after 1 h, waiting for <code>wisps.caught</code>" in drawn
    assert "This version spends nothing metered." in drawn
