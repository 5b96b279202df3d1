"""The resource ledger against the real engine on both databases: the table's holding key,
record before confirm, cleanup on every ending with its attempt bound, and reconcile."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import delete, func, select

from pageant.db import resources
from pageant.db.migrate import head_revision
from pageant.db.tables import event_run_resources, event_run_steps
from pageant.engine import Engine
from pageant.runs.create import start_now
from pageant.switchboard import board
from tests.conftest import bearer
from tests.factories import (
    log_lines,
    make_host,
    phase,
    publish_event,
    run_row,
    spec,
    start_event,
    step,
    step_rows,
)
from tests.ledger.games import forge, lease


async def _rows(host, run_id) -> list[Any]:
    async with host.db.connect() as conn:
        return await resources.resources_of_run(conn, run_id)


# ── the table ─────────────────────────────────────────────────────────────────


def test_the_ledger_migration_is_on_the_one_line_to_the_head():
    from alembic.script import ScriptDirectory

    from pageant.db.migrate import alembic_config

    scripts = ScriptDirectory.from_config(alembic_config())
    line = [r.revision for r in scripts.walk_revisions("base", head_revision())]
    assert len(scripts.get_heads()) == 1
    assert "0004" in line
    assert scripts.get_revision("0004").down_revision in line


async def _one_run_and_step(host) -> tuple[int, int]:
    run_id = await start_event(host, spec(phase("p", forge(1))))
    (made,) = await step_rows(host.db, run_id)
    return run_id, made.id


async def _hold(conn, run_id, step_id, ref="north", status="confirmed", now=None) -> int | None:
    return await resources.hold(
        conn,
        run_id=run_id,
        step_id=step_id,
        owner="smith",
        kind="smith.weather",
        ref=ref,
        status=status,
        payload=None,
        now=now,
    )


async def test_two_rows_never_hold_one_target_and_a_released_target_is_free_again(smith_host):
    now = smith_host.clock.now()
    run_id, step_id = await _one_run_and_step(smith_host)
    async with smith_host.db.begin() as conn:
        first = await _hold(conn, run_id, step_id, now=now)
        assert first is not None
        # Held: the second holder is refused by the unique index, and nothing is written.
        assert await _hold(conn, run_id, step_id, now=now) is None
        assert await _hold(conn, run_id, step_id, status="pending", now=now) is None
        assert await _hold(conn, run_id, step_id, status="revert_failed", now=now) is None
        # Another target is free.
        assert await _hold(conn, run_id, step_id, ref="south", now=now) is not None
    for released in ("reverted", "drifted", "orphaned"):
        async with smith_host.db.begin() as conn:
            holder = await resources.holder(conn, "smith", "smith.weather", "north")
            # The UPDATE recomputes the stored column: the key is released at once.
            assert await resources.release(conn, holder.id, to=released, now=now, attempted=False)
            assert await resources.holder(conn, "smith", "smith.weather", "north") is None
            assert await _hold(conn, run_id, step_id, now=now) is not None
    async with smith_host.db.connect() as conn:
        count = (
            await conn.execute(
                select(event_run_resources.c.status, func.count())
                .where(event_run_resources.c.ref == "north")
                .group_by(event_run_resources.c.status)
            )
        ).all()
    # Three released rows share the key (NULLs never collide) beside the one holder.
    assert dict(count) == {"reverted": 1, "drifted": 1, "orphaned": 1, "confirmed": 1}


async def test_a_record_outlives_its_step(smith_host):
    now = smith_host.clock.now()
    run_id, step_id = await _one_run_and_step(smith_host)
    async with smith_host.db.begin() as conn:
        row_id = await _hold(conn, run_id, step_id, now=now)
    async with smith_host.db.begin() as conn:
        await conn.execute(delete(event_run_steps).where(event_run_steps.c.id == step_id))
    (row,) = await _rows(smith_host, run_id)
    assert (row.id, row.step_id, row.status) == (row_id, None, "confirmed")


# ── record before confirm ─────────────────────────────────────────────────────


async def test_a_placeholder_is_written_before_perform_and_resolved_by_the_answer(
    smith_host, smith_engine, smith
):
    seen: list[Any] = []

    async def look(ctx: Any) -> Any:
        seen.extend(await _rows(smith_host, ctx.run.id))
        return None  # then forge as usual

    smith.first = look
    run_id = await start_event(smith_host, spec(phase("p", forge(2))))
    await smith_engine.tick()
    (made,) = await step_rows(smith_host.db, run_id)
    (placeholder,) = seen
    assert (placeholder.kind, placeholder.ref, placeholder.status) == (
        "@step",
        made.idempotency_key,
        "pending",
    )
    assert placeholder.step_id == made.id


async def test_three_swords_are_recorded_and_all_given_back_when_the_run_completes(
    smith_host, smith_engine, smith
):
    run_id = await start_event(smith_host, spec(phase("p", forge(3))))
    await smith_engine.tick()
    run = await run_row(smith_host.db, run_id)
    assert run.status == "completed"
    assert smith.world == {}
    rows = await _rows(smith_host, run_id)
    assert [(r.kind, r.ref, r.status, r.revert_attempts) for r in rows] == [
        ("sword", "sword-1", "reverted", 1),
        ("sword", "sword-2", "reverted", 1),
        ("sword", "sword-3", "reverted", 1),
    ]
    # Given back newest first, one resource per call, under the step's key.
    assert [ctx.resources[0].ref for ctx in smith.reverts] == ["sword-3", "sword-2", "sword-1"]
    (made,) = await step_rows(smith_host.db, run_id)
    assert {ctx.idempotency_key for ctx in smith.reverts} == {made.idempotency_key}
    assert run.cleanup_status == "complete"
    from pageant.runs.console import console
    from pageant.runs.console_text import render_console

    text = render_console(await console(smith_host, run_id))
    (world,) = [line.split(None, 1)[1] for line in text.splitlines() if line.startswith("  world")]
    assert world == (
        "Everything this run created or borrowed has been given back (cleanup complete)"
    )
    kinds = [line.kind for line in await log_lines(smith_host.db, run_id)]
    assert kinds.count("resource.placeholder") == 1
    assert kinds.count("resource.confirmed") == 1
    assert kinds.count("resource.reverted") == 3


async def test_a_retry_reuses_its_own_placeholder(smith_host, smith_engine, smith, clock):
    smith.answers = [{"ok": False, "retry": True, "error": "anvil busy"}]
    run_id = await start_event(smith_host, spec(phase("p", forge(1))))
    await smith_engine.tick()
    (pending,) = await _rows(smith_host, run_id)
    assert (pending.kind, pending.status) == ("@step", "pending")
    assert (await run_row(smith_host.db, run_id)).cleanup_status == "pending"
    clock.advance(seconds=smith_host.settings.retry_seconds + 1)
    await smith_engine.tick()
    rows = await _rows(smith_host, run_id)
    assert [(r.kind, r.status) for r in rows] == [("sword", "reverted")]
    assert len(await log_lines(smith_host.db, run_id, "resource.placeholder")) == 1
    assert len(smith.performs) == 2


async def test_a_lost_answer_leaves_the_placeholder_and_revert_gets_the_key_and_nothing_else(
    smith_host, smith_engine, smith
):
    async def half_done(ctx: Any) -> Any:
        # The world changed, and what came back names nothing.
        smith.world["sword-x"] = ctx.idempotency_key
        return {"ok": False, "retry": False, "error": "shard went away"}

    smith.first = half_done
    run_id = await start_event(smith_host, spec(phase("p", forge(1, on_failure="skip"))))
    await smith_engine.tick()
    (made,) = await step_rows(smith_host.db, run_id)
    assert made.status == "failed"
    assert (await run_row(smith_host.db, run_id)).status == "completed"
    (ctx,) = smith.reverts
    assert (ctx.idempotency_key, ctx.resources) == (made.idempotency_key, ())
    assert smith.world == {}
    (row,) = await _rows(smith_host, run_id)
    assert (row.kind, row.status) == ("@step", "reverted")
    assert (await run_row(smith_host.db, run_id)).cleanup_status == "complete"


async def test_a_notify_action_records_nothing(smith_host, smith_engine):
    run_id = await start_event(
        smith_host, spec(phase("p", step("core.announce", leg="core.log", message="hi")))
    )
    await smith_engine.tick()
    assert await _rows(smith_host, run_id) == []
    assert (await run_row(smith_host.db, run_id)).cleanup_status == "not_required"


# ── cleanup: the bound, both halves ───────────────────────────────────────────


async def test_a_failing_revert_is_tried_exactly_three_times_then_the_run_is_incomplete(
    smith_host, smith_engine, smith, clock
):
    smith.revert_error = "the forge is cold"
    run_id = await start_event(smith_host, spec(phase("p", forge(2))))
    await smith_engine.tick()
    run = await run_row(smith_host.db, run_id)
    assert (run.status, run.cleanup_status) == ("completed", "pending")
    for _ in range(2):
        clock.advance(seconds=1)
        await smith_engine.tick()
    rows = await _rows(smith_host, run_id)
    # The floor: three real attempts happened on each row.
    assert [(r.status, r.revert_attempts, r.last_error) for r in rows] == [
        ("revert_failed", 3, "the forge is cold"),
        ("revert_failed", 3, "the forge is cold"),
    ]
    assert len(smith.reverts) == 6
    run = await run_row(smith_host.db, run_id)
    assert (run.status, run.cleanup_status) == ("completed", "incomplete")
    # The ceiling: a fourth never does, however long the engine goes on.
    for _ in range(3):
        clock.advance(seconds=60)
        await smith_engine.tick()
    assert len(smith.reverts) == 6
    assert [r.revert_attempts for r in await _rows(smith_host, run_id)] == [3, 3]
    assert len(smith.world) == 2


async def test_the_bound_is_a_setting(settings, db, clock, smith):
    host = make_host(settings.model_copy(update={"revert_max_attempts": 1}), db, clock, [smith])
    async with host.db.begin() as conn:
        await board.set_action(
            conn, host.registry, "smith.forge", enabled=True, actor="a", now=clock.now()
        )
    engine = Engine(host)
    try:
        smith.revert_error = "no"
        run_id = await start_event(host, spec(phase("p", forge(1))))
        await engine.tick()
        await engine.tick()
        (row,) = await _rows(host, run_id)
        assert (row.status, row.revert_attempts) == ("revert_failed", 1)
        assert (await run_row(host.db, run_id)).cleanup_status == "incomplete"
    finally:
        await engine.stop()
        await host.close()


async def test_a_run_that_ended_otherwise_is_given_back_too(smith_host, smith_engine, smith):
    # Failed: the second step aborts the run; what the first forged is given back.
    smith.answers = [None, {"ok": False, "retry": False, "error": "slag"}]
    run_id = await start_event(
        smith_host, spec(phase("p", forge(1), forge(1, on_failure="abort_run")))
    )
    await smith_engine.tick()
    run = await run_row(smith_host.db, run_id)
    assert (run.status, run.cleanup_status) == ("failed", "complete")
    assert smith.world == {}


async def test_the_stage_selects_from_the_rows_not_from_cleanup_status(
    smith_host, smith_engine, smith
):
    # A run whose summary column says nothing is needed is still given back.
    from tests.factories import set_run

    run_id = await start_event(smith_host, spec(phase("p", forge(1))))
    smith.revert_error = "later"
    await smith_engine.tick()
    await set_run(smith_host.db, run_id, cleanup_status="not_required")
    smith.revert_error = None
    await smith_engine.tick()
    assert smith.world == {}
    assert (await run_row(smith_host.db, run_id)).cleanup_status == "complete"


async def test_the_idle_stage_reads_nothing_for_ended_runs_that_hold_nothing(smith_host):
    run_id = await start_event(smith_host, spec(phase("p", forge(1))))
    from tests.factories import set_run

    await set_run(smith_host.db, run_id, status="completed")
    async with smith_host.db.connect() as conn:
        assert await resources.cleanup_candidates(conn, smith_host.clock.now(), limit=10) == []


# ── reconcile ─────────────────────────────────────────────────────────────────


async def test_reconcile_marks_what_the_plugin_no_longer_reports_orphaned_never_reverted(
    smith_host, smith_engine, smith
):
    smith.revert_error = "keep them"
    run_id = await start_event(smith_host, spec(phase("p", forge(2))))
    await smith_engine.tick()  # forged and ended; the reverts fail, so both are held
    del smith.world["sword-1"]  # someone removed it in the game
    reverts = len(smith.reverts)
    answer = await smith_host.reconcile("smith")
    assert answer == {"asked": 2, "orphaned": 1}
    rows = await _rows(smith_host, run_id)
    assert [(r.ref, r.status) for r in rows] == [
        ("sword-1", "orphaned"),
        ("sword-2", "confirmed"),
    ]
    assert len(smith.reverts) == reverts  # never reverted
    (line,) = await log_lines(smith_host.db, run_id, "resource.orphaned")
    assert line.detail["ref"] == "sword-1"


async def test_a_reconcile_that_raises_changes_nothing_and_is_logged(
    smith_host, smith_engine, smith
):
    smith.revert_error = "keep them"
    run_id = await start_event(smith_host, spec(phase("p", forge(1))))
    await smith_engine.tick()
    before = [(r.id, r.status) for r in await _rows(smith_host, run_id)]
    smith.reconcile_error = RuntimeError("game unreachable")
    smith.world.clear()
    answer = await smith_host.reconcile("smith")
    assert answer["orphaned"] == 0 and "game unreachable" in answer["error"]
    assert [(r.id, r.status) for r in await _rows(smith_host, run_id)] == before
    (line,) = await log_lines(smith_host.db, run_id, "resource.reconcile_failed")
    assert line.detail == {"owner": "smith", "error": "RuntimeError: game unreachable"}


# ── the controls, through the real app ────────────────────────────────────────


@pytest.fixture
async def smith_client(smith_host, aiohttp_client):
    from pageant.api.app import make_app

    return await aiohttp_client(make_app(smith_host, run_engine=False))


async def test_a_failing_revert_is_rescued_by_the_cleanup_route_and_a_moderator_is_refused(
    smith_host, smith_engine, smith, smith_client, tokens, clock
):
    smith.revert_error = "the forge is cold"
    run_id = await start_event(smith_host, spec(phase("p", forge(3))))
    for _ in range(4):
        await smith_engine.tick()
        clock.advance(seconds=1)
    url = f"/api/v1/admin/runs/{run_id}"
    console = await (await smith_client.get(url, headers=bearer(tokens["moderator"]))).json()
    assert (console["run"]["status"], console["run"]["cleanup_status"]) == (
        "completed",
        "incomplete",
    )
    assert [(r["status"], r["revert_attempts"], r["last_error"]) for r in console["resources"]] == [
        ("revert_failed", 3, "the forge is cold")
    ] * 3
    assert console["cleanup_summary"] == (
        "3 of these are still out there (nothing is left to try; an admin can try cleanup again)"
    )
    refused = await smith_client.post(f"{url}/cleanup", headers=bearer(tokens["moderator"]))
    assert refused.status == 403
    assert len(smith.world) == 3
    smith.revert_error = None
    answer = await smith_client.post(f"{url}/cleanup", headers=bearer(tokens["admin"]))
    assert answer.status == 200
    body = await answer.json()
    assert body["run"]["cleanup_status"] == "complete"
    assert body["cleanup_summary"] == "Everything this run created or borrowed has been given back"
    assert [(r["status"], r["revert_attempts"]) for r in body["resources"]] == [("reverted", 4)] * 3
    assert smith.world == {}
    (line,) = await log_lines(smith_host.db, run_id, "control.cleanup")
    assert (line.actor, line.detail) == ("admin:test-admin", {"result": "complete"})


async def test_the_cleanup_route_refuses_a_run_in_flight_and_one_that_recorded_nothing(
    smith_host, smith_engine, smith_client, tokens
):
    live = await start_event(smith_host, spec(phase("p", step("core.wait", seconds=60), forge(1))))
    await smith_engine.tick()
    answer = await smith_client.post(
        f"/api/v1/admin/runs/{live}/cleanup", headers=bearer(tokens["admin"])
    )
    assert answer.status == 409
    assert (
        "is running; cleanup acts on a run that has ended"
        in (await answer.json())["error"]["message"]
    )
    quiet = await start_event(
        smith_host, spec(phase("p", step("core.announce", leg="core.log", message="hi")))
    )
    await smith_engine.tick()
    answer = await smith_client.post(
        f"/api/v1/admin/runs/{quiet}/cleanup", headers=bearer(tokens["admin"])
    )
    assert answer.status == 409
    assert "recorded nothing" in (await answer.json())["error"]["message"]
    missing = await smith_client.post(
        "/api/v1/admin/runs/999999/cleanup", headers=bearer(tokens["admin"])
    )
    assert missing.status == 404


async def test_cancel_without_cleanup_is_an_admins_call_leaves_the_world_and_is_logged(
    smith_host, smith_engine, smith, smith_client, tokens, clock
):
    run_id = await start_event(
        smith_host, spec(phase("p", forge(2), step("core.wait", seconds=600)))
    )
    await smith_engine.tick()
    assert len(smith.world) == 2
    url = f"/api/v1/admin/runs/{run_id}/cancel"
    body = {"reason": "the shard owner keeps them", "cleanup": False}
    refused = await smith_client.post(url, json=body, headers=bearer(tokens["moderator"]))
    assert refused.status == 403
    assert "admin" in (await refused.json())["error"]["message"]
    assert (await run_row(smith_host.db, run_id)).status == "running"  # nothing changed
    answer = await smith_client.post(url, json=body, headers=bearer(tokens["admin"]))
    assert answer.status == 200
    run = await run_row(smith_host.db, run_id)
    assert (run.status, run.cleanup_status) == ("cancelled", "incomplete")
    for _ in range(3):
        clock.advance(seconds=30)
        await smith_engine.tick()
    assert len(smith.world) == 2 and smith.reverts == []
    # Nothing tried them, and the counter says so.
    assert [(r.status, r.revert_attempts) for r in await _rows(smith_host, run_id)] == [
        ("confirmed", 0),
        ("confirmed", 0),
    ]
    (line,) = await log_lines(smith_host.db, run_id, "control.cancel")
    assert (line.actor, line.detail["cleanup"]) == ("admin:test-admin", False)


async def test_a_moderators_cancel_gives_everything_back(
    smith_host, smith_engine, smith, smith_client, tokens
):
    run_id = await start_event(
        smith_host, spec(phase("p", forge(2), step("core.wait", seconds=600)))
    )
    await smith_engine.tick()
    answer = await smith_client.post(
        f"/api/v1/admin/runs/{run_id}/cancel",
        json={"reason": "wrong night"},
        headers=bearer(tokens["moderator"]),
    )
    assert answer.status == 200
    await smith_engine.tick()
    assert smith.world == {}
    assert (await run_row(smith_host.db, run_id)).cleanup_status == "complete"


# ── leases ────────────────────────────────────────────────────────────────────


async def _lease_rows(host, run_id) -> list[Any]:
    return [r for r in await _rows(host, run_id) if r.kind == "wx.sky"]


async def test_a_lease_only_run_is_given_back(wx_host, wx_engine, weather):
    # The reference's first defect: a run holding only a lease was never cleaned up.
    run_id = await start_event(wx_host, spec(phase("p", lease("north", "storm"))))
    await wx_engine.tick()
    run = await run_row(wx_host.db, run_id)
    assert run.status == "completed"
    assert weather.sky["north"] == "clear"
    assert weather.restored == [("north", "clear")]
    (row,) = await _lease_rows(wx_host, run_id)
    assert row.status == "reverted"
    assert row.payload == {
        "lease": "wx.sky",
        "target": "north",
        "baseline": "clear",
        "applied": "storm",
    }
    assert run.cleanup_status == "complete"


async def test_a_lease_is_given_back_at_its_deadline_while_the_run_goes_on(
    wx_host, wx_engine, weather, clock
):
    run_id = await start_event(
        wx_host,
        spec(phase("p", lease("north", "storm", minutes=5), step("core.wait", seconds=3600))),
    )
    await wx_engine.tick()
    assert weather.sky["north"] == "storm"
    (row,) = await _lease_rows(wx_host, run_id)
    assert row.lease_until == clock.now() + timedelta(minutes=5)
    # The engine's sleep knows the deadline: it is the earliest instant anything is due.
    from pageant.db import due

    async with wx_host.db.connect() as conn:
        assert await due.next_instant(conn, clock.now()) == row.lease_until
    clock.advance(seconds=299)
    await wx_engine.tick()
    assert weather.sky["north"] == "storm"  # one second before: still borrowed
    clock.advance(seconds=1)
    await wx_engine.tick()
    assert weather.sky["north"] == "clear"
    assert (await run_row(wx_host.db, run_id)).status == "running"


async def test_a_second_run_asking_for_a_leased_target_is_refused_by_name(
    wx_host, wx_engine, weather
):
    first = await start_event(
        wx_host, spec(phase("p", lease("north", "storm"), step("core.wait", seconds=3600)))
    )
    await wx_engine.tick()
    event = await publish_event(
        wx_host.db, wx_host.clock.now(), spec(phase("p", lease("north", "snow", on_failure="skip")))
    )
    second, _ = await start_now(wx_host, event.id, scope="", actor="admin:test")
    await wx_engine.tick()
    (made,) = await step_rows(wx_host.db, second)
    assert made.status == "failed"
    assert made.last_error == f"wx.sky for north is already leased by run {first}"
    assert weather.sky["north"] == "storm"  # nothing applied
    assert await _lease_rows(wx_host, second) == []


async def test_a_drifted_lease_leaves_the_world_alone_and_a_later_run_leases_it_again(
    wx_host, wx_engine, weather
):
    run_id = await start_event(
        wx_host, spec(phase("p", lease("north", "storm"), step("core.wait", seconds=60)))
    )
    await wx_engine.tick()
    weather.sky["north"] = "fog"  # a game master changed it meanwhile
    from pageant.runs import controls

    await controls.cancel(wx_host, run_id, actor="admin:test", reason="done")
    await wx_engine.tick()
    assert weather.sky["north"] == "fog" and weather.restored == []
    (row,) = await _lease_rows(wx_host, run_id)
    assert (row.status, row.revert_attempts, row.payload["found"]) == ("drifted", 0, "fog")
    async with wx_host.db.connect() as conn:
        from pageant.runs.console import cleanup_summary

        rows = await resources.resources_of_run(conn, run_id)
    assert cleanup_summary(rows, ended=True) == (
        "Everything this run created or borrowed has been given back; "
        "someone else changed wx.sky for north; it was left alone"
    )
    later = await start_event(wx_host, spec(phase("p", lease("north", "snow"))))
    await wx_engine.tick()
    assert [r.status for r in await _lease_rows(wx_host, later)] == ["reverted"]
    assert weather.sky["north"] == "fog"


async def test_a_lease_the_game_already_put_back_is_given_back_without_a_restore(
    wx_host, wx_engine, weather
):
    run_id = await start_event(
        wx_host, spec(phase("p", lease("north", "storm"), step("core.wait", seconds=60)))
    )
    await wx_engine.tick()
    baseline = (await _lease_rows(wx_host, run_id))[0].payload["baseline"]
    weather.sky["north"] = baseline  # the game restored it by itself, at the apply's until
    from pageant.runs import controls

    await controls.cancel(wx_host, run_id, actor="admin:test", reason="done")
    await wx_engine.tick()
    (row,) = await _lease_rows(wx_host, run_id)
    assert (row.status, row.revert_attempts) == ("reverted", 0)
    assert (row.payload["found"], row.payload["restored_by"]) == (baseline, "game")
    assert weather.restored == []  # nothing to restore: the host did not call it


async def test_lease_minutes_are_bounded_by_the_setting(wx_host, wx_engine, weather):
    longest = wx_host.settings.lease_max_minutes
    assert longest == 24 * 60
    ok = await start_event(wx_host, spec(phase("p", lease("north", "storm", minutes=longest))))
    too_long = await start_event(
        wx_host, spec(phase("p", lease("south", "storm", minutes=longest + 1, on_failure="skip")))
    )
    await wx_engine.tick()
    assert [s.status for s in await step_rows(wx_host.db, ok)] == ["done"]
    (refused,) = await step_rows(wx_host.db, too_long)
    assert refused.status == "failed"
    assert refused.last_error == (
        f"minutes must be between 1 and {longest} (lease_max_minutes), not {longest + 1}"
    )
    assert weather.sky["south"] == "rain"


async def test_core_lease_is_off_until_an_admin_enables_it(smith_host, smith_engine):
    run_id = await start_event(
        smith_host, spec(phase("p", lease("north", "storm", on_failure="skip")))
    )
    await smith_engine.tick()
    (line,) = await log_lines(smith_host.db, run_id, "step.refused")
    assert line.detail["code"] == "disabled"


# ── a game that is down ───────────────────────────────────────────────────────


async def test_an_unavailable_plugin_holds_its_world_changing_steps_until_it_is_back(
    smith_host, smith_engine, smith, clock
):
    from pageant.runs.console import console

    context = smith_host.context_for("smith", "smith")
    context.set_available(False, "the shard is restarting")
    run_id = await start_event(smith_host, spec(phase("p", forge(1))))
    for _ in range(3):
        await smith_engine.tick()
        clock.advance(seconds=5)
    run = await run_row(smith_host.db, run_id)
    assert (run.status, run.health) == ("running", "degraded")
    (made,) = await step_rows(smith_host.db, run_id)
    assert (made.status, made.attempts) == ("pending", 0)  # never claimed, never failed
    assert smith.performs == []
    waiting_on = (await console(smith_host, run_id))["run"]["waiting_on"]
    assert waiting_on["reason"] == "unavailable"
    assert waiting_on["sentence"] == (
        f"“Forge” (step {made.id}) waits: smith.forge is unavailable (the shard is restarting)"
    )
    assert waiting_on["step_id"] == made.id
    assert len(await log_lines(smith_host.db, run_id, "run.waiting")) == 1  # logged once
    context.set_available(True)
    await smith_engine.tick()
    (made,) = await step_rows(smith_host.db, run_id)
    assert made.status == "done"
    assert (await run_row(smith_host.db, run_id)).status == "completed"
    assert smith.world == {}


async def test_reverts_wait_for_an_unavailable_plugin_without_spending_attempts(
    smith_host, smith_engine, smith, clock
):
    context = smith_host.context_for("smith", "smith")

    async def then_go_down(ctx: Any) -> None:
        context.set_available(False, "the shard went down")

    smith.first = then_go_down
    run_id = await start_event(smith_host, spec(phase("p", forge(2))))
    for _ in range(5):
        await smith_engine.tick()
        clock.advance(seconds=30)
    assert smith.reverts == []
    rows = await _rows(smith_host, run_id)
    assert [(r.status, r.revert_attempts) for r in rows] == [("confirmed", 0), ("confirmed", 0)]
    assert (await run_row(smith_host.db, run_id)).cleanup_status == "pending"
    context.set_available(True)
    await smith_engine.tick()
    rows = await _rows(smith_host, run_id)
    assert [(r.status, r.revert_attempts) for r in rows] == [("reverted", 1), ("reverted", 1)]
    assert smith.world == {}


async def test_reconcile_runs_when_the_host_starts(smith_host, smith_engine, smith, aiohttp_client):
    from pageant.api.app import make_app

    run_id = await start_event(
        smith_host, spec(phase("p", forge(2), step("core.wait", seconds=3600)))
    )
    await smith_engine.tick()
    del smith.world["sword-2"]
    await aiohttp_client(make_app(smith_host, run_engine=True))
    assert [(r.ref, r.status) for r in await _rows(smith_host, run_id)] == [
        ("sword-1", "confirmed"),
        ("sword-2", "orphaned"),
    ]
    assert smith.reverts == []


# ── wisps: the example plugin's whole loop ────────────────────────────────────


async def test_the_wisps_walk_summons_borrows_and_gives_everything_back(host, clock):
    import pageant_wisps

    pageant_wisps.WORLD.clear()
    pageant_wisps.WEATHER.update(dict.fromkeys(pageant_wisps.COLOURS, "clear"))
    async with host.db.begin() as conn:
        for action_id in ("wisps.summon", "core.lease"):
            await board.set_action(
                conn, host.registry, action_id, enabled=True, actor="admin:test", now=clock.now()
            )
    event_spec = spec(
        phase(
            "storm",
            step("wisps.summon", colour="north", count=3),
            step("core.lease", lease="wisps.weather", target="north", value="storm", minutes=30),
            step("core.wait", seconds=60),
        ),
    )
    engine = Engine(host)
    try:
        run_id = await start_event(host, event_spec)
        await engine.tick()
        assert sum(len(refs) for refs in pageant_wisps.WORLD.values()) == 3
        assert pageant_wisps.WEATHER["north"] == "storm"
        rows = await _rows(host, run_id)
        assert [(r.kind, r.status) for r in rows] == [
            ("wisp", "confirmed"),
            ("wisp", "confirmed"),
            ("wisp", "confirmed"),
            ("wisps.weather", "confirmed"),
        ]
        # A player catches one wisp; the plugin asks the host to reconcile.
        key = next(iter(pageant_wisps.WORLD))
        caught = pageant_wisps.WORLD[key].pop(0)
        assert await host.reconcile("wisps") == {"asked": 4, "orphaned": 1}
        clock.advance(seconds=61)
        await engine.tick()
        await engine.tick()
    finally:
        await engine.stop()
    run = await run_row(host.db, run_id)
    assert (run.status, run.cleanup_status) == ("completed", "complete")
    assert pageant_wisps.WORLD == {}
    assert pageant_wisps.WEATHER["north"] == "clear"
    rows = {r.ref: r.status for r in await _rows(host, run_id)}
    assert rows.pop(caught) == "orphaned"
    assert set(rows.values()) == {"reverted"}


async def test_a_rescue_that_fails_leaves_a_row_its_remaining_tries(
    smith_host, smith_engine, smith, smith_client, tokens
):
    smith.revert_error = "still cold"
    run_id = await start_event(smith_host, spec(phase("p", forge(1))))
    await smith_engine.tick()  # completed; the first attempt failed
    (row,) = await _rows(smith_host, run_id)
    assert (row.status, row.revert_attempts) == ("confirmed", 1)
    answer = await smith_client.post(
        f"/api/v1/admin/runs/{run_id}/cleanup", headers=bearer(tokens["admin"])
    )
    assert answer.status == 200
    (row,) = await _rows(smith_host, run_id)
    # The admin's try counts, and the bound still leaves the stage its third.
    assert (row.status, row.revert_attempts) == ("confirmed", 2)
    assert (await answer.json())["run"]["cleanup_status"] == "pending"
    await smith_engine.tick()
    (row,) = await _rows(smith_host, run_id)
    assert (row.status, row.revert_attempts) == ("revert_failed", 3)


async def test_what_an_action_without_a_revert_reports_is_shown_as_still_out_there(
    smith_host, smith_engine, smith, clock
):
    async with smith_host.db.begin() as conn:
        await board.set_action(
            conn, smith_host.registry, "smith.melt", enabled=True, actor="a", now=clock.now()
        )
    run_id = await start_event(smith_host, spec(phase("p", step("smith.melt", count=1))))
    await smith_engine.tick()
    (row,) = await _rows(smith_host, run_id)
    # Nothing could try it, and the counter says so.
    assert (row.kind, row.status, row.revert_attempts, row.last_error) == (
        "sword",
        "revert_failed",
        0,
        "smith.melt declares no revert",
    )
    assert (await run_row(smith_host.db, run_id)).cleanup_status == "incomplete"
    assert smith.reverts == []


async def test_what_waits_for_a_plugin_that_is_down_never_crowds_out_the_rest(
    settings, db, clock, smith, weather
):
    host = make_host(settings.model_copy(update={"runs_per_tick": 1}), db, clock, [smith, weather])
    async with host.db.begin() as conn:
        for action_id in ("core.lease", "smith.forge"):
            await board.set_action(
                conn, host.registry, action_id, enabled=True, actor="a", now=clock.now()
            )
    engine = Engine(host)
    try:
        forged = await start_event(host, spec(phase("p", forge(1))))
        leased = await start_event(host, spec(phase("p", lease("north", "storm"))))
        for _ in range(4):
            await engine.tick()
        assert weather.sky["north"] == "clear" and smith.world == {}
        # The smith's game goes down with a sword still out; the weather's plugin is fine.
        third = await start_event(host, spec(phase("p", forge(1))))
        smith.first = None

        async def down_after(ctx: Any) -> None:
            host.mark_unavailable("smith", "the forge is offline")

        smith.first = down_after
        later = await start_event(host, spec(phase("p", lease("south", "storm"))))
        for _ in range(6):
            clock.advance(seconds=1)
            await engine.tick()
        assert (await run_row(host.db, third)).cleanup_status == "pending"
        assert weather.sky["south"] == "rain"  # the later run's lease was given back
        assert (await run_row(host.db, later)).cleanup_status == "complete"
        assert forged < leased < third < later
    finally:
        await engine.stop()
        await host.close()
