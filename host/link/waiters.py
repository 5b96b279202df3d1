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

    async def wait(self, key: Any, future: asyncio.Future[Any], timeout: float) -> bool:
        """Wait for ``future`` (from :meth:`watch`) up to ``timeout`` seconds; True when
        woken. The future is forgotten either way."""
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout)
            return True
        except TimeoutError:
            return False
        finally:
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
