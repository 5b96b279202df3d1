"""Run params in the console, over the real app and database (both dialects): the editor
declares them and lets a step's param or a condition's value be "the run's param X" from a
picker, a schedule fans out over param sets authored in the editor and shown per set on the
calendar, and starting, verifying and rehearsing ask for the params (the option source's
values offered where the param names one). No JSON is typed anywhere."""

from __future__ import annotations

import re
from typing import Any

from tests.api.test_events_api import EVENTS, call, create
from tests.console.test_console import csrf_of, form_of, sign_in
from tests.scheduling import spec_with

HX = {"HX-Request": "true"}
COLOUR = {
    "name": "colour",
    "type": "string",
    "label": "Colour",
    "required": True,
    "option_source": "wisps.options.colours",
}


def _main(message: Any = "The wisps stir", value: Any = "north") -> dict[str, Any]:
    return {
        "key": "main",
        "label": "Main",
        "steps": [{"action": "core.announce", "params": {"leg": "core.log", "message": message}}],
        "advance": {
            "on": "wisps.caught",
            "count": 1,
            "where": {"var": "colour", "op": "eq", "value": value},
        },
    }


async def _event(client: Any, tokens: dict[str, str], spec: dict[str, Any]) -> int:
    event = await create(client, tokens["admin"], title="Wisp hunt", spec=spec)
    return int(event["id"])


async def _stored(client: Any, tokens: dict[str, str], event_id: int) -> dict[str, Any]:
    status, data = await call(client, "GET", f"{EVENTS}/{event_id}", tokens["admin"])
    assert status == 200, data
    return dict(data["spec"])


def _set(fields: list[tuple[str, str]], **values: str) -> list[tuple[str, str]]:
    """The form's fields with some changed (names with ``_`` for ``-``), or added."""
    changed = {k.replace("_", "-"): v for k, v in values.items()}
    out = [(k, changed.pop(k, v)) for k, v in fields if k != "op"]
    return out + list(changed.items())


async def _op(client: Any, event_id: int, fields: list[tuple[str, str]], op: str) -> str:
    answer = await client.post(f"/events/{event_id}", data=[*fields, ("op", op)], headers=HX)
    assert answer.status == 200, await answer.text()
    return await answer.text()


async def _save(client: Any, event_id: int, fields: list[tuple[str, str]]) -> None:
    answer = await client.post(
        f"/events/{event_id}", data=[*fields, ("op", "save")], allow_redirects=False
    )
    assert answer.status == 303, await answer.text()


async def test_a_run_param_is_declared_in_the_editor_and_saved(client, tokens):
    event_id = await _event(client, tokens, spec_with({"kind": "manual"}, _main()))
    await sign_in(client, tokens["editor"])
    html = await (await client.get(f"/events/{event_id}")).text()
    assert "No run params" in html
    part = await _op(client, event_id, form_of(html), "add-param")
    assert 'id="rp0-name"' in part and "Added run param 1" in part
    # every option source is offered as the param's choices, and a type from the four
    assert '<option value="wisps.options.colours">' in part
    assert re.search(r'<select id="rp0-type"[^>]*>\s*<option value="string" selected>', part)
    fields = _set(
        form_of(part),
        rp0_name="colour",
        rp0_label="Colour",
        rp0_source="wisps.options.colours",
        rp0_required="yes",
    )
    await _save(client, event_id, fields)
    assert (await _stored(client, tokens, event_id))["params"] == [COLOUR]
    # drawn back: the default is a choice among the source's values
    html = await (await client.get(f"/events/{event_id}")).text()
    assert re.search(r'<select id="rp0-default" name="rp0-default"><option value="">', html)
    assert '<option value="south">' in html.split('id="rp0-default"')[1].split("</select>")[0]


async def test_a_bad_declaration_is_shown_at_its_field_and_nothing_is_saved(client, tokens):
    event_id = await _event(client, tokens, spec_with({"kind": "manual"}, _main()))
    await sign_in(client, tokens["editor"])
    html = await (await client.get(f"/events/{event_id}")).text()
    part = await _op(client, event_id, form_of(html), "add-param")
    fields = _set(form_of(part), rp0_name="Colour!", rp0_type="integer", rp0_default="many")
    answer = await client.post(f"/events/{event_id}", data=[*fields, ("op", "save")])
    assert answer.status == 400
    page = await answer.text()
    assert re.search(r'id="rp0-name"[^>]*aria-invalid="true"', page)
    assert 'id="rp0-label" name="rp0-label" value=""' in page
    assert 'id="err-spec-params_0-name-1"' in page and "Run param 1" not in page.split("<form")[0]
    assert 'id="err-spec-params_0-default-1">⚠ must be an integer; got &#34;many&#34;' in page
    assert "params" not in await _stored(client, tokens, event_id)


async def test_a_step_param_and_a_condition_take_the_run_s_param_from_a_picker(client, tokens):
    spec = spec_with({"kind": "manual"}, _main())
    event_id = await _event(client, tokens, {**spec, "params": [COLOUR]})
    await sign_in(client, tokens["editor"])
    html = await (await client.get(f"/events/{event_id}")).text()
    # offered where the types agree: the message (a string) and the colour condition
    assert re.search(
        r'<select id="p0-s0-param-message-from" name="p0-s0-param-message-from" data-refresh>'
        r'<option value="">the value set here</option><option value="colour">'
        r"the run's param colour</option>",
        html,
    )
    assert 'id="p0-c0-from"' in html
    fields = _set(form_of(html), p0_s0_param_message_from="colour", p0_c0_from="colour")
    part = await _op(client, event_id, fields, "refresh")
    # chosen, the value's own field is gone and the picker says which param
    assert 'id="p0-s0-param-message"' not in part and 'id="p0-c0-value"' not in part
    assert '<option value="colour" selected>the run\'s param colour</option>' in part
    await _save(client, event_id, [(k, v) for k, v in form_of(part)])
    stored = await _stored(client, tokens, event_id)
    main = stored["phases"][0]
    assert main["steps"][0]["params"]["message"] == {"param": "colour"}
    assert main["advance"]["where"] == {"var": "colour", "op": "eq", "value": {"param": "colour"}}
    # back to a value set here
    html = await (await client.get(f"/events/{event_id}")).text()
    fields = _set(form_of(html), p0_s0_param_message_from="")
    part = await _op(client, event_id, fields, "refresh")
    fields = _set(form_of(part), p0_s0_param_message="Plain words")
    await _save(client, event_id, fields)
    main = (await _stored(client, tokens, event_id))["phases"][0]
    assert main["steps"][0]["params"]["message"] == "Plain words"


async def test_a_param_of_another_type_is_not_offered(client, tokens):
    spec = spec_with({"kind": "manual"}, _main())
    rounds = {"name": "rounds", "type": "integer", "label": "Rounds", "required": False}
    event_id = await _event(client, tokens, {**spec, "params": [rounds]})
    await sign_in(client, tokens["editor"])
    html = await (await client.get(f"/events/{event_id}")).text()
    assert "-from" not in html.split('id="run-params"')[1]


async def test_the_form_posts_back_a_spec_with_params_references_and_a_fan_out(client, tokens):
    schedule = {
        "kind": "weekly",
        "days": ["friday"],
        "time": "20:00",
        "params": [{"colour": "north"}, {"colour": "south"}],
    }
    spec = spec_with(schedule, _main({"param": "colour"}, {"param": "colour"}))
    event_id = await _event(client, tokens, {**spec, "params": [COLOUR]})
    stored = await _stored(client, tokens, event_id)
    await sign_in(client, tokens["admin"])
    html = await (await client.get(f"/events/{event_id}")).text()
    await _save(client, event_id, form_of(html))
    assert await _stored(client, tokens, event_id) == stored


async def test_a_fan_out_is_authored_in_the_editor_and_shown_per_set_on_the_calendar(
    client, tokens
):
    schedule = {"kind": "weekly", "days": ["friday"], "time": "20:00"}
    spec = spec_with(schedule, _main({"param": "colour"}))
    event_id = await _event(client, tokens, {**spec, "params": [COLOUR]})
    await sign_in(client, tokens["admin"])
    html = await (await client.get(f"/events/{event_id}")).text()
    assert "One run at each occurrence" in html
    part = await _op(client, event_id, form_of(html), "add-fan")
    part = await _op(client, event_id, form_of(part), "add-fan")
    # each run's params, the source's values offered
    assert '<select id="fan1-colour" name="fan1-colour">' in part
    fields = _set(form_of(part), fan0_colour="north", fan1_colour="south")
    await _save(client, event_id, fields)
    stored = await _stored(client, tokens, event_id)
    assert stored["schedule"]["params"] == [{"colour": "north"}, {"colour": "south"}]
    html = await (await client.get(f"/events/{event_id}")).text()
    published = await client.post(
        f"/events/{event_id}/publish", data={"csrf_token": csrf_of(html)}, allow_redirects=False
    )
    assert published.status == 303, await published.text()
    calendar = await (await client.get("/calendar?month=2027-03")).text()
    friday = calendar.split('<span class="day">5</span>')[1].split("</td>")[0]
    assert friday.count("Wisp hunt") == 2
    assert '<span class="run-on">colour north</span>' in friday
    assert '<span class="run-on">colour south</span>' in friday
    # removing a set and saving leaves one run an occurrence
    html = await (await client.get(f"/events/{event_id}")).text()
    part = await _op(client, event_id, form_of(html), "remove-fan:0")
    await _save(client, event_id, form_of(part))
    stored = await _stored(client, tokens, event_id)
    assert stored["schedule"]["params"] == [{"colour": "south"}]


async def test_a_fan_out_missing_a_required_param_is_named_at_its_field(client, tokens):
    schedule = {"kind": "weekly", "days": ["friday"], "time": "20:00"}
    spec = spec_with(schedule, _main())
    event_id = await _event(client, tokens, {**spec, "params": [COLOUR]})
    await sign_in(client, tokens["admin"])
    html = await (await client.get(f"/events/{event_id}")).text()
    part = await _op(client, event_id, form_of(html), "add-fan")
    answer = await client.post(f"/events/{event_id}", data=[*form_of(part), ("op", "save")])
    assert answer.status == 400
    page = await answer.text()
    assert 'id="err-spec-schedule-params_0-colour-1">⚠ required (Colour)' in page
    assert "params" not in (await _stored(client, tokens, event_id))["schedule"]


async def _published(client: Any, tokens: dict[str, str]) -> int:
    spec = spec_with({"kind": "manual"}, _main({"param": "colour"}, {"param": "colour"}))
    event_id = await _event(client, tokens, {**spec, "params": [COLOUR]})
    status, data = await call(client, "POST", f"{EVENTS}/{event_id}/publish", tokens["admin"])
    assert status == 200, data
    return event_id


async def test_starting_a_run_offers_the_option_source_s_values_and_gives_the_param(client, tokens):
    event_id = await _published(client, tokens)
    await sign_in(client, tokens["admin"])
    html = await (await client.get(f"/events/{event_id}")).text()
    start = html.split(f'action="/events/{event_id}/start"')[1].split("</form>")[0]
    assert '<select id="start-colour" name="param.colour" required>' in start
    assert '<option value="south">South (south)</option>' in start
    answer = await client.post(
        f"/events/{event_id}/start",
        data={"csrf_token": csrf_of(html), "param.colour": "south"},
        allow_redirects=False,
    )
    assert answer.status == 303, await answer.text()
    run_id = int(answer.headers["Location"].rsplit("/", 1)[1])
    status, run = await call(client, "GET", f"/api/v1/admin/runs/{run_id}", tokens["admin"])
    assert status == 200 and run["run"]["params"] == {"colour": "south"}, run


async def test_a_start_without_a_required_param_names_it_and_makes_no_run(client, tokens):
    event_id = await _published(client, tokens)
    await sign_in(client, tokens["admin"])
    html = await (await client.get(f"/events/{event_id}")).text()
    answer = await client.post(f"/events/{event_id}/start", data={"csrf_token": csrf_of(html)})
    assert answer.status == 400
    assert "<strong>Param colour</strong>: required (Colour)" in await answer.text()
    status, runs = await call(client, "GET", f"{EVENTS}/{event_id}/runs", tokens["admin"])
    assert status == 200 and runs["items"] == []


async def test_verify_and_rehearse_ask_for_the_params_and_use_them(client, tokens):
    event_id = await _published(client, tokens)
    await sign_in(client, tokens["editor"])
    html = await (await client.get(f"/events/{event_id}")).text()
    for form in ("verify", "rehearse"):
        part = html.split(f'action="/events/{event_id}/{form}"')[1].split("</form>")[0]
        assert f'<select id="{form}-colour" name="param.colour" required>' in part
    csrf = csrf_of(html)
    refused = await client.post(f"/events/{event_id}/verify", data={"csrf_token": csrf})
    assert refused.status == 400
    assert "<strong>Param colour</strong>: required (Colour)" in await refused.text()
    given = {"csrf_token": csrf, "param.colour": "north"}
    verified = await client.post(f"/events/{event_id}/verify", data=given)
    assert verified.status == 200, await verified.text()
    assert "passed verification" in await verified.text()
    refused = await client.post(f"/events/{event_id}/rehearse", data={"csrf_token": csrf})
    assert refused.status == 400
    assert "<strong>Param colour</strong>: required (Colour)" in await refused.text()
    rehearsed = await client.post(f"/events/{event_id}/rehearse", data=given)
    assert rehearsed.status == 200, await rehearsed.text()
    page = await rehearsed.text()
    assert "Rehearsed version 1" in page and "nothing was performed" in page


async def test_a_moderator_reads_the_params_the_references_and_the_fan_out(client, tokens):
    schedule = {"kind": "weekly", "days": ["friday"], "time": "20:00"}
    schedule["params"] = [{"colour": "north"}, {"colour": "south"}]
    spec = spec_with(schedule, _main({"param": "colour"}, {"param": "colour"}))
    event_id = await _event(client, tokens, {**spec, "params": [COLOUR]})
    await sign_in(client, tokens["moderator"])
    page = await (await client.get(f"/events/{event_id}")).text()
    assert "Read-only" in page and 'id="editor"' not in page
    assert "<code>colour</code> (Colour): string, one of <code>wisps.options.colours</code>" in page
    assert "message: the run's param colour" in page
    assert "<code>colour eq the run's param colour</code>" in page
    assert (
        '<span class="run-on">colour north</span>; <span class="run-on">colour south</span>' in page
    )


def test_a_manual_event_has_no_fan_out_to_add_to():
    from pageant.console import editor

    spec: dict[str, Any] = {"schedule": {"kind": "manual"}, "phases": [], "params": [COLOUR]}
    said = editor.apply_op(spec, "add-fan", {}, None)  # type: ignore[arg-type]  # no registry needed
    assert said.startswith("A manual event has no schedule to fan out")
    assert spec["schedule"] == {"kind": "manual"}
    weekly: dict[str, Any] = {"schedule": {"kind": "weekly"}, "phases": []}
    editor.apply_op(weekly, "add-fan", {}, None)  # type: ignore[arg-type]  # no registry needed
    assert weekly["schedule"]["params"] == [{}]
    editor.apply_op(weekly, "remove-fan:0", {}, None)  # type: ignore[arg-type]  # no registry needed
    assert "params" not in weekly["schedule"]  # the last set gone: no fan-out at all
