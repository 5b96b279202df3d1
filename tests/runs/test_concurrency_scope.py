"""Concurrency keys per scope: ``{scope}`` in an event's key makes one key per scope, so two
scopes run side by side while one scope never runs twice."""

from __future__ import annotations

import pytest

from pageant.errors import Conflict
from pageant.runs.create import run_key, start_now
from tests.api.test_events_api import EVENTS, call
from tests.factories import phase, publish_event, run_row, spec, step

CUE = step("core.cue", message="Hold the line")


async def test_two_scopes_run_side_by_side_and_one_scope_never_twice(probe_host, engine, clock):
    event = await publish_event(
        probe_host.db, clock.now(), spec(phase("p", CUE)), concurrency_key="raid:{scope}"
    )
    north, _ = await start_now(probe_host, event.id, scope="north", actor="admin:test")
    south, _ = await start_now(probe_host, event.id, scope="south", actor="admin:test")
    await engine.tick()

    assert [(await run_row(probe_host.db, r)).status for r in (north, south)] == [
        "running",
        "running",
    ]
    assert (await run_row(probe_host.db, north)).concurrency_key == "raid:north"
    clock.advance(60)
    with pytest.raises(Conflict, match='the concurrency key "raid:north" is held by run'):
        await start_now(probe_host, event.id, scope="north", actor="admin:test")


async def test_a_key_without_scope_holds_every_scope(probe_host, engine, clock):
    event = await publish_event(
        probe_host.db, clock.now(), spec(phase("p", CUE)), concurrency_key="raid"
    )
    await start_now(probe_host, event.id, scope="north", actor="admin:test")
    await engine.tick()
    with pytest.raises(Conflict, match='"raid" is held'):
        await start_now(probe_host, event.id, scope="south", actor="admin:test")


def test_a_long_scope_keeps_its_key_apart_and_within_the_column():
    long_a, long_b = "a" * 100, "a" * 99 + "b"
    key_a, key_b = run_key("raid:{scope}", long_a), run_key("raid:{scope}", long_b)
    assert len(key_a) == len(key_b) == 100
    assert key_a != key_b
    assert run_key("raid:{scope}", "") == "raid:"
    assert run_key(None, "north") is None


async def test_only_a_param_name_may_be_written_in_braces(client, tokens):
    body = {"title": "Raid", "concurrency_key": "raid:{Zone one}"}
    status, data = await call(client, "POST", EVENTS, tokens["admin"], body)
    assert status == 400
    assert data["error"]["details"] == [
        "body.concurrency_key: only a param's name may be written in braces, such as {scope} "
        "or {server} (a param the spec declares)"
    ]
    body["concurrency_key"] = "raid:{scope"
    status, data = await call(client, "POST", EVENTS, tokens["admin"], body)
    assert status == 400
    body["concurrency_key"] = "raid:{scope}"
    status, data = await call(client, "POST", EVENTS, tokens["admin"], body)
    assert (status, data["concurrency_key"]) == (201, "raid:{scope}")
