"""The runs API: start now, an event's runs, and the run console — through the real app."""

from __future__ import annotations

import pytest

from pageant.api.app import make_app
from pageant.engine import Engine
from tests.conftest import bearer
from tests.factories import (
    announce,
    phase,
    probe_step,
    publish_event,
    spec,
    step,
    wait,
)

RUN_KEYS = {
    "id",
    "definition_id",
    "definition_slug",
    "definition_title",
    "version_id",
    "version_number",
    "scope",
    "params",
    "source",
    "status",
    "health",
    "cleanup_status",
    "current_phase",
    "scheduled_for",
    "hold_until",
    "last_error",
    "cancel_reason",
    "concurrency_key",
    "dst_adjusted",
    "moved_from",
    "created_at",
    "started_at",
    "ended_at",
    "waiting_on",
}
STEP_KEYS = {
    "id",
    "phase",
    "seq",
    "label",
    "action",
    "action_version",
    "params",
    "on_failure",
    "spent",
    "status",
    "attempts",
    "parked",
    "due_at",
    "last_error",
    "note",
    "started_at",
    "finished_at",
}


@pytest.fixture
async def api(probe_host, aiohttp_client):
    return await aiohttp_client(make_app(probe_host, run_engine=False))


async def _start(api, tokens, event_id, body=None, role="admin"):
    kwargs = {"headers": bearer(tokens[role])}
    if body is not None:
        kwargs["json"] = body
    return await api.post(f"/api/v1/admin/events/{event_id}/runs", **kwargs)


# ── start now ─────────────────────────────────────────────────────────────────


async def test_start_now_answers_201_with_the_run(api, tokens, probe_host, clock):
    event = await publish_event(probe_host.db, clock.now(), spec(phase("p", probe_step("a"))))
    response = await _start(api, tokens, event.id)
    assert response.status == 201
    run = await response.json()
    assert set(run) == RUN_KEYS
    assert (run["status"], run["source"], run["scope"], run["version_number"]) == (
        "scheduled",
        "manual",
        "",
        1,
    )
    assert (run["definition_id"], run["definition_slug"]) == (event.id, event.slug)
    assert run["scheduled_for"] == "2027-03-01T12:00:00Z"
    assert run["waiting_on"] is None


async def test_a_second_start_at_the_same_instant_is_the_same_run(api, tokens, probe_host, clock):
    event = await publish_event(probe_host.db, clock.now(), spec(phase("p", probe_step("a"))))
    first = await (await _start(api, tokens, event.id)).json()
    again = await _start(api, tokens, event.id, {})
    assert again.status == 200 and (await again.json())["id"] == first["id"]
    other = await _start(api, tokens, event.id, {"scope": "north"})
    assert other.status == 201
    assert (await other.json())["scope"] == "north"


async def test_start_now_refusals_name_what_is_wrong(api, tokens, probe_host, clock):
    draft = await publish_event(probe_host.db, clock.now(), published=False)
    response = await _start(api, tokens, draft.id)
    assert response.status == 409
    assert "no published version" in (await response.json())["error"]["message"]

    held = await publish_event(
        probe_host.db, clock.now(), spec(phase("p", wait(60))), concurrency_key="arena"
    )
    holder = await (await _start(api, tokens, held.id)).json()
    async with Engine(probe_host) as engine:
        await engine.tick()
    clock.advance(1)
    response = await _start(api, tokens, held.id)
    error = (await response.json())["error"]
    assert response.status == 409 and error["code"] == "conflict"
    assert f"held by run {holder['id']} (running)" in error["message"]
    assert error["details"] == [f"holder_run_id: {holder['id']}"]


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({"scope": 7}, "body.scope: Input should be a valid string"),
        ({"scope": "x" * 101}, "body.scope: String should have at most 100 characters"),
        ({"scop": "x"}, "body.scop: is not a known field"),
    ],
)
async def test_start_now_refuses_a_bad_body(api, tokens, probe_host, clock, body, detail):
    event = await publish_event(probe_host.db, clock.now())
    response = await _start(api, tokens, event.id, body)
    assert response.status == 400
    assert detail in (await response.json())["error"]["details"]


async def test_start_now_checks_role_then_event_then_body(api, tokens, probe_host, clock):
    event = await publish_event(probe_host.db, clock.now())
    path = f"/api/v1/admin/events/{event.id}/runs"
    assert (await api.post(path, json={})).status == 401
    for role in ("editor", "moderator", "game"):
        response = await _start(api, tokens, event.id, {}, role=role)
        assert response.status == 403
        assert (await response.json())["error"]["message"] == "requires role admin"
    assert (await _start(api, tokens, 999_999, {"scope": 7})).status == 404
    assert (await _start(api, tokens, "nope", {})).status == 404
    json_ = {**bearer(tokens["admin"]), "Content-Type": "application/json"}
    malformed = await api.post(path, data=b"{", headers=json_)
    assert malformed.status == 400
    # Sent as anything but JSON, the body is a 415 - still after the role and the event.
    not_json = await api.post(path, data=b"{", headers=bearer(tokens["admin"]))
    assert not_json.status == 415
    missing = f"/api/v1/admin/events/{event.id + 1000}/runs"
    assert (await api.post(missing, data=b"{", headers=bearer(tokens["admin"]))).status == 404


# ── the list ──────────────────────────────────────────────────────────────────


async def test_an_events_runs_are_listed_by_id_and_paged(api, tokens, probe_host, clock):
    event = await publish_event(probe_host.db, clock.now())
    other = await publish_event(probe_host.db, clock.now(), title="other")
    ids = []
    for scope in ("a", "b", "c"):
        ids.append((await (await _start(api, tokens, event.id, {"scope": scope})).json())["id"])
    await _start(api, tokens, other.id)
    path = f"/api/v1/admin/events/{event.id}/runs"
    first = await (await api.get(path + "?limit=2", headers=bearer(tokens["moderator"]))).json()
    assert [r["id"] for r in first["items"]] == ids[:2]
    assert set(first["items"][0]) == RUN_KEYS
    cursor = first["next_cursor"]
    second = await (
        await api.get(f"{path}?limit=2&cursor={cursor}", headers=bearer(tokens["editor"]))
    ).json()
    assert [r["id"] for r in second["items"]] == ids[2:]
    assert second["next_cursor"] is None
    assert (await api.get(path)).status == 401
    assert (
        await api.get("/api/v1/admin/events/999999/runs", headers=bearer(tokens["editor"]))
    ).status == 404
    bad = await api.get(path + "?limit=0", headers=bearer(tokens["editor"]))
    assert bad.status == 400


# ── the console ───────────────────────────────────────────────────────────────


async def test_the_console_shows_run_steps_gate_and_log(
    api, tokens, probe_host, clock, engine, probe
):
    probe.script["cue"] = [{"ok": True, "park": True}]
    event = await publish_event(
        probe_host.db, clock.now(), spec(phase("p", announce("hello"), probe_step("cue")))
    )
    run_id = (await (await _start(api, tokens, event.id)).json())["id"]
    await engine.tick()
    response = await api.get(f"/api/v1/admin/runs/{run_id}", headers=bearer(tokens["editor"]))
    assert response.status == 200
    console = await response.json()
    assert set(console) == {
        "run",
        "phases",
        "steps",
        "gate",
        "participants",
        "results",
        "budget",
        "resources",
        "cleanup_summary",
        "log",
    }
    assert (console["resources"], console["cleanup_summary"]) == (
        [],
        "This run has recorded nothing in the world.",
    )
    assert set(console["run"]) == RUN_KEYS
    assert console["gate"] is None
    assert console["budget"] == []  # nothing here spends a budget
    assert [set(s) for s in console["steps"]] == [STEP_KEYS, STEP_KEYS]
    announced, cue = console["steps"]
    assert (announced["status"], announced["parked"]) == ("done", False)
    assert (cue["status"], cue["parked"], cue["attempts"]) == ("running", True, 1)
    waiting = console["run"]["waiting_on"]
    assert waiting["reason"] == "parked" and waiting["step_id"] == cue["id"]
    assert waiting["sentence"] == f"waiting for a person to confirm “Probe step” (step {cue['id']})"
    log = console["log"]
    assert set(log[0]) == {"id", "at", "kind", "phase", "step_id", "detail", "actor"}
    assert [line["id"] for line in log] == sorted(line["id"] for line in log)
    assert log[0]["kind"] == "run.created" and log[0]["actor"] == "admin:test-admin"
    assert log[-1]["kind"] == "run.waiting"


async def test_the_console_answers_404_for_an_unknown_run(api, tokens):
    for path in ("/api/v1/admin/runs/424242", "/api/v1/admin/runs/abc"):
        response = await api.get(path, headers=bearer(tokens["moderator"]))
        assert response.status == 404
    assert (await api.get("/api/v1/admin/runs/1")).status == 401
    assert (await api.get("/api/v1/admin/runs/1", headers=bearer(tokens["game"]))).status == 403


async def test_waiting_on_explains_a_backoff(api, tokens, probe_host, clock, engine, probe):
    probe.script["a"] = [{"ok": False, "retry": True, "error": "shard busy"}]
    event = await publish_event(probe_host.db, clock.now(), spec(phase("p", probe_step("a"))))
    run_id = (await (await _start(api, tokens, event.id)).json())["id"]
    await engine.tick()
    console = await (
        await api.get(f"/api/v1/admin/runs/{run_id}", headers=bearer(tokens["admin"]))
    ).json()
    waiting = console["run"]["waiting_on"]
    assert {k: waiting[k] for k in ("reason", "attempt", "of", "until")} == {
        "reason": "backoff",
        "attempt": 1,
        "of": 3,
        "until": "2027-03-01T12:01:00Z",
    }
    assert "shard busy" in waiting["sentence"]
    assert console["run"]["health"] == "degraded"


# ── a newcomer's walk through the HTTP API ───────────────────────────────────


async def test_a_newcomers_walk_create_publish_start_confirm(host, client, tokens, clock):
    admin = bearer(tokens["admin"])
    created = await client.post(
        "/api/v1/admin/events",
        json={
            "title": "Gate of Yew",
            "spec": spec(
                phase(
                    "muster",
                    announce("The gate of Yew opens in two seconds"),
                    wait(2),
                    announce("The gate is open"),
                    step("core.cue", message="Spawn the gatekeeper, then confirm"),
                )
            ),
        },
        headers=admin,
    )
    assert created.status == 201, await created.text()
    event = await created.json()
    edited = await client.put(
        f"/api/v1/admin/events/{event['id']}", json={"description": "Fridays"}, headers=admin
    )
    assert edited.status == 200, await edited.text()
    published = await client.post(f"/api/v1/admin/events/{event['id']}/publish", headers=admin)
    assert published.status == 200, await published.text()

    started = await client.post(f"/api/v1/admin/events/{event['id']}/runs", headers=admin)
    assert started.status == 201
    run_id = (await started.json())["id"]
    console_path = f"/api/v1/admin/runs/{run_id}"

    async with Engine(host) as engine:
        await engine.tick()
        held = await (await client.get(console_path, headers=admin)).json()
        assert held["run"]["waiting_on"]["reason"] == "not_due"
        clock.advance(2)
        await engine.tick()
        parked = await (await client.get(console_path, headers=admin)).json()
        assert parked["run"]["waiting_on"]["reason"] == "parked"
        cue = parked["steps"][-1]
        assert cue["parked"] is True

        moderator = bearer(tokens["moderator"])
        confirmed = await client.post(
            f"{console_path}/steps/{cue['id']}/confirm",
            json={"note": "gatekeeper spawned"},
            headers=moderator,
        )
        assert confirmed.status == 200
        await engine.tick()

    final = await (await client.get(console_path, headers=admin)).json()
    assert final["run"]["status"] == "completed"
    assert final["run"]["waiting_on"] is None
    story = [(line["kind"], (line["detail"] or {}).get("message")) for line in final["log"]]
    said = [message for kind, message in story if kind == "announce"]
    assert said == [
        "The gate of Yew opens in two seconds",
        "The gate is open",
        "Spawn the gatekeeper, then confirm",
    ]
    kinds = [kind for kind, _ in story]
    assert (
        kinds.index("step.parked") < kinds.index("control.confirm") < kinds.index("phase.completed")
    )
    confirm_line = next(line for line in final["log"] if line["kind"] == "control.confirm")
    assert confirm_line["actor"] == "moderator:test-moderator"
    assert confirm_line["detail"]["note"] == "gatekeeper spawned"
    assert kinds[-1] == "run.status" and final["log"][-1]["detail"]["to"] == "completed"
