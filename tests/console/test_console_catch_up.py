"""The event editor's catch-up control: a policy select and its window, without JSON — saved
into the spec, shown again from it, and a bad window named at the field."""

from __future__ import annotations

import re
from html import unescape
from typing import Any

from pageant.engine import Engine
from tests.api.test_events_api import EVENTS, call
from tests.console.test_console import form_of, sign_in
from tests.engine.test_catch_up import BERLIN, catch_up, hourly_event, outage, settle
from tests.factories import announce, phase, publish_event, spec


async def _editor(client: Any, tokens: dict[str, str], host: Any) -> tuple[int, list[Any]]:
    event = await publish_event(
        host.db, host.clock.now(), spec(phase("p", announce("hi"))), published=False
    )
    await sign_in(client, tokens["admin"])
    html = await (await client.get(f"/events/{event.id}")).text()
    return event.id, html


def _without(fields: list[tuple[str, str]], *names: str) -> list[tuple[str, str]]:
    return [f for f in fields if f[0] not in names]


CONTROLS = ("catch-up", "catch-up-within-n", "catch-up-within-unit")


async def test_the_editor_offers_catch_up_and_saves_it_into_the_spec(client, tokens, host):
    event_id, html = await _editor(client, tokens, host)
    fields = form_of(html)
    assert ("catch-up", "none") in fields  # an event without catch_up shows "none"

    answer = await client.post(
        f"/events/{event_id}",
        data=[
            *_without(fields, *CONTROLS),
            ("catch-up", "one"),
            ("catch-up-within-n", "3"),
            ("catch-up-within-unit", "h"),
            ("op", "save"),
        ],
        allow_redirects=False,
    )
    assert answer.status == 303, await answer.text()
    status, event = await call(client, "GET", f"{EVENTS}/{event_id}", tokens["admin"])
    assert status == 200
    assert event["spec"]["catch_up"] == {"policy": "one", "within": "3h"}

    # Drawn again from the spec, and "none" takes it out again.
    fields = form_of(await (await client.get(f"/events/{event_id}")).text())
    assert {("catch-up", "one"), ("catch-up-within-n", "3"), ("catch-up-within-unit", "h")} <= set(
        fields
    )
    answer = await client.post(
        f"/events/{event_id}",
        data=[*_without(fields, "catch-up"), ("catch-up", "none"), ("op", "save")],
        allow_redirects=False,
    )
    assert answer.status == 303, await answer.text()
    _, event = await call(client, "GET", f"{EVENTS}/{event_id}", tokens["admin"])
    assert "catch_up" not in event["spec"]


async def test_a_window_past_the_bound_or_missing_is_named_at_its_field(client, tokens, host):
    event_id, html = await _editor(client, tokens, host)
    fields = _without(form_of(html), *CONTROLS)
    for amount, unit, words in [
        ("8", "d", "from 1m to 7d"),
        ("", "h", 'required for "all"'),
    ]:
        answer = await client.post(
            f"/events/{event_id}",
            data=[
                *fields,
                ("catch-up", "all"),
                ("catch-up-within-n", amount),
                ("catch-up-within-unit", unit),
                ("op", "save"),
            ],
        )
        page = await answer.text()
        assert answer.status == 400, page
        assert words in unescape(page)
        assert re.search(r'id="catch-up-within-n"[^>]*aria-invalid="true"', page), page
    _, event = await call(client, "GET", f"{EVENTS}/{event_id}", tokens["admin"])
    assert "catch_up" not in event["spec"]  # nothing was saved


async def test_the_console_calendar_shows_each_decision_s_reason(client, tokens, host):
    event = await hourly_event(host, BERLIN, catch_up("one", "3h"))
    engine = Engine(host)
    try:
        await outage(host, engine, BERLIN)
        await settle(engine, host.db, event)
    finally:
        await engine.stop()
    await sign_in(client, tokens["moderator"])
    page = unescape(await (await client.get("/calendar?view=agenda&month=2026-10")).text())
    assert page.count("a later occurrence (run ") == 2
    assert "started 45 min late, catching up after the host was down" in page
