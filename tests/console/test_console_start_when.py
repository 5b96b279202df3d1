"""The event editor keeps an event's quorum (``start_when``): shown as JSON in its field,
saved back unchanged by a save that does not touch it, taken out when blanked, and a bad
one named at the field with nothing saved."""

from __future__ import annotations

import json
import re
from html import unescape
from typing import Any

from tests.api.test_events_api import EVENTS, call
from tests.console.test_console import form_of, sign_in
from tests.factories import announce, phase, publish_event, spec

QUORUM = {
    "reading": "shard.players_online",
    "params": {"server": "eu-1"},
    "at_least": 4,
    "wait": "10m",
    "else": "skip",
}


async def _editor(client: Any, tokens: dict[str, str], host: Any) -> tuple[int, list[Any]]:
    body = spec(phase("p", announce("hi")))
    body["start_when"] = QUORUM
    event = await publish_event(host.db, host.clock.now(), body, published=False)
    await sign_in(client, tokens["admin"])
    return event.id, form_of(await (await client.get(f"/events/{event.id}")).text())


def _without(fields: list[tuple[str, str]], *names: str) -> list[tuple[str, str]]:
    return [f for f in fields if f[0] not in names]


async def test_a_save_from_the_editor_keeps_the_quorum_and_a_blank_takes_it_out(
    client, tokens, host
):
    event_id, fields = await _editor(client, tokens, host)
    [shown] = [value for name, value in fields if name == "start-when"]
    assert json.loads(shown) == QUORUM

    answer = await client.post(
        f"/events/{event_id}", data=[*fields, ("op", "save")], allow_redirects=False
    )
    assert answer.status == 303, await answer.text()
    _, event = await call(client, "GET", f"{EVENTS}/{event_id}", tokens["admin"])
    assert event["spec"]["start_when"] == QUORUM

    answer = await client.post(
        f"/events/{event_id}",
        data=[*_without(fields, "start-when"), ("start-when", ""), ("op", "save")],
        allow_redirects=False,
    )
    assert answer.status == 303, await answer.text()
    _, event = await call(client, "GET", f"{EVENTS}/{event_id}", tokens["admin"])
    assert "start_when" not in event["spec"]


async def test_a_bad_quorum_is_named_at_its_field_and_nothing_is_saved(client, tokens, host):
    event_id, fields = await _editor(client, tokens, host)
    for text, words in [
        (json.dumps({**QUORUM, "at_least": 0}), "expected a number above 0"),
        ("{reading: shard", "expected an object with reading, at_least, wait and else"),
    ]:
        answer = await client.post(
            f"/events/{event_id}",
            data=[*_without(fields, "start-when"), ("start-when", text), ("op", "save")],
        )
        page = await answer.text()
        assert answer.status == 400, page
        assert words in unescape(page)
        assert re.search(r'id="start-when"[^>]*aria-invalid="true"', page), page
    _, event = await call(client, "GET", f"{EVENTS}/{event_id}", tokens["admin"])
    assert event["spec"]["start_when"] == QUORUM


async def test_a_save_from_the_editor_keeps_a_phases_reading_gate(client, tokens, host):
    gate = {**QUORUM, "wait": "30m", "else": "fail"}
    body = spec(phase("p", announce("hi"), advance=gate))
    event = await publish_event(host.db, host.clock.now(), body, published=False)
    await sign_in(client, tokens["admin"])
    fields = form_of(await (await client.get(f"/events/{event.id}")).text())
    assert ("p0-gate", "reading") in fields
    [shown] = [value for name, value in fields if name == "p0-reading-gate"]
    assert json.loads(shown) == gate
    answer = await client.post(
        f"/events/{event.id}", data=[*fields, ("op", "save")], allow_redirects=False
    )
    assert answer.status == 303, await answer.text()
    _, saved = await call(client, "GET", f"{EVENTS}/{event.id}", tokens["admin"])
    assert saved["spec"]["phases"][0]["advance"] == gate
