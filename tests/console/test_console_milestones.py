"""The event editor's milestone fields on a public count gate: saved into the gate's
``milestones``, drawn again from it, kept by a save that does not touch them, and a bad
percentage named at its field."""

from __future__ import annotations

import re
from html import unescape
from typing import Any

from pageant.engine import Engine
from tests.api.test_events_api import EVENTS, call
from tests.console.test_console import form_of, sign_in
from tests.factories import announce, phase, publish_event, spec

FIELDS = ("p0-milestones-at", "p0-milestones-legs", "p0-milestones-message")


async def _editor(client: Any, tokens: dict[str, str], host: Any) -> tuple[int, str]:
    gate = {"on": "wisps.caught", "count": 8, "public": True, "label": "Wisps caught"}
    event = await publish_event(
        host.db,
        host.clock.now(),
        spec(phase("hunt", announce("hi"), advance=gate)),
        published=False,
    )
    await sign_in(client, tokens["admin"])
    return event.id, await (await client.get(f"/events/{event.id}")).text()


def _without(fields: list[tuple[str, str]], *names: str) -> list[tuple[str, str]]:
    return [f for f in fields if f[0] not in names]


async def test_the_editor_saves_milestones_and_keeps_them(client, tokens, host):
    event_id, html = await _editor(client, tokens, host)
    fields = form_of(html)
    assert ("p0-milestones-at", "") in fields
    answer = await client.post(
        f"/events/{event_id}",
        data=[
            *_without(fields, *FIELDS),
            ("p0-milestones-at", "50, 25"),
            ("p0-milestones-legs", "core.log"),
            ("p0-milestones-message", "Wisps: {count} of {target}"),
            ("op", "save"),
        ],
        allow_redirects=False,
    )
    assert answer.status == 303, await answer.text()
    _, event = await call(client, "GET", f"{EVENTS}/{event_id}", tokens["admin"])
    stored = {"at": [25, 50], "legs": ["core.log"], "message": "Wisps: {count} of {target}"}
    assert event["spec"]["phases"][0]["advance"]["milestones"] == stored

    fields = form_of(await (await client.get(f"/events/{event_id}")).text())
    assert ("p0-milestones-at", "25, 50") in fields
    answer = await client.post(
        f"/events/{event_id}", data=[*fields, ("op", "save")], allow_redirects=False
    )
    assert answer.status == 303, await answer.text()
    _, event = await call(client, "GET", f"{EVENTS}/{event_id}", tokens["admin"])
    assert event["spec"]["phases"][0]["advance"]["milestones"] == stored


async def test_a_bad_milestone_is_named_where_it_is_written(client, tokens, host):
    event_id, html = await _editor(client, tokens, host)
    answer = await client.post(
        f"/events/{event_id}",
        data=[
            *_without(form_of(html), *FIELDS),
            ("p0-milestones-at", "25, lots"),
            ("p0-milestones-legs", "core.log"),
            ("p0-milestones-message", "Caught by {player}"),
            ("op", "save"),
        ],
    )
    page = await answer.text()
    assert answer.status == 400, page
    assert 'expected a whole percentage from 1 to 100; got "lots"' in unescape(page)
    assert "{player} is not a placeholder" in unescape(page)
    assert re.search(r'id="p0-milestones-message"[^>]*aria-invalid="true"', page), page
    _, event = await call(client, "GET", f"{EVENTS}/{event_id}", tokens["admin"])
    assert "milestones" not in event["spec"]["phases"][0]["advance"]


async def test_the_run_page_lists_the_gate_s_milestones(client, tokens, host):
    admin = tokens["admin"]
    gate = {
        "on": "wisps.caught",
        "count": 8,
        "public": True,
        "milestones": {"at": [25, 100], "legs": ["core.log"], "message": "{count} of {target}"},
    }
    status, event = await call(
        client,
        "POST",
        EVENTS,
        admin,
        {"title": "Wisp Night", "spec": spec(phase("hunt", announce("hi"), advance=gate))},
    )
    assert status == 201, event
    status, data = await call(client, "POST", f"{EVENTS}/{event['id']}/publish", admin)
    assert status == 200, data
    status, run = await call(client, "POST", f"{EVENTS}/{event['id']}/runs", admin, {})
    assert status == 201, run
    engine = Engine(host)
    try:
        await engine.tick()
    finally:
        await engine.stop()
    await sign_in(client, tokens["moderator"])
    page = unescape(await (await client.get(f"/runs/{run['id']}")).text())
    assert "Milestones told to players" in page
    assert "Milestone: 25% (2) (core.log)" in page
    assert "Milestone: 100% (8) (core.log)" in page
