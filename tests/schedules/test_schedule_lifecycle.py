"""A schedule's life: an outage, a republish (new time, new zone, the same schedule, and
back again), an archive and a person's cancel — through the real API and the real engine,
on both dialects, with time injected. Never two live rows for one occurrence."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from pageant.db import steps
from pageant.engine import Engine
from tests.api.test_events_api import EVENTS, call, create
from tests.factories import log_lines
from tests.scheduling import (
    MAIN,
    once,
    ready_event,
    runs_of,
    set_expanded_until,
    spec_with,
    utc,
    weekly,
)

LIVE = ("scheduled", "starting", "running", "paused", "ending")


@pytest.fixture
async def engine_of_host(host: Any) -> Any:
    """The engine of ``host`` (the one behind ``client``), not started: tests tick it."""
    engine = Engine(host)
    try:
        yield engine
    finally:
        await engine.stop()


async def publish(
    client: Any, tokens: dict[str, str], event_id: int, reason: str | None = None
) -> dict[str, Any]:
    """Publish (with ``reason``, which moving a public event's occurrences needs), then
    verify (scheduled occurrences start only from a verified version)."""
    body = {"reason": reason} if reason is not None else None
    path = f"{EVENTS}/{event_id}/publish"
    status, data = await call(client, "POST", path, tokens["admin"], body)
    assert status == 200, data
    status, verified = await call(client, "POST", f"{EVENTS}/{event_id}/verify", tokens["admin"])
    assert status == 200, verified
    return data


async def edit(client: Any, tokens: dict[str, str], event_id: int, **body: Any) -> None:
    status, data = await call(client, "PUT", f"{EVENTS}/{event_id}", tokens["admin"], body)
    assert status == 200, data


async def scheduled_event(
    client: Any, tokens: dict[str, str], schedule: dict[str, Any], tz: str = "Europe/Berlin"
) -> int:
    event = await create(
        client, tokens["admin"], title="Friday Muster", timezone=tz, spec=spec_with(schedule)
    )
    await publish(client, tokens, event["id"])
    return event["id"]


def live(rows: list[Any]) -> list[Any]:
    return [r for r in rows if r.status in LIVE]


def assert_one_live_row_per_day(rows: list[Any]) -> None:
    days = Counter(r.occurrence_local[:10] for r in live(rows))
    assert days and max(days.values()) == 1, days


# ── an outage ────────────────────────────────────────────────────────────────


async def test_a_restart_after_three_days_misses_only_what_was_materialised(
    client, tokens, host, engine_of_host, db, clock
):
    # Daily at 20:00 Berlin (19:00Z), published and expanded on Monday 1 March at 12:00Z.
    every_day = weekly(
        "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", at="20:00"
    )
    daily = await scheduled_event(client, tokens, every_day)
    await engine_of_host.tick()
    before = await runs_of(db, daily)
    assert len(before) == 14  # 1 to 14 March: the horizon ends 15 March 12:00Z
    # While the host is down, a second event becomes ready that no engine has expanded.
    unseen = await ready_event(db, clock.now(), every_day)

    clock.advance(timedelta(days=3).total_seconds())  # Thursday 4 March 12:00Z
    await engine_of_host.tick()

    rows = await runs_of(db, daily)
    missed = [r for r in rows if r.status == "missed"]
    assert [r.scheduled_for for r in missed] == [utc(2027, 3, d, 19) for d in (1, 2, 3)]
    assert {r.id for r in missed} <= {r.id for r in before}  # nothing made up afterwards
    for row in missed:
        assert row.last_error == "the grace window passed before it could start"
        (line,) = await log_lines(db, row.id, "run.status")
        assert (line.detail["from"], line.detail["to"]) == ("scheduled", "missed")
    assert [r.scheduled_for for r in rows if r.status == "scheduled"] == [
        utc(2027, 3, d, 19) for d in range(4, 18)
    ]
    # The event nobody expanded during the outage gets nothing before now - grace.
    assert [r.scheduled_for for r in await runs_of(db, unseen.id)] == [
        utc(2027, 3, d, 19) for d in range(4, 18)
    ]


# ── republish ────────────────────────────────────────────────────────────────


async def test_a_republish_that_moves_the_time_supersedes_the_old_rows_without_a_double(
    client, tokens, engine_of_host, db
):
    event_id = await scheduled_event(client, tokens, weekly("friday", at="20:00"))
    old = await runs_of(db, event_id)  # publishing already made them
    assert [r.scheduled_for for r in old] == [utc(2027, 3, 5, 19), utc(2027, 3, 12, 19)]

    await edit(client, tokens, event_id, spec=spec_with(weekly("friday", at="21:00")))
    await publish(client, tokens, event_id)
    await engine_of_host.tick()

    rows = await runs_of(db, event_id)
    by_id = {r.id: r for r in rows}
    for row in old:
        now_row = by_id[row.id]
        assert (now_row.status, now_row.cancel_reason) == ("cancelled", "superseded")
        (line,) = await log_lines(db, row.id, "run.status")
        assert line.detail["reason"] == "superseded"
        assert line.actor == "admin:test-admin"
    new = live(rows)
    assert [(r.scheduled_for, r.occurrence_local) for r in new] == [
        (utc(2027, 3, 5, 20), "2027-03-05T21:00"),
        (utc(2027, 3, 12, 20), "2027-03-12T21:00"),
    ]
    assert {r.version_id for r in new} != {r.version_id for r in old}
    assert_one_live_row_per_day(rows)


async def test_republishing_the_same_schedule_repins_the_rows_not_yet_started(client, tokens, db):
    event_id = await scheduled_event(client, tokens, weekly("friday", at="20:00"))
    before = await runs_of(db, event_id)
    fixed = {
        **MAIN,
        "steps": [{**MAIN["steps"][0], "params": {"leg": "core.log", "message": "Fixed"}}],
    }
    await edit(client, tokens, event_id, spec=spec_with(weekly("friday", at="20:00"), fixed))
    event = await publish(client, tokens, event_id)

    after = await runs_of(db, event_id)
    assert [r.id for r in after] == [r.id for r in before]
    for row in after:
        assert row.version_id == event["current_version"]["id"]
        assert row.status == "scheduled"
        (line,) = await log_lines(db, row.id, "run.repinned")
        assert line.detail == {"version_id": row.version_id}
        async with db.connect() as conn:
            (step,) = await steps.steps_of_run(conn, row.id)
        assert step.params["message"] == "Fixed"


async def test_a_zone_change_moves_each_row_to_its_new_instant(client, tokens, engine_of_host, db):
    event_id = await scheduled_event(client, tokens, weekly("friday", at="20:00"))
    before = await runs_of(db, event_id)
    await edit(client, tokens, event_id, timezone="Europe/London")
    await publish(client, tokens, event_id)
    await engine_of_host.tick()

    after = await runs_of(db, event_id)
    assert [(r.id, r.scheduled_for, r.occurrence_local) for r in after] == [
        (before[0].id, utc(2027, 3, 5, 20), "2027-03-05T20:00"),
        (before[1].id, utc(2027, 3, 12, 20), "2027-03-12T20:00"),
    ]
    (moved,) = await log_lines(db, before[0].id, "run.moved")
    assert (moved.detail["from"], moved.detail["to"]) == (
        "2027-03-05T19:00:00Z",
        "2027-03-05T20:00:00Z",
    )
    assert moved.detail["timezone"] == "Europe/London"


async def test_back_to_an_earlier_time_revives_the_superseded_rows_but_never_a_persons_cancel(
    client, tokens, engine_of_host, db
):
    event_id = await scheduled_event(client, tokens, weekly("friday", at="20:00"))
    first, second = await runs_of(db, event_id)
    status, _ = await call(
        client,
        "POST",
        f"/api/v1/admin/runs/{second.id}/cancel",
        tokens["moderator"],
        {"reason": "superseded"},  # a person may type the same word
    )
    assert status == 200

    await edit(client, tokens, event_id, spec=spec_with(weekly("friday", at="21:00")))
    await publish(client, tokens, event_id)
    await edit(client, tokens, event_id, spec=spec_with(weekly("friday", at="20:00")))
    event = await publish(client, tokens, event_id)
    await engine_of_host.tick()

    rows = {r.id: r for r in await runs_of(db, event_id)}
    revived = rows[first.id]
    assert (revived.status, revived.cancel_reason) == ("scheduled", None)
    assert revived.version_id == event["current_version"]["id"]
    async with db.connect() as conn:
        assert [s.status for s in await steps.steps_of_run(conn, first.id)] == ["pending"]
    kept = rows[second.id]
    assert (kept.status, kept.cancel_reason) == ("cancelled", "superseded")
    # The 21:00 rows went the way the 20:00 ones had; one row per Friday, at most one live.
    assert sorted((r.occurrence_local, r.status) for r in rows.values()) == [
        ("2027-03-05T20:00", "scheduled"),
        ("2027-03-05T21:00", "cancelled"),
        ("2027-03-12T20:00", "cancelled"),
        ("2027-03-12T21:00", "cancelled"),
    ]


async def test_a_republish_to_manual_supersedes_every_row_not_started(client, tokens, db):
    event_id = await scheduled_event(client, tokens, weekly("friday", at="20:00"))
    await edit(client, tokens, event_id, spec=spec_with({"kind": "manual"}))
    event = await publish(client, tokens, event_id)
    rows = await runs_of(db, event_id)
    assert [(r.status, r.cancel_reason) for r in rows] == [("cancelled", "superseded")] * 2
    assert event["next_occurrence"] is None


async def test_publishing_a_once_inside_its_grace_window_makes_it_and_wakes_the_engine(
    client, tokens, engine_of_host, db, clock
):
    woken = []
    engine_of_host.wake = lambda: woken.append(True)
    event_id = await scheduled_event(client, tokens, once("2027-03-01T12:58"))  # 11:58Z
    (row,) = await runs_of(db, event_id)
    assert (row.scheduled_for, row.status) == (utc(2027, 3, 1, 11, 58), "scheduled")
    assert woken == [True, True]  # the publish, then the verify
    await engine_of_host.tick()
    (row,) = await runs_of(db, event_id)
    assert row.status != "scheduled"  # started inside its window


# ── archive, and a person's cancel ────────────────────────────────────────────


async def test_archiving_cancels_what_has_not_started_and_stops_the_schedule(
    client, tokens, engine_of_host, db, clock
):
    # Mondays 12:00 UTC with a cue that parks: the first occurrence is now, and stays running.
    cue = {
        "key": "main",
        "label": "Main",
        "steps": [{"action": "core.cue", "params": {"message": "Open the gate"}}],
    }
    event = await create(client, tokens["admin"], spec=spec_with(weekly("monday", at="12:00"), cue))
    await publish(client, tokens, event["id"])
    await engine_of_host.tick()
    running, upcoming = await runs_of(db, event["id"])
    assert (running.status, upcoming.status) == ("running", "scheduled")

    status, _ = await call(client, "POST", f"{EVENTS}/{event['id']}/archive", tokens["admin"])
    assert status == 200
    rows = {r.id: r for r in await runs_of(db, event["id"])}
    assert rows[running.id].status == "running"  # under way: it goes on to its end
    assert (rows[upcoming.id].status, rows[upcoming.id].cancel_reason) == (
        "cancelled",
        "archived",
    )
    (line,) = await log_lines(db, upcoming.id, "run.status")
    assert (line.detail["reason"], line.actor) == ("archived", "admin:test-admin")

    clock.advance(timedelta(days=30).total_seconds())
    await engine_of_host.tick()
    assert len(await runs_of(db, event["id"])) == 2  # nothing expands any more


async def test_a_cancelled_occurrence_stays_cancelled(client, tokens, engine_of_host, db, clock):
    event_id = await scheduled_event(client, tokens, weekly("friday", at="20:00"))
    first, second = await runs_of(db, event_id)
    status, _ = await call(
        client,
        "POST",
        f"/api/v1/admin/runs/{first.id}/cancel",
        tokens["moderator"],
        {"reason": "the shard is down"},
    )
    assert status == 200

    await engine_of_host.tick()
    await set_expanded_until(db, event_id, None)  # a full re-expansion
    await engine_of_host.tick()
    await publish(client, tokens, event_id)  # and a republish of the same schedule
    clock.advance(timedelta(days=1).total_seconds())
    await engine_of_host.tick()

    rows = await runs_of(db, event_id)
    assert [(r.id, r.status, r.cancel_reason) for r in rows] == [
        (first.id, "cancelled", "the shard is down"),
        (second.id, "scheduled", None),
    ]


async def test_a_persons_cancel_keeps_its_slot_through_a_zone_change(client, tokens, db):
    event_id = await scheduled_event(client, tokens, weekly("friday", at="20:00"))
    first, second = await runs_of(db, event_id)
    status, _ = await call(
        client, "POST", f"/api/v1/admin/runs/{first.id}/cancel", tokens["admin"], {"reason": "x"}
    )
    assert status == 200
    await edit(client, tokens, event_id, timezone="Europe/London")
    await publish(client, tokens, event_id)
    # 5 March 20:00 is still the cancelled occurrence, wherever its instant now falls.
    rows = await runs_of(db, event_id)
    assert [(r.id, r.scheduled_for, r.status) for r in rows] == [
        (first.id, utc(2027, 3, 5, 19), "cancelled"),
        (second.id, utc(2027, 3, 12, 20), "scheduled"),
    ]
