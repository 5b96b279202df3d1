"""An event's save-time warnings in the console, over the real app and database (both
dialects): the editor shows each with an "I know; don't warn me again" box that adds its id
to the spec's ``acknowledge`` on save; a console save keeps what was acknowledged (through
the API too, and ids whose warning is gone); unticking gives the warning again; a box stays
ticked when the form is redrawn; and the read-only event page lists the warnings. The same
in a real browser, with axe-core, is ``test_console_warnings_walk.py``."""

from __future__ import annotations

import copy
import re
from typing import Any

from tests.api.test_events_api import EVENTS, call, create
from tests.console.test_console import form_of, sign_in
from tests.console.test_console_params import _op, _save, _set, _stored

WARNING_ID = "gate-unscoped:main:colour"
BOX = "I know; don't warn me again"


def hunt() -> dict[str, Any]:
    """Wisps of the run's colour summoned, and a gate counting every colour's catches."""
    return {
        "params": [{"name": "colour", "type": "string", "option_source": "wisps.options.colours"}],
        "schedule": {"kind": "manual"},
        "phases": [
            {
                "key": "main",
                "label": "Main",
                "steps": [
                    {
                        "action": "wisps.summon",
                        "params": {"colour": {"param": "colour"}, "count": 2},
                    }
                ],
                "advance": {"on": "wisps.caught", "count": 1},
            }
        ],
    }


async def _hunt(client: Any, tokens: dict[str, str], **extra: Any) -> tuple[int, dict[str, Any]]:
    event = await create(client, tokens["admin"], title="Wisp hunt", spec={**hunt(), **extra})
    return int(event["id"]), event


async def _warnings(client: Any, tokens: dict[str, str], event_id: int) -> list[str]:
    status, data = await call(client, "GET", f"{EVENTS}/{event_id}", tokens["admin"])
    assert status == 200, data
    return [w["id"] for w in data["warnings"]]


def _box(page: str) -> str:
    """The warning's box, as drawn."""
    found = re.search(r'<input type="checkbox" id="ack-0"[^>]*>', page)
    assert found, "no warning box on the page"
    return found.group(0)


async def test_the_editor_shows_the_warning_and_its_box_acknowledges_it_on_save(client, tokens):
    event_id, event = await _hunt(client, tokens)
    assert [w["id"] for w in event["warnings"]] == [WARNING_ID]
    await sign_in(client, tokens["editor"])
    page = await (await client.get(f"/events/{event_id}")).text()
    warnings = page.split('<fieldset id="warnings"')[1].split("</fieldset>")[0]
    assert "<legend>Warnings</legend>" in warnings
    assert (
        '<p id="ack-0-text">⚠ <strong>Phase 1, gate</strong>: this gate counts wisps.caught '
        "from every colour: the steps take the colour the run&#39;s param &#34;colour&#34; "
        "chooses"
    ) in warnings
    assert _box(page) == (
        f'<input type="checkbox" id="ack-0" name="acknowledge" value="{WARNING_ID}" '
        'aria-describedby="ack-0-text">'
    )
    assert f'<label for="ack-0">{BOX}</label>' in warnings
    # not ticked: a save leaves the warning as it was
    await _save(client, event_id, form_of(page))
    assert "acknowledge" not in await _stored(client, tokens, event_id)
    # ticked: the save lists its id, and the warning is no longer given
    await _save(client, event_id, [*form_of(page), ("acknowledge", WARNING_ID)])
    assert (await _stored(client, tokens, event_id))["acknowledge"] == [WARNING_ID]
    assert await _warnings(client, tokens, event_id) == []
    page = await (await client.get(f"/events/{event_id}")).text()
    assert "Acknowledged warnings (1)" in page
    assert _box(page).endswith(" checked>")


async def test_a_console_save_keeps_what_was_acknowledged_and_unticking_warns_again(client, tokens):
    gone = "gate-unscoped:muster:server"  # acknowledged once; its gate has gone since
    event_id, _ = await _hunt(client, tokens, acknowledge=[WARNING_ID, gone])
    assert await _warnings(client, tokens, event_id) == []
    await sign_in(client, tokens["editor"])
    page = await (await client.get(f"/events/{event_id}")).text()
    assert f'<input type="hidden" name="acknowledge" value="{gone}">' in page
    # an edit elsewhere keeps both ids
    await _save(client, event_id, _set(form_of(page), title="Wisp hunt, redux"))
    assert (await _stored(client, tokens, event_id))["acknowledge"] == [WARNING_ID, gone]
    assert await _warnings(client, tokens, event_id) == []
    # unticked: the warning is given again; the gone gate's id stays
    fields = [f for f in form_of(page) if f != ("acknowledge", WARNING_ID)]
    await _save(client, event_id, fields)
    assert (await _stored(client, tokens, event_id))["acknowledge"] == [gone]
    assert await _warnings(client, tokens, event_id) == [WARNING_ID]


async def test_a_saved_page_says_it_has_warnings(client, tokens):
    event_id, _ = await _hunt(client, tokens)
    await sign_in(client, tokens["editor"])
    page = await (await client.get(f"/events/{event_id}?saved=1")).text()
    assert re.search(
        r'<div class="banner" role="status" id="notice" data-tone="warn"><p>Saved\. '
        r"1 warning: see Warnings below\.</p>",
        page,
    )
    spec = copy.deepcopy(hunt())
    spec["phases"][0]["advance"]["where"] = {
        "var": "colour",
        "op": "eq",
        "value": {"param": "colour"},
    }
    status, data = await call(
        client, "PUT", f"{EVENTS}/{event_id}", tokens["admin"], {"spec": spec}
    )
    assert (status, data["warnings"]) == (200, [])
    page = await (await client.get(f"/events/{event_id}?saved=1")).text()
    assert "<p>Saved.</p>" in page and 'id="warnings"' not in page


async def test_a_ticked_box_stays_ticked_when_the_form_is_redrawn(client, tokens):
    event_id, _ = await _hunt(client, tokens)
    await sign_in(client, tokens["editor"])
    page = await (await client.get(f"/events/{event_id}")).text()
    part = await _op(client, event_id, [*form_of(page), ("acknowledge", WARNING_ID)], "add-phase")
    assert "Added phase 2" in part and _box(part).endswith(" checked>")
    await _save(client, event_id, form_of(part))
    stored = await _stored(client, tokens, event_id)
    assert (len(stored["phases"]), stored["acknowledge"]) == (2, [WARNING_ID])


async def test_an_acknowledgement_that_is_not_an_id_is_named_and_nothing_is_saved(client, tokens):
    event_id, _ = await _hunt(client, tokens)
    await sign_in(client, tokens["editor"])
    page = await (await client.get(f"/events/{event_id}")).text()
    answer = await client.post(
        f"/events/{event_id}", data=[*form_of(page), ("acknowledge", "x" * 201), ("op", "save")]
    )
    assert answer.status == 400
    assert "expected a warning id such as" in await answer.text()
    assert "acknowledge" not in await _stored(client, tokens, event_id)


async def test_the_read_only_event_page_lists_the_warnings(client, tokens):
    event_id, _ = await _hunt(client, tokens)
    await sign_in(client, tokens["moderator"])
    page = await (await client.get(f"/events/{event_id}")).text()
    section = page.split('<section id="warnings"')[1].split("</section>")[0]
    assert '<h2 id="warnings-h">Warnings</h2>' in section
    assert "<strong>Phase 1, gate</strong>: this gate counts wisps.caught" in section
    assert 'type="checkbox"' not in section
    await call(
        client,
        "PUT",
        f"{EVENTS}/{event_id}",
        tokens["admin"],
        {"spec": {**hunt(), "acknowledge": [WARNING_ID]}},
    )
    page = await (await client.get(f"/events/{event_id}")).text()
    assert 'id="warnings"' not in page
