"""A ``notify`` step of a plugin that is down is held, not refused, for up to its
``hold_seconds`` (default 120; 0 refuses at once as before): it is sent late when its plugin
comes back within the hold, and refused when the hold runs out first. The run log says it
was held and for how long (``step.held``); holding claims nothing and spends no attempt."""

from __future__ import annotations

import pytest

from pageant.events.authoring.validator import MAX_HOLD_SECONDS
from pageant.runs.holding import DEFAULT_HOLD_SECONDS
from tests.factories import log_lines, phase, probe_step, spec, start_event, step_rows

DOWN = "the game server is restarting"


async def _held_run(host, engine, **hold):
    host.mark_unavailable("probe", DOWN)
    run_id = await start_event(host, spec(phase("main", probe_step("a", **hold))))
    await engine.tick()
    return run_id


async def _waiting_on(host, run_id):
    from pageant.runs.console import console

    return (await console(host, run_id))["run"]["waiting_on"]


async def test_a_notify_step_is_held_while_its_plugin_is_down_and_sent_when_it_is_back(
    probe_host, engine, probe, clock
):
    run_id = await _held_run(probe_host, engine)
    clock.advance(DEFAULT_HOLD_SECONDS - 1)  # just inside the hold
    await engine.tick()
    [a] = await step_rows(probe_host.db, run_id)
    assert (a.status, a.attempts, a.claimed_by) == ("pending", 0, None)
    assert probe.names() == []
    waiting = await _waiting_on(probe_host, run_id)
    assert waiting["reason"] == "unavailable"
    assert f"{DOWN}; a notify step is held up to 120 s for its plugin" in waiting["sentence"]
    assert (await log_lines(probe_host.db, run_id, "run.health"))[0].detail["to"] == "degraded"

    probe_host.mark_unavailable("probe", None)
    await engine.tick()
    [a] = await step_rows(probe_host.db, run_id)
    assert (a.status, a.attempts) == ("done", 1)
    assert probe.names() == ["a"]  # sent late, not lost
    [held] = await log_lines(probe_host.db, run_id, "step.held")
    assert held.detail == {
        "action": "probe.step",
        "held_seconds": DEFAULT_HOLD_SECONDS - 1,
        "hold_seconds": DEFAULT_HOLD_SECONDS,
        "outcome": "dispatched",
    }
    assert held.step_id == a.id


async def test_a_hold_that_runs_out_is_refused_and_says_how_long_it_held(
    probe_host, engine, probe, clock
):
    run_id = await _held_run(probe_host, engine, hold_seconds=30)
    clock.advance(30)  # just past the hold
    await engine.tick()
    [a] = await step_rows(probe_host.db, run_id)
    assert a.status == "refused" and probe.names() == []
    [refused] = await log_lines(probe_host.db, run_id, "step.refused")
    assert refused.detail["code"] == "unavailable"
    assert refused.detail["error"] == f"probe.step is unavailable: {DOWN}"
    [held] = await log_lines(probe_host.db, run_id, "step.held")
    assert (held.detail["held_seconds"], held.detail["hold_seconds"]) == (30, 30)
    assert held.detail["outcome"] == "refused"


async def test_hold_seconds_zero_refuses_at_once_as_before(probe_host, engine, probe):
    run_id = await _held_run(probe_host, engine, hold_seconds=0)
    [a] = await step_rows(probe_host.db, run_id)
    assert a.status == "refused" and probe.names() == []
    assert await log_lines(probe_host.db, run_id, "step.held") == []


async def test_a_step_whose_plugin_is_up_is_not_held(probe_host, engine, probe):
    run_id = await start_event(probe_host, spec(phase("main", probe_step("a"))))
    await engine.tick()
    assert probe.names() == ["a"]
    assert await log_lines(probe_host.db, run_id, "step.held") == []


@pytest.mark.parametrize("bad", [-1, 1.5, "60", True, MAX_HOLD_SECONDS + 1])
async def test_hold_seconds_is_checked_at_save(client, tokens, bad):
    from tests.conftest import bearer

    body = {
        "title": "Held",
        "spec": spec(phase("main", {**probe_step("a"), "hold_seconds": bad})),
    }
    body["spec"]["phases"][0]["steps"][0]["action"] = "core.announce"
    body["spec"]["phases"][0]["steps"][0]["params"] = {"leg": "core.log", "message": "hi"}
    answer = await client.post("/api/v1/admin/events", json=body, headers=bearer(tokens["admin"]))
    assert answer.status == 400
    details = (await answer.json())["error"]["details"]
    assert details == [
        "spec.phases[0].steps[0].hold_seconds: expected a whole number of seconds from 0 to "
        f"{MAX_HOLD_SECONDS}; got {bad!r}".replace("'", '"').replace("True", "true")
    ]


async def test_hold_seconds_round_trips_through_save(client, tokens):
    from tests.conftest import bearer

    step = {"action": "core.announce", "params": {"leg": "core.log", "message": "hi"}}
    body = {"title": "Held", "spec": spec(phase("main", {**step, "hold_seconds": 300}))}
    answer = await client.post("/api/v1/admin/events", json=body, headers=bearer(tokens["admin"]))
    assert answer.status == 201, await answer.text()
    saved = (await answer.json())["spec"]["phases"][0]["steps"][0]
    assert saved["hold_seconds"] == 300
