"""The engine: one asyncio task per host that ticks, then sleeps until something is due.

Instead of a fixed poll, the engine sleeps until the earliest instant at which anything
becomes due — a pending step's ``due_at``, a run's ``hold_until`` or ``scheduled_for``, a
claim lease expiry, a gate's deadline, the instant a held gate stalls — capped by ``poll_seconds``,
and ``wake()`` (a start, a control, a firing that closed a gate) ends the sleep at once.
A ``core.wait`` of 5 s therefore holds ~5 s.

Runs are advanced by tasks of their own, at most ``dispatch_concurrency`` at a time, so a
``perform`` that takes its whole budget holds only its own run, and the loop goes on
ticking beside it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from datetime import datetime
from typing import TYPE_CHECKING, Any

import aiohttp

from pageant.db import due
from pageant.engine.tick import STAGES
from pageant.runs.versions import PinnedSpecs

if TYPE_CHECKING:
    from pageant.hosting import Host

log = logging.getLogger("pageant.engine")

#: How long ``stop()`` lets runs in flight finish before cancelling them. A cancelled
#: dispatch keeps its step's claim lease, so the reclaim re-dispatches it (same idempotency key).
STOP_GRACE_SECONDS = 10.0


class Engine:
    """The runner of one host. ``start()``/``stop()`` run the loop; ``tick()`` runs one
    tick by hand (tests, the demo) and by default waits for the runs it started."""

    def __init__(self, host: Host) -> None:
        self.host = host
        host.attach_engine(self)
        self.versions = PinnedSpecs()
        #: Run id -> the task advancing it in this process.
        self.inflight: dict[int, asyncio.Task[Any]] = {}
        self.last_prune_at: datetime | None = None
        #: What the loop last asked the clock to sleep, in seconds.
        self.last_sleep: float | None = None
        self._slots = asyncio.Semaphore(host.settings.dispatch_concurrency)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._session: aiohttp.ClientSession | None = None

    # ── lifecycle ──────────────────────────────────────────────────────────────

    async def start(self) -> None:
        """Start the loop task (idempotent)."""
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="pageant-engine")

    async def stop(self) -> None:
        """Stop the loop, let runs in flight finish (briefly), and close the HTTP session."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        tasks = list(self.inflight.values())
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=STOP_GRACE_SECONDS)
            for task in pending:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> Engine:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def wake(self) -> None:
        """End the current sleep now: something may be due (a start, a control, an emit)."""
        self._wake.set()

    async def http_session(self) -> aiohttp.ClientSession:
        """The engine's one HTTP session (made on first use, closed by ``stop``)."""
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
        return self._session

    # ── the tick ───────────────────────────────────────────────────────────────

    async def tick(self, *, drain: bool = True) -> None:
        """Run every stage once, in order, each in its own error boundary.

        With ``drain`` (the default), wait until the runs this tick handed to tasks are done,
        before the stages after advance (so a run that ends in this tick is cleaned up in
        it). Without, a run task that moved wakes the loop, and the next tick cleans up.
        """
        now = self.host.clock.now()
        for stage in STAGES:
            if drain and stage.__name__ == "cleanup":
                await self.drain()
            try:
                await stage(self.host, now)
            except Exception:
                log.exception("the %s stage failed; the tick goes on", stage.__name__)
        if drain:
            await self.drain()

    async def drain(self) -> None:
        """Wait for every run task of this engine to finish."""
        while self.inflight:
            await asyncio.gather(*list(self.inflight.values()), return_exceptions=True)

    def spawn(self, run_id: int, work: Coroutine[Any, Any, tuple[str, bool]]) -> None:
        """Advance one run in a task of its own, bounded by ``dispatch_concurrency``."""
        if run_id in self.inflight:
            work.close()
            return
        task = asyncio.create_task(self._advance_one(run_id, work), name=f"pageant-run-{run_id}")
        self.inflight[run_id] = task

    async def _advance_one(self, run_id: int, work: Coroutine[Any, Any, tuple[str, bool]]) -> None:
        progressed = False
        try:
            async with self._slots:
                _, progressed = await work
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("advancing run %s failed; the next tick tries again", run_id)
        finally:
            self.inflight.pop(run_id, None)
            # Look again at once only when something moved (the run may have more to do,
            # or its next instant is now known); a run that only waits must not spin.
            if progressed:
                self.wake()

    # ── sleeping ───────────────────────────────────────────────────────────────

    async def next_sleep(self, now: datetime | None = None) -> float:
        """Seconds until the earliest due instant after ``now``, capped by ``poll_seconds``."""
        poll = self.host.settings.poll_seconds
        now = now or self.host.clock.now()
        try:
            async with self.host.db.connect() as conn:
                at = await due.next_instant(
                    conn, now, stall_seconds=self.host.settings.stall_seconds
                )
        except Exception:
            log.exception("could not read the next due instant; polling")
            return poll
        if at is None:
            return poll
        return max(0.0, min(poll, (at - now).total_seconds()))

    async def _sleep(self, seconds: float) -> None:
        # The clock's sleep (a fake one in tests) raced against a wake.
        sleeper = asyncio.ensure_future(self.host.clock.sleep(seconds))
        waker = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeper, waker):
                task.cancel()
            await asyncio.gather(sleeper, waker, return_exceptions=True)

    async def _loop(self) -> None:
        log.info("engine started as %s", self.host.identity)
        while True:
            # Cleared before the tick reads anything: a wake during the tick is kept and
            # ends the sleep that follows, so nothing it announced is slept through.
            self._wake.clear()
            await self.tick(drain=False)
            self.last_sleep = await self.next_sleep()
            await self._sleep(self.last_sleep)
