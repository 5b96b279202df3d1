"""The run controls: each a compare-and-set from the statuses DESIGN §7 allows, a 409
naming the actual status otherwise, and a control.* line with the actor and the reason."""

from __future__ import annotations

import asyncio

import pytest

from pageant.api.app import make_app
from tests.conftest import bearer
from tests.factories import (
    Blocker,
    log_lines,
    phase,
    probe_step,
    publish_event,
    run_row,
    set_run,
    spec,
    step_rows,
)

FATAL = {"ok": False, "retry": False, "error": "the shard said no"}
PARK = {"ok": True, "park": True}


@pytest.fixture
async def api(probe_host, aiohttp_client):
    return await aiohttp_client(make_app(probe_host, run_engine=False))


async def _run(api, tokens, host, event_spec, **kw):
    event = await publish_event(host.db, host.clock.now(), event_spec, **kw)
    response = await api.post(
        f"/api/v1/admin/events/{event.id}/runs", headers=bearer(tokens["admin"])
    )
    return (await response.json())["id"]


async def _control(api, tokens, path, body=None, role="moderator"):
    kwargs = {"headers": bearer(tokens[role])}
    if body is not None:
        kwargs["json"] = body
    response = await api.post(f"/api/v1/admin/runs/{path}", **kwargs)
    return response.status, await response.json()


def _conflict(answer, text):
    return answer["error"]["code"] == "conflict" and text in answer["error"]["message"]


# ── pause, resume, cancel ─────────────────────────────────────────────────────


async def test_pause_stops_a_running_run_and_says_who(api, tokens, probe_host, engine, probe):
    probe.script["cue"] = [PARK]
    run_id = await _run(api, tokens, probe_host, spec(phase("p", probe_step("cue"))))
    await engine.tick()
    status, run = await _control(api, tokens, f"{run_id}/pause", {"reason": "wrong shard"})
    assert status == 200
    assert run["status"] == "paused"
    assert run["waiting_on"]["reason"] == "paused"
    assert run["waiting_on"]["sentence"] == "paused by a person; resume to continue"
    (line,) = await log_lines(probe_host.db, run_id, "control.pause")
    assert (line.actor, line.detail["reason"]) == ("moderator:test-moderator", "wrong shard")
    status, answer = await _control(api, tokens, f"{run_id}/pause")
    assert status == 409 and _conflict(answer, f"run {run_id} is paused")


async def test_pause_refuses_a_run_that_is_not_running(api, tokens, probe_host, engine):
    scheduled = await _run(api, tokens, probe_host, spec(phase("p", probe_step("a"))))
    status, answer = await _control(api, tokens, f"{scheduled}/pause")
    assert status == 409 and _conflict(answer, "is scheduled")
    await engine.tick()
    status, answer = await _control(api, tokens, f"{scheduled}/pause")
    assert status == 409 and _conflict(answer, "is completed")
    assert await log_lines(probe_host.db, scheduled, "control.pause") == []


async def test_resume_steps_over_the_failed_step_it_stopped_at(
    api, tokens, probe_host, engine, probe
):
    probe.script["a"] = [FATAL]
    run_id = await _run(
        api,
        tokens,
        probe_host,
        spec(phase("p", probe_step("a", on_failure="pause"), probe_step("b"))),
    )
    await engine.tick()
    assert (await run_row(probe_host.db, run_id)).status == "paused"
    status, run = await _control(api, tokens, f"{run_id}/resume", {"reason": "fixed by hand"})
    assert status == 200 and run["status"] == "running" and run["waiting_on"] is None
    await engine.tick()
    assert [s.status for s in await step_rows(probe_host.db, run_id)] == ["failed", "done"]
    assert probe.names() == ["a", "b"]
    assert (await run_row(probe_host.db, run_id)).status == "completed"
    status, answer = await _control(api, tokens, f"{run_id}/resume")
    assert status == 409 and _conflict(answer, "is completed; resume acts on a paused run")


async def test_cancel_cancels_pending_and_parked_steps_and_frees_the_key(
    api, tokens, probe_host, engine, probe
):
    probe.script["cue"] = [PARK]
    run_id = await _run(
        api,
        tokens,
        probe_host,
        spec(phase("p", probe_step("cue"), probe_step("b"))),
        concurrency_key="arena",
    )
    await engine.tick()
    status, run = await _control(api, tokens, f"{run_id}/cancel", {"reason": "storm"})
    assert status == 200
    assert (run["status"], run["cancel_reason"]) == ("cancelled", "storm")
    assert [s.status for s in await step_rows(probe_host.db, run_id)] == [
        "cancelled",
        "cancelled",
    ]
    row = await run_row(probe_host.db, run_id)
    assert (row.concurrency_lock, row.claimed_by) == (None, None)
    (line,) = await log_lines(probe_host.db, run_id, "control.cancel")
    assert line.detail == {
        "from": "running",
        "to": "cancelled",
        "reason": "storm",
        "cancelled_steps": 2,
    }
    status, answer = await _control(api, tokens, f"{run_id}/cancel", {"reason": "again"})
    assert status == 409 and _conflict(answer, f"run {run_id} is cancelled")


async def test_a_scheduled_run_can_be_cancelled(api, tokens, probe_host):
    run_id = await _run(api, tokens, probe_host, spec(phase("p", probe_step("a"))))
    status, run = await _control(api, tokens, f"{run_id}/cancel", {"reason": "not tonight"})
    assert status == 200 and run["status"] == "cancelled"


@pytest.mark.parametrize("body", [None, {}, {"reason": ""}, {"reason": 3}, {"why": "x"}])
async def test_cancel_requires_a_reason(api, tokens, probe_host, body):
    run_id = await _run(api, tokens, probe_host, spec(phase("p", probe_step("a"))))
    status, answer = await _control(api, tokens, f"{run_id}/cancel", body)
    assert status == 400 and answer["error"]["code"] == "invalid"
    assert (await run_row(probe_host.db, run_id)).status == "scheduled"


# ── confirm, skip ─────────────────────────────────────────────────────────────


async def test_confirm_finishes_a_parked_step_with_a_note(api, tokens, probe_host, engine, probe):
    probe.script["cue"] = [PARK]
    run_id = await _run(api, tokens, probe_host, spec(phase("p", probe_step("cue"))))
    await engine.tick()
    (cue,) = await step_rows(probe_host.db, run_id)
    status, step = await _control(
        api, tokens, f"{run_id}/steps/{cue.id}/confirm", {"note": "spawned by hand"}
    )
    assert status == 200
    assert (step["status"], step["note"], step["parked"]) == ("done", "spawned by hand", False)
    await engine.tick()
    assert (await run_row(probe_host.db, run_id)).status == "completed"
    status, answer = await _control(api, tokens, f"{run_id}/steps/{cue.id}/confirm")
    assert status == 409 and _conflict(answer, f"step {cue.id} is done")


async def test_confirm_refuses_a_step_that_is_not_parked(api, tokens, probe_host, engine, probe):
    blocker = Blocker()
    probe.script["slow"] = [blocker]
    run_id = await _run(
        api, tokens, probe_host, spec(phase("p", probe_step("slow"), probe_step("b")))
    )
    await engine.tick(drain=False)
    await blocker.entered.wait()
    slow, later = await step_rows(probe_host.db, run_id)
    status, answer = await _control(api, tokens, f"{run_id}/steps/{slow.id}/confirm")
    assert status == 409 and _conflict(answer, "is running (being dispatched)")
    status, answer = await _control(api, tokens, f"{run_id}/steps/{later.id}/confirm")
    assert status == 409 and _conflict(answer, f"step {later.id} is pending")
    blocker.release.set()
    await engine.drain()


async def test_skip_takes_a_pending_or_parked_step_out_of_the_way(
    api, tokens, probe_host, engine, probe
):
    probe.script["cue"] = [PARK]
    run_id = await _run(
        api,
        tokens,
        probe_host,
        spec(phase("p", probe_step("cue"), probe_step("b"), probe_step("c"))),
    )
    await engine.tick()
    cue, b, _ = await step_rows(probe_host.db, run_id)
    status, step = await _control(api, tokens, f"{run_id}/steps/{b.id}/skip", {"reason": "no"})
    assert status == 200 and step["status"] == "skipped"
    status, step = await _control(api, tokens, f"{run_id}/steps/{cue.id}/skip")
    assert status == 200 and step["status"] == "skipped"
    await engine.tick()
    assert probe.names() == ["cue", "c"]
    assert [s.status for s in await step_rows(probe_host.db, run_id)] == [
        "skipped",
        "skipped",
        "done",
    ]
    lines = await log_lines(probe_host.db, run_id, "control.skip")
    assert [line.detail["from"] for line in lines] == ["pending", "parked"]
    status, answer = await _control(api, tokens, f"{run_id}/steps/{b.id}/skip")
    assert status == 409 and _conflict(answer, f"step {b.id} is skipped")


# ── retry ─────────────────────────────────────────────────────────────────────


async def test_retry_requeues_the_furthest_failed_step_and_resumes(
    api, tokens, probe_host, engine, probe
):
    probe.script["a"] = [FATAL]
    probe.script["c"] = [FATAL, FATAL]
    run_id = await _run(
        api,
        tokens,
        probe_host,
        spec(
            phase(
                "p",
                probe_step("a"),  # fails, skip: stepped over
                probe_step("b"),
                probe_step("c", on_failure="pause"),  # fails, pauses the run here
                probe_step("d"),
            )
        ),
    )
    await engine.tick()
    a, _, c, _ = await step_rows(probe_host.db, run_id)
    assert (await run_row(probe_host.db, run_id)).status == "paused"
    status, answer = await _control(api, tokens, f"{run_id}/steps/{a.id}/retry")
    assert status == 409 and _conflict(answer, "not the furthest step")
    status, step = await _control(api, tokens, f"{run_id}/steps/{c.id}/retry", {"reason": "2nd"})
    assert status == 200
    assert (step["status"], step["attempts"], step["last_error"]) == ("pending", 0, None)
    assert (await run_row(probe_host.db, run_id)).status == "running"
    await engine.tick()  # c fails again and pauses again
    assert (await run_row(probe_host.db, run_id)).status == "paused"
    await _control(api, tokens, f"{run_id}/steps/{c.id}/retry")
    await engine.tick()
    assert probe.names() == ["a", "b", "c", "c", "c", "d"]
    assert (await run_row(probe_host.db, run_id)).status == "completed"
    lines = await log_lines(probe_host.db, run_id, "control.retry")
    assert [line.detail["reason"] for line in lines] == ["2nd", None]
    # the same idempotency key on every retry, the person's included
    assert len({ctx.idempotency_key for ctx in probe.calls if ctx.params["name"] == "c"}) == 1


async def test_retry_refusals(api, tokens, probe_host, engine, probe):
    probe.script["a"] = [FATAL]
    run_id = await _run(api, tokens, probe_host, spec(phase("p", probe_step("a"), probe_step("b"))))
    await engine.tick()
    a, b = await step_rows(probe_host.db, run_id)
    status, answer = await _control(api, tokens, f"{run_id}/steps/{b.id}/retry")
    assert status == 409 and _conflict(answer, f"step {b.id} is done")
    status, answer = await _control(api, tokens, f"{run_id}/steps/{a.id}/retry")
    assert status == 409 and _conflict(answer, f"run {run_id} is completed")
    assert (a.status, a.attempts) == ("failed", 1)
    assert (await step_rows(probe_host.db, run_id))[0].status == "failed"


async def test_retry_also_reruns_a_refused_step(api, tokens, probe_host, engine, probe):
    run_id = await _run(
        api,
        tokens,
        probe_host,
        spec(phase("p", {"action": "probe.change", "params": {"name": "x"}})),
    )
    await engine.tick()
    (refused,) = await step_rows(probe_host.db, run_id)
    assert refused.status == "refused"
    status, step = await _control(api, tokens, f"{run_id}/steps/{refused.id}/retry")
    assert status == 200 and step["status"] == "pending"
    await engine.tick()  # still disabled: refused again, paused again
    assert (await step_rows(probe_host.db, run_id))[0].status == "refused"
    assert (await run_row(probe_host.db, run_id)).status == "paused"


# ── the order of checks, and races ────────────────────────────────────────────


async def test_controls_check_token_role_resource_body_then_state(api, tokens, probe_host):
    run_id = await _run(api, tokens, probe_host, spec(phase("p", probe_step("a"))))
    other = await _run(api, tokens, probe_host, spec(phase("p", probe_step("b"))))
    (mine,) = await step_rows(probe_host.db, run_id)
    no_token = await api.post(f"/api/v1/admin/runs/{run_id}/cancel", json={})
    assert no_token.status == 401
    status, answer = await _control(api, tokens, f"{run_id}/cancel", {}, role="editor")
    assert status == 403 and answer["error"]["message"] == "requires role admin or moderator"
    status, _ = await _control(api, tokens, "999999/cancel", {})
    assert status == 404
    status, answer = await _control(api, tokens, f"{other}/steps/{mine.id}/skip", {"reason": 1})
    assert status == 404 and answer["error"]["message"] == f"no such step: {mine.id} in run {other}"
    status, _ = await _control(api, tokens, f"{run_id}/steps/{mine.id}/confirm", {"note": 1})
    assert status == 400
    status, answer = await _control(api, tokens, f"{run_id}/steps/{mine.id}/confirm", {})
    assert status == 409 and _conflict(answer, "is pending")
    for role in ("admin", "moderator"):
        status, _ = await _control(api, tokens, f"{run_id}/pause", {}, role=role)
        assert status == 409  # allowed to ask; the run is scheduled


async def test_two_confirms_at_once_confirm_once(api, tokens, probe_host, engine, probe):
    probe.script["cue"] = [PARK]
    run_id = await _run(api, tokens, probe_host, spec(phase("p", probe_step("cue"))))
    await engine.tick()
    (cue,) = await step_rows(probe_host.db, run_id)
    path = f"{run_id}/steps/{cue.id}/confirm"
    answers = await asyncio.gather(
        _control(api, tokens, path, {"note": "one"}),
        _control(api, tokens, path, {"note": "two"}, role="admin"),
    )
    assert sorted(status for status, _ in answers) == [200, 409]
    assert len(await log_lines(probe_host.db, run_id, "control.confirm")) == 1


async def test_retry_refuses_a_failed_step_of_an_earlier_phase(
    api, tokens, probe_host, engine, probe
):
    probe.script["a"] = [FATAL]
    probe.script["b"] = [FATAL]
    run_id = await _run(
        api,
        tokens,
        probe_host,
        spec(phase("one", probe_step("a")), phase("two", probe_step("b", on_failure="pause"))),
    )
    await engine.tick()
    a, b = await step_rows(probe_host.db, run_id)
    assert (a.status, b.status) == ("failed", "failed")
    status, answer = await _control(api, tokens, f"{run_id}/steps/{a.id}/retry")
    assert status == 409 and _conflict(answer, "is in phase 'one'")
    status, _ = await _control(api, tokens, f"{run_id}/steps/{b.id}/retry")
    assert status == 200


async def test_a_run_paused_while_starting_resumes_into_its_first_phase(
    api, tokens, probe_host, engine, probe
):
    run_id = await _run(api, tokens, probe_host, spec(phase("p", probe_step("a"))))
    await set_run(probe_host.db, run_id, status="starting")
    status, run = await _control(api, tokens, f"{run_id}/pause")
    assert status == 200 and run["status"] == "paused"
    status, run = await _control(api, tokens, f"{run_id}/resume")
    assert status == 200 and run["status"] == "starting"
    await engine.tick()
    assert (await run_row(probe_host.db, run_id)).status == "completed"
    assert probe.names() == ["a"]
