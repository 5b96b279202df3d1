"""Verify, the hold on unverified scheduled occurrences, and the wisps walk: a world-changing
action enabled on purpose, run end to end, bounded by its cap."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from pageant.db.tables import event_versions
from pageant.engine import Engine
from pageant_wisps import WORLD
from tests.api.test_events_api import EVENTS, call, create
from tests.factories import log_lines, publish_event, run_row, spec
from tests.scheduling import once, runs_of, spec_with

ACTIONS = "/api/v1/admin/actions"


@pytest.fixture
async def engine_of_host(host: Any) -> Any:
    engine = Engine(host)
    try:
        yield engine
    finally:
        await engine.stop()


def summon(count: int, colour: str = "north", **kw: Any) -> dict[str, Any]:
    return {"action": "wisps.summon", "params": {"colour": colour, "count": count}, **kw}


def main_phase(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"key": "main", "label": "Main", "steps": list(steps)}


async def _enable(client, tokens, **body: Any) -> None:
    status, data = await call(client, "PUT", f"{ACTIONS}/wisps.summon", tokens["admin"], body)
    assert status == 200, data


async def _published(client, tokens, *steps: dict[str, Any], schedule=None) -> int:
    event = await create(
        client,
        tokens["admin"],
        title="Wisps",
        spec=spec_with(schedule or {"kind": "manual"}, main_phase(*steps)),
    )
    status, data = await call(client, "POST", f"{EVENTS}/{event['id']}/publish", tokens["admin"])
    assert status == 200, data
    return event["id"]


async def _verified_at(db, definition_id: int) -> list[Any]:
    async with db.connect() as conn:
        rows = await conn.execute(
            select(event_versions.c.verified_at).where(
                event_versions.c.definition_id == definition_id
            )
        )
        return [r.verified_at for r in rows]


async def _console(client, tokens, run_id: int) -> dict[str, Any]:
    status, data = await call(client, "GET", f"/api/v1/admin/runs/{run_id}", tokens["moderator"])
    assert status == 200
    return data


# ── verify ────────────────────────────────────────────────────────────────────


async def test_verify_refuses_a_disabled_action_and_records_nothing(client, tokens, db):
    event_id = await _published(client, tokens, summon(3))
    status, data = await call(client, "POST", f"{EVENTS}/{event_id}/verify", tokens["editor"])
    assert (status, data["error"]["code"]) == (400, "invalid")
    assert data["error"]["details"] == [
        "spec.phases[0].steps[0]: wisps.summon is a change action, disabled by default (its risk)"
    ]
    assert await _verified_at(db, event_id) == [None]


async def test_verify_refuses_the_whole_plan_past_a_cap_though_each_step_fits(client, tokens, db):
    await _enable(client, tokens, enabled=True, caps={"wisps.wisps": 30})
    event_id = await _published(client, tokens, summon(15), summon(15), summon(15))
    status, data = await call(client, "POST", f"{EVENTS}/{event_id}/verify", tokens["admin"])
    assert status == 400
    assert data["error"]["details"] == [
        'spec: asks for 45 of "wisps.wisps" across all its steps; the cap is 30 (set on '
        "wisps.summon)"
    ]
    assert await _verified_at(db, event_id) == [None]
    # At the cap exactly, the plan passes.
    event_id = await _published(client, tokens, summon(15), summon(15))
    status, data = await call(client, "POST", f"{EVENTS}/{event_id}/verify", tokens["admin"])
    assert status == 200, data
    assert data["spend"] == [
        {
            "dimension": "wisps.wisps",
            "label": "Wisps summoned",
            "unit": "wisps",
            "total": 30,
            "cap": 30,
            "cap_source_action": "wisps.summon",
        }
    ]
    assert (data["verified_by"], data["verified_at"]) == (
        "admin:test-admin",
        "2027-03-01T12:00:00Z",
    )
    assert await _verified_at(db, event_id) != [None]


async def test_verify_refuses_a_value_its_option_source_does_not_offer(client, tokens, db, clock):
    await _enable(client, tokens, enabled=True)
    # Stored before the source changed (written directly: a save would refuse it now).
    event = await publish_event(
        db,
        clock.now(),
        spec({"key": "main", "label": "Main", "steps": [summon(2, "purple")]}),
        verified=False,
    )
    status, data = await call(client, "POST", f"{EVENTS}/{event.id}/verify", tokens["admin"])
    assert status == 400
    assert (
        "spec.phases[0].steps[0].params.colour: 'purple' is not a value of "
        'wisps.options.colours; expected one of "north", "south", "ember"'
    ) in data["error"]["details"]
    # perform(verify=True) caught it as well.
    assert (
        "spec.phases[0].steps[0]: wisps.summon perform(verify=True) failed: no such colour 'purple'"
    ) in data["error"]["details"]
    assert await _verified_at(db, event.id) == [None]


async def test_verify_answers_404_and_409(client, tokens):
    status, _ = await call(client, "POST", f"{EVENTS}/999/verify", tokens["admin"])
    assert status == 404
    event = await create(client, tokens["admin"], title="Draft")
    status, data = await call(client, "POST", f"{EVENTS}/{event['id']}/verify", tokens["admin"])
    assert (status, data["error"]["code"]) == (409, "conflict")


async def test_a_scheduled_occurrence_of_an_unverified_version_is_held_until_verified(
    client, tokens, db, clock, engine_of_host
):
    # 12:00Z now; a once at 12:00 (the event's zone is UTC by default), grace 300 s.
    event_id = await _published(
        client,
        tokens,
        {"action": "core.wait", "params": {"seconds": 0}},
        schedule=once("2027-03-01T12:00"),
    )
    (row,) = await runs_of(db, event_id)
    await engine_of_host.tick()
    await engine_of_host.tick()
    row = await run_row(db, row.id)
    assert (row.status, row.waiting_reason) == ("scheduled", "unverified")
    held = [
        line
        for line in await log_lines(db, row.id, "run.waiting")
        if line.detail["reason"] == "unverified"
    ]
    assert len(held) == 1  # once per change of reason, not once per tick
    console = await _console(client, tokens, row.id)
    assert console["run"]["waiting_on"]["reason"] == "unverified"

    status, _ = await call(client, "POST", f"{EVENTS}/{event_id}/verify", tokens["admin"])
    assert status == 200
    await engine_of_host.tick()
    assert (await run_row(db, row.id)).status == "completed"


async def test_a_held_occurrence_is_missed_when_its_grace_runs_out(
    client, tokens, db, clock, engine_of_host
):
    event_id = await _published(
        client,
        tokens,
        {"action": "core.wait", "params": {"seconds": 0}},
        schedule=once("2027-03-01T12:00"),  # the zone is UTC by default
    )
    (row,) = await runs_of(db, event_id)
    await engine_of_host.tick()
    clock.advance(300)  # the last instant of its grace: still held, still scheduled
    await engine_of_host.tick()
    assert (await run_row(db, row.id)).status == "scheduled"
    clock.advance(1)
    await engine_of_host.tick()
    assert (await run_row(db, row.id)).status == "missed"


async def test_a_person_starting_an_unverified_version_is_not_held(
    client, tokens, db, engine_of_host
):
    event_id = await _published(client, tokens, {"action": "core.wait", "params": {"seconds": 0}})
    status, run = await call(client, "POST", f"{EVENTS}/{event_id}/runs", tokens["admin"], {})
    assert status == 201
    await engine_of_host.tick()
    assert (await run_row(db, run["id"])).status == "completed"


# ── the wisps walk ────────────────────────────────────────────────────────────


async def test_wisps_summon_walk_enable_publish_verify_start_cap_pause_raise_retry(
    client, tokens, db, engine_of_host
):
    WORLD.clear()
    await _enable(client, tokens, enabled=True, caps={"wisps.wisps": 30})
    event_id = await _published(client, tokens, summon(15), summon(15))
    status, data = await call(client, "POST", f"{EVENTS}/{event_id}/verify", tokens["admin"])
    assert status == 200, data
    status, run = await call(client, "POST", f"{EVENTS}/{event_id}/runs", tokens["admin"], {})
    assert status == 201
    await engine_of_host.tick()
    console = await _console(client, tokens, run["id"])
    assert console["run"]["status"] == "completed"
    assert console["budget"] == [
        {
            "dimension": "wisps.wisps",
            "label": "Wisps summoned",
            "unit": "wisps",
            "cap": 30,
            "consumed": 30,
            "cap_source_action": "wisps.summon",
        }
    ]
    # The run summoned 30 wisps, the ledger recorded each, and the run gave them all back.
    assert [r["status"] for r in console["resources"]] == ["reverted"] * 30
    assert console["run"]["cleanup_status"] == "complete"
    assert WORLD == {}

    # A third summon past the cap: verify refuses the plan, a person starts it anyway.
    greedy = await _published(
        client, tokens, summon(15), summon(15), summon(15, on_failure="pause"), summon(1)
    )
    status, _ = await call(client, "POST", f"{EVENTS}/{greedy}/verify", tokens["admin"])
    assert status == 400
    status, run = await call(client, "POST", f"{EVENTS}/{greedy}/runs", tokens["admin"], {})
    await engine_of_host.tick()
    console = await _console(client, tokens, run["id"])
    assert console["run"]["status"] == "paused"
    assert console["run"]["health"] == "degraded"
    assert [s["status"] for s in console["steps"]] == ["done", "done", "refused", "pending"]
    refused = console["steps"][2]
    assert refused["last_error"] == (
        'asks for 15 of "wisps.wisps"; 30 of 30 is already spent this run'
    )
    (line,) = [entry for entry in console["log"] if entry["kind"] == "step.refused"]
    assert (line["detail"]["code"], line["detail"]["asked"], line["detail"]["cap"]) == (
        "cap",
        15,
        30,
    )
    assert console["run"]["waiting_on"]["reason"] == "paused"

    # An admin raises the cap; the paused run's meter follows; a retry completes it.
    await _enable(client, tokens, caps={"wisps.wisps": 46})
    console = await _console(client, tokens, run["id"])
    assert (console["budget"][0]["cap"], console["budget"][0]["consumed"]) == (46, 30)
    status, data = await call(
        client,
        "POST",
        f"/api/v1/admin/runs/{run['id']}/steps/{refused['id']}/retry",
        tokens["moderator"],
        {"reason": "cap raised"},
    )
    assert status == 200, data
    await engine_of_host.tick()
    console = await _console(client, tokens, run["id"])
    assert console["run"]["status"] == "completed"
    assert [s["status"] for s in console["steps"]] == ["done"] * 4
    assert (console["budget"][0]["cap"], console["budget"][0]["consumed"]) == (46, 46)
    assert [s["spent"] for s in console["steps"]] == [
        {"wisps.wisps": 15},
        {"wisps.wisps": 15},
        {"wisps.wisps": 15},
        {"wisps.wisps": 1},
    ]


# ── option sources at save ────────────────────────────────────────────────────


async def test_saving_a_value_its_option_source_does_not_offer_is_a_400(client, tokens, db):
    from tests.api.test_events_api import snapshot

    before = await snapshot(db)
    body = {"title": "Wisps", "spec": spec_with({"kind": "manual"}, main_phase(summon(2, "teal")))}
    status, data = await call(client, "POST", EVENTS, tokens["admin"], body)
    assert (status, data["error"]["code"]) == (400, "invalid")
    assert data["error"]["details"] == [
        "spec.phases[0].steps[0].params.colour: 'teal' is not a value of "
        'wisps.options.colours; expected one of "north", "south", "ember"'
    ]
    assert await snapshot(db) == before
    body["spec"] = spec_with({"kind": "manual"}, main_phase(summon(2, "ember")))
    status, _ = await call(client, "POST", EVENTS, tokens["admin"], body)
    assert status == 201


async def test_a_source_that_cannot_answer_is_a_warning_not_a_refusal(
    client, tokens, host, monkeypatch, caplog
):
    source = host.registry.option_sources["wisps.options.colours"]

    async def down() -> list[dict[str, str]]:
        raise ConnectionError("the shard is down")

    monkeypatch.setattr(type(source), "resolve", property(lambda self: down), raising=False)
    body = {"title": "Wisps", "spec": spec_with({"kind": "manual"}, main_phase(summon(2, "teal")))}
    status, data = await call(client, "POST", EVENTS, tokens["admin"], body)
    assert status == 201, data
    assert "not checked; wisps.options.colours raised ConnectionError: the shard is down" in (
        caplog.text
    )
