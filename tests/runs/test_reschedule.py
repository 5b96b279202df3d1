"""Rescheduling one occurrence: it moves, the log keeps both instants, and neither the
expansion nor a republish ever puts it back or makes it again. Through the real app."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from pageant.engine import Engine
from pageant.runs.controls import cancel
from pageant.support.timefmt import iso
from tests.api.test_events_api import call
from tests.factories import log_lines
from tests.schedules.test_calendar import items
from tests.schedules.test_schedule_lifecycle import publish, scheduled_event
from tests.scheduling import runs_of, utc, weekly

FIRST = utc(2027, 3, 5, 19)  # Friday 20:00 in Berlin
SECOND = utc(2027, 3, 12, 19)
MOVED = utc(2027, 3, 6, 17)  # Saturday 18:00 in Berlin


@pytest.fixture
async def ticking(host: Any) -> Any:
    engine = Engine(host)
    try:
        yield engine
    finally:
        await engine.stop()


async def _reschedule(client, token, run_id, body):
    return await call(client, "POST", f"/api/v1/admin/runs/{run_id}/reschedule", token, body)


async def test_a_moved_occurrence_stays_moved(client, tokens, ticking, db, host, clock):
    event_id = await scheduled_event(client, tokens, weekly("friday", at="20:00"))
    await ticking.tick()
    first, second = await runs_of(db, event_id)
    assert (first.scheduled_for, second.scheduled_for) == (FIRST, SECOND)

    status, run = await _reschedule(
        client, tokens["moderator"], first.id, {"scheduled_for": iso(MOVED), "reason": "raid night"}
    )

    assert status == 200, run
    assert (run["scheduled_for"], run["moved_from"]) == (iso(MOVED), iso(FIRST))
    (line,) = await log_lines(db, first.id, "control.reschedule")
    assert line.detail == {"from": iso(FIRST), "to": iso(MOVED), "reason": "raid night"}
    assert line.actor == "moderator:test-moderator"

    # The expansion moves on a week, and a republish reconciles: the occurrence is had.
    clock.advance(days=1)
    await ticking.tick()
    await publish(client, tokens, event_id)
    rows = await runs_of(db, event_id)
    assert [(r.id, r.scheduled_for, r.status) for r in rows][:2] == [
        (first.id, MOVED, "scheduled"),
        (second.id, SECOND, "scheduled"),
    ]
    assert FIRST not in {r.scheduled_for for r in rows}
    # The calendar shows it as moved, and nothing at its old instant.
    found = await items(client, tokens, start=utc(2027, 3, 2), end=utc(2027, 3, 14))
    assert [(i["scheduled_for"], i["moved_from"]) for i in found] == [
        (iso(MOVED), iso(FIRST)),
        (iso(SECOND), None),
    ]
    # Moved again, it still remembers where it came from.
    later = MOVED + timedelta(hours=1)
    status, run = await _reschedule(
        client, tokens["admin"], first.id, {"scheduled_for": iso(later), "reason": "late"}
    )
    assert (status, run["moved_from"]) == (200, iso(FIRST))


async def test_a_run_moved_earlier_and_done_is_not_made_again(
    client, tokens, ticking, db, host, clock
):
    event_id = await scheduled_event(client, tokens, weekly("friday", at="20:00"))
    await ticking.tick()
    _, second = await runs_of(db, event_id)
    early = utc(2027, 3, 6, 12)
    status, _ = await _reschedule(
        client, tokens["admin"], second.id, {"scheduled_for": iso(early), "reason": "early"}
    )
    assert status == 200
    await cancel(host, second.id, actor="admin:test", reason="called off")
    # Days later the horizon has passed the slot it came from: it is still had.
    clock.set(utc(2027, 3, 11, 12))
    await ticking.tick()
    assert SECOND not in {r.scheduled_for for r in await runs_of(db, event_id)}


async def test_what_cannot_be_rescheduled_is_refused_and_nothing_moves(
    client, tokens, ticking, db, host
):
    event_id = await scheduled_event(client, tokens, weekly("friday", at="20:00"))
    await ticking.tick()
    first, _second = await runs_of(db, event_id)
    admin = tokens["admin"]

    status, data = await _reschedule(
        client, admin, first.id, {"scheduled_for": iso(SECOND), "reason": "x"}
    )
    assert status == 409 and data["error"]["details"] == [
        f"body.scheduled_for: {iso(SECOND)} is taken"
    ]
    status, data = await _reschedule(
        client, admin, first.id, {"scheduled_for": "2027-03-01T11:59:00Z", "reason": "x"}
    )
    assert status == 400 and "is not later than now" in data["error"]["details"][0]
    status, data = await _reschedule(
        client, admin, first.id, {"scheduled_for": "2027-03-06T18:00:00", "reason": "x"}
    )
    assert status == 400 and data["error"]["details"][0].startswith(
        "body.scheduled_for: an instant with an offset is required"
    )
    status, data = await _reschedule(client, admin, first.id, {"scheduled_for": iso(MOVED)})
    assert status == 400 and data["error"]["details"] == ["body.reason: Field required"]
    status, data = await _reschedule(
        client, admin, 999, {"scheduled_for": iso(MOVED), "reason": "x"}
    )
    assert status == 404
    await cancel(host, first.id, actor="admin:test", reason="storm")
    status, data = await _reschedule(
        client, admin, first.id, {"scheduled_for": iso(MOVED), "reason": "x"}
    )
    assert (status, data["error"]["message"]) == (
        409,
        f"run {first.id} is cancelled; reschedule acts on a scheduled run",
    )
    assert [(r.scheduled_for, r.moved_from) for r in await runs_of(db, event_id)] == [
        (FIRST, None),
        (SECOND, None),
    ]
