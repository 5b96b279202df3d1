"""The engine: one asyncio task per host that ticks, then sleeps until something is due.

Instead of a fixed poll, the engine sleeps until the earliest instant at which anything
becomes due — a pending step's ``due_at``, a run's ``hold_until`` or ``scheduled_for``, a
claim lease expiry, a gate's deadline, the instant a held gate stalls — capped by ``poll_seconds``,
and ``wake()`` (a start, a control, a firing that closed a gate) ends the sleep at once.
A ``core.wait`` of 5 s therefore holds ~5 s.

Runs are advanced by tasks of their own, at most ``dispatch_concurrency`` at a time, so a
``perform`` that takes its whole budget holds only its own run, and the loop goes on
ticking beside it.

The stages other than advance keep their own clock in the loop: a tick that only follows
the engine's own progress (a run task moved and woke the loop) runs advance alone (and
cleanup when a run ended); a sleep that ran to its instant runs the stages that instant is
due to (:data:`pageant.db.due.INSTANT_STAGES`); the whole tick runs when something outside
woke the engine (a start, a control, an emit), after a sleep the poll capped, and at least
every ``FULL_TICK_SECONDS`` however busy the engine is. A tick run by hand runs every stage.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import aiohttp

from pageant.db import due, runs, steps
from pageant.db.engine import answers
from pageant.db.errors import is_unavailable
from pageant.db.group import OutcomeBatch
from pageant.db.outage import OVERDUE_SECONDS, PROBE_SECONDS
from pageant.engine.contention import ContentionPersisted, jitter, noted, retrying
from pageant.engine.tick import STAGES, handed_back
from pageant.states import OUTCOME_FINISHED, RUN_ACTIVE

if TYPE_CHECKING:
    from pageant.hosting import Host

log = logging.getLogger("pageant.engine")

T = TypeVar("T")

#: Under constant progress, the longest the loop goes without a whole tick (reclaim,
#: expand, the missed sweep, cleanup, prune), in seconds of real time.
FULL_TICK_SECONDS = 1.0
#: While run tasks are in flight, how long a wake by one's progress waits for the others'
#: before the advance stage scans for due runs again, in seconds.
PROGRESS_GATHER_SECONDS = 0.01
#: The stages a tick that only follows the engine's own progress runs.
_ON_PROGRESS = frozenset({"advance"})


class Engine:
    """The runner of one host. ``start()``/``stop()`` run the loop; ``tick()`` runs one
    tick by hand (tests, the demo) and by default waits for the runs it started."""

    def __init__(self, host: Host) -> None:
        self.host = host
        host.attach_engine(self)
        #: Run id -> the task advancing it in this process.
        self.inflight: dict[int, asyncio.Task[Any]] = {}
        #: Run id -> the task giving back what it holds, beside the tick.
        self.cleaning: dict[int, asyncio.Task[Any]] = {}
        #: What the loop last asked the clock to sleep, in seconds.
        self.last_sleep: float | None = None
        self._slots = asyncio.Semaphore(host.settings.dispatch_concurrency)
        #: The run tasks holding one of ``_slots`` now (see :meth:`plugin_call`).
        self._slot_holders: set[asyncio.Task[Any]] = set()
        #: The shared transaction the answers of this host's steps are recorded in.
        self.outcomes = OutcomeBatch(host.db, host.settings.outcome_batch_size)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._session: aiohttp.ClientSession | None = None
        #: Set by ``stop()``: nothing new is claimed from then on (no run, no step).
        self.stopping = False
        #: When the last tick finished, or the loop started before any
        #: (``time.monotonic()``), for /healthz; None before either.
        self.last_tick_at: float | None = None
        #: Run id -> lock collisions in a row while advancing it.
        self._collisions: dict[int, int] = {}
        #: Whether (and since when) the database is out of reach, for one line each way
        #: (the host's note: what fires a run's triggers beside the engine reports to it).
        self.outage = host.outage
        #: Whether the loop's next tick must be whole: something outside woke the engine
        #: (or nothing has ticked yet), or a run ended (its cleanup is due).
        self._outside = True
        self._ended = False
        self._next_full = 0.0
        #: The stages the instant the loop sleeps until is due to (None: every stage).
        self._instant_stages: frozenset[str] | None = None
        #: The instant the loop's last tick read what was due at.
        self._ticked_at: datetime | None = None

    # ── lifecycle ──────────────────────────────────────────────────────────────

    async def start(self) -> None:
        """Start the loop task (idempotent)."""
        if self._task is None:
            self.last_tick_at = time.monotonic()  # /healthz counts from the start
            self._task = asyncio.create_task(self._loop(), name="pageant-engine")

    async def stop(self, grace: float | None = None) -> None:
        """Stop cleanly: claim nothing more, let the steps already in ``perform`` finish
        within ``grace`` seconds (default: the ``stop_grace_seconds`` setting) and record
        their outcomes, then hand back every claim this host holds.

        A step still in ``perform`` when the grace runs out is cancelled and handed back to
        ``pending`` unmarked - its attempt stands, and the next dispatcher runs it again
        under the same idempotency key - and the log names it.
        """
        grace = self.host.settings.stop_grace_seconds if grace is None else grace
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        self.stopping = True
        self.wake()
        if self._task is not None:
            # The loop ends at its next turn; a tick under way finishes its stages first
            # (the advance stage hands nothing new to a task once stopping is set).
            done, _ = await asyncio.wait({self._task}, timeout=max(0.0, deadline - loop.time()))
            if not done:
                self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        tasks = list(self.inflight.values())
        if tasks:
            log.info("stopping: %d run(s) in flight get %.0f s to finish", len(tasks), grace)
            _, pending = await asyncio.wait(tasks, timeout=max(0.0, deadline - loop.time()))
            for task in pending:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        cleaning = list(self.cleaning.values())
        if cleaning:
            # A give-back cut here spends nothing: the row is as it was, and the next
            # host to start tries it again (a revert is final for its key, so twice is safe).
            _, pending = await asyncio.wait(cleaning, timeout=max(0.0, deadline - loop.time()))
            for task in pending:
                task.cancel()
            await asyncio.gather(*cleaning, return_exceptions=True)
        await self._hand_back()
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _hand_back(self) -> None:
        """Release every step and run this host still holds (a clean stop's last act)."""
        host, owner = self.host, self.host.identity
        now = host.clock.now()
        try:
            async with host.db.connect() as conn:
                held = await steps.steps_held_by(conn, owner)
            for row in held:
                step = row._mapping
                async with host.db.begin() as conn:
                    if not await steps.release_held_step(
                        conn, step["id"], owner=owner, attempt=step["attempts"]
                    ):
                        continue
                    stopped = "the host stopped before perform answered"
                    await handed_back(conn, step, owner, stopped, now=now)
                log.warning(
                    "stopping: step %s (%s) of run %s was still in perform when the grace "
                    "ran out; handed back unmarked for another dispatch under the same "
                    "idempotency key",
                    step["id"],
                    step["action"],
                    step["run_id"],
                    extra={
                        "run_id": step["run_id"],
                        "step_id": step["id"],
                        "action": step["action"],
                        "outcome": "released",
                    },
                )
            async with host.db.begin() as conn:
                released = await runs.release_claims_of(conn, owner)
            if released:
                log.info("stopping: handed back %d run claim(s)", released)
        except Exception:
            # The leases expire on their own and the reclaim takes them: slower, not lost.
            log.exception("stopping: could not hand back this host's claims; they expire")

    async def __aenter__(self) -> Engine:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def wake(self, *, advance_only: bool = False) -> None:
        """End the current sleep now: something may be due (a start, a control, an emit).

        ``advance_only``: what woke the engine concerns only the advance stage (a run was
        started now, a gate closed), so the tick it causes is advance's alone; a burst of
        starts then costs no reclaim, sweep or prune per start. Otherwise the tick is whole.
        """
        if not advance_only:
            self._outside = True
        self._wake.set()

    async def http_session(self) -> aiohttp.ClientSession:
        """The engine's one HTTP session (made on first use, closed by ``stop``)."""
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
        return self._session

    # ── the tick ───────────────────────────────────────────────────────────────

    async def tick(self, *, drain: bool = True, only: frozenset[str] | None = None) -> None:
        """Run every stage once, in order, each in its own error boundary.

        With ``drain`` (the default), wait until the runs this tick handed to tasks are done,
        before the stages after advance (so a run that ends in this tick is cleaned up in
        it). Without, a run task that moved wakes the loop, and the next tick cleans up.
        ``only`` names the stages to run (the loop's tick that follows its own progress);
        None runs them all.
        """
        now = self._ticked_at = self.host.clock.now()
        started = time.perf_counter()
        unreachable = False
        if self.outage.since is not None:
            unreachable = not await self._hand_back_stale_claims()
        for stage in STAGES:
            if only is not None and stage.__name__ not in only:
                continue
            if drain and stage.__name__ == "cleanup":
                await self.drain()
            try:
                await retrying(
                    self.host, f"the {stage.__name__} stage", partial(stage, self.host, now)
                )
            except ContentionPersisted:
                pass  # logged at the bound; the next tick runs the stage again
            except Exception as exc:
                if self.outage.noted(exc, f"the {stage.__name__} stage"):
                    unreachable = True
                else:
                    log.exception("the %s stage failed; the tick goes on", stage.__name__)
        if not unreachable and self.outage.since is not None:
            self.outage.ended(await self._runs_in_progress())
        metrics = self.host.metrics
        metrics.tick_seconds.observe(time.perf_counter() - started)
        metrics.last_tick.set(time.time())
        self.last_tick_at = time.monotonic()
        if drain:
            await self.drain()

    async def _runs_in_progress(self) -> int | None:
        """How many runs are under way (starting, running, ending): the ones an outage held
        and the engine now takes on. None when the database cannot say."""
        try:
            async with self.host.db.connect() as conn:
                counts = await runs.count_by_status(conn)
                await conn.rollback()
        except Exception:
            log.debug("could not count the runs under way", exc_info=True)
            return None
        return sum(counts[status] for status in RUN_ACTIVE)

    async def watched(self, work: Coroutine[Any, Any, T], where: str) -> T:
        """Await ``work`` (a tick, a read of the next instant), watching for a database that
        accepts and never answers: while ``work`` is overdue (``OVERDUE_SECONDS``), ask the
        database directly, and if that goes unanswered for ``PROBE_SECONDS`` the outage began
        when ``work`` did. A paused server otherwise raises nothing for a minute (the
        drivers' statement bound), and the log said nothing while it lasted."""
        began = self.host.clock.now()
        task = asyncio.ensure_future(work)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=OVERDUE_SECONDS)
                if done:
                    return task.result()
                if self.outage.since is None and not await self._database_answers():
                    self.outage.began(where, f"no answer within {PROBE_SECONDS:g} s", at=began)
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    async def _database_answers(self) -> bool:
        try:
            async with asyncio.timeout(PROBE_SECONDS):
                await answers(self.host.db)
        except TimeoutError:
            return False
        except Exception as exc:
            return not is_unavailable(exc)
        return True

    @asynccontextmanager
    async def plugin_call(self, owner: str) -> AsyncIterator[None]:
        """Around a call into ``owner``'s plugin from a run task: the run waits for one of
        the plugin's own slots (``plugin_concurrency``) without holding a dispatch slot,
        and holds both for the call. Performs that hang therefore hold at most
        ``plugin_concurrency`` of the ``dispatch_concurrency`` slots, and another plugin's
        runs still find one."""
        task = asyncio.current_task()
        if task is None or task not in self._slot_holders:
            async with self.host.plugin_slots.of(owner):
                yield
            return
        self._slot_holders.discard(task)
        self._slots.release()
        async with self.host.plugin_slots.of(owner):
            # Cancelled before this, the task holds no dispatch slot, and its run task
            # gives none back (it reads _slot_holders).
            await self._slots.acquire()
            self._slot_holders.add(task)
            yield

    async def _hand_back_stale_claims(self) -> bool:
        """After an outage: hand back the run claims this host holds on runs it is not
        working. A claim whose release met the outage (or whose commit the outage made
        uncertain) would otherwise hold its run still until its lease expired - fifteen
        minutes by default. Answers whether the database answered."""
        try:
            async with self.host.db.begin() as conn:
                await runs.release_claims_of(conn, self.host.identity, keep=list(self.inflight))
        except Exception as exc:
            if not self.outage.noted(exc, "handing back claims"):
                log.exception("could not hand back this host's stale claims")
            return False
        return True

    async def drain(self) -> None:
        """Wait for every run task and every give-back task of this engine to finish."""
        while self.inflight or self.cleaning:
            tasks = [*self.inflight.values(), *self.cleaning.values()]
            await asyncio.gather(*tasks, return_exceptions=True)

    def give_back_beside(self, run_id: int, work: Coroutine[Any, Any, str]) -> None:
        """Give back what one run holds in a task of its own, beside the tick: a revert
        that hangs holds that run's cleanup, never the tick, and a run already being given
        back is not given back twice at once."""
        if run_id in self.cleaning or self.stopping:
            work.close()
            return
        task = asyncio.create_task(
            self._give_back_one(run_id, work), name=f"pageant-cleanup-{run_id}"
        )
        self.cleaning[run_id] = task

    async def _give_back_one(self, run_id: int, work: Coroutine[Any, Any, str]) -> None:
        try:
            await work
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if noted(self.host, f"cleaning up run {run_id}", exc):
                # Rolled back whole: the next tick's stage selects the run again.
                asyncio.get_running_loop().call_later(jitter(1), self.wake)
            else:
                log.exception("could not clean up run %s; the next tick tries again", run_id)
        finally:
            self.cleaning.pop(run_id, None)

    def spawn(self, run_id: int, work: Coroutine[Any, Any, tuple[str, bool]]) -> None:
        """Advance one run in a task of its own, bounded by ``dispatch_concurrency``."""
        if run_id in self.inflight or self.stopping:
            work.close()
            return
        task = asyncio.create_task(self._advance_one(run_id, work), name=f"pageant-run-{run_id}")
        self.inflight[run_id] = task

    async def _advance_one(self, run_id: int, work: Coroutine[Any, Any, tuple[str, bool]]) -> None:
        progressed = False
        try:
            task = asyncio.current_task()
            assert task is not None
            await self._slots.acquire()
            self._slot_holders.add(task)
            try:
                outcome, progressed = await work
            finally:
                # Held unless a plugin call gave it back and was cancelled taking it again.
                if task in self._slot_holders:
                    self._slot_holders.discard(task)
                    self._slots.release()
            if outcome in OUTCOME_FINISHED:
                self._ended = True  # what it holds is the cleanup stage's to give back
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            collisions = self._collisions.get(run_id, 0) + 1
            if noted(self.host, f"advancing run {run_id}", exc, collisions):
                # Nothing was written by the transaction that lost; look again soon, at a
                # jittered moment so the two writers do not meet again in lockstep.
                self._collisions[run_id] = collisions
                asyncio.get_running_loop().call_later(jitter(collisions), self.wake)
            else:
                self._collisions.pop(run_id, None)
                if not self.outage.noted(exc, f"advancing run {run_id}"):
                    log.exception("advancing run %s failed; the next tick tries again", run_id)
        else:
            self._collisions.pop(run_id, None)
        finally:
            self.inflight.pop(run_id, None)
            # Look again at once only when something moved (the run may have more to do,
            # or its next instant is now known); a run that only waits must not spin. This
            # wake is the engine's own: the tick it causes runs advance, not every stage.
            if progressed:
                self._wake.set()

    # ── sleeping ───────────────────────────────────────────────────────────────

    async def next_sleep(
        self, now: datetime | None = None, *, since: datetime | None = None
    ) -> float:
        """Seconds until the earliest due instant after ``now``, capped by ``poll_seconds``.

        ``since``: read the instants after this earlier moment instead (the loop passes the
        moment its last tick read what was due). An instant that fell between that read and
        this one was seen by neither; with ``since`` it is found, already past, and the
        sleep is none. Each such instant costs one more tick, not a spin: the next read
        starts after that tick's moment.

        Notes which stages that instant is due to: a sleep that runs to it wakes those
        (a step's due_at needs advance, not reclaim); a sleep capped by the poll, all."""
        poll = self.host.settings.poll_seconds
        now = now or self.host.clock.now()
        after = now if since is None else min(since, now)
        self._instant_stages = None
        try:
            async with self.host.db.connect() as conn:
                at, stages = await due.next_instant_and_stages(
                    conn, after, stall_seconds=self.host.settings.stall_seconds
                )
        except Exception as exc:
            if not self.outage.noted(exc, "reading the next due instant"):
                log.exception("could not read the next due instant; polling")
            return poll
        if at is None:
            return poll
        seconds = (at - now).total_seconds()
        if seconds > poll:
            return poll
        self._instant_stages = stages
        return max(0.0, seconds)

    async def _sleep(self, seconds: float) -> bool:
        """Sleep ``seconds`` or until a wake; answers whether the sleep ran to its end."""
        # The clock's sleep (a fake one in tests) raced against a wake.
        sleeper = asyncio.ensure_future(self.host.clock.sleep(seconds))
        waker = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
            return sleeper.done() and not sleeper.cancelled()
        finally:
            for task in (sleeper, waker):
                task.cancel()
            await asyncio.gather(sleeper, waker, return_exceptions=True)

    def _stages_due(self, slept_through: bool) -> frozenset[str] | None:
        """The stages the loop's next tick runs (None: all of them)."""
        now = time.monotonic()
        instant = self._instant_stages if slept_through else frozenset()
        self._instant_stages = None
        if (slept_through and instant is None) or self._outside or now >= self._next_full:
            self._outside = self._ended = False
            self._next_full = now + FULL_TICK_SECONDS
            return None
        stages = _ON_PROGRESS | (instant or frozenset())
        if self._ended:
            self._ended = False
            stages |= {"cleanup"}
        return stages

    async def _loop(self) -> None:
        log.info("engine started as %s", self.host.identity)
        slept_through = True
        while not self.stopping:
            # Cleared before the tick reads anything: a wake during the tick is kept and
            # ends the sleep that follows, so nothing it announced is slept through.
            self._wake.clear()
            await self.watched(
                self.tick(drain=False, only=self._stages_due(slept_through)), "a tick"
            )
            if self.stopping:
                break
            if self._wake.is_set():
                # Woken during the tick: the sleep would end at once, so the instant it
                # would be measured against is not read.
                slept_through = False
                if self._outside or not self.inflight:
                    await asyncio.sleep(0)
                else:
                    # Only a run task's progress woke it, and others are still in flight:
                    # a moment's wait lets one scan find what they all did, so a burst of
                    # runs costs a few scans of the due runs, not one a run.
                    await asyncio.sleep(PROGRESS_GATHER_SECONDS)
                continue
            self.last_sleep = await self.watched(
                self.next_sleep(since=self._ticked_at), "reading the next due instant"
            )
            slept_through = await self._sleep(self.last_sleep)
            if not slept_through:
                self._instant_stages = None
