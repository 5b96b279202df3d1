"""Overlap: what a run does when it becomes due while another run still holds its
concurrency key — ``hold`` waits, ``skip`` ends it as skipped, ``replace`` cancels the holder
and starts, ``allow`` starts beside it; and two hosts deciding at once never leave two runs
live where the policy allows one."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select, update

from pageant.db.tables import event_definitions, event_runs
from pageant.engine import Engine
from pageant.engine.overlap import SKIP_REASON
from pageant.runs import sentences
from pageant.runs.create import create_run, start_now
from pageant.states import RUN_LIVE
from pageant.support.timefmt import iso
from tests.api.test_events_api import EVENTS, call, create
from tests.conftest import bearer
from tests.console.test_console import form_of, sign_in
from tests.factories import log_lines, make_host, phase, publish_event, run_row, spec, wait
from tests.ledger.games import forge

LONG = spec(phase("p", wait(600)))
SERVER = {"name": "server", "type": "string", "label": "Server", "required": True}


async def _event(db: Any, now: Any, overlap: str, *, key: str = "arena", event_spec=LONG):
    event = await publish_event(db, now, event_spec, concurrency_key=key, grace_seconds=600)
    async with db.begin() as conn:
        await conn.execute(
            update(event_definitions)
            .where(event_definitions.c.id == event.id)
            .values(overlap=overlap)
        )
    return event


async def _occurrence(
    host: Any, event: Any, *, params: dict[str, Any] | None = None, event_spec=LONG
) -> int:
    """A scheduled occurrence of ``event`` due now (as the schedule makes one)."""
    async with host.db.begin() as conn:
        template = await conn.scalar(
            select(event_definitions.c.concurrency_key).where(event_definitions.c.id == event.id)
        )
        run_id, created = await create_run(
            conn,
            definition_id=event.id,
            version_id=event.version_id,
            spec=event_spec,
            scheduled_for=host.clock.now(),
            now=host.clock.now(),
            source="schedule",
            scope=",".join(f"{k}={v}" for k, v in (params or {}).items()),
            params=params,
            concurrency_key=template,
            registry=host.registry,
        )
    assert created
    return run_id


async def _holder_and_newcomer(host: Any, engine: Any, clock: Any, overlap: str):
    """A run of the key going, then the next occurrence of an event with ``overlap`` due."""
    holder_event = await _event(host.db, clock.now(), "hold")
    holder = await _occurrence(host, holder_event)
    await engine.tick()
    assert (await run_row(host.db, holder)).status == "running"
    clock.advance(60)
    event = await _event(host.db, clock.now(), overlap)
    newcomer = await _occurrence(host, event)
    await engine.tick()
    return holder, newcomer


async def _live_on(db: Any, *, definition_ids: list[int]) -> int:
    async with db.connect() as conn:
        return await conn.scalar(
            select(func.count())
            .select_from(event_runs)
            .where(
                event_runs.c.definition_id.in_(definition_ids),
                event_runs.c.status.in_(RUN_LIVE),
            )
        )


# ── each policy, with a run of the key still going ────────────────────────────


async def test_hold_keeps_the_newcomer_scheduled_until_the_key_is_free(probe_host, engine, clock):
    holder, newcomer = await _holder_and_newcomer(probe_host, engine, clock, "hold")
    row = await run_row(probe_host.db, newcomer)
    assert (row.status, row.waiting_reason) == ("scheduled", "concurrency")
    assert (await run_row(probe_host.db, holder)).status == "running"
    assert await log_lines(probe_host.db, newcomer, "run.overlap") == []


async def test_skip_ends_the_newcomer_as_skipped_and_says_why_on_both_runs(
    probe_host, engine, clock
):
    holder, newcomer = await _holder_and_newcomer(probe_host, engine, clock, "skip")
    row = await run_row(probe_host.db, newcomer)
    assert (row.status, row.cancel_reason, row.started_at) == ("skipped", SKIP_REASON, None)
    assert row.ended_at == clock.now()
    assert (await run_row(probe_host.db, holder)).status == "running"
    (status,) = await log_lines(probe_host.db, newcomer, "run.status")
    assert status.detail == {
        "from": "scheduled",
        "to": "skipped",
        "because": "the previous run of this key was still going",
        "cancelled_steps": 1,
    }
    (mine,) = await log_lines(probe_host.db, newcomer, "run.overlap")
    (theirs,) = await log_lines(probe_host.db, holder, "run.overlap")
    assert (mine.detail["overlap"], mine.detail["newcomer"], mine.detail["other_run_id"]) == (
        "skip",
        True,
        holder,
    )
    assert (theirs.detail["newcomer"], theirs.detail["other_run_id"]) == (False, newcomer)
    # Each says it in words a person reads, naming the other run.
    assert sentences.text(mine._mapping) == (
        f"Run {holder}, due at 12:00, was still going, so this run was skipped "
        "(concurrency key “arena”, overlap skip) (by engine:overlap)"
    )
    assert sentences.text(theirs._mapping) == (
        f"Run {newcomer}, due at 12:01, was skipped: this run was still going "
        "(concurrency key “arena”, overlap skip) (by engine:overlap)"
    )
    # Terminal: later passes leave it as it is.
    clock.advance(60)
    await engine.tick()
    assert (await run_row(probe_host.db, newcomer)).status == "skipped"


async def test_replace_cancels_the_holder_naming_the_newcomer_and_starts_it(
    probe_host, engine, clock
):
    holder, newcomer = await _holder_and_newcomer(probe_host, engine, clock, "replace")
    old = await run_row(probe_host.db, holder)
    new = await run_row(probe_host.db, newcomer)
    assert old.status == "cancelled"
    assert old.cancel_reason == (
        f"replaced by run {newcomer}, due at {iso(new.scheduled_for)} (overlap: replace)"
    )
    assert (new.status, new.concurrency_key) == ("running", "arena")
    # The holder went through the cancel control: its open steps cancelled, its log says so.
    (cancel,) = await log_lines(probe_host.db, holder, "control.cancel")
    assert (cancel.actor, cancel.detail["reason"]) == ("engine:overlap", old.cancel_reason)
    (said,) = await log_lines(probe_host.db, newcomer, "run.overlap")
    assert (said.detail["overlap"], said.detail["other_run_id"]) == ("replace", holder)


async def test_a_replaced_run_gives_back_everything_it_made(smith_host, smith_engine, smith, clock):
    forging = spec(phase("p", forge(2), wait(600)))
    event = await _event(smith_host.db, clock.now(), "replace", event_spec=forging)
    holder = await _occurrence(smith_host, event, event_spec=forging)
    await smith_engine.tick()
    assert sorted(smith.world) == ["sword-1", "sword-2"]
    clock.advance(60)
    newcomer = await _occurrence(smith_host, event, event_spec=forging)
    await smith_engine.tick()
    await smith_engine.tick()
    old = await run_row(smith_host.db, holder)
    assert (old.status, old.cleanup_status) == ("cancelled", "complete")
    # What the newcomer forged is its own; the holder's swords are all given back.
    new = await run_row(smith_host.db, newcomer)
    assert new.status == "running"
    assert sorted(smith.world) == ["sword-3", "sword-4"]


async def test_allow_starts_the_newcomer_beside_the_holder(probe_host, engine, clock):
    holder, newcomer = await _holder_and_newcomer(probe_host, engine, clock, "allow")
    assert (await run_row(probe_host.db, holder)).status == "running"
    new = await run_row(probe_host.db, newcomer)
    # It starts beside the holder, so it holds no key of its own (the index admits one).
    assert (new.status, new.concurrency_key) == ("running", None)
    (said,) = await log_lines(probe_host.db, newcomer, "run.overlap")
    assert (said.detail["overlap"], said.detail["key"]) == ("allow", "arena")
    assert len(await log_lines(probe_host.db, holder, "run.overlap")) == 1


async def test_a_free_key_starts_the_newcomer_whatever_its_overlap(probe_host, engine, clock):
    for overlap in ("hold", "skip", "replace", "allow"):
        event = await _event(probe_host.db, clock.now(), overlap, key=f"free-{overlap}")
        run_id = await _occurrence(probe_host, event)
        await engine.tick()
        row = await run_row(probe_host.db, run_id)
        assert (row.status, row.concurrency_key) == ("running", f"free-{overlap}")
        assert await log_lines(probe_host.db, run_id, "run.overlap") == []


async def test_staff_see_the_skip_and_why_and_players_only_that_it_did_not_happen(
    client, tokens, host, host_engine, clock
):
    holder, newcomer = await _holder_and_newcomer(host, host_engine, clock, "skip")
    async with host.db.begin() as conn:
        await conn.execute(update(event_definitions).values(visibility="public"))
    window = {
        "from": iso(clock.now() - timedelta(hours=1)),
        "to": iso(clock.now() + timedelta(hours=1)),
    }
    response = await client.get(
        "/api/v1/admin/calendar", params=window, headers=bearer(tokens["moderator"])
    )
    assert response.status == 200
    staff = {i["run_id"]: i for i in (await response.json())["items"]}
    assert (staff[newcomer]["status"], staff[newcomer]["reason"]) == ("skipped", SKIP_REASON)
    assert (staff[holder]["status"], staff[holder]["reason"]) == ("running", None)

    response = await client.get("/api/v1/public/events", params=window)
    assert response.status == 200
    told = await response.text()
    assert SKIP_REASON not in told and "reason" not in told and "skipped" not in told
    statuses = sorted(i["status"] for i in (await response.json())["items"])
    assert statuses == ["cancelled", "running"]


# ── two hosts at once ─────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("overlap", "live", "ended"),
    [("hold", 1, None), ("skip", 1, "skipped"), ("replace", 1, "cancelled"), ("allow", 2, None)],
)
async def test_two_hosts_at_once_leave_one_live_run_where_the_policy_allows_one(
    settings, db, clock, probe, overlap, live, ended
):
    hosts = [make_host(settings, db, clock, [probe]) for _ in range(2)]
    engines = [Engine(h) for h in hosts]
    try:
        holder_event = await _event(db, clock.now(), "hold")
        holder = await _occurrence(hosts[0], holder_event)
        await asyncio.gather(*(e.tick() for e in engines))
        assert (await run_row(db, holder)).status == "running"
        clock.advance(60)
        event = await _event(db, clock.now(), overlap)
        newcomers = [await _occurrence(hosts[0], event, params=None)]
        for _ in range(3):
            await asyncio.gather(*(e.tick() for e in engines))
            assert await _live_on(db, definition_ids=[holder_event.id, event.id]) <= live
        assert await _live_on(db, definition_ids=[holder_event.id, event.id]) == live
        rows = [await run_row(db, r) for r in (holder, *newcomers)]
        if ended is not None:
            assert ended in {r.status for r in rows}
        # Whichever host decided, it was decided once: one line per run, never two.
        for run_id in (holder, *newcomers):
            assert len(await log_lines(db, run_id, "run.overlap")) == (overlap != "hold")
    finally:
        for e in engines:
            await e.stop()
        for h in hosts:
            await h.close()


async def test_two_replacing_newcomers_on_two_hosts_leave_one_run_live(settings, db, clock, probe):
    hosts = [make_host(settings, db, clock, [probe]) for _ in range(2)]
    engines = [Engine(h) for h in hosts]
    try:
        first = await _event(db, clock.now(), "replace")
        holder = await _occurrence(hosts[0], first)
        await engines[0].tick()
        clock.advance(60)
        others = [await _event(db, clock.now(), "replace") for _ in range(2)]
        for other in others:
            await _occurrence(hosts[0], other)
        ids = [first.id, *(o.id for o in others)]
        for _ in range(4):
            await asyncio.gather(*(e.tick() for e in engines))
            assert await _live_on(db, definition_ids=ids) <= 1
        assert await _live_on(db, definition_ids=ids) == 1
        assert (await run_row(db, holder)).status == "cancelled"
    finally:
        for e in engines:
            await e.stop()
        for h in hosts:
            await h.close()


# ── keys filled from a run's params ───────────────────────────────────────────


async def test_a_server_key_holds_one_server_while_another_runs(probe_host, engine, clock):
    per_server = spec(phase("p", wait(600)))
    per_server["params"] = [SERVER]
    event = await _event(
        probe_host.db, clock.now(), "hold", key="frenzy:{server}", event_spec=per_server
    )
    north = await _occurrence(probe_host, event, params={"server": "north"})
    await engine.tick()
    clock.advance(60)
    north_again = await _occurrence(probe_host, event, params={"server": "north"})
    south = await _occurrence(probe_host, event, params={"server": "south"})
    await engine.tick()
    rows = {r: await run_row(probe_host.db, r) for r in (north, north_again, south)}
    assert {r: (row.status, row.concurrency_key) for r, row in rows.items()} == {
        north: ("running", "frenzy:north"),
        north_again: ("scheduled", "frenzy:north"),
        south: ("running", "frenzy:south"),
    }
    assert rows[north_again].waiting_reason == "concurrency"


# ── a start now ───────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("overlap", "refused"), [("hold", True), ("skip", True), ("replace", False), ("allow", False)]
)
async def test_a_start_now_on_a_held_key_is_refused_only_where_it_could_not_run(
    probe_host, engine, clock, overlap, refused
):
    event = await _event(probe_host.db, clock.now(), overlap)
    await start_now(probe_host, event.id, actor="admin:test")
    await engine.tick()
    clock.advance(60)
    if refused:
        with pytest.raises(Exception, match='the concurrency key "arena" is held'):
            await start_now(probe_host, event.id, actor="admin:test")
    else:
        run_id, created = await start_now(probe_host, event.id, actor="admin:test")
        assert created
        await engine.tick()
        assert (await run_row(probe_host.db, run_id)).status == "running"


# ── through the HTTP API ──────────────────────────────────────────────────────


async def test_overlap_is_a_field_of_the_event_and_replace_works_end_to_end(
    client, tokens, host, host_engine, clock
):
    admin = tokens["admin"]
    body = {
        "spec": {
            "schedule": {"kind": "manual"},
            "phases": [
                {
                    "key": "main",
                    "label": "Main",
                    "steps": [{"action": "core.wait", "params": {"seconds": 600}}],
                }
            ],
        }
    }
    event = await create(client, admin, title="Frenzy", concurrency_key="frenzy", **body)
    assert event["overlap"] == "hold"  # the default
    status, event = await call(
        client, "PUT", f"{EVENTS}/{event['id']}", admin, {"overlap": "replace"}
    )
    assert (status, event["overlap"]) == (200, "replace")
    status, _ = await call(client, "POST", f"{EVENTS}/{event['id']}/publish", admin)
    assert status == 200
    runs_path = f"{EVENTS}/{event['id']}/runs"
    status, first = await call(client, "POST", runs_path, admin, {})
    assert status == 201, first
    await host_engine.tick()
    clock.advance(60)
    status, second = await call(client, "POST", runs_path, admin, {})
    assert status == 201, second
    await host_engine.tick()

    status, old = await call(client, "GET", f"/api/v1/admin/runs/{first['id']}", admin)
    assert status == 200
    assert old["run"]["status"] == "cancelled"
    assert old["run"]["cancel_reason"].startswith(f"replaced by run {second['id']}, due at ")
    status, new = await call(client, "GET", f"/api/v1/admin/runs/{second['id']}", admin)
    assert new["run"]["status"] == "running"
    for console, other in ((old, second), (new, first)):
        (said,) = [line for line in console["log"] if line["kind"] == "run.overlap"]
        assert said["detail"]["other_run_id"] == other["id"]
    status, got = await call(client, "GET", f"{EVENTS}/{event['id']}", admin)
    assert got["overlap"] == "replace"


# ── bad input ─────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("bad", ["sometimes", "HOLD", "", None, 1])
async def test_a_bad_overlap_is_a_400_naming_the_field_and_changes_nothing(client, tokens, bad):
    admin = tokens["admin"]
    status, data = await call(client, "POST", EVENTS, admin, {"title": "Raid", "overlap": bad})
    assert status == 400, data
    assert [d.split(":")[0] for d in data["error"]["details"]] == ["body.overlap"]
    event = await create(client, admin, title="Raid", overlap="skip")
    status, data = await call(client, "PUT", f"{EVENTS}/{event['id']}", admin, {"overlap": bad})
    assert status == 400, data
    assert [d.split(":")[0] for d in data["error"]["details"]] == ["body.overlap"]
    status, still = await call(client, "GET", f"{EVENTS}/{event['id']}", admin)
    assert still["overlap"] == "skip"


@pytest.mark.parametrize("good", ["hold", "skip", "replace", "allow"])
async def test_each_overlap_is_taken(client, tokens, good):
    event = await create(client, tokens["admin"], title="Raid", overlap=good)
    assert event["overlap"] == good


# ── the console's editor ──────────────────────────────────────────────────────


async def test_the_editor_shows_the_overlap_and_saves_a_new_one(client, tokens):
    event = await create(client, tokens["admin"], title="Frenzy", concurrency_key="frenzy")
    await sign_in(client, tokens["editor"])
    path = f"/events/{event['id']}"
    html = await (await client.get(path)).text()
    assert dict(form_of(html))["overlap"] == "hold"
    fields = [(k, v) for k, v in form_of(html) if k not in ("op", "overlap")]
    answer = await client.post(
        path, data=[*fields, ("overlap", "skip"), ("op", "save")], allow_redirects=False
    )
    assert answer.status == 303, await answer.text()
    status, saved = await call(client, "GET", f"{EVENTS}/{event['id']}", tokens["admin"])
    assert (status, saved["overlap"]) == (200, "skip")
    # A word the select does not offer is named and saves nothing.
    answer = await client.post(path, data=[*fields, ("overlap", "twice"), ("op", "save")])
    assert answer.status == 400
    assert "&#39;twice&#39; is not one of hold, skip, replace, allow" in await answer.text()
    status, saved = await call(client, "GET", f"{EVENTS}/{event['id']}", tokens["admin"])
    assert saved["overlap"] == "skip"
