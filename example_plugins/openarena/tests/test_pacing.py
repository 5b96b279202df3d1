"""The plugin's copy of ioquake3's rcon ration, on an injected clock: a burst at once, then
one request per refill; a dropped request gives its token back; never more than the burst."""

from __future__ import annotations

import pytest
from pageant_openarena.pacing import CONTENDED_SECONDS, Bucket, Slots


class Clock:
    """Seconds that pass only when the bucket sleeps."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def bucket(clock: Clock, burst: int = 10, per_second: float = 1.0) -> Bucket:
    return Bucket(burst, per_second, clock=clock, sleep=clock.sleep)


async def test_the_burst_goes_at_once_and_the_next_waits_one_refill() -> None:
    clock = Clock()
    paced = bucket(clock)
    for _ in range(10):
        assert await paced.take() == 0
    assert clock.now == 100.0
    assert await paced.take() == pytest.approx(1.0)
    assert await paced.take() == pytest.approx(1.0)
    assert clock.now == pytest.approx(102.0)


async def test_after_the_burst_it_keeps_to_per_second() -> None:
    clock = Clock()
    paced = bucket(clock, burst=2, per_second=4.0)
    for _ in range(2 + 8):
        await paced.take()
    assert clock.now - 100.0 == pytest.approx(2.0)  # eight past the burst at four a second


async def test_it_refills_while_idle_but_never_past_the_burst() -> None:
    clock = Clock()
    paced = bucket(clock, burst=3)
    for _ in range(3):
        await paced.take()
    assert paced.wait() == pytest.approx(1.0)
    clock.now += 0.5
    assert paced.wait() == pytest.approx(0.5)
    clock.now += 60
    assert paced.tokens() == 3
    for _ in range(3):
        assert await paced.take() == 0
    assert paced.wait() == pytest.approx(1.0)


async def test_a_dropped_request_gives_its_token_back_up_to_the_burst() -> None:
    clock = Clock()
    paced = bucket(clock, burst=2)
    await paced.take()
    await paced.take()
    paced.give_back()
    assert await paced.take() == 0  # the server never counted the dropped one
    assert paced.wait() == pytest.approx(1.0)
    clock.now += 10
    paced.give_back()
    assert paced.tokens() == 2


@pytest.mark.parametrize(("burst", "per_second"), [(0, 1.0), (1, 0.0), (1, -1.0)])
def test_a_bucket_that_could_never_send_is_refused(burst: int, per_second: float) -> None:
    with pytest.raises(ValueError, match="burst >= 1 and per_second > 0"):
        Bucket(burst, per_second)


# ── the shared ration's free slots ───────────────────────────────────────────


def test_without_a_drop_there_is_no_slot_to_wait_for() -> None:
    clock = Clock()
    slots = Slots(1.0, clock=clock)
    slots.won(clock.now)
    clock.now += 0.3
    assert slots.wait() == 0


def test_after_drops_the_next_request_waits_for_the_beat_of_the_one_that_won() -> None:
    clock = Clock()
    slots = Slots(1.0, clock=clock)
    slots.lost()  # a copy dropped: another client spends the ration
    slots.won(100.5)  # the copy sent at 100.5 was answered: a slot freed just before
    clock.now = 100.6
    assert slots.wait() == pytest.approx(0.902)  # a whole second after, and a hair
    clock.now = 101.51
    assert slots.wait() == pytest.approx(0.992)  # just missed 101.502: the next beat


def test_the_beat_is_forgotten_once_nothing_is_dropped_for_a_while() -> None:
    clock = Clock()
    slots = Slots(1.0, clock=clock)
    slots.lost()
    slots.won(100.0)
    clock.now += CONTENDED_SECONDS
    assert slots.wait() == 0
