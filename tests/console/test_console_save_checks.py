"""The console editor's Save and the API's save check the same things, over the real app and
database (both dialects): a value written where an option source's value is taken (a step's
param, a run param's default) that the source does not offer is refused by both, in the same
sentence, and nothing is saved; a source that cannot answer refuses neither and is logged;
and the source is asked before the save's write transaction, so a slow game holds no lock
that another save waits on."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from tests.api.test_events_api import EVENTS, call, create
from tests.console.test_console import form_of, sign_in
from tests.console.test_console_params import _set, _stored

COLOURS = "wisps.options.colours"
NOT_A_COLOUR = (
    "spec.phases[0].steps[0].params.colour: 'purple' is not a value of wisps.options.colours; "
    'expected one of "north", "south", "ember"'
)
#: How long a save may wait behind another that asks a slow option source (the bound is
#: far above a save's own time; the other save waits until its source is released).
WAIT_SECONDS = 10


def _summon(colour: Any = "north") -> dict[str, Any]:
    return {
        "schedule": {"kind": "manual"},
        "phases": [
            {
                "key": "main",
                "label": "Main",
                "steps": [{"action": "wisps.summon", "params": {"colour": colour, "count": 2}}],
            }
        ],
    }


async def _summoning(client: Any, tokens: dict[str, str], **spec: Any) -> int:
    event = await create(client, tokens["admin"], title="Wisp hunt", spec={**_summon(), **spec})
    return int(event["id"])


async def _console_save(client: Any, event_id: int, fields: list[tuple[str, str]]) -> Any:
    return await client.post(
        f"/events/{event_id}", data=[*fields, ("op", "save")], allow_redirects=False
    )


async def test_a_step_param_its_source_does_not_offer_is_refused_by_the_console_as_by_the_api(
    client, tokens
):
    event_id = await _summoning(client, tokens)
    before = await _stored(client, tokens, event_id)
    status, data = await call(
        client, "PUT", f"{EVENTS}/{event_id}", tokens["admin"], {"spec": _summon("purple")}
    )
    assert (status, data["error"]["details"]) == (400, [NOT_A_COLOUR])

    await sign_in(client, tokens["admin"])
    html = await (await client.get(f"/events/{event_id}")).text()
    # a value the dropdown does not offer: posted by hand, or offered before the source
    # changed its answer
    answer = await _console_save(client, event_id, _set(form_of(html), p0_s0_param_colour="purple"))
    assert answer.status == 400
    page = await answer.text()
    assert "The event was not saved" in page
    assert "&#39;purple&#39; is not a value of wisps.options.colours" in page
    described = 'aria-describedby="err-spec-phases_0-steps_0-params-colour-1"'
    assert f'aria-invalid="true" {described}' in page
    assert await _stored(client, tokens, event_id) == before

    # the same form with a value the source offers saves
    answer = await _console_save(client, event_id, _set(form_of(html), p0_s0_param_colour="ember"))
    assert answer.status == 303, await answer.text()
    stored = await _stored(client, tokens, event_id)
    assert stored["phases"][0]["steps"][0]["params"]["colour"] == "ember"


async def test_a_run_param_default_its_source_does_not_offer_is_refused_by_both(client, tokens):
    colour = {"name": "colour", "type": "string", "option_source": COLOURS}
    event_id = await _summoning(client, tokens, params=[colour])
    expected = (
        "spec.params[0].default: 'purple' is not a value of wisps.options.colours; "
        'expected one of "north", "south", "ember"'
    )
    body = {"spec": {**_summon(), "params": [{**colour, "default": "purple"}]}}
    status, data = await call(client, "PUT", f"{EVENTS}/{event_id}", tokens["admin"], body)
    assert (status, data["error"]["details"]) == (400, [expected])

    await sign_in(client, tokens["admin"])
    html = await (await client.get(f"/events/{event_id}")).text()
    answer = await _console_save(client, event_id, _set(form_of(html), rp0_default="purple"))
    assert answer.status == 400
    assert 'id="err-spec-params_0-default-1">⚠ &#39;purple&#39; is not a value' in (
        await answer.text()
    )
    assert "default" not in (await _stored(client, tokens, event_id))["params"][0]


async def test_a_source_that_cannot_answer_refuses_neither_save_and_is_logged(
    client, tokens, host, monkeypatch, caplog
):
    event_id = await _summoning(client, tokens)

    async def down() -> list[dict[str, str]]:
        raise ConnectionError("the wisps' realm is down")

    source = host.registry.option_sources[COLOURS]
    monkeypatch.setitem(
        host.registry.option_sources, COLOURS, source.model_copy(update={"resolve": down})
    )
    caplog.set_level(logging.WARNING, logger="pageant.events")
    status, data = await call(
        client, "PUT", f"{EVENTS}/{event_id}", tokens["admin"], {"spec": _summon("purple")}
    )
    assert status == 200, data
    await sign_in(client, tokens["admin"])
    html = await (await client.get(f"/events/{event_id}")).text()
    answer = await _console_save(client, event_id, _set(form_of(html), p0_s0_param_colour="south"))
    assert answer.status == 303, await answer.text()
    assert (await _stored(client, tokens, event_id))["phases"][0]["steps"][0]["params"] == {
        "colour": "south",
        "count": 2,
    }
    unchecked = [
        r.getMessage()
        for r in caplog.records
        if r.name == "pageant.events" and "not checked" in r.getMessage()
    ]
    assert len(unchecked) == 2, unchecked  # one for each surface's save
    assert all(
        m.startswith("saving event: spec.phases[0].steps[0].params.colour: not checked; ")
        and "ConnectionError: the wisps' realm is down" in m
        for m in unchecked
    ), unchecked


@pytest.mark.parametrize("surface", ["console", "api"])
async def test_a_save_asks_the_source_before_taking_the_write_lock(
    surface, client, tokens, host, monkeypatch
):
    """While one save waits on a slow option source, a save of the same event by someone
    else goes through (on SQLite a write transaction holds the file's write lock, on
    MariaDB the event's row is locked for the save)."""
    event_id = await _summoning(client, tokens)
    asked, release = asyncio.Event(), asyncio.Event()
    source = host.registry.option_sources[COLOURS]

    async def slow() -> list[dict[str, str]]:
        asked.set()
        await release.wait()
        return [{"value": "north", "label": "North"}, {"value": "ember", "label": "Ember"}]

    if surface == "console":
        await sign_in(client, tokens["admin"])
        html = await (await client.get(f"/events/{event_id}")).text()
        fields = _set(form_of(html), p0_s0_param_colour="ember")
    monkeypatch.setitem(
        host.registry.option_sources, COLOURS, source.model_copy(update={"resolve": slow})
    )
    if surface == "console":
        saving = asyncio.ensure_future(_console_save(client, event_id, fields))
    else:
        saving = asyncio.ensure_future(
            call(client, "PUT", f"{EVENTS}/{event_id}", tokens["admin"], {"spec": _summon("ember")})
        )
    await asyncio.wait_for(asked.wait(), WAIT_SECONDS)
    try:
        status, data = await asyncio.wait_for(
            call(
                client,
                "PUT",
                f"{EVENTS}/{event_id}",
                tokens["editor"],
                {"description": "Saved while the other save asked its source"},
            ),
            WAIT_SECONDS,
        )
        assert status == 200, data
        assert not saving.done()
    finally:
        release.set()
        answer = await saving
    if surface == "console":
        assert answer.status == 303, await answer.text()
    else:
        assert answer[0] == 200, answer
    stored = await _stored(client, tokens, event_id)
    assert stored["phases"][0]["steps"][0]["params"]["colour"] == "ember"
