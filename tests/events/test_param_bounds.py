"""A param's declared bounds (contract 1.3: minimum, maximum, min_length, max_length,
pattern, enum) are checked when a spec is saved, exactly like its type, with the sentence
verify and the step give; a ``{"param": name}`` reference is a run param, checked as the
value it is written out as."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import update

from pageant import hookimpl
from pageant.api.app import make_app
from pageant.db.tables import event_definitions
from pageant.engine import Engine
from pageant.hookspecs import Param
from tests.api.test_events_api import EVENTS, call, snapshot
from tests.conftest import bearer
from tests.factories import make_host, step_rows

WHERE = "spec.phases[0].steps[0].params"


def one_step(action: str, **params: Any) -> dict[str, Any]:
    return {
        "schedule": {"kind": "manual"},
        "phases": [
            {"key": "main", "label": "Main", "steps": [{"action": action, "params": params}]}
        ],
    }


def wait(seconds: Any) -> dict[str, Any]:
    return one_step("core.wait", seconds=seconds)


def spawn(count: Any) -> dict[str, Any]:
    return one_step("shard.spawn", region="yew", creature="guardian", count=count)


async def _save(client: Any, token: str, spec: dict[str, Any]) -> tuple[int, Any]:
    return await call(client, "POST", EVENTS, token, {"title": "Bounded", "spec": spec})


# ── core.wait and shard.spawn, as installed ──────────────────────────────────


@pytest.mark.parametrize(
    ("spec", "detail"),
    [
        (wait(-5), '"seconds" must be at least 0; got -5'),
        (wait(86_401), '"seconds" must be at most 86400; got 86401'),
        (wait(10**30), '"seconds" must be at most 86400; got 1000000000000000000000000000000'),
        (spawn(0), '"count" must be at least 1; got 0'),
        (spawn(51), '"count" must be at most 50; got 51'),
        (spawn(10**20), '"count" must be at most 50; got 100000000000000000000'),
    ],
    ids=["wait -5", "wait 86401", "wait 1e30", "spawn 0", "spawn 51", "spawn 1e20"],
)
async def test_a_value_outside_its_params_bounds_is_refused_at_save(
    client, tokens, db, spec, detail
) -> None:
    before = await snapshot(db)
    status, data = await _save(client, tokens["admin"], spec)
    assert status == 400, data
    assert data["error"]["details"] == [f"{WHERE}: {detail}"]
    assert await snapshot(db) == before


@pytest.mark.parametrize(
    "spec",
    [wait(0), wait(86_400), wait(86_400.0), spawn(1), spawn(50)],
    ids=["wait 0", "wait 86400", "wait 86400.0", "spawn 1", "spawn 50"],
)
async def test_a_value_on_its_params_bounds_is_saved_and_published(client, tokens, spec) -> None:
    status, event = await _save(client, tokens["admin"], spec)
    assert status == 201, event
    path = f"{EVENTS}/{event['id']}/publish"
    status, published = await call(client, "POST", path, tokens["admin"])
    assert status == 200, published


async def test_a_stored_value_outside_the_bounds_is_refused_at_publish(client, tokens, db):
    """A working copy saved before its action declared bounds (an upgraded plugin) is
    refused at publish with the save's own sentence."""
    status, event = await _save(client, tokens["admin"], wait(300))
    assert status == 201
    async with db.begin() as conn:
        await conn.execute(
            update(event_definitions)
            .where(event_definitions.c.id == event["id"])
            .values(spec=wait(86_401))
        )
    status, data = await call(client, "POST", f"{EVENTS}/{event['id']}/publish", tokens["admin"])
    assert status == 400, data
    assert f'{WHERE}: "seconds" must be at most 86400; got 86401' in data["error"]["details"]


def _referenced(default: int) -> dict[str, Any]:
    delay = {"name": "delay", "type": "integer", "label": "Delay", "default": default}
    return {**wait({"param": "delay"}), "params": [delay]}


async def test_a_reference_is_checked_as_the_value_it_is_written_out_as(
    client, tokens, host
) -> None:
    # Saved and published: a reference is not a value. Verify writes it out, and gives the
    # save's sentence; a run started by hand fails at the step with the same one.
    status, event = await _save(client, tokens["admin"], _referenced(90_000))
    assert status == 201, event
    status, _ = await call(client, "POST", f"{EVENTS}/{event['id']}/publish", tokens["admin"])
    assert status == 200
    status, data = await call(client, "POST", f"{EVENTS}/{event['id']}/verify", tokens["admin"])
    assert status == 400
    assert f'{WHERE}: "seconds" must be at most 86400; got 90000' in data["error"]["details"]
    path = f"{EVENTS}/{event['id']}/verify"
    status, data = await call(client, "POST", path, tokens["admin"], {"params": {"delay": 600}})
    assert status == 200, data
    status, run = await call(client, "POST", f"{EVENTS}/{event['id']}/runs", tokens["admin"])
    assert status == 201, run
    async with Engine(host) as engine:
        await engine.tick()
    (step,) = await step_rows(host.db, run["id"])
    assert step.status == "failed"
    assert step.last_error == '"seconds" must be at most 86400; got 90000'


# ── every kind of bound, on a plugin of its own ──────────────────────────────


class Bounded:
    """An action whose params declare every kind of bound."""

    PLUGIN_INFO = {"owner": "bounded", "contract": "^1.3"}  # noqa: RUF012 - read by the loader

    @hookimpl
    def pageant_actions(self) -> list[dict[str, Any]]:
        async def perform(ctx: Any) -> dict[str, Any]:
            return {"ok": True}

        def param(name: str, type_: str, example: Any, **bounds: Any) -> Param:
            return Param(name=name, type=type_, description=name, example=example, **bounds)

        return [
            {
                "id": "bounded.act",
                "label": "Bounded",
                "risk": "notify",
                "budget_ms": 1_000,
                "perform": perform,
                "params": [
                    param("level", "integer", 5, minimum=1, maximum=10),
                    param("ratio", "number", 1.0, minimum=0.5, maximum=2.5),
                    param("name", "string", "wisp", min_length=2, max_length=8),
                    param("code", "string", "ab12", pattern="[a-z]+[0-9]*"),
                    param("mode", "string", "calm", enum=["calm", "storm"]),
                ],
            }
        ]


@pytest.fixture
async def bounded_client(settings, db, clock, aiohttp_client) -> Any:
    host = make_host(settings, db, clock, [Bounded()])
    return await aiohttp_client(make_app(host, run_engine=False))


@pytest.mark.parametrize(
    ("params", "detail"),
    [
        ({"level": 0}, '"level" must be at least 1; got 0'),
        ({"level": 11}, '"level" must be at most 10; got 11'),
        ({"ratio": 0.49}, '"ratio" must be at least 0.5; got 0.49'),
        ({"ratio": 2.51}, '"ratio" must be at most 2.5; got 2.51'),
        ({"name": "w"}, '"name" must be at least 2 characters long; got "w"'),
        ({"name": "wisp" * 3}, '"name" must be at most 8 characters long; got "wispwispwisp"'),
        ({"code": "AB12"}, '"code" must match the pattern "[a-z]+[0-9]*"; got "AB12"'),
        ({"code": "ab12x"}, '"code" must match the pattern "[a-z]+[0-9]*"; got "ab12x"'),
        ({"mode": "gale"}, '"mode" must be one of "calm", "storm"; got "gale"'),
    ],
)
async def test_each_kind_of_bound_refuses_a_value_past_it_at_save(
    bounded_client, tokens, params, detail
) -> None:
    status, data = await _save(bounded_client, tokens["admin"], one_step("bounded.act", **params))
    assert status == 400, data
    assert data["error"]["details"] == [f"{WHERE}: {detail}"]


@pytest.mark.parametrize(
    "params",
    [
        {"level": 1, "ratio": 0.5, "name": "wi", "code": "a", "mode": "calm"},
        {"level": 10, "ratio": 2.5, "name": "wispwisp", "code": "abc123", "mode": "storm"},
    ],
    ids=["lower", "upper"],
)
async def test_each_kind_of_bound_admits_a_value_on_it(bounded_client, tokens, params) -> None:
    status, data = await _save(bounded_client, tokens["admin"], one_step("bounded.act", **params))
    assert status == 201, data
    assert data["spec"]["phases"][0]["steps"][0]["params"] == params


async def test_the_catalog_shows_a_params_bounds(bounded_client, tokens) -> None:
    response = await bounded_client.get("/api/v1/admin/catalog", headers=bearer(tokens["admin"]))
    (action,) = [a for a in (await response.json())["actions"] if a["id"] == "bounded.act"]
    level = next(p for p in action["params"] if p["name"] == "level")
    assert (level["minimum"], level["maximum"], level["pattern"]) == (1, 10, None)
