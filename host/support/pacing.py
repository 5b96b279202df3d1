"""Requests admitted at a steady pace: at most so many a second, in arrival order.

A run console answered from what is kept for its readers (:mod:`pageant.support.recent`) costs a
tenth of a millisecond, so fifty clients asking again the moment they are answered would
ask thousands of times a second and take the event loop from the engine whatever each
answer costs. A slot limit bounds how many are answered at once, not how often. :class:`Pace`
bounds how often: each caller is given the next free instant, one ``1 / rate`` after the
last one given, and waits until it; up to ``burst`` callers in a row are let through at
once after a quiet spell. It is the generic cell rate algorithm: one number of state, the
instant the next caller would be due at a perfectly steady pace.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable

#: A wait this short is the sum of the intervals' rounding, not a wait (seconds).
_ROUNDING = 1e-9


class Pace:
    """``await pace.turn()`` returns once the caller's turn has come: at most ``rate``
    turns a second on average and ``burst`` at once, in the order they were asked for.
    ``rate`` 0: every turn at once (no pace)."""

    def __init__(
        self,
        rate: float,
        burst: int = 1,
        *,
        now: Callable[[], float] | None = None,
        sleep: Callable[[float], Awaitable[object]] | None = None,
    ) -> None:
        if rate < 0 or burst < 1:
            raise ValueError(f"a pace needs rate >= 0 and burst >= 1, not {rate} and {burst}")
        self.rate = rate
        self._interval = 1 / rate if rate else 0.0
        #: How far ahead of now the next due instant may run before a caller waits.
        self._tolerance = (burst - 1) * self._interval
        self._now = now or time.monotonic
        self._sleep = sleep or asyncio.sleep
        #: When the next caller is due at the steady pace (the "theoretical arrival time").
        self._due = -math.inf

    def reserve(self) -> float:
        """Take the next turn without waiting for it: answers how long until it comes
        (seconds; 0 for a turn that is already due)."""
        if not self.rate:
            return 0.0
        now = self._now()
        due = max(self._due, now)
        self._due = due + self._interval
        wait = due - self._tolerance - now
        return wait if wait > _ROUNDING else 0.0

    async def turn(self) -> float:
        """Wait for this caller's turn; answers how long it waited (seconds). A caller who
        leaves while it waits (its task cancelled) leaves its turn unused: the callers after
        it wait no longer than they would have beside it."""
        wait = self.reserve()
        if wait:
            await self._sleep(wait)
        return wait
