"""An action's own default ``on_failure`` (contract 1.2): the declaration's default wins over
its risk's, the author's spec may still override it, and the catalog, the editor and the
run's steps all show the same one. And resources a ``notify`` action reports, which the
host never records, are logged once, not silently dropped."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from pageant import hookimpl
from pageant.api.app import make_app
from pageant.engine import Engine
from pageant.runs.create import start_now
from tests.api.test_events_api import EVENTS, call, create
from tests.conftest import bearer
from tests.console.test_console import sign_in
from tests.factories import make_host, phase, publish_event, spec, step, step_rows


class Herald:
    """A broadcast that cannot be taken back (irreversible) and must never be repeated or
    waited on: it declares ``skip``. And a roll call that reports what it saw."""

    PLUGIN_INFO = {"owner": "herald", "contract": "^1.2"}  # noqa: RUF012 - read by the loader

    def __init__(self) -> None:
        self.answers: list[dict[str, Any]] = []

    async def perform(self, ctx: Any) -> Any:
        return self.answers.pop(0) if self.answers else {"ok": True}

    @hookimpl
    def pageant_actions(self) -> list[dict[str, Any]]:
        base = {"perform": self.perform, "budget_ms": 5_000}
        return [
            {
                "id": "herald.broadcast",
                "label": "Broadcast",
                "risk": "irreversible",
                "on_failure": "skip",
                **base,
            },
            {"id": "herald.proclaim", "label": "Proclaim", "risk": "irreversible", **base},
            {"id": "herald.roll_call", "label": "Roll call", "risk": "notify", **base},
        ]


@pytest.fixture
def herald() -> Herald:
    return Herald()


@pytest.fixture
async def herald_host(settings, db, clock, herald):
    h = make_host(settings, db, clock, [herald])
    try:
        yield h
    finally:
        await h.close()


@pytest.fixture
async def herald_client(herald_host, aiohttp_client):
    return await aiohttp_client(make_app(herald_host, run_engine=False))


def test_an_action_declares_only_a_known_disposition() -> None:
    from pydantic import ValidationError

    from pageant.hookspecs import Action

    async def perform(ctx: Any) -> dict[str, Any]:
        return {"ok": True}

    declared = {"id": "herald.x", "label": "X", "risk": "change", "budget_ms": 10}
    assert Action(**declared, perform=perform).default_on_failure == "pause"
    assert Action(**declared, perform=perform, on_failure="skip").default_on_failure == "skip"
    with pytest.raises(ValidationError, match="on_failure"):
        Action(**declared, perform=perform, on_failure="retry")


async def test_the_declared_default_wins_over_the_risks_and_the_spec_may_override_it(
    herald_client, tokens
):
    event = await create(herald_client, tokens["admin"], title="Proclamations")
    steps = [
        step("herald.broadcast"),
        step("herald.proclaim"),
        step("herald.broadcast", on_failure="abort_run"),
    ]
    body = {"spec": spec(phase("p", *steps))}
    path = f"{EVENTS}/{event['id']}"
    status, saved = await call(herald_client, "PUT", path, tokens["admin"], body)
    assert status == 200, saved
    stored = [s["on_failure"] for s in saved["spec"]["phases"][0]["steps"]]
    assert stored == ["skip", "abort_run", "abort_run"]

    response = await herald_client.get("/api/v1/admin/catalog", headers=bearer(tokens["admin"]))
    actions = {a["id"]: a for a in (await response.json())["actions"]}
    assert (
        actions["herald.broadcast"]["on_failure"],
        actions["herald.broadcast"]["default_on_failure"],
    ) == ("skip", "skip")
    assert (
        actions["herald.proclaim"]["on_failure"],
        actions["herald.proclaim"]["default_on_failure"],
    ) == (None, "abort_run")

    await sign_in(herald_client, tokens["admin"])
    html = await (await herald_client.get(f"/events/{event['id']}")).text()
    assert "the action&#39;s default: skip" in html or "the action's default: skip" in html
    assert (
        "the action&#39;s default: abort run" in html or "the action's default: abort run" in html
    )


async def test_a_failed_step_of_a_declared_skip_lets_the_run_go_on(herald_host, herald):
    # A spec stored without on_failure (as an older version was) takes the declaration's.
    herald.answers = [{"ok": False, "retry": False, "error": "the crier lost his voice"}]
    event = await publish_event(
        herald_host.db,
        herald_host.clock.now(),
        {
            "schedule": {"kind": "manual"},
            "phases": [phase("p", step("herald.broadcast"), step("herald.roll_call"))],
        },
    )
    await _enable(herald_host, "herald.broadcast")
    run_id, _ = await start_now(herald_host, event.id, scope="", actor="admin:test")
    engine = Engine(herald_host)
    try:
        for _ in range(3):
            await engine.tick()
    finally:
        await engine.stop()
    rows = await step_rows(herald_host.db, run_id)
    assert [(r.on_failure, r.status) for r in rows] == [("skip", "failed"), ("skip", "done")]


async def _enable(host: Any, action_id: str) -> None:
    from pageant.switchboard import board

    async with host.db.begin() as conn:
        await board.set_action(
            conn,
            host.registry,
            action_id,
            enabled=True,
            caps={},
            actor="admin:test",
            now=host.clock.now(),
        )


async def test_resources_a_notify_action_reports_are_logged_once_and_not_recorded(
    herald_host, herald, caplog
):
    seen = {"ok": True, "resources": [{"kind": "banner", "ref": "b-1"}]}
    herald.answers = [dict(seen), dict(seen)]
    calls = phase("p", step("herald.roll_call"), step("herald.roll_call"))
    event = await publish_event(herald_host.db, herald_host.clock.now(), spec(calls))
    run_id, _ = await start_now(herald_host, event.id, scope="", actor="admin:test")
    engine = Engine(herald_host)
    caplog.set_level(logging.WARNING, logger="pageant")
    try:
        for _ in range(3):
            await engine.tick()
    finally:
        await engine.stop()
    assert [r.status for r in await step_rows(herald_host.db, run_id)] == ["done", "done"]
    warned = [r for r in caplog.records if "answered resources" in r.getMessage()]
    assert len(warned) == 1
    assert warned[0].levelno == logging.WARNING
    assert "herald.roll_call (risk notify)" in warned[0].getMessage()
    from pageant.runs.console import console

    assert (await console(herald_host, run_id))["resources"] == []
