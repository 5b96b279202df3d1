"""A quorum at a run's start (``start_when``): it starts once a reading reaches its number,
waits while it does not, and after its wait lets ``else`` decide.

A test plugin's reading, ``gauge.players_online``, answers what the test scripts (a number,
unknown, or a raise); the engine is ticked on a fake clock, and what the run did is read from
its row and its log.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from pageant import hookimpl
from pageant.hookspecs import UNKNOWN
from pageant.runs.console import run_view
from tests.factories import announce, log_lines, make_host, phase, publish_event
from tests.scheduling import once, runs_of, utc

START = utc(2027, 3, 1, 13, 0)


class Gauge:
    """A reading, ``gauge.players_online``, whose answer per server the test sets; and an
    announce leg, ``gauge.chat``, that keeps what it is sent."""

    PLUGIN_INFO = {"owner": "gauge", "contract": "^1.5"}  # noqa: RUF012 - read by the loader

    def __init__(self) -> None:
        self.online: dict[str, Any] = {}
        self.reads: list[str] = []
        self.sent: list[str] = []

    async def read(self, params: dict[str, Any], ctx: Any) -> Any:
        self.reads.append(params["server"])
        answer = self.online.get(params["server"], UNKNOWN)
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def send(self, message: str, ctx: Any) -> dict[str, Any]:
        self.sent.append(message)
        return {"ok": True}

    @hookimpl
    def pageant_readings(self) -> list[dict[str, Any]]:
        return [
            {
                "id": "gauge.players_online",
                "label": "Players online",
                "unit": "players online",
                "params": [
                    {
                        "name": "server",
                        "type": "string",
                        "required": True,
                        "description": "Which server.",
                        "example": "ffa-1",
                    }
                ],
                "read": self.read,
            }
        ]

    @hookimpl
    def pageant_announce_legs(self) -> list[dict[str, Any]]:
        return [{"id": "gauge.chat", "label": "Chat", "send": self.send}]


@pytest.fixture
def gauge() -> Gauge:
    return Gauge()


@pytest.fixture
async def host(settings: Any, db: Any, clock: Any, gauge: Gauge) -> Any:
    h = make_host(settings, db, clock, [gauge])
    try:
        yield h
    finally:
        await h.close()


@pytest.fixture
async def engine(host: Any) -> Any:
    from pageant.engine import Engine

    e = Engine(host)
    try:
        yield e
    finally:
        await e.stop()


def quorum(otherwise: str = "skip", server: str = "ffa-1", **more: Any) -> dict[str, Any]:
    """A spec due once at 13:00 UTC that waits up to 10 minutes for 4 players online."""
    start_when = {
        "reading": "gauge.players_online",
        "params": {"server": server},
        "at_least": 4,
        "wait": "10m",
        "else": otherwise,
        **more,
    }
    return {
        "schedule": once("2027-03-01T13:00"),
        "phases": [phase("main", announce("The Frenzy begins"))],
        "start_when": start_when,
    }


async def due_run(host: Any, engine: Any, spec: dict[str, Any]) -> int:
    """The run the expansion makes of ``spec`` before its instant."""
    host.clock.set(START - timedelta(minutes=30))
    event = await publish_event(host.db, host.clock.now(), spec, title="Frenzy")
    await engine.tick()
    [run] = await runs_of(host.db, event.id)
    return int(run.id)


async def tick_at(engine: Any, at: Any) -> None:
    engine.host.clock.set(at)
    await engine.tick()


async def the_run(host: Any, run_id: int) -> dict[str, Any]:
    return await run_view(host, run_id)


async def status_lines(host: Any, run_id: int) -> list[dict[str, Any]]:
    return [line.detail for line in await log_lines(host.db, run_id, "run.status")]


async def test_it_starts_once_the_reading_reaches_the_number_and_says_with_how_many(
    host: Any, engine: Any, gauge: Gauge
) -> None:
    run_id = await due_run(host, engine, quorum())
    gauge.online["ffa-1"] = 2
    await tick_at(engine, START)
    view = await the_run(host, run_id)
    assert view["status"] == "scheduled"
    assert view["waiting_on"]["reason"] == "quorum"
    assert view["waiting_on"]["sentence"].startswith("waiting for 4 players online (2 now)")

    gauge.online["ffa-1"] = 3
    await tick_at(engine, START + timedelta(minutes=5))
    assert (await the_run(host, run_id))["status"] == "scheduled"

    # Past the grace window (5 minutes) it is not missed: its wait decides.
    gauge.online["ffa-1"] = 6
    await tick_at(engine, START + timedelta(minutes=9, seconds=59))
    await tick_at(engine, START + timedelta(minutes=10))
    assert (await the_run(host, run_id))["status"] == "completed"
    started = [line for line in await status_lines(host, run_id) if line["to"] == "starting"]
    assert started[0]["because"] == "started with 6 players online"


async def test_a_run_with_the_number_at_its_instant_starts_at_once(
    host: Any, engine: Any, gauge: Gauge
) -> None:
    run_id = await due_run(host, engine, quorum())
    gauge.online["ffa-1"] = 4  # at_least is inclusive
    await tick_at(engine, START)
    await tick_at(engine, START + timedelta(seconds=1))
    assert (await the_run(host, run_id))["status"] == "completed"


async def test_it_is_skipped_after_the_wait_with_how_far_short_it_was(
    host: Any, engine: Any, gauge: Gauge
) -> None:
    run_id = await due_run(host, engine, quorum("skip"))
    gauge.online["ffa-1"] = 2
    await tick_at(engine, START)
    await tick_at(engine, START + timedelta(minutes=9, seconds=59))
    assert (await the_run(host, run_id))["status"] == "scheduled"
    await tick_at(engine, START + timedelta(minutes=10))
    view = await the_run(host, run_id)
    assert view["status"] == "skipped"
    assert view["cancel_reason"] == "skipped: 2 of 4 players online after 10 minutes"
    assert gauge.sent == []


@pytest.mark.parametrize("answer", [UNKNOWN, RuntimeError("rcon refused"), "six", True])
async def test_an_unknown_reading_counts_as_short_and_skip_skips_it(
    host: Any, engine: Any, gauge: Gauge, answer: Any
) -> None:
    run_id = await due_run(host, engine, quorum("skip"))
    gauge.online["ffa-1"] = answer
    await tick_at(engine, START)
    view = await the_run(host, run_id)
    assert view["status"] == "scheduled"
    assert "(reading unknown" in view["waiting_on"]["sentence"]
    await tick_at(engine, START + timedelta(minutes=10))
    view = await the_run(host, run_id)
    assert view["status"] == "skipped"
    assert view["cancel_reason"].startswith("skipped: reading unknown after 10 minutes")


async def test_an_unknown_reading_with_else_start_starts_anyway_saying_so(
    host: Any, engine: Any, gauge: Gauge
) -> None:
    run_id = await due_run(host, engine, quorum("start"))
    await tick_at(engine, START)
    assert (await the_run(host, run_id))["status"] == "scheduled"
    await tick_at(engine, START + timedelta(minutes=10))
    await tick_at(engine, START + timedelta(minutes=10, seconds=1))
    assert (await the_run(host, run_id))["status"] == "completed"
    started = [line for line in await status_lines(host, run_id) if line["to"] == "starting"]
    assert started[0]["because"] == (
        "started anyway: reading unknown after 10 minutes (gauge.players_online answered "
        "unknown) (else: start)"
    )


async def test_an_unknown_reading_with_announce_and_skip_calls_it_off_then_skips(
    host: Any, engine: Any, gauge: Gauge
) -> None:
    run_id = await due_run(host, engine, quorum("announce_and_skip", legs=["gauge.chat"]))
    await tick_at(engine, START)
    await tick_at(engine, START + timedelta(minutes=9))
    assert gauge.sent == []
    await tick_at(engine, START + timedelta(minutes=10))
    assert gauge.sent == [
        "Frenzy is called off: reading unknown after 10 minutes "
        "(gauge.players_online answered unknown)"
    ]
    view = await the_run(host, run_id)
    assert view["status"] == "skipped"
    # Sent once: later ticks send nothing more.
    await tick_at(engine, START + timedelta(minutes=11))
    assert len(gauge.sent) == 1


async def test_announce_and_skip_sends_the_message_written_on_every_leg(
    host: Any, engine: Any, gauge: Gauge
) -> None:
    run_id = await due_run(
        host,
        engine,
        quorum("announce_and_skip", legs=["gauge.chat", "core.log"], message="No Frenzy tonight"),
    )
    gauge.online["ffa-1"] = 1
    await tick_at(engine, START)
    await tick_at(engine, START + timedelta(minutes=10))
    assert gauge.sent == ["No Frenzy tonight"]
    logged = [line.detail["message"] for line in await log_lines(host.db, run_id, "announce")]
    assert logged == ["No Frenzy tonight"]
    view = await the_run(host, run_id)
    assert view["cancel_reason"] == "skipped: 1 of 4 players online after 10 minutes"


async def test_two_events_on_the_same_reading_share_one_read_inside_the_interval(
    host: Any, engine: Any, gauge: Gauge
) -> None:
    assert host.settings.reading_interval_seconds == 10
    host.clock.set(START - timedelta(minutes=30))
    for title in ("Frenzy", "Muster"):
        await publish_event(host.db, host.clock.now(), quorum(), title=title)
    await publish_event(host.db, host.clock.now(), quorum(server="ctf-2"), title="Other")
    await engine.tick()
    gauge.online.update({"ffa-1": 2, "ctf-2": 1})
    await tick_at(engine, START)
    # Two events ask of ffa-1, one of ctf-2: one read of each server.
    assert sorted(gauge.reads) == ["ctf-2", "ffa-1"]
    await tick_at(engine, START + timedelta(seconds=9))
    assert sorted(gauge.reads) == ["ctf-2", "ffa-1"]
    # The interval passed: each server is read again, once.
    await tick_at(engine, START + timedelta(seconds=10))
    assert sorted(gauge.reads) == ["ctf-2", "ctf-2", "ffa-1", "ffa-1"]


async def test_runs_waiting_on_a_quorum_do_not_keep_the_missed_sweep_from_others(
    settings: Any, db: Any, clock: Any, gauge: Gauge
) -> None:
    """The sweep reads a bounded batch of late runs; one waiting on its quorum (which its
    grace never misses) must not take the place of a run the sweep is for."""
    from pageant.engine import Engine

    narrow = make_host(settings.model_copy(update={"runs_per_tick": 1}), db, clock, [gauge])
    engine = Engine(narrow)
    try:
        clock.set(START - timedelta(minutes=30))
        waiting = await publish_event(db, clock.now(), quorum(wait="1d"), title="Frenzy")
        held_spec = {
            "schedule": once("2027-03-01T13:01"),
            "phases": [phase("main", announce("hi"))],
        }
        held = await publish_event(db, clock.now(), held_spec, title="Held", verified=False)
        await engine.tick()
        await engine.tick()
        gauge.online["ffa-1"] = 1
        for minutes in (0, 1, 7, 8):
            clock.set(START + timedelta(minutes=minutes))
            await engine.tick()
        [late] = await runs_of(db, held.id)
        assert late.status == "missed"
        [quorate] = await runs_of(db, waiting.id)
        assert (quorate.status, quorate.waiting_reason) == ("scheduled", "quorum")
    finally:
        await engine.stop()
        await narrow.close()


# ── a phase's reading gate ───────────────────────────────────────────────────


def gated(otherwise: str = "advance") -> dict[str, Any]:
    """A manual spec whose first phase waits up to 30 minutes for 4 players online."""
    gate = {
        "reading": "gauge.players_online",
        "params": {"server": "ffa-1"},
        "at_least": 4,
        "wait": "30m",
        "else": otherwise,
    }
    return {
        "schedule": {"kind": "manual"},
        "phases": [
            phase("muster", announce("Gather"), advance=gate),
            phase("frenzy", announce("The Frenzy begins")),
        ],
    }


async def started_run(host: Any, engine: Any, spec: dict[str, Any]) -> int:
    from tests.factories import start_event

    host.clock.set(START)
    run_id = await start_event(host, spec)
    await engine.tick()
    return run_id


async def phase_of(host: Any, run_id: int) -> tuple[str, str | None]:
    view = await the_run(host, run_id)
    return view["status"], view["current_phase"]


async def test_a_reading_gate_holds_its_phase_until_the_reading_reaches_the_number(
    host: Any, engine: Any, gauge: Gauge
) -> None:
    gauge.online["ffa-1"] = 2
    run_id = await started_run(host, engine, gated())
    assert await phase_of(host, run_id) == ("running", "muster")
    view = await the_run(host, run_id)
    assert view["waiting_on"]["reason"] == "gate"
    assert view["waiting_on"]["sentence"].startswith(
        "waiting for gauge.players_online to read at least 4 until 13:30 UTC (then advance)"
    )
    await tick_at(engine, START + timedelta(minutes=5))
    assert await phase_of(host, run_id) == ("running", "muster")
    gauge.online["ffa-1"] = 5
    await tick_at(engine, START + timedelta(minutes=6))
    await tick_at(engine, START + timedelta(minutes=6, seconds=1))
    assert await phase_of(host, run_id) == ("completed", "frenzy")
    [advanced] = await log_lines(host.db, run_id, "phase.advanced")
    assert advanced.detail["because"] == "reading"
    assert advanced.detail["read"] == 5


async def test_a_reading_gate_whose_wait_ends_short_advances_with_else_advance(
    host: Any, engine: Any, gauge: Gauge
) -> None:
    gauge.online["ffa-1"] = 1
    run_id = await started_run(host, engine, gated("advance"))
    await tick_at(engine, START + timedelta(minutes=29, seconds=59))
    assert await phase_of(host, run_id) == ("running", "muster")
    await tick_at(engine, START + timedelta(minutes=30))
    await tick_at(engine, START + timedelta(minutes=30, seconds=1))
    assert await phase_of(host, run_id) == ("completed", "frenzy")
    [advanced] = await log_lines(host.db, run_id, "phase.advanced")
    assert advanced.detail["because"] == "deadline"


async def test_a_reading_gate_whose_wait_ends_short_fails_the_run_with_else_fail(
    host: Any, engine: Any, gauge: Gauge
) -> None:
    run_id = await started_run(host, engine, gated("fail"))  # unknown all along
    await tick_at(engine, START + timedelta(minutes=29, seconds=59))
    assert await phase_of(host, run_id) == ("running", "muster")
    await tick_at(engine, START + timedelta(minutes=30))
    view = await the_run(host, run_id)
    assert view["status"] == "failed"
    assert view["last_error"] == (
        "phase muster: reading unknown after 30 minutes (gauge.players_online answered unknown)"
    )
