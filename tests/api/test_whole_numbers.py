"""A JSON number with no fractional part is an integer, as JSON Schema counts it: ``9.0``
passes wherever an ``integer`` is declared (a step's param, a run param, a trigger's
variable in a firing) and is kept as the int ``9``; ``9.5`` and ``true`` are refused, naming
the param or variable."""

from __future__ import annotations

from typing import Any

import pytest

from pageant import hookimpl
from pageant.api.app import make_app
from pageant.engine import Engine
from tests.api.test_events_api import EVENTS, call, create
from tests.conftest import bearer
from tests.factories import announce, make_host, phase, publish_event


def _wait(seconds: Any) -> dict[str, Any]:
    return {
        "schedule": {"kind": "manual"},
        "phases": [
            {
                "key": "main",
                "label": "Main",
                "steps": [{"action": "core.wait", "params": {"seconds": seconds}}],
            }
        ],
    }


async def test_a_whole_float_for_an_integer_step_param_is_saved_as_an_int(client, tokens):
    event = await create(client, tokens["admin"], title="Hold", spec=_wait(9.0))
    (step,) = event["spec"]["phases"][0]["steps"]
    assert step["params"]["seconds"] == 9 and isinstance(step["params"]["seconds"], int)


@pytest.mark.parametrize(
    ("seconds", "shown"), [(9.5, "9.5"), (True, "true"), (float("1e400"), "Infinity")]
)
async def test_a_fractional_or_boolean_integer_step_param_is_a_400(client, tokens, seconds, shown):
    body = b'{"title": "Hold", "spec": %s}' % (
        b'{"schedule": {"kind": "manual"}, "phases": [{"key": "main", "label": "M", "steps": '
        b'[{"action": "core.wait", "params": {"seconds": %s}}]}]}' % shown.encode()
    )
    status, data = await call(client, "POST", EVENTS, tokens["admin"], body)
    assert status == 400, data
    assert (
        f'spec.phases[0].steps[0].params: "seconds" must be an integer; got {shown}'
        in (data["error"]["details"])
    )


def _counted() -> dict[str, Any]:
    rounds = {"name": "rounds", "type": "integer", "label": "Rounds", "default": 3}
    return {
        "params": [rounds],
        "schedule": {"kind": "manual"},
        "phases": [phase("main", announce("go"))],
    }


async def test_a_whole_float_for_an_integer_run_param_starts_the_run_with_an_int(client, tokens):
    event = await create(client, tokens["admin"], title="Rounds", spec=_counted())
    status, _ = await call(client, "POST", f"{EVENTS}/{event['id']}/publish", tokens["admin"])
    assert status == 200
    path = f"{EVENTS}/{event['id']}/runs"
    status, run = await call(client, "POST", path, tokens["admin"], {"params": {"rounds": 9.0}})
    assert status == 201, run
    assert run["params"] == {"rounds": 9} and isinstance(run["params"]["rounds"], int)
    assert run["scope"] == "rounds=9"
    status, data = await call(client, "POST", path, tokens["admin"], {"params": {"rounds": 9.5}})
    assert status == 400
    assert data["error"]["details"] == ["params.rounds: must be an integer; got 9.5"]


class Scores:
    """A game whose trigger counts points, an integer."""

    PLUGIN_INFO = {"owner": "scores", "contract": "^1.0"}  # noqa: RUF012 - read by the loader

    @hookimpl
    def pageant_triggers(self) -> list[dict[str, Any]]:
        points = {"name": "points", "type": "integer", "description": "How many.", "example": 3}
        return [{"id": "scores.scored", "label": "Points scored", "variables": [points]}]


async def test_a_whole_float_in_a_firing_counts_for_an_integer_condition(
    settings, db, clock, aiohttp_client, tokens
):
    host = make_host(settings, db, clock, [Scores()])
    client = await aiohttp_client(make_app(host, run_engine=False))
    where = {"var": "points", "op": "eq", "value": 9}
    event = await publish_event(
        db,
        clock.now(),
        {
            "schedule": {"kind": "manual"},
            "phases": [phase("p", advance={"on": "scores.scored", "where": where, "count": 1})],
        },
    )
    from pageant.runs.create import start_now

    await start_now(host, event.id, actor="admin:test")
    fire = "/api/v1/triggers/scores.scored/fire"
    async with Engine(host) as engine:
        await engine.tick()
        refused = await client.post(fire, json={"points": 9.5}, headers=bearer(tokens["game"]))
        assert refused.status == 400
        assert (await refused.json())["error"]["details"] == [
            'body.points: expected an integer for "points", got 9.5'
        ]
        fired = await client.post(fire, json={"points": 9.0}, headers=bearer(tokens["game"]))
        assert fired.status == 200
        assert await fired.json() == {"gates_matched": 1, "gates_closed": 1}
