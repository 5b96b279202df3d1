"""Countdown ladders: a phase's announcements at set times before the run begins.

A scheduled run is made by the real expansion; the engine is ticked on a fake clock, and
each rung is seen where it lands: ``core.log``'s ``announce`` lines and a test leg that keeps
what it was sent.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select

from pageant import hookimpl
from pageant.db import due
from pageant.db.countdown import COUNTDOWN_PHASE
from pageant.db.tables import event_run_steps
from pageant.runs import controls
from pageant.runs.countdown import remaining_words
from tests.factories import announce, log_lines, make_host, phase, publish_event
from tests.scheduling import once, runs_of, utc

START = utc(2027, 3, 1, 13, 0)


class Horn:
    """An announce leg, ``horn.call``, that keeps every message it is sent (and its key),
    answering from ``answers`` first."""

    PLUGIN_INFO = {"owner": "horn", "contract": "^1.0"}  # noqa: RUF012 - read by the loader

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []
        self.tried: list[str] = []
        self.answers: list[dict[str, Any]] = []

    async def send(self, message: str, ctx: Any) -> dict[str, Any]:
        self.tried.append(ctx.idempotency_key)
        if self.answers:
            return self.answers.pop(0)
        self.sent.append((message, ctx.idempotency_key))
        return {"ok": True}

    @hookimpl
    def pageant_announce_legs(self) -> list[dict[str, Any]]:
        return [{"id": "horn.call", "label": "Horn", "send": self.send}]

    def messages(self) -> list[str]:
        return [message for message, _ in self.sent]


@pytest.fixture
def horn() -> Horn:
    return Horn()


@pytest.fixture
async def horn_host(settings: Any, db: Any, clock: Any, horn: Horn) -> Any:
    h = make_host(settings, db, clock, [horn])
    try:
        yield h
    finally:
        await h.close()


@pytest.fixture
async def engine(horn_host: Any) -> Any:
    from pageant.engine import Engine

    e = Engine(horn_host)
    try:
        yield e
    finally:
        await e.stop()


def frenzy(before: list[str] | None = None) -> dict[str, Any]:
    """A spec due once at 13:00 UTC whose first phase counts down on two legs."""
    first = phase("muster", announce("The Frenzy begins"))
    first["countdown"] = {
        "before": before or ["30m", "15m", "5m", "1m"],
        "legs": ["core.log", "horn.call"],
        "message": "The Frenzy starts in {remaining}",
    }
    return {"schedule": once("2027-03-01T13:00"), "phases": [first]}


async def scheduled_run(host: Any, engine: Any, spec: dict[str, Any]) -> int:
    """The run the expansion makes of ``spec`` at the clock's now (one tick)."""
    event = await publish_event(host.db, host.clock.now(), spec, title="Frenzy")
    await engine.tick()
    [run] = await runs_of(host.db, event.id)
    assert run.status == "scheduled"
    return int(run.id)


async def logged(host: Any, run_id: int) -> list[str]:
    return [line.detail["message"] for line in await log_lines(host.db, run_id, "announce")]


async def rungs(host: Any, run_id: int) -> list[Any]:
    s = event_run_steps.c
    async with host.db.connect() as conn:
        found = await conn.execute(
            select(event_run_steps)
            .where(s.run_id == run_id, s.phase == COUNTDOWN_PHASE)
            .order_by(s.seq)
        )
        return list(found.all())


async def tick_at(engine: Any, clock: Any, at: Any) -> None:
    clock.set(at)
    await engine.tick()


def test_remaining_reads_as_a_person_says_it() -> None:
    assert remaining_words(900) == "15 minutes"
    assert remaining_words(60) == "1 minute"
    assert remaining_words(3600) == "1 hour"
    assert remaining_words(5400) == "90 minutes"
    assert remaining_words(2 * 86_400) == "2 days"


async def test_each_rung_is_sent_once_at_its_offset_on_both_legs(
    horn_host: Any, engine: Any, clock: Any, horn: Horn
) -> None:
    clock.set(utc(2027, 3, 1, 12, 0))
    run_id = await scheduled_run(horn_host, engine, frenzy())
    made = await rungs(horn_host, run_id)
    assert [(r.status, r.due_at) for r in made[::2]] == [
        ("pending", START - timedelta(minutes=m)) for m in (30, 15, 5, 1)
    ]
    assert len({r.idempotency_key for r in made}) == 8

    expected: list[str] = []
    for minutes in (30, 15, 5, 1):
        due = START - timedelta(minutes=minutes)
        await tick_at(engine, clock, due - timedelta(seconds=1))
        assert horn.messages() == expected, f"sent before {due}"
        await tick_at(engine, clock, due)
        await tick_at(engine, clock, due + timedelta(seconds=20))
        words = remaining_words(minutes * 60)
        expected.append(f"The Frenzy starts in {words}")
        assert horn.messages() == expected
        assert await logged(horn_host, run_id) == expected

    await tick_at(engine, clock, START)
    await tick_at(engine, clock, START + timedelta(minutes=5))
    assert horn.messages() == expected
    assert await logged(horn_host, run_id) == [*expected, "The Frenzy begins"]
    assert [r.status for r in await rungs(horn_host, run_id)] == ["done"] * 8
    # Each rung went out under its own key, once.
    assert [key for _, key in horn.sent] == [r.idempotency_key for r in made[1::2]]


async def test_a_cancel_between_rungs_sends_nothing_more(
    horn_host: Any, engine: Any, clock: Any, horn: Horn
) -> None:
    clock.set(utc(2027, 3, 1, 12, 0))
    run_id = await scheduled_run(horn_host, engine, frenzy())
    await tick_at(engine, clock, START - timedelta(minutes=30))
    assert horn.messages() == ["The Frenzy starts in 30 minutes"]

    clock.set(START - timedelta(minutes=20))
    await controls.cancel(horn_host, run_id, actor="admin:test", reason="rained off")
    for minutes in (15, 5, 1, 0):
        await tick_at(engine, clock, START - timedelta(minutes=minutes))
    assert horn.messages() == ["The Frenzy starts in 30 minutes"]
    assert await logged(horn_host, run_id) == ["The Frenzy starts in 30 minutes"]
    assert [r.status for r in await rungs(horn_host, run_id)] == ["done"] * 2 + ["cancelled"] * 6


async def test_a_rung_whose_time_passed_before_the_run_was_made_is_skipped_not_sent(
    horn_host: Any, engine: Any, clock: Any, horn: Horn
) -> None:
    clock.set(START - timedelta(minutes=10))
    run_id = await scheduled_run(horn_host, engine, frenzy())
    made = await rungs(horn_host, run_id)
    assert [r.status for r in made] == ["skipped"] * 4 + ["pending"] * 4
    assert made[0].note == "its time had passed when the run was made"

    for minutes in (5, 1):
        await tick_at(engine, clock, START - timedelta(minutes=minutes))
    assert horn.messages() == ["The Frenzy starts in 5 minutes", "The Frenzy starts in 1 minute"]


async def test_a_rung_the_host_was_down_for_is_skipped_not_sent_late(
    horn_host: Any, engine: Any, clock: Any, horn: Horn
) -> None:
    clock.set(utc(2027, 3, 1, 12, 0))
    run_id = await scheduled_run(horn_host, engine, frenzy())
    # The host comes back two minutes after the 15-minute rung was due.
    await tick_at(engine, clock, START - timedelta(minutes=13))
    assert horn.messages() == []
    made = await rungs(horn_host, run_id)
    assert [r.status for r in made[:4]] == ["skipped"] * 4
    assert made[2].note == "its time passed before it could be sent"
    skipped = await log_lines(horn_host.db, run_id, "step.status")
    assert sum(1 for line in skipped if line.detail["to"] == "skipped") == 4

    # A minute late is still in time.
    await tick_at(engine, clock, START - timedelta(minutes=4))
    assert horn.messages() == ["The Frenzy starts in 5 minutes"]


async def test_a_rung_a_leg_asks_to_retry_is_sent_again_under_its_key(
    horn_host: Any, engine: Any, clock: Any, horn: Horn
) -> None:
    clock.set(utc(2027, 3, 1, 12, 0))
    run_id = await scheduled_run(horn_host, engine, frenzy(["15m"]))
    horn.answers = [{"ok": False, "retry": True, "error": "the horn is busy"}]
    await tick_at(engine, clock, START - timedelta(minutes=15))
    assert horn.messages() == []
    await tick_at(engine, clock, START - timedelta(minutes=14))
    assert horn.messages() == ["The Frenzy starts in 15 minutes"]
    [_, horned] = await rungs(horn_host, run_id)
    assert horn.tried == [horned.idempotency_key] * 2
    assert (horned.status, horned.attempts) == ("done", 2)


async def test_rescheduling_a_run_moves_its_rungs_with_it(
    horn_host: Any, engine: Any, clock: Any, horn: Horn
) -> None:
    clock.set(utc(2027, 3, 1, 12, 0))
    run_id = await scheduled_run(horn_host, engine, frenzy(["30m", "5m"]))
    later = START + timedelta(hours=1)
    await controls.reschedule(
        horn_host, run_id, actor="admin:test", scheduled_for=later, reason="the server is late"
    )
    assert [r.due_at for r in await rungs(horn_host, run_id)] == [
        later - timedelta(minutes=30)
    ] * 2 + [later - timedelta(minutes=5)] * 2

    await tick_at(engine, clock, START - timedelta(minutes=30))
    assert horn.messages() == []
    await tick_at(engine, clock, later - timedelta(minutes=30))
    assert horn.messages() == ["The Frenzy starts in 30 minutes"]


async def test_moving_a_run_closer_skips_the_rungs_it_passes(
    horn_host: Any, engine: Any, clock: Any, horn: Horn
) -> None:
    clock.set(utc(2027, 3, 1, 12, 0))
    run_id = await scheduled_run(horn_host, engine, frenzy(["30m", "5m"]))
    clock.set(utc(2027, 3, 1, 12, 40))
    sooner = utc(2027, 3, 1, 12, 50)
    await controls.reschedule(
        horn_host, run_id, actor="admin:test", scheduled_for=sooner, reason="early start"
    )
    made = await rungs(horn_host, run_id)
    assert [r.status for r in made] == ["skipped", "skipped", "pending", "pending"]
    assert made[0].note == "the run was moved and its time has passed"
    await tick_at(engine, clock, sooner - timedelta(minutes=5))
    assert horn.messages() == ["The Frenzy starts in 5 minutes"]


async def test_the_engine_sleeps_until_the_next_rung_and_wakes_the_countdown_for_it(
    horn_host: Any, engine: Any, clock: Any
) -> None:
    clock.set(utc(2027, 3, 1, 12, 0))
    await scheduled_run(horn_host, engine, frenzy(["30m", "5m"]))
    async with horn_host.db.connect() as conn:
        at, stages = await due.next_instant_and_stages(conn, utc(2027, 3, 1, 12, 29, 50))
    assert at == START - timedelta(minutes=30)
    assert "countdown" in stages
    assert await engine.next_sleep(utc(2027, 3, 1, 12, 29, 50)) == 10.0
