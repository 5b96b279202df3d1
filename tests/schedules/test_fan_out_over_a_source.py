"""A schedule that fans out over an option source's values
(``"params": {"for_each": {"room": "rooms.options.rooms"}}``), through the admin API and the
engine's expansion on the fake clock: checked at save (each problem names its field, and a
refused save changes nothing); one run per value the source offers when the occurrences are
made; a value added to the source gets its runs at the next expansion, a value taken out has
its scheduled runs superseded with the reason; and a source that cannot be read keeps the last
known values — new occurrences still get their runs, nothing is superseded, a warning says so."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest

from pageant import hookimpl
from pageant.api.app import make_app
from pageant.engine import Engine
from pageant.schedules.fan_out import REFRESH
from tests.api.test_events_api import EVENTS, call
from tests.console.test_console import form_of, sign_in
from tests.factories import make_host, phase, step
from tests.runs.test_run_param_options import ROOM, Rooms

SOURCE = "rooms.options.rooms"
# Every Friday at 13:00 UTC: the 5th and the 12th are inside the horizon of the test
# clock's Monday 2027-03-01 12:00, the 19th comes inside it a week later.
WEEKLY = {"kind": "weekly", "days": ["friday"], "time": "13:00"}


class Halls:
    """A second option source, of another plugin."""

    PLUGIN_INFO = {"owner": "halls", "contract": "^1.0"}  # noqa: RUF012 - read by the loader

    async def resolve(self) -> list[dict[str, str]]:
        return [{"value": "great", "label": "Great hall"}]

    @hookimpl
    def pageant_option_sources(self) -> list[dict[str, Any]]:
        return [{"id": "halls.options.halls", "label": "Halls", "resolve": self.resolve}]


@pytest.fixture
async def rooms_api(settings, db, clock, aiohttp_client):
    """``client, host, rooms``: the real app over a host with the rooms plugin, whose
    rooms (an option source) the test changes, or takes down, and the halls plugin."""
    rooms = Rooms()
    host = make_host(settings, db, clock, [rooms, Halls()])
    client = await aiohttp_client(make_app(host, run_engine=False))
    try:
        yield client, host, rooms
    finally:
        await host.close()


def _body(fan_out: Any, params: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "title": "Lights in every room",
        "concurrency_key": "lights:{room}",
        "spec": {
            "params": params or [ROOM],
            "schedule": {**WEEKLY, "params": fan_out},
            "phases": [phase("p", step("rooms.light", room={"param": "room"}))],
        },
    }


async def _tick(host: Any) -> None:
    engine = Engine(host)
    try:
        await engine.tick()
    finally:
        await engine.stop()


async def _runs(client: Any, admin: str, event_id: int) -> list[dict[str, Any]]:
    status, data = await call(client, "GET", f"{EVENTS}/{event_id}/runs?limit=200", admin)
    assert status == 200, data
    return list(data["items"])


def _live(runs: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """(room, instant) of each scheduled run."""
    return {(r["params"]["room"], r["scheduled_for"]) for r in runs if r["status"] == "scheduled"}


FRIDAYS = ("2027-03-05T13:00:00Z", "2027-03-12T13:00:00Z")


async def test_a_fan_out_follows_the_sources_values_from_one_expansion_to_the_next(
    rooms_api, tokens, clock
):
    client, host, rooms = rooms_api
    admin = tokens["admin"]
    status, event = await call(client, "POST", EVENTS, admin, _body({"for_each": {"room": SOURCE}}))
    assert status == 201, event
    assert event["spec"]["schedule"]["params"] == {"for_each": {"room": SOURCE}}
    status, data = await call(client, "POST", f"{EVENTS}/{event['id']}/publish", admin)
    assert status == 200, data

    # The source is a plugin's call: the engine's next expansion reads it, not the publish.
    assert await _runs(client, admin, event["id"]) == []
    await _tick(host)
    first = await _runs(client, admin, event["id"])
    assert _live(first) == {(room, at) for room in ("hall", "crypt") for at in FRIDAYS}
    assert {r["scope"] for r in first} == {"room=hall", "room=crypt"}
    assert {r["concurrency_key"] for r in first} == {"lights:hall", "lights:crypt"}

    # The settings change: the crypt goes, an attic comes. It is read once REFRESH is past.
    rooms.rooms = ["hall", "attic"]
    clock.advance(REFRESH.total_seconds())
    await _tick(host)
    assert _live(await _runs(client, admin, event["id"])) == _live(first)
    clock.advance(1)
    await _tick(host)
    after = await _runs(client, admin, event["id"])
    assert _live(after) == {(room, at) for room in ("hall", "attic") for at in FRIDAYS}
    kept = {r["id"] for r in first if r["params"]["room"] == "hall"}
    assert kept <= {r["id"] for r in after if r["status"] == "scheduled"}  # the same runs
    gone = [r for r in after if r["params"]["room"] == "crypt"]
    assert len(gone) == 2
    assert {(r["status"], r["cancel_reason"]) for r in gone} == {("cancelled", "superseded")}
    status, view = await call(client, "GET", f"/api/v1/admin/runs/{gone[0]['id']}", admin)
    assert status == 200, view
    (line,) = [entry for entry in view["log"] if entry["kind"] == "run.status"]
    assert line["detail"]["because"] == (
        f"the run's set (room=crypt) is no longer among the values of {SOURCE}"
    )

    # Put back, the crypt's superseded runs come back (the same runs).
    rooms.rooms = ["hall", "attic", "crypt"]
    clock.advance(REFRESH.total_seconds() + 1)
    await _tick(host)
    back = await _runs(client, admin, event["id"])
    assert _live(back) == {(room, at) for room in ("hall", "attic", "crypt") for at in FRIDAYS}
    assert {r["id"] for r in gone} <= {r["id"] for r in back if r["status"] == "scheduled"}


async def test_a_source_that_cannot_be_read_keeps_the_last_known_values(
    rooms_api, tokens, clock, caplog
):
    client, host, rooms = rooms_api
    admin = tokens["admin"]
    status, event = await call(client, "POST", EVENTS, admin, _body({"for_each": {"room": SOURCE}}))
    assert status == 201, event
    assert (await call(client, "POST", f"{EVENTS}/{event['id']}/publish", admin))[0] == 200
    await _tick(host)
    assert _live(await _runs(client, admin, event["id"])) == {
        (room, at) for room in ("hall", "crypt") for at in FRIDAYS
    }

    # The game is down when the next Friday comes inside the horizon: no occurrence is
    # dropped, no run superseded; the runs it makes are the last known rooms'.
    rooms.down = True
    clock.set(clock.now() + timedelta(days=1))
    with caplog.at_level(logging.WARNING, logger="pageant.engine"):
        await _tick(host)
        clock.set(clock.now() + timedelta(days=6))
        await _tick(host)
    runs = await _runs(client, admin, event["id"])
    assert {(r["params"]["room"], r["scheduled_for"]) for r in runs} >= {
        ("hall", "2027-03-19T13:00:00Z"),
        ("crypt", "2027-03-19T13:00:00Z"),
    }
    assert not [r for r in runs if r["cancel_reason"] == "superseded"]
    assert f"fans out over {SOURCE}, which could not be read" in caplog.text
    assert "it keeps its last known values" in caplog.text

    # Back up, the source is read as it answers.
    rooms.down = False
    rooms.rooms = ["hall"]
    clock.advance(REFRESH.total_seconds() + 1)
    await _tick(host)
    runs = await _runs(client, admin, event["id"])
    assert {r["params"]["room"] for r in runs if r["status"] == "scheduled"} == {"hall"}


@pytest.mark.parametrize(
    ("fan_out", "params", "detail"),
    [
        (
            {"for_each": {"floor": SOURCE}},
            None,
            "spec.schedule.params.for_each.floor: not a param of this event (it declares room)",
        ),
        (
            {"for_each": {"room": "rooms.options.nowhere"}},
            None,
            "spec.schedule.params.for_each.room: expected an option source a plugin "
            'registers; got "rooms.options.nowhere"',
        ),
        (
            {"for_each": {"room": SOURCE, "other": SOURCE}},
            None,
            "spec.schedule.params.for_each: expected one param and the option source it fans "
            "out over, e.g. {",
        ),
        (
            {"for_each": {"room": SOURCE}, "also": 1},
            None,
            'spec.schedule.params.also: is not a known field (a fan-out says "for_each")',
        ),
        (
            {"for_each": {"room": SOURCE}},
            [ROOM, {"name": "floor", "type": "integer", "label": "Floor", "required": True}],
            'spec.schedule.params.for_each.room: the param "floor" is required and has no '
            f'default, and a fan-out over {SOURCE} gives each run only "room"',
        ),
        (
            {"for_each": {"room": SOURCE}},
            [{**ROOM, "option_source": "halls.options.halls"}],
            'spec.schedule.params.for_each.room: the param "room" takes its values from '
            f"halls.options.halls; fan out over that source, not {SOURCE}",
        ),
        (
            {"server": "x"},
            None,
            "spec.schedule.params: expected a list of param sets, or "
            '{"for_each": {param: option source}}; got',
        ),
    ],
)
async def test_a_bad_fan_out_over_a_source_is_refused_naming_the_field(
    rooms_api, tokens, fan_out, params, detail
):
    client, _, _ = rooms_api
    admin = tokens["admin"]
    status, event = await call(client, "POST", EVENTS, admin, _body([{"room": "hall"}]))
    assert status == 201, event
    spec = _body(fan_out, params)["spec"]
    status, data = await call(client, "PUT", f"{EVENTS}/{event['id']}", admin, {"spec": spec})
    assert status == 400, data
    assert any(d.startswith(detail) for d in data["error"]["details"]), data
    status, data = await call(client, "GET", f"{EVENTS}/{event['id']}", admin)
    assert data["spec"]["schedule"]["params"] == [{"room": "hall"}]  # as it was


async def test_the_console_shows_a_fan_out_over_a_source_and_its_editor_keeps_it(rooms_api, tokens):
    client, _, _ = rooms_api
    admin = tokens["admin"]
    status, event = await call(client, "POST", EVENTS, admin, _body({"for_each": {"room": SOURCE}}))
    assert status == 201, event
    await sign_in(client, admin)
    html = await (await client.get(f"/events/{event['id']}")).text()
    assert f"One run for each value of <code>{SOURCE}</code>" in html
    fields = form_of(html)
    answer = await client.post(
        f"/events/{event['id']}", data=[*fields, ("op", "save")], allow_redirects=False
    )
    assert answer.status == 303, await answer.text()
    _, data = await call(client, "GET", f"{EVENTS}/{event['id']}", admin)
    assert data["spec"]["schedule"]["params"] == {"for_each": {"room": SOURCE}}

    # "Fan out by hand instead" takes it away; saved, each occurrence is one run again.
    part = await client.post(
        f"/events/{event['id']}",
        data=[*fields, ("op", "remove-fan:0")],
        headers={"HX-Request": "true"},
    )
    assert part.status == 200
    answer = await client.post(
        f"/events/{event['id']}",
        data=[*form_of(await part.text()), ("op", "save")],
        allow_redirects=False,
    )
    assert answer.status == 303, await answer.text()
    _, data = await call(client, "GET", f"{EVENTS}/{event['id']}", admin)
    assert "params" not in data["spec"]["schedule"]
