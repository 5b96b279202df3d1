"""A cleanup held because its plugin is down says so: the ended run's ``waiting_on`` names
the plugin and why, its health is ``degraded`` (each logged once, however many passes look),
and when the plugin is back — by its own ``set_available(True)``, or any caller of
``Host.plugin_back`` (a game link's return) — the cleanup goes on by itself and the note is
cleared. Real engine, API and both databases."""

from __future__ import annotations

from typing import Any

from pageant.api.app import make_app
from pageant.runs import controls
from pageant.runs.console import run_view
from tests.conftest import bearer
from tests.factories import log_lines, phase, run_row, spec, start_event, step
from tests.ledger.games import forge

SENTENCE = (
    "cleanup waits for smith, which is unavailable (the forge went cold): 2 things this run "
    "holds will be given back once smith is back"
)


async def _held(smith_host: Any, smith_engine: Any, clock: Any) -> int:
    """A run that forged 2 swords, then its plugin went down, then it was cancelled: its
    cleanup waits through three passes of the engine."""
    run_id = await start_event(
        smith_host, spec(phase("p", forge(2), step("core.wait", seconds=3600)))
    )
    await smith_engine.tick()
    smith_host.context_for("smith", "smith").set_available(False, "the forge went cold")
    await controls.cancel(smith_host, run_id, actor="admin:test", reason="called off")
    for _ in range(3):
        await smith_engine.tick()
        clock.advance(seconds=30)
    return run_id


async def test_a_cleanup_held_for_a_plugin_that_is_down_names_it_and_degrades_the_run(
    smith_host, smith_engine, smith, clock, aiohttp_client, tokens
):
    client = await aiohttp_client(make_app(smith_host, run_engine=False))
    run_id = await _held(smith_host, smith_engine, clock)
    assert len(smith.world) == 2 and smith.reverts == []  # nothing tried, nothing spent
    run = await run_row(smith_host.db, run_id)
    assert (run.status, run.health, run.cleanup_status) == ("cancelled", "degraded", "pending")
    view = await run_view(smith_host, run_id)
    waiting = view["waiting_on"]
    assert (waiting["reason"], waiting["plugin"], waiting["sentence"]) == (
        "unavailable",
        "smith",
        SENTENCE,
    )
    answer = await client.get(f"/api/v1/admin/runs/{run_id}", headers=bearer(tokens["admin"]))
    assert (await answer.json())["run"]["waiting_on"]["sentence"] == SENTENCE
    # Said once each, however many passes looked.
    (health,) = await log_lines(smith_host.db, run_id, "run.health")
    assert (health.detail["to"], health.detail["because"]) == ("degraded", SENTENCE)
    waits = await log_lines(smith_host.db, run_id, "run.waiting")
    (waited,) = [line for line in waits if line.detail["reason"] == "unavailable"]
    assert waited.detail["plugin"] == "smith"


async def test_a_held_cleanup_goes_on_by_itself_when_the_plugin_is_back(
    smith_host, smith_engine, smith, clock
):
    run_id = await _held(smith_host, smith_engine, clock)
    assert smith_host.plugin_back("smith") is True
    assert smith_host.plugin_back("smith") is False  # a return already known changes nothing
    await smith_engine.tick()
    assert smith.world == {}
    run = await run_row(smith_host.db, run_id)
    assert (run.cleanup_status, run.health, run.waiting_reason) == ("complete", "degraded", None)
    assert (await run_view(smith_host, run_id))["waiting_on"] is None
    *_, held, cleared = await log_lines(smith_host.db, run_id, "run.waiting")
    assert (held.detail["reason"], cleared.detail["reason"]) == ("unavailable", None)


async def test_a_cleanup_that_waits_for_nothing_says_nothing(smith_host, smith_engine, smith):
    run_id = await start_event(smith_host, spec(phase("p", forge(2))))
    await smith_engine.tick()
    run = await run_row(smith_host.db, run_id)
    assert (run.cleanup_status, run.health) == ("complete", "ok")
    assert await log_lines(smith_host.db, run_id, "run.waiting") == []
