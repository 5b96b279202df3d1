"""Blackouts in the console, over the real app and database (both dialects): the page lists
them, authors make, edit and archive one (a bad field is named and nothing is made), the
editor's boxes subscribe an event and its fan-out takes a stagger, and the calendar shows a
blacked-out occurrence with the blackout's name."""

from __future__ import annotations

import json
from html import unescape
from typing import Any

from tests.api.test_events_api import EVENTS, call, create
from tests.console.test_console import csrf_of, form_of, page_csrf, sign_in
from tests.scheduling import spec_with

NIGHT = {"kind": "weekly", "days": ["friday"], "start": "18:00", "end": "23:00"}
SERVER = {"name": "colour", "type": "string", "label": "Server", "required": True}


async def _make(client: Any, **fields: str) -> Any:
    csrf = await page_csrf(client, "/blackouts")
    form = {
        "csrf_token": csrf,
        "slug": "tournament-night",
        "name": "Tournament night",
        "timezone": "Europe/Berlin",
        "periods": json.dumps([NIGHT]),
        **fields,
    }
    return await client.post("/blackouts", data=form, allow_redirects=False)


async def _listed(client: Any, tokens: dict[str, str]) -> list[dict[str, Any]]:
    status, data = await call(client, "GET", "/api/v1/admin/blackouts", tokens["admin"])
    assert status == 200, data
    return list(data["items"])


async def test_an_author_makes_edits_and_archives_a_blackout_on_its_page(client, tokens):
    await sign_in(client, tokens["editor"])
    made = await _make(client)
    assert (made.status, made.headers["Location"]) == (303, "/blackouts?made=0")
    page = unescape(await (await client.get("/blackouts?made=0")).text())
    assert "Made. 0 occurrences of the subscribed events moved." in page
    assert "Friday 18:00\N{EN DASH}23:00" in page
    (blackout,) = await _listed(client, tokens)
    assert (blackout["name"], blackout["periods"]) == ("Tournament night", [NIGHT])

    csrf = csrf_of(page)
    late = {**NIGHT, "end": "23:30"}
    form = {
        "csrf_token": csrf,
        "name": "Cup night",
        "timezone": "UTC",
        "periods": json.dumps([late]),
    }
    edited = await client.post(f"/blackouts/{blackout['id']}", data=form, allow_redirects=False)
    assert edited.status == 303, await edited.text()
    (blackout,) = await _listed(client, tokens)
    assert (blackout["name"], blackout["timezone"], blackout["periods"]) == (
        "Cup night",
        "UTC",
        [late],
    )
    archived = await client.post(
        f"/blackouts/{blackout['id']}/archive", data={"csrf_token": csrf}, allow_redirects=False
    )
    assert (archived.status, archived.headers["Location"]) == (303, "/blackouts?archived=0")
    (blackout,) = await _listed(client, tokens)
    assert blackout["state"] == "archived"


async def test_bad_fields_are_named_and_nothing_is_made(client, tokens):
    await sign_in(client, tokens["admin"])
    bad = [{**NIGHT, "end": "25:00"}]
    answer = await _make(client, timezone="Mars/Olympus", periods=json.dumps(bad))
    assert answer.status == 400
    page = unescape(await answer.text())
    assert '⚠ timezone: "Mars/Olympus" is not a known IANA time zone' in page
    assert '⚠ periods[0].end: expected a 24-hour time as "HH:MM"; got "25:00"' in page
    answer = await _make(client, periods="friday evenings")
    assert answer.status == 400
    assert "⚠ periods: expected a JSON list of periods" in unescape(await answer.text())
    assert await _listed(client, tokens) == []


async def test_a_moderator_sees_the_list_but_no_form(client, tokens):
    body = {"slug": "tournament-night", "name": "Tournament night", "periods": [NIGHT]}
    status, data = await call(client, "POST", "/api/v1/admin/blackouts", tokens["admin"], body)
    assert status == 201, data
    await sign_in(client, tokens["moderator"])
    page = await (await client.get("/blackouts")).text()
    assert "Tournament night" in page and 'id="new-blackout-form"' not in page
    refused = await _make(client, slug="other")
    assert refused.status == 403
    assert len(await _listed(client, tokens)) == 1


async def test_the_editor_subscribes_an_event_and_the_calendar_names_the_blackout(client, tokens):
    await sign_in(client, tokens["admin"])
    assert (await _make(client)).status == 303
    schedule = {"kind": "weekly", "days": ["friday"], "time": "20:00"}
    event = await create(
        client,
        tokens["admin"],
        title="Friday Muster",
        timezone="Europe/Berlin",
        spec=spec_with(schedule),
    )
    html = await (await client.get(f"/events/{event['id']}")).text()
    assert 'name="blackouts" value="tournament-night">' in html  # offered, not ticked
    fields = [*[(k, v) for k, v in form_of(html) if k != "op"], ("blackouts", "tournament-night")]
    saved = await client.post(
        f"/events/{event['id']}", data=[*fields, ("op", "save")], allow_redirects=False
    )
    assert saved.status == 303, await saved.text()
    status, stored = await call(client, "GET", f"{EVENTS}/{event['id']}", tokens["admin"])
    assert status == 200
    assert stored["spec"]["blackouts"] == ["tournament-night"]
    html = await (await client.get(f"/events/{event['id']}")).text()
    assert 'name="blackouts" value="tournament-night" checked>' in html

    published = await client.post(
        f"/events/{event['id']}/publish", data={"csrf_token": csrf_of(html)}, allow_redirects=False
    )
    assert published.status == 303, await published.text()
    calendar = await (await client.get("/calendar?month=2027-03")).text()
    friday = calendar.split('<span class="day">5</span>')[1].split("</td>")[0]
    assert "blacked out (Tournament night)" in friday


async def test_the_editor_sets_a_fan_outs_stagger_and_names_a_bad_one(client, tokens):
    await sign_in(client, tokens["admin"])
    schedule = {
        "kind": "weekly",
        "days": ["friday"],
        "time": "20:00",
        "params": [{"colour": "eu-1"}, {"colour": "eu-2"}],
    }
    spec = {**spec_with(schedule), "params": [SERVER]}
    event = await create(client, tokens["admin"], title="Frenzy", spec=spec)
    html = await (await client.get(f"/events/{event['id']}")).text()
    fields = [(k, v) for k, v in form_of(html) if k not in ("op", "schedule-stagger")]
    answer = await client.post(
        f"/events/{event['id']}",
        data=[*fields, ("schedule-stagger", "2d"), ("op", "save")],
        allow_redirects=False,
    )
    assert answer.status == 400
    assert 'expected a duration from "1s" to "1d"' in unescape(await answer.text())
    answer = await client.post(
        f"/events/{event['id']}",
        data=[*fields, ("schedule-stagger", "5m"), ("op", "save")],
        allow_redirects=False,
    )
    assert answer.status == 303, await answer.text()
    status, stored = await call(client, "GET", f"{EVENTS}/{event['id']}", tokens["admin"])
    assert status == 200
    assert stored["spec"]["schedule"]["stagger"] == "5m"
