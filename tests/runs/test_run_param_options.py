"""A run's values against the option sources they are taken from, when it starts: refused
when the source answers without the value, started when the source cannot answer (a game
down refuses nothing), by a person's start and by the engine at a scheduled instant alike."""

from __future__ import annotations

from typing import Any

import pytest

from pageant import hookimpl
from pageant.engine import Engine
from pageant.errors import Invalid
from pageant.events.authoring import validator as specs
from pageant.runs.create import start_now
from tests.factories import make_host, phase, publish_event, run_row, spec, step
from tests.scheduling import runs_of


class Rooms:
    """A plugin whose rooms are an option source that answers, or raises while ``down``."""

    PLUGIN_INFO = {"owner": "rooms", "contract": "^1.0"}  # noqa: RUF012 - read by the loader

    def __init__(self) -> None:
        self.rooms = ["hall", "crypt"]
        self.down = False

    async def resolve(self) -> list[dict[str, str]]:
        if self.down:
            raise ConnectionError("the rooms server does not answer")
        return [{"value": room, "label": room.title()} for room in self.rooms]

    async def perform(self, ctx: Any) -> dict[str, Any]:
        return {"ok": True}

    @hookimpl
    def pageant_option_sources(self) -> list[dict[str, Any]]:
        return [{"id": "rooms.options.rooms", "label": "Rooms", "resolve": self.resolve}]

    @hookimpl
    def pageant_actions(self) -> list[dict[str, Any]]:
        room = {
            "name": "room",
            "type": "string",
            "required": True,
            "description": "Which room.",
            "example": "hall",
            "option_source": "rooms.options.rooms",
        }
        degrees = {
            "name": "degrees",
            "type": "number",
            "required": True,
            "description": "How warm.",
            "example": 20.5,
        }
        return [
            {
                "id": "rooms.light",
                "label": "Light a room",
                "risk": "notify",
                "budget_ms": 5_000,
                "params": [room],
                "perform": self.perform,
            },
            {
                "id": "rooms.warm",
                "label": "Warm a room",
                "risk": "notify",
                "budget_ms": 5_000,
                "params": [degrees],
                "perform": self.perform,
            },
        ]


ROOM = {"name": "room", "type": "string", "label": "Room", "option_source": "rooms.options.rooms"}


@pytest.fixture
async def rooms_host(settings, db, clock):
    rooms = Rooms()
    host = make_host(settings, db, clock, [rooms])
    try:
        yield host, rooms
    finally:
        await host.close()


def _lit() -> dict[str, Any]:
    out = spec(phase("p", step("rooms.light", room={"param": "room"})))
    out["params"] = [ROOM]
    return out


async def test_a_value_the_source_does_not_offer_is_refused_and_one_it_does_starts(
    rooms_host, clock
):
    host, _ = rooms_host
    event = await publish_event(host.db, clock.now(), _lit())
    with pytest.raises(Invalid) as refused:
        await start_now(host, event.id, params={"room": "attic"}, actor="admin:test")
    assert refused.value.details == [
        'params.room: "attic" is not a value of rooms.options.rooms (it offers "hall", '
        '"crypt" now), which the param "room" takes'
    ]
    assert await runs_of(host.db, event.id) == []
    run_id, created = await start_now(host, event.id, params={"room": "crypt"}, actor="a:t")
    assert created and (await run_row(host.db, run_id)).params == {"room": "crypt"}


async def test_a_source_that_cannot_answer_refuses_no_start(rooms_host, clock, caplog):
    host, rooms = rooms_host
    event = await publish_event(host.db, clock.now(), _lit())
    rooms.down = True
    _, created = await start_now(host, event.id, params={"room": "attic"}, actor="a:t")
    assert created
    assert "params.room: not checked; rooms.options.rooms raised ConnectionError" in caplog.text


@pytest.mark.parametrize("down", [False, True], ids=["answers", "cannot-answer"])
async def test_the_engine_checks_a_scheduled_runs_value_at_its_instant(rooms_host, clock, down):
    host, rooms = rooms_host
    event = await publish_event(host.db, clock.now(), _lit())
    run_id, _ = await start_now(host, event.id, params={"room": "crypt"}, actor="a:t")
    # The crypt is walled up before the engine gets to the run.
    rooms.rooms = ["hall"]
    rooms.down = down
    engine = Engine(host)
    try:
        await engine.tick()
    finally:
        await engine.stop()
    row = await run_row(host.db, run_id)
    if down:
        assert row.status in ("running", "completed"), row.last_error
    else:
        assert (row.status, row.last_error) == (
            "failed",
            'not started: params.room: "crypt" is not a value of rooms.options.rooms (it '
            'offers "hall" now), which the param "room" takes',
        )


@pytest.mark.parametrize(
    ("type_", "refusal"),
    [
        ("integer", None),
        ("number", None),
        (
            "string",
            'spec.phases[0].steps[0].params: "degrees": the param "heat" is string; '
            "this takes number",
        ),
    ],
)
async def test_a_param_fits_a_step_param_of_its_type_and_an_integer_fits_a_number(
    rooms_host, type_, refusal
):
    host, _ = rooms_host
    raw = spec(phase("p", step("rooms.warm", degrees={"param": "heat"})))
    raw["params"] = [{"name": "heat", "type": type_, "label": "Heat", "required": True}]
    if refusal is None:
        assert specs.validate(raw, host.registry)["phases"][0]["steps"][0]["params"] == {
            "degrees": {"param": "heat"}
        }
    else:
        with pytest.raises(Invalid) as refused:
            specs.validate(raw, host.registry)
        assert refused.value.details == [refusal]
