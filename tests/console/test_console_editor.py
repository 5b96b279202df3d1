"""The editor's second edition over the real app and database (both dialects): steps and
phases moved in place (htmx swaps only the form), the cap meter live against the
switchboard, problems numbered as the form numbers them and linked to what fixes them, and
a rehearsal's result drawn above the form in the tone of its outcome."""

from __future__ import annotations

import re
from html import unescape
from typing import Any

import pytest

from pageant.console import editor
from tests.api.test_events_api import call
from tests.console.test_console import csrf_of, form_of, page_csrf, sign_in
from tests.console.test_console_admin import _summon, _wisps_event
from tests.factories import announce, phase, publish_event, spec

HX = {"HX-Request": "true"}


def _announce(message: str) -> dict[str, Any]:
    return {"action": "core.announce", "params": {"leg": "core.log", "message": message}}


def _messages(html: str) -> list[str]:
    return re.findall(r'name="p0-s\d+-param-message" value="([^"]*)"', html)


async def _cap(client: Any, tokens: dict[str, str], cap: int) -> None:
    status, data = await call(
        client,
        "PUT",
        "/api/v1/admin/actions/wisps.summon",
        tokens["admin"],
        {"enabled": True, "caps": {"wisps.wisps": cap}},
    )
    assert status == 200, data


async def test_moving_a_step_swaps_only_the_form_and_marks_it_unsaved(client, tokens):
    event_id = await _wisps_event(client, tokens, _announce("one"), _announce("two"))
    await sign_in(client, tokens["editor"])
    html = await (await client.get(f"/events/{event_id}")).text()
    assert _messages(html) == ["one", "two"]
    assert "data-unsaved" not in html
    fields = [*form_of(html), ("op", "move-step:0:0:down")]
    answer = await client.post(f"/events/{event_id}", data=fields, headers=HX)
    part = await answer.text()
    assert answer.status == 200
    # only the form, and the focus sent to the sentence (the step is first: it has no "up")
    assert part.lstrip().startswith('<div id="editor-part" data-focus="notice">')
    assert _messages(part) == ["two", "one"]
    assert "data-unsaved" in part and "Moved step 1 of phase 1 to place 2" in part
    # the first step has no "up", the last no "down"
    assert "Move step 1 of phase 1 up" not in part and "Move step 2 of phase 1 down" not in part
    # saved, the new order is the event's
    saved = [(k, v) for k, v in form_of(part) if k != "op"] + [("op", "save")]
    answer = await client.post(f"/events/{event_id}", data=saved, allow_redirects=False)
    assert answer.status == 303
    html = await (await client.get(f"/events/{event_id}")).text()
    assert _messages(html) == ["two", "one"] and "data-unsaved" not in html


async def test_without_htmx_a_move_answers_the_whole_page(client, tokens):
    event_id = await _wisps_event(client, tokens, _announce("one"), _announce("two"))
    await sign_in(client, tokens["editor"])
    html = await (await client.get(f"/events/{event_id}")).text()
    fields = [*form_of(html), ("op", "move-step:0:1:up")]
    page = await (await client.post(f"/events/{event_id}", data=fields)).text()
    assert page.startswith("<!doctype html>") and _messages(page) == ["two", "one"]


def test_the_focus_follows_a_moved_step_to_its_new_place():
    spec = {"phases": [{"key": "a", "steps": [1, 2, 3]}, {"key": "b", "steps": []}]}
    assert editor.focus_after(spec, "move-step:0:0:down") == "op-move-step-0-1-down"
    assert editor.focus_after(spec, "move-step:0:2:up") == "op-move-step-0-1-up"
    assert editor.focus_after(spec, "move-step:0:1:up") == "notice"  # now first
    assert editor.focus_after(spec, "move-step:0:1:down") == "notice"  # now last
    assert editor.focus_after(spec, "move-phase:0:down") == "notice"
    assert editor.focus_after(spec, "add-step:1") == "op-add-step-1"


def test_moves_past_either_end_change_nothing():
    spec = {"phases": [{"key": "a", "steps": [{"n": 1}, {"n": 2}]}, {"key": "b", "steps": []}]}
    assert "cannot move" in editor.apply_op(spec, "move-step:0:0:up", {}, None)  # type: ignore[arg-type]  # a bare dict spec, not a Spec
    assert "cannot move" in editor.apply_op(spec, "move-step:0:1:down", {}, None)  # type: ignore[arg-type]  # a bare dict spec, not a Spec
    assert "cannot move" in editor.apply_op(spec, "move-phase:1:down", {}, None)  # type: ignore[arg-type]  # a bare dict spec, not a Spec
    assert [s["n"] for s in spec["phases"][0]["steps"]] == [1, 2]
    editor.apply_op(spec, "move-phase:1:up", {}, None)  # type: ignore[arg-type]  # a bare dict spec, not a Spec
    assert [p["key"] for p in spec["phases"]] == ["b", "a"]


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("spec.phases[0].steps[1].params.count", "Phase 1, step 2, param count"),
        ("spec.phases[1].key", "Phase 2, key"),
        ("spec.phases[2].advance.where.all[1]", "Phase 3, gate, conditions, condition 2"),
        ("spec.schedule.time", "Schedule, time"),
        ("spec", "The event"),
        ("title", "Title"),
    ],
)
def test_a_path_is_numbered_as_the_form_numbers_it(path, words):
    assert editor.readable_path(path) == words


def test_a_problem_over_a_cap_links_to_the_switchboard_row_that_sets_it():
    found = editor.readable(
        'spec: asks for 40 of "wisps.wisps" across all its steps; the cap is 30 '
        "(set on wisps.summon)"
    )
    assert found["where"] == "The event" and found["fix"] == "/switchboard/wisps.summon"
    assert editor.readable("spec.phases[0].key: is not a phase key")["fix"] is None


async def test_the_cap_meter_follows_the_form_s_params_against_the_cap(client, tokens):
    await _cap(client, tokens, 12)
    event_id = await _wisps_event(client, tokens, _summon(5), _summon(7))
    await sign_in(client, tokens["editor"])
    html = await (await client.get(f"/events/{event_id}")).text()
    meter = html.split('id="cap-meter"')[1].split("</section>")[0]
    assert "12 of 12 wisps" in meter and "over the cap" not in meter  # at the cap: not over
    assert 'href="/switchboard/wisps.summon"' in meter
    fields = [(k, "8" if k == "p0-s1-param-count" else v) for k, v in form_of(html)]
    answer = await client.post(f"/events/{event_id}/meter", data=fields, headers=HX)
    part = await answer.text()
    assert answer.status == 200 and "<html" not in part
    assert "13 of 12 wisps" in part and "⚠ over the cap" in part  # one past it: over
    # nothing was saved
    html = await (await client.get(f"/events/{event_id}")).text()
    assert "12 of 12 wisps" in html


async def test_the_cap_meter_needs_the_session_s_csrf_token(client, tokens):
    event_id = await _wisps_event(client, tokens, _summon(5))
    await sign_in(client, tokens["editor"])
    html = await (await client.get(f"/events/{event_id}")).text()
    fields = [(k, v) for k, v in form_of(html) if k != "csrf_token"]
    answer = await client.post(f"/events/{event_id}/meter", data=fields, headers=HX)
    assert answer.status == 403


async def test_a_stalled_rehearsal_is_a_warning_drawn_above_the_form(client, tokens):
    event_id = await _wisps_event(
        client, tokens, _announce("hi"), advance={"on": "wisps.caught", "count": 1}
    )
    await sign_in(client, tokens["editor"])
    csrf = await page_csrf(client, f"/events/{event_id}")
    html = await (
        await client.post(f"/events/{event_id}/rehearse", data={"csrf_token": csrf})
    ).text()
    assert re.search(r'<div class="banner" role="status" id="notice" data-tone="warn">', html)
    assert html.index('id="rehearsal"') < html.index('<form id="editor"')
    assert csrf_of(html)


async def test_a_clean_rehearsal_is_a_success(client, tokens):
    event_id = await _wisps_event(client, tokens, _announce("hi"))
    await sign_in(client, tokens["editor"])
    csrf = await page_csrf(client, f"/events/{event_id}")
    html = await (
        await client.post(f"/events/{event_id}/rehearse", data={"csrf_token": csrf})
    ).text()
    assert 'class="notice" role="status" id="notice" data-tone="ok"' in html


async def test_a_blank_wait_asks_for_a_duration_and_a_given_one_is_kept(client, tokens, host):
    event = await publish_event(
        host.db,
        host.clock.now(),
        spec(phase("p", announce("hi"), advance={"after": "10m"})),
        published=False,
    )
    await sign_in(client, tokens["admin"])
    html = await (await client.get(f"/events/{event.id}")).text()
    fields = [f for f in form_of(html) if f[0] != "p0-after-n"]
    answer = await client.post(
        f"/events/{event.id}", data=[*fields, ("p0-after-n", " "), ("op", "save")]
    )
    html = await answer.text()
    assert answer.status == 400
    assert "give a duration such as 10m" in html and 'got "m"' not in html
    answer = await client.post(
        f"/events/{event.id}",
        data=[*fields, ("p0-after-n", "15"), ("op", "save")],
        allow_redirects=False,
    )
    assert answer.status == 303, await answer.text()


NORTH_TWICE = {
    "on": "wisps.caught",
    "where": {"var": "colour", "op": "eq", "value": "north"},
    "count": 2,
}


async def test_simulated_firings_rehearse_an_on_gate_to_its_end(client, tokens):
    event_id = await _wisps_event(client, tokens, _announce("hi"), advance=NORTH_TWICE)
    await sign_in(client, tokens["editor"])
    html = await (await client.get(f"/events/{event_id}")).text()
    # The form offers a row for the gate: its trigger, its count, its variables.
    assert '<option value="wisps.caught" selected>' in html
    assert 'id="firing-0-count" name="firing-0-count" type="number"' in html
    assert 'value="2"' in html.split('id="firing-0-count"')[1][:120]
    assert 'name="firing-0-var-colour"' in html
    csrf = csrf_of(html)
    rows = {"firing-0-trigger": "wisps.caught", "firing-0-after": "2m", "firing-0-count": "2"}
    answer = await client.post(
        f"/events/{event_id}/rehearse",
        data={"csrf_token": csrf, **rows, "firing-0-var-colour": "north"},
    )
    html = await answer.text()
    assert answer.status == 200, html
    assert "the run ended completed" in html
    assert "wisps.caught fired with colour “north” — 2 of 2" in html
    # The axis fits what was reached: two minutes and a second of the run, not less.
    assert "The axis spans 2 min" in html
    # A firing of the wrong colour counts for nothing: the gate stalls.
    answer = await client.post(
        f"/events/{event_id}/rehearse",
        data={"csrf_token": csrf, **rows, "firing-0-var-colour": "south"},
    )
    assert "the run ended completed" not in await answer.text()


async def test_a_simulated_firing_that_does_not_fit_is_named(client, tokens):
    event_id = await _wisps_event(client, tokens, _announce("hi"), advance=NORTH_TWICE)
    await sign_in(client, tokens["editor"])
    csrf = await page_csrf(client, f"/events/{event_id}")
    for field, value, said in (
        ("firing-0-count", "0", "the count is a whole number from 1 to 100"),
        ("firing-0-after", "soon", 'the offset is a length such as "30s"'),
        ("firing-0-var-weight", "heavy", "payload.weight: 'heavy' is not a number"),
    ):
        data = {"csrf_token": csrf, "firing-0-trigger": "wisps.caught", field: value}
        answer = await client.post(f"/events/{event_id}/rehearse", data=data)
        assert answer.status == 400, field
        assert f"simulated firing 1: {said}" in unescape(await answer.text()), field
