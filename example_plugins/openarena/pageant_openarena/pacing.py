"""Pacing the plugin's RCON traffic to what ioquake3 answers.

ioquake3 rations rcon per source address with a leaky bucket: ten requests at once, then one
a second (measured on Debian's ``openarena-server``: 20 ``status`` requests sent at once got
10 answers; 20 sent a second apart got 20; 30 sent 0.25 s apart got 17, the 13 after the
burst one a second). A request past the ration is dropped without a word, and every client
on the same address (an admin's tool, a status bot, a second pageant host) draws from the
same ration.

:class:`Bucket` is the plugin's own copy of that ration, one per server: a request waits for
a token rather than being sent to be dropped. The server counts only what it accepted, so a
request that got no answer gives its token back (:meth:`Bucket.give_back`): it was dropped,
most likely because another client spent the ration, and sending it again costs the server
nothing until it is answered.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable

#: ioquake3's ration, measured: a burst of ten, then one a second.
SERVER_BURST = 10
SERVER_PER_SECOND = 1.0


class Bucket:
    """A token bucket: ``burst`` tokens, refilled at ``per_second``; ``clock`` answers
    seconds (``time.monotonic`` unless a test gives another) and ``sleep`` waits."""

    def __init__(
        self,
        burst: int = SERVER_BURST,
        per_second: float = SERVER_PER_SECOND,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if burst < 1 or per_second <= 0:
            raise ValueError(
                f"a bucket needs burst >= 1 and per_second > 0, not {burst}, {per_second}"
            )
        self.burst, self.per_second = burst, per_second
        self._clock, self._sleep = clock, sleep
        self._tokens = float(burst)
        self._stamp = clock()

    def tokens(self) -> float:
        """The tokens there are now (a fraction is a token on its way)."""
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._stamp) * self.per_second)
        self._stamp = now
        return self._tokens

    def wait(self) -> float:
        """Seconds until a token is there (0: one is there now)."""
        return max(0.0, (1 - self.tokens()) / self.per_second)

    async def take(self) -> float:
        """Wait for a token and spend it; answers how long it waited."""
        waited = 0.0
        while (pause := self.wait()) > 0:
            await self._sleep(pause)
            waited += pause
        self._tokens -= 1
        return waited

    def give_back(self) -> None:
        """A request the server did not answer: it did not count it, so neither do we."""
        self.tokens()
        self._tokens = min(float(self.burst), self._tokens + 1)


#: How long after its last dropped request the plugin counts the ration as contended.
CONTENDED_SECONDS = 10.0
#: How far past the instant a slot frees a request is sent (the server's clock ticks in ms).
LEAD_SECONDS = 0.002


class Slots:
    """When the shared ration is likely to free a request, learnt from the plugin's own.

    Once another client keeps the server's ration spent, the server frees one request a
    second, on a beat of its own (its bucket leaks whole seconds from a fixed instant), and
    the first request to arrive after each beat takes it. A request of ours that was
    answered after copies were dropped arrived just after a beat and before the other
    client's: sending the next one whole periods later keeps that place. Without a drop in
    the last :data:`CONTENDED_SECONDS` there is nothing to wait for."""

    def __init__(
        self, per_second: float = SERVER_PER_SECOND, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.period = 1 / per_second
        self._clock = clock
        self._contended_until = float("-inf")
        self._won_at: float | None = None

    def lost(self) -> None:
        """A copy got no answer: the ration is contended."""
        self._contended_until = self._clock() + CONTENDED_SECONDS

    def won(self, sent_at: float) -> None:
        """A copy sent at ``sent_at`` was answered: while contended, that is a free slot."""
        if self._clock() < self._contended_until:
            self._won_at = sent_at

    def wait(self) -> float:
        """Seconds until the next likely free slot (0: send now)."""
        now = self._clock()
        if now >= self._contended_until or self._won_at is None:
            return 0.0
        periods = math.ceil((now - self._won_at - LEAD_SECONDS) / self.period)
        return max(0.0, self._won_at + periods * self.period + LEAD_SECONDS - now)
