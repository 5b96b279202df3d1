"""Runs started in batches (``POST /api/v1/admin/events/{id}/runs:batch``), through the real
app: up to 500 starts in one transaction, answered in order, each item judged exactly as a
single start is — a refused item answers the error a single start would, in its place, and
writes nothing; the others are made."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select

from pageant.api.app import make_app
from pageant.db.tables import event_runs
from tests.conftest import bearer
from tests.factories import announce, log_lines, phase, publish_event, spec, step, step_rows

COLOUR = {"name": "colour", "type": "string", "label": "Colour", "required": True}


def _colours() -> dict[str, Any]:
    """A run param the summon step takes from the wisps' option source of colours."""
    out = spec(phase("hunt", announce("go"), step("wisps.summon", colour={"param": "colour"})))
    out["params"] = [{**COLOUR, "option_source": "wisps.options.colours"}]
    return out


@pytest.fixture
def engine(host_engine: Any) -> Any:
    """``host``'s engine, attached (its group commit takes the batch) but never ticking."""
    return host_engine


@pytest.fixture
async def api(host: Any, engine: Any, aiohttp_client: Any) -> Any:
    return await aiohttp_client(make_app(host, run_engine=False))


def _path(event_id: int | str, batch: bool = True) -> str:
    return f"/api/v1/admin/events/{event_id}/runs" + (":batch" if batch else "")


async def _batch(api: Any, tokens: dict[str, str], event_id: Any, body: Any, role: str = "admin"):
    response = await api.post(_path(event_id), json=body, headers=bearer(tokens[role]))
    return response.status, await response.json()


async def _single(api: Any, tokens: dict[str, str], event_id: int, body: Any):
    response = await api.post(
        _path(event_id, batch=False), json=body, headers=bearer(tokens["admin"])
    )
    return response.status, await response.json()


async def _count_runs(db: Any, event_id: int) -> int:
    async with db.connect() as conn:
        query = select(func.count()).where(event_runs.c.definition_id == event_id)
        return int((await conn.execute(query)).scalar_one())


async def test_a_batch_makes_every_run_in_one_transaction_and_answers_them_in_order(
    api, tokens, host, engine, clock
):
    event = await publish_event(host.db, clock.now(), _colours())
    before = engine.outcomes.transactions
    colours = ["north", "south", "ember"]

    status, data = await _batch(
        api, tokens, event.id, {"runs": [{"scope": c, "params": {"colour": c}} for c in colours]}
    )

    assert status == 200, data
    assert [run["scope"] for run in data["runs"]] == colours
    assert [run["params"] for run in data["runs"]] == [{"colour": c, "scope": c} for c in colours]
    assert {(run["status"], run["source"]) for run in data["runs"]} == {("scheduled", "manual")}
    assert engine.outcomes.transactions - before == 1
    assert await _count_runs(host.db, event.id) == 3
    for colour, run in zip(colours, data["runs"], strict=True):
        summon = (await step_rows(host.db, run["id"]))[1]
        assert summon.params["colour"] == colour
        (created,) = await log_lines(host.db, run["id"], "run.created")
        assert created.detail["params"] == {"colour": colour, "scope": colour}


async def test_a_refused_item_answers_a_single_starts_error_in_its_place_and_writes_nothing(
    api, tokens, host, clock
):
    event = await publish_event(host.db, clock.now(), _colours())
    items = [
        {"scope": "a", "params": {"colour": "north"}},
        {"scope": "x", "params": {"colour": 7}},
        {"scope": "b", "params": {"colour": "violet"}},
        {"scope": "c", "params": {}},
        {"scope": "d", "params": {"colour": "south"}},
    ]

    status, data = await _batch(api, tokens, event.id, {"runs": items})

    assert status == 200, data
    answers = data["runs"]
    assert [a["scope"] for a in (answers[0], answers[4])] == ["a", "d"]
    assert await _count_runs(host.db, event.id) == 2
    for index in (1, 2, 3):
        assert set(answers[index]) == {"error", "http_status"}
        # Exactly what a single start of that body answers (and it, too, writes nothing).
        single_status, single = await _single(api, tokens, event.id, items[index])
        assert (answers[index]["http_status"], {"error": answers[index]["error"]}) == (
            single_status,
            single,
        )
    assert answers[1]["http_status"] == 400
    assert answers[1]["error"]["details"] == ["params.colour: must be a string; got 7"]
    assert answers[2]["error"]["details"] == [
        'params.colour: "violet" is not a value of wisps.options.colours (it offers "north", '
        '"south", "ember" now), which the param "colour" takes'
    ]
    assert answers[3]["http_status"] == 400
    assert any(d.startswith("params.colour") for d in answers[3]["error"]["details"])
    assert await _count_runs(host.db, event.id) == 2


async def test_items_of_one_batch_meet_the_rules_of_starts_sent_together(api, tokens, host, clock):
    keyed = await publish_event(
        host.db, clock.now(), spec(phase("p", announce("hi"))), concurrency_key="arena"
    )
    status, data = await _batch(api, tokens, keyed.id, {"runs": [{"scope": "n"}, {"scope": "s"}]})
    assert status == 200
    first, second = data["runs"]
    assert first["concurrency_key"] == "arena"
    assert second["http_status"] == 409
    assert second["error"]["details"] == [f"holder_run_id: {first['id']}"]

    free = await publish_event(host.db, clock.now(), _colours(), title="free")
    items = [
        {"scope": "x", "params": {"colour": "north"}},
        {"scope": "x", "params": {"colour": "north"}},
        {"scope": "x", "params": {"colour": "south"}},
    ]
    status, data = await _batch(api, tokens, free.id, {"runs": items})
    assert status == 200
    made, same, other = data["runs"]
    assert same["id"] == made["id"]  # an identical start at the same instant: the same run
    assert other["http_status"] == 409
    assert other["error"]["details"] == ["runs[2].scope: the same as runs[0]"]
    assert await _count_runs(host.db, free.id) == 1


async def test_a_batch_takes_500_items_and_refuses_501_naming_runs(api, tokens, host, clock):
    event = await publish_event(host.db, clock.now(), spec(phase("p", announce("hi"))))

    status, data = await _batch(api, tokens, event.id, {"runs": [{"scope": "x"}] * 501})
    assert status == 400
    assert data["error"]["details"] == [
        "body.runs: List should have at most 500 items after validation, not 501"
    ]
    assert await _count_runs(host.db, event.id) == 0
    status, data = await _batch(api, tokens, event.id, {"runs": []})
    assert status == 400
    assert data["error"]["details"][0].startswith("body.runs: List should have at least 1 item")

    status, data = await _batch(
        api, tokens, event.id, {"runs": [{"scope": f"s{i}"} for i in range(500)]}
    )
    assert status == 200
    assert [run["scope"] for run in data["runs"]] == [f"s{i}" for i in range(500)]
    assert await _count_runs(host.db, event.id) == 500


async def test_a_batch_checks_role_then_event_then_body(api, tokens, host, clock):
    event = await publish_event(host.db, clock.now(), spec(phase("p", announce("hi"))))
    body = {"runs": [{"scope": "a"}]}
    assert (await api.post(_path(event.id), json=body)).status == 401
    for role in ("editor", "moderator", "game"):
        status, data = await _batch(api, tokens, event.id, body, role=role)
        assert (status, data["error"]["message"]) == (403, "requires role admin")
    assert (await _batch(api, tokens, 999_999, {"runs": 7}))[0] == 404
    status, data = await _batch(api, tokens, event.id, {"runs": [{"scope": "a"}], "more": 1})
    assert (status, data["error"]["details"]) == (400, ["body.more: is not a known field"])
    status, data = await _batch(api, tokens, event.id, {"runs": ["a"]})
    assert status == 400 and data["error"]["details"][0].startswith("body.runs[0]")
    # An item of the wrong shape is a malformed body: the whole batch is refused.
    bad = {"runs": [{"scope": "a"}, {"scope": 7}, {"scope": "b", "colour": "north"}]}
    status, data = await _batch(api, tokens, event.id, bad)
    assert (status, data["error"]["details"]) == (
        400,
        [
            "body.runs[1].scope: Input should be a valid string",
            "body.runs[2].colour: is not a known field",
        ],
    )
    assert await _count_runs(host.db, event.id) == 0

    draft = await publish_event(host.db, clock.now(), published=False, title="draft")
    status, data = await _batch(api, tokens, draft.id, body)
    assert status == 200
    assert data["runs"][0]["http_status"] == 409
    assert "no published version" in data["runs"][0]["error"]["message"]
