"""A schedule fans out over at most 1,000 param sets (runs per occurrence), through the
admin API: 1,000 are saved and published, 1,001 are refused naming the field, and the
console's editor reads back every one of 1,000 sets (none dropped) when it saves them."""

from __future__ import annotations

from typing import Any

from tests.api.test_events_api import EVENTS, call, create
from tests.console.test_console import form_of, sign_in
from tests.factories import announce, phase

SERVER = {"name": "server", "type": "string", "label": "Server", "required": True}


def _fanned(count: int) -> dict[str, Any]:
    schedule = {
        "kind": "weekly",
        "days": ["friday"],
        "time": "20:00",
        "params": [{"server": f"s{i:04}"} for i in range(count)],
    }
    return {"params": [SERVER], "schedule": schedule, "phases": [phase("p", announce("go"))]}


async def test_a_schedule_fans_out_over_1000_sets_and_1001_are_refused_naming_the_field(
    client, tokens
):
    admin = tokens["admin"]
    event = await create(client, admin, title="Everywhere", spec=_fanned(1000))
    assert len(event["spec"]["schedule"]["params"]) == 1000

    status, data = await call(
        client, "PUT", f"{EVENTS}/{event['id']}", admin, {"spec": _fanned(1001)}
    )
    assert status == 400
    assert data["error"]["details"] == [
        "spec.schedule.params: at most 1000 param sets; this one has 1001"
    ]
    status, data = await call(client, "GET", f"{EVENTS}/{event['id']}", admin)
    assert len(data["spec"]["schedule"]["params"]) == 1000  # the refusal changed nothing


async def test_the_editor_saves_every_one_of_1000_sets_and_the_view_sums_them_up(client, tokens):
    event = await create(client, tokens["admin"], title="Everywhere", spec=_fanned(1000))
    await sign_in(client, tokens["admin"])
    html = await (await client.get(f"/events/{event['id']}")).text()
    fields = form_of(html)
    assert ("fan999-server", "s0999") in fields
    answer = await client.post(
        f"/events/{event['id']}", data=[*fields, ("op", "save")], allow_redirects=False
    )
    assert answer.status == 303, await answer.text()
    _, data = await call(client, "GET", f"{EVENTS}/{event['id']}", tokens["admin"])
    assert data["spec"]["schedule"]["params"] == _fanned(1000)["schedule"]["params"]

    client.session.cookie_jar.clear()  # signed out: a moderator reads it
    await sign_in(client, tokens["moderator"])
    page = await (await client.get(f"/events/{event['id']}")).text()
    assert page.count('<span class="run-on">') == 20
    assert "and 980 more (1000 runs at each occurrence)" in page
