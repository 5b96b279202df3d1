"""The event editor's requirement control (a campaign): the event, the outcome and the window
without JSON — saved into the spec, drawn again from it, kept by a save that does not touch
it, an unknown event named at its field; and the console's calendar writing the chain and a
held occurrence's reason in words."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape
from typing import Any

from pageant.engine import Engine
from tests.api.test_events_api import EVENTS, call
from tests.console.test_console import form_of, sign_in
from tests.engine.test_campaigns import campaign, occurrence, settle
from tests.factories import announce, phase, publish_event, spec

CONTROLS = ("requires-event", "requires-outcome", "requires-within-n", "requires-within-unit")


async def _editor(client: Any, tokens: dict[str, str], host: Any) -> tuple[int, str]:
    event = await publish_event(
        host.db, host.clock.now(), spec(phase("p", announce("hi"))), published=False
    )
    await sign_in(client, tokens["admin"])
    html = await (await client.get(f"/events/{event.id}")).text()
    return event.id, html


def _without(fields: list[tuple[str, str]], *names: str) -> list[tuple[str, str]]:
    return [f for f in fields if f[0] not in names]


async def test_the_editor_saves_a_requirement_and_keeps_it(client, tokens, host):
    other = await publish_event(
        host.db, host.clock.now(), spec(phase("p", announce("muster"))), published=False
    )
    _, other_event = await call(client, "GET", f"{EVENTS}/{other.id}", tokens["admin"])
    event_id, html = await _editor(client, tokens, host)
    fields = form_of(html)
    assert ("requires-event", "") in fields  # none yet

    answer = await client.post(
        f"/events/{event_id}",
        data=[
            *_without(fields, *CONTROLS),
            ("requires-event", other_event["slug"]),
            ("requires-outcome", "ended"),
            ("requires-within-n", "3"),
            ("requires-within-unit", "d"),
            ("op", "save"),
        ],
        allow_redirects=False,
    )
    assert answer.status == 303, await answer.text()
    _, event = await call(client, "GET", f"{EVENTS}/{event_id}", tokens["admin"])
    chain = {"event": other_event["slug"], "outcome": "ended", "within": "3d"}
    assert event["spec"]["requires"] == chain

    # Drawn again from the spec; a save of the form as drawn keeps it.
    fields = form_of(await (await client.get(f"/events/{event_id}")).text())
    assert {("requires-event", other_event["slug"]), ("requires-within-n", "3")} <= set(fields)
    answer = await client.post(
        f"/events/{event_id}", data=[*fields, ("op", "save")], allow_redirects=False
    )
    assert answer.status == 303, await answer.text()
    _, event = await call(client, "GET", f"{EVENTS}/{event_id}", tokens["admin"])
    assert event["spec"]["requires"] == chain


async def test_an_unknown_event_is_named_at_its_field_and_nothing_is_saved(client, tokens, host):
    event_id, html = await _editor(client, tokens, host)
    answer = await client.post(
        f"/events/{event_id}",
        data=[
            *_without(form_of(html), *CONTROLS),
            ("requires-event", "champion-muster"),
            ("requires-outcome", "completed"),
            ("requires-within-n", "7"),
            ("requires-within-unit", "d"),
            ("op", "save"),
        ],
    )
    page = await answer.text()
    assert answer.status == 400, page
    assert 'no event "champion-muster"' in unescape(page)
    assert re.search(r'id="requires-event"[^>]*aria-invalid="true"', page), page
    _, event = await call(client, "GET", f"{EVENTS}/{event_id}", tokens["admin"])
    assert "requires" not in event["spec"]


async def test_the_console_calendar_writes_the_chain_and_the_hold(client, tokens, host):
    t0 = host.clock.now()
    a, b, slug = await campaign(host)
    a_run = await occurrence(host, a, t0)
    await occurrence(host, b, t0 + timedelta(minutes=5))
    engine = Engine(host)
    try:
        await settle(engine)
        host.clock.set(t0 + timedelta(minutes=5))
        await settle(engine)
    finally:
        await engine.stop()
    await sign_in(client, tokens["moderator"])
    page = unescape(await (await client.get(f"/calendar?view=agenda&month={t0:%Y-%m}")).text())
    assert f"only after {slug} has ended completed within 7d before it" in page
    assert f"held: waiting for {slug} (run {a_run}) to complete" in page
