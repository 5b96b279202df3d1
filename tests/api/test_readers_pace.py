"""Run console readers are admitted at a pace (``console_reads_per_second``): at most that
many a second, a quarter second's worth at once, in arrival order; no other request waits
behind them. First :class:`Pace` on its own (time injected), then through the real app."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from pageant.api.app import make_app
from pageant.runs import console as console_module
from pageant.support.pacing import Pace
from tests.api.test_console_reads import _run
from tests.conftest import bearer
from tests.factories import announce, make_host


class Timeline:
    """A monotonic clock and a sleep on it: sleeping moves the clock, and says how long."""

    def __init__(self) -> None:
        self.now = 50.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


def paced(rate: float, burst: int = 1) -> tuple[Pace, Timeline]:
    line = Timeline()
    return Pace(rate, burst, now=line.clock, sleep=line.sleep), line


async def test_a_burst_goes_at_once_and_the_one_past_it_waits_one_interval() -> None:
    pace, line = paced(10, burst=3)
    assert [await pace.turn() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert line.slept == []
    assert await pace.turn() == pytest.approx(0.1)  # the fourth, at the same instant
    assert await pace.turn() == pytest.approx(0.2)  # and the fifth, after it
    assert line.slept == pytest.approx([0.1, 0.2])


async def test_at_the_steady_pace_nobody_waits() -> None:
    pace, line = paced(10)
    for _ in range(20):
        assert await pace.turn() == 0.0
        line.now += 0.1  # exactly one interval apart
    assert line.slept == []


async def test_a_moment_faster_than_the_pace_waits() -> None:
    pace, line = paced(10)
    await pace.turn()
    line.now += 0.099
    assert await pace.turn() == pytest.approx(0.001)


async def test_a_quiet_spell_gives_back_the_burst_and_no_more() -> None:
    pace, line = paced(100, burst=5)
    for _ in range(5):
        await pace.turn()
    line.now += 60  # long quiet: the burst is whole again, not sixty seconds' worth
    assert [await pace.turn() for _ in range(5)] == [0.0] * 5
    assert await pace.turn() == pytest.approx(0.01)


async def test_a_turn_taken_ahead_says_when_it_comes_and_waits_for_nothing() -> None:
    pace, line = paced(10)
    assert pace.reserve() == 0.0
    assert pace.reserve() == pytest.approx(0.1)
    assert line.slept == []
    # The turns taken ahead are taken: the next caller's comes after them.
    assert await pace.turn() == pytest.approx(0.2)


async def test_no_rate_is_no_pace() -> None:
    pace, line = paced(0)
    assert [await pace.turn() for _ in range(1000)] == [0.0] * 1000
    assert line.slept == []


@pytest.mark.parametrize(("rate", "burst"), [(-1, 1), (10, 0)])
def test_a_pace_that_cannot_be_is_refused(rate: float, burst: int) -> None:
    with pytest.raises(ValueError, match="rate >= 0 and burst >= 1"):
        Pace(rate, burst)


async def test_a_caller_who_leaves_while_it_waits_takes_no_turn_from_the_next() -> None:
    pace = Pace(20)  # real time: a turn every 50 ms
    await pace.turn()
    leaving = asyncio.create_task(pace.turn())  # due in 50 ms
    await asyncio.sleep(0)
    leaving.cancel()
    began = time.monotonic()
    await pace.turn()  # due 100 ms after the first: its own turn, not the one left
    assert time.monotonic() - began >= 0.09


# ── through the real app ─────────────────────────────────────────────────────────────────


@pytest.fixture
async def slow_readers(settings, db, clock, aiohttp_client):
    """The app over a host whose console readers are paced at 40 a second (10 at once)."""
    host = make_host(settings.model_copy(update={"console_reads_per_second": 40}), db, clock, [])
    try:
        yield host, await aiohttp_client(make_app(host, run_engine=False))
    finally:
        await host.close()


async def test_console_reads_past_the_burst_are_paced_and_others_are_not(
    slow_readers, tokens, clock
):
    host, api = slow_readers
    run_id = await _run(api, tokens, host, clock, announce("hi"))
    who = bearer(tokens["admin"])
    finished: list[str] = []

    async def get(path: str, name: str) -> Any:
        answer = await api.get(path, headers=who)
        finished.append(name)
        return answer

    began = time.monotonic()
    # Twenty readers at once: ten in the burst, then one every 25 ms: the last at >= 250 ms.
    readers = [
        asyncio.create_task(get(f"/api/v1/admin/runs/{run_id}", f"console {n}")) for n in range(20)
    ]
    await asyncio.sleep(0.05)
    other = await get("/api/v1/admin/plugins", "plugins")
    answers = await asyncio.gather(*readers)
    took = time.monotonic() - began
    assert [a.status for a in answers] == [200] * 20
    assert took >= 0.25
    # The other request was not queued behind the paced readers.
    assert other.status == 200
    assert finished.index("plugins") < finished.index("console 19")


async def test_console_reads_within_the_burst_are_not_held(
    slow_readers, tokens, clock, monkeypatch
):
    host, api = slow_readers
    run_id = await _run(api, tokens, host, clock, announce("hi"))
    waits: list[float] = []
    reserve = Pace.reserve

    def counted(self: Pace) -> float:
        waits.append(reserve(self))
        return waits[-1]

    monkeypatch.setattr(Pace, "reserve", counted)
    path = f"/api/v1/admin/runs/{run_id}"
    answers = await asyncio.gather(
        *(api.get(path, headers=bearer(tokens["admin"])) for _ in range(10))
    )
    assert [a.status for a in answers] == [200] * 10
    # The burst (a quarter of 40) at once, however the ten arrive; the one past it waits
    # (the test above, and the unit tests with time injected).
    assert waits == [0.0] * 10


@pytest.mark.parametrize(
    ("max_age_ms", "read_early"),
    [
        (2000, True),  # read ahead up to 1 s: the whole of the later reader's wait
        (0, False),  # nothing kept, nothing read ahead: read at the turn
    ],
)
async def test_a_console_waiting_its_turn_is_read_while_it_waits_and_answered_at_the_turn(
    settings, db, clock, tokens, aiohttp_client, monkeypatch, max_age_ms, read_early
):
    # One reader a second, one at once: of two readers asking together, whichever the host
    # takes second has its turn a second away.
    tuned = {"console_reads_per_second": 1, "console_max_age_ms": max_age_ms}
    host = make_host(settings.model_copy(update=tuned), db, clock, [])
    try:
        api = await aiohttp_client(make_app(host, run_engine=False))
        run_ids = [await _run(api, tokens, host, clock, announce(n)) for n in ("one", "two")]
        began: dict[int, float] = {}
        build = console_module._build

        async def timed(conn: Any, host: Any, row: Any, **kwargs: Any) -> Any:
            began[row.id] = time.monotonic()
            return await build(conn, host, row, **kwargs)

        monkeypatch.setattr(console_module, "_build", timed)
        who = bearer(tokens["admin"])
        asked = time.monotonic()
        answers = await asyncio.gather(
            *(api.get(f"/api/v1/admin/runs/{run_id}", headers=who) for run_id in run_ids)
        )
        answered = time.monotonic()
    finally:
        await host.close()
    assert [a.status for a in answers] == [200, 200]
    assert [(await a.json())["run"]["id"] for a in answers] == run_ids
    # Either way the later answer waits for its turn, a second after the host took the first.
    assert answered - asked >= 0.95
    later_read = max(began.values()) - asked
    if read_early:
        assert later_read < 0.5  # read at once, while its reader waits for its turn
    else:
        assert later_read >= 0.95  # read at its turn
