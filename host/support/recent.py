"""Answers kept for a moment, so that readers of the same thing share one build.

A run console is read afresh from the database every time it is built: nine queries and the
whole story of the run. Ten staff watching one run during a live event, or a dashboard
polling every run, would build the same answer ten times a second. :class:`RecentAnswers`
keeps each answer for ``max_age`` seconds from the moment it was asked for, and readers who
ask while it is being built wait for that build instead of starting their own.

What a reader may see is therefore up to ``max_age`` behind the engine's own progress when
its request is handled (a paced reader's answer may then be held for its turn:
:func:`pageant.api.middleware.admission`), never behind a write made through this host:
every request that may write clears what is kept (:meth:`RecentAnswers.forget`), and a
build that began before the clear is neither kept nor joined. ``max_age`` 0 keeps nothing:
every answer is built for its own reader.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

#: The most answers kept at once; the oldest goes first. Each is a console (tens of kB).
KEEP_AT_MOST = 256
#: How far below ``max_age`` an answer's own age may be drawn (a fraction of it).
SPREAD = 0.5

#: The run consoles' paths: the API's, and the web console's run page and its polled part.
CONSOLE_READS = re.compile(r"(/api/v1/admin)?/runs/[0-9]+(/live)?")


def reads_console(method: str, path: str) -> bool:
    """Whether a request reads a run console: answered from what is kept for its readers,
    its token trusted as the console is (up to ``console_max_age_ms`` old), and admitted at
    the readers' pace apart from other requests."""
    return method == "GET" and CONSOLE_READS.fullmatch(path) is not None


class RecentAnswers:
    """``await answers.get(key, build)``: the answer ``build()`` gave for ``key`` if it was
    asked for at most ``max_age`` seconds ago (on ``now``, a monotonic clock), else a new
    one, built once however many ask for it meanwhile."""

    def __init__(
        self,
        max_age: float,
        *,
        limit: int = KEEP_AT_MOST,
        spread: float = SPREAD,
        now: Callable[[], float] | None = None,
        draw: Callable[[], float] = random.random,
    ) -> None:
        self.max_age = max_age
        self.limit = limit
        self.spread = spread
        self._now = now or time.monotonic
        self._draw = draw
        #: key -> (when it was asked for, how long it is kept, the answer), oldest first.
        self._kept: OrderedDict[Hashable, tuple[float, float, Any]] = OrderedDict()
        #: key -> (the generation it began in, the build under way).
        self._building: dict[Hashable, tuple[int, asyncio.Task[Any]]] = {}
        #: Moves on at every :meth:`forget`: what began before it is not kept or joined.
        self._generation = 0

    def forget(self) -> None:
        """Drop every kept answer, and let no build under way be kept or joined: a write
        has just been made, and the next reader must see it."""
        self._generation += 1
        self._kept.clear()

    async def get(self, key: Hashable, build: Callable[[], Awaitable[Any]]) -> Any:
        if self.max_age <= 0:
            return await build()
        asked = self._now()
        kept = self._kept.get(key)
        if kept is not None and asked - kept[0] <= kept[1]:
            return kept[2]
        under_way = self._building.get(key)
        if under_way is not None and under_way[0] == self._generation:
            # Shielded: a reader who gives up (its client went away) does not cancel the
            # build the others wait for.
            return await asyncio.shield(under_way[1])
        generation = self._generation
        task = asyncio.ensure_future(build())
        # Its failure is raised to whoever waits; if all of them have gone, it is dropped
        # here rather than reported as never retrieved.
        task.add_done_callback(lambda done: done.cancelled() or done.exception())
        self._building[key] = (generation, task)
        try:
            answer = await asyncio.shield(task)
        finally:
            if self._building.get(key, (None, None))[1] is task:
                del self._building[key]
        if generation == self._generation:
            self._keep(key, asked, answer)
        return answer

    def _keep(self, key: Hashable, asked: float, answer: Any) -> None:
        # Each answer is kept for its own age, drawn between (1 - spread) and 1 of max_age:
        # answers first read together (a dashboard opened on every run, a host just started)
        # fall due apart instead of all being read again in the same instant, ever after.
        age = self.max_age * (1 - self.spread * self._draw())
        self._kept[key] = (asked, age, answer)
        self._kept.move_to_end(key)
        # Oldest first: drop what has expired, then what is past the limit.
        now = self._now()
        while self._kept:
            oldest_key, (oldest_asked, oldest_age, _) = next(iter(self._kept.items()))
            if len(self._kept) <= self.limit and now - oldest_asked <= oldest_age:
                break
            del self._kept[oldest_key]
