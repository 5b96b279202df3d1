"""The event editor's announcement fields: saved with the spec, refused at their place, and
previewed from the form as it stands."""

from __future__ import annotations

import html

from tests.console.test_console import csrf_of, form_of, sign_in

EVENTS = "/api/v1/admin/events"


async def _event(client, token: str) -> int:
    from tests.conftest import bearer

    body = {
        "title": "Wisp Night",
        "timezone": "Europe/Berlin",
        "spec": {
            "schedule": {"kind": "weekly", "days": ["friday"], "time": "20:00"},
            "phases": [
                {
                    "key": "main",
                    "label": "Main",
                    "steps": [
                        {
                            "action": "core.announce",
                            "params": {"leg": "core.log", "message": "Wisps gather"},
                        }
                    ],
                }
            ],
        },
    }
    response = await client.post(EVENTS, json=body, headers=bearer(token))
    assert response.status == 201, await response.text()
    return (await response.json())["id"]


async def test_the_editor_saves_the_template_and_shows_it_again(client, tokens):
    event_id = await _event(client, tokens["editor"])
    await sign_in(client, tokens["editor"])
    page = await (await client.get(f"/events/{event_id}")).text()
    fields = dict(form_of(page))
    assert fields["announce-title"] == "" and "announce-body" in fields
    form = {**fields, "announce-title": "{title} tonight", "announce-body": "{message}! {when}"}
    saved = await client.post(f"/events/{event_id}", data={**form, "op": "save"})
    assert saved.status == 200  # followed to the editor
    again = dict(form_of(await saved.text()))
    assert again["announce-title"] == "{title} tonight"
    assert again["announce-body"] == "{message}! {when}"


async def test_a_bad_template_is_shown_at_its_field_and_not_saved(client, tokens):
    event_id = await _event(client, tokens["editor"])
    await sign_in(client, tokens["editor"])
    fields = dict(form_of(await (await client.get(f"/events/{event_id}")).text()))
    answer = await client.post(
        f"/events/{event_id}", data={**fields, "announce-body": "{starts}", "op": "save"}
    )
    assert answer.status == 400
    text = html.unescape(await answer.text())
    assert 'id="err-spec-announcement-body-1"' in text
    assert "{starts} is not a placeholder" in text
    fresh = dict(form_of(await (await client.get(f"/events/{event_id}")).text()))
    assert fresh["announce-body"] == ""


async def test_the_preview_renders_the_form_as_it_stands(client, tokens):
    event_id = await _event(client, tokens["editor"])
    await sign_in(client, tokens["editor"])
    page = await (await client.get(f"/events/{event_id}")).text()
    assert f'hx-post="/events/{event_id}/announce-preview"' in page
    fields = dict(form_of(page))
    answer = await client.post(
        f"/events/{event_id}/announce-preview",
        data={
            **fields,
            "announce-title": "{title} tonight",
            "announce-body": "{message} at {when}",
        },
    )
    assert answer.status == 200
    text = html.unescape(await answer.text())
    assert "<dd>Wisp Night tonight</dd>" in text
    # The clock stands at Monday 2027-03-01; the next Friday 20:00 in Berlin.
    assert "<pre>Wisps gather at Fri 5 Mar 2027, 20:00 CET</pre>" in text
    assert '"embeds"' in text and '"blocks"' in text
    refused = await client.post(
        f"/events/{event_id}/announce-preview", data={**fields, "announce-title": "{nope}"}
    )
    assert "spec.announcement.title: {nope} is not a placeholder" in html.unescape(
        await refused.text()
    )


async def test_the_preview_shows_a_plugins_leg_beside_the_built_in_ones(crier_client, tokens):
    event_id = await _event(crier_client, tokens["editor"])
    await sign_in(crier_client, tokens["editor"])
    fields = dict(form_of(await (await crier_client.get(f"/events/{event_id}")).text()))
    answer = await crier_client.post(
        f"/events/{event_id}/announce-preview",
        data={**fields, "announce-title": "{title} tonight"},
    )
    assert answer.status == 200
    text = html.unescape(await answer.text())
    assert "<h4><code>crier.bell</code></h4>" in text
    assert '"line": "Hear ye! Wisp Night tonight: Wisps gather"' in text
    assert "preview raised ValueError: the bell is cracked" in text
    assert "<code>crier.mute</code>" not in text and "<code>core.log</code>" not in text
    assert "<h4><code>core.discord</code></h4>" in text


async def test_a_moderator_may_not_preview_from_the_editor(client, tokens):
    event_id = await _event(client, tokens["editor"])
    await sign_in(client, tokens["moderator"])
    nonce = csrf_of(await (await client.get("/now")).text())
    answer = await client.post(f"/events/{event_id}/announce-preview", data={"csrf_token": nonce})
    assert answer.status == 403
