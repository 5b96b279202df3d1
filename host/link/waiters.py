"""Who waits on the game link in this process, and what wakes them.

A sync held open is a future in a set, keyed by its server: no thread and no database
connection while it waits. A command queued through this host wakes its server's syncs at
once; one queued through another host is found by a periodic check (one query for every
server waiting here, every :data:`CHECK_SECONDS`). Calls waiting for an agent's answer are
woken the same way: at once when the answer comes through this host, by the check when it
comes through another.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from pageant.support.tasks import end_if_cancelled

log = logging.getLogger("pageant.link")

#: How often a host asks the database for commands queued, and answers given, through
#: another host (seconds): the most such a command waits before a sync here hands it out.
CHECK_SECONDS = 0.5


class Waiters:
    """Futures by key, woken all at once. ``wait(key, timeout)`` answers True when woken,
    False when the timeout ran out; a wake may carry a value, the future's result."""

    def __init__(self) -> None:
        self._waiting: dict[Any, set[asyncio.Future[Any]]] = {}
        #: The futures whose waiter is in :meth:`wait` now (not looking at the database),
        #: each with what says whether its waiter is still there to be handed anything.
        self._parked: dict[asyncio.Future[Any], Callable[[], bool]] = {}
        #: The futures taken by :meth:`claim` (their waiter waits until each is settled),
        #: each with what says whether its waiter is still there.
        self._claimed: dict[asyncio.Future[Any], Callable[[], bool]] = {}

    def keys(self) -> list[Any]:
        return list(self._waiting)

    def __len__(self) -> int:
        return sum(len(futures) for futures in self._waiting.values())

    def wake(self, key: Any, value: Any = None) -> None:
        for future in self._waiting.pop(key, ()):
            if not future.done():
                future.set_result(value)

    def watch(self, key: Any) -> asyncio.Future[Any]:
        """A future a :meth:`wake` of ``key`` resolves: taken *before* looking at the
        database, so a wake between the look and the wait is not missed."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, set()).add(future)
        return future

    def parked(self, key: Any) -> bool:
        """Whether a waiter of ``key`` is in :meth:`wait` now and still there."""
        return any(
            (there := self._parked.get(future)) is not None and there()
            for future in self._waiting.get(key, ())
        )

    def claim(self, key: Any) -> asyncio.Future[Any] | None:
        """One future of ``key`` whose waiter is in :meth:`wait` now and still there, taken
        out of the wake of every other: its waiter waits for it past its timeout, so whoever
        claims it must settle it (``set_result``) whatever happens. None when no waiter of
        ``key`` waits."""
        for future in self._waiting.get(key, ()):
            there = self._parked.get(future)
            if there is not None and there() and not future.done():
                self.forget(key, future)
                self._claimed[future] = there
                return future
        return None

    def holds(self, future: asyncio.Future[Any]) -> bool:
        """Whether the waiter of a claimed ``future`` still waits for it and is still there
        (not cancelled, its connection not closed): settled now, it is handed the result."""
        there = self._claimed.get(future)
        return there is not None and there() and not future.done()

    async def wait(
        self,
        key: Any,
        future: asyncio.Future[Any],
        timeout: float,
        there: Callable[[], bool] = lambda: True,
    ) -> bool:
        """Wait for ``future`` (from :meth:`watch`) up to ``timeout`` seconds (or, once
        claimed, until it is settled); True when woken. ``there`` says whether the waiter
        can still be handed anything (:meth:`claim` passes it by when not). The future is
        forgotten either way."""
        self._parked[future] = there
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout)
            return True
        except TimeoutError:
            if future in self._claimed:
                self._parked.pop(future, None)
                await future
                return True
            return False
        finally:
            self._parked.pop(future, None)
            self._claimed.pop(future, None)
            self.forget(key, future)

    def forget(self, key: Any, future: asyncio.Future[Any]) -> None:
        waiting = self._waiting.get(key)
        if waiting is not None:
            waiting.discard(future)
            if not waiting:
                del self._waiting[key]


class Checker:
    """The periodic check, running only while something waits: ``check()`` is awaited every
    :data:`CHECK_SECONDS` until ``busy()`` says nothing waits any more."""

    def __init__(self, check: Callable[[], Awaitable[None]], busy: Callable[[], bool]) -> None:
        self._check = check
        self._busy = busy
        self._task: asyncio.Task[None] | None = None

    def ensure(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._loop())

    async def _loop(self) -> None:
        while self._busy():
            await asyncio.sleep(CHECK_SECONDS)
            try:
                await self._check()
            except Exception:  # the database is out of reach: the next check tries again
                log.debug("the link's periodic check failed", exc_info=True)
            end_if_cancelled()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
