"""Group commit's queue: writes handed in by many tasks, taken in turns by one writer.

A task hands its write to :meth:`WriteQueue.run` and waits. Writes that arrive while a
transaction is committing wait for the next one, which takes up to :attr:`WriteQueue.size`
of them in arrival order: the subclass's :meth:`WriteQueue._commit` makes them in one
transaction and answers each one's future. Nothing waits for a batch to fill: a lone write
is committed at once. One writer at a time, on either database: shared transactions side by
side on MariaDB were measured to deadlock with each other, and ran slower than one.

The engine's step outcomes (:class:`OutcomeBatch`, below) and the game link's writes
(:class:`pageant.link.writes.LinkWrites`) are its two queues.

The outcome queue: the answers of many runs' steps recorded in one transaction.

A run task whose step answered hands its write to the engine's :class:`OutcomeBatch` and
waits. Writes that arrive while a transaction is committing wait for the next one, which
takes up to ``outcome_batch_size`` of them in arrival order, runs each in turn on one
connection and commits them together: a batch costs one ``BEGIN``, one ``COMMIT`` and one
turn of SQLite's writer lock however many steps it records, its log lines are inserted in
one statement and each action's switchboard flag is read once (:mod:`pageant.db.shared`).
Nothing waits for a batch to fill — a lone answer is written at once, exactly as before.

The batch is a value, never a mode: each write is called with the connection and the
transaction's :class:`pageant.db.shared.Batch` (None when it runs alone), and hands it on
to exactly the calls that keep work for it (``steps.keep_claim``, ``steps.keep_finish``,
the run log's writers given ``batch=``, ``switchboard.enabled_flag(batch=...)``,
:func:`defer_look`).
Every other call does its work at once.

A ``done`` answer's look ahead (its run's cursor, and the claim of the next step when it is
ready) is kept for the end of the batch (:func:`defer_look`): every run's cursor is then read
in one statement and each ready step claimed, in run id order, in the same transaction — one
read a batch instead of one a step. The lines kept so far are inserted before the looks, so
a line a look writes at once comes after them in its run's log.

Runs created or started in a batch keep their first phase's step rows for one insert
(:func:`pageant.db.steps.flush_new`), made before anything else the batch kept.

The batch's step claims and ``done`` finishes are each made in one statement
(:func:`pageant.db.steps.flush_finishes`, before the cursors are read, and
:func:`pageant.db.steps.flush_claims`, after the last claim): one compare-and-set names every
step, and its row count says whether each step was still as its write read it.

Each write is whole on its own (its compare-and-set fence, its log lines, the run's next
state), and may run more than once: when the shared transaction fails, it is rolled back
and every write in it runs again in a transaction of its own, so one write's error (or a
lock collision) is that write's alone, and the caller's retry sees it as before. A kept
compare-and-set that changed fewer rows than it named fails it the same way (even for a
lone write): on its own, the step that had moved is told as stale, or as taken.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Generic, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pageant.db import runlog, runs, steps
from pageant.db.shared import Batch, Look, Write

W = TypeVar("W")
log = logging.getLogger("pageant.engine")


class WriteQueue(Generic[W]):
    """One queue of writes of kind ``W``, committed together as they arrive."""

    #: The name of the writer's task.
    name = "pageant-writes"
    #: The most writes one transaction takes (set by each queue).
    size: int

    def __init__(self, db: AsyncEngine) -> None:
        self.db = db
        self._queue: list[tuple[W, asyncio.Future[Any]]] = []
        self._writer: asyncio.Task[None] | None = None
        #: How many transactions and writes went through (for benchmarks and /metrics).
        self.transactions = 0
        self.writes = 0

    async def run(self, write: W) -> Any:
        """Make ``write`` in the next shared transaction; answers what it answered once that
        transaction committed (or raises what it raised on its own)."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.append((write, future))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._drain(), name=self.name)
        return await future

    async def settle(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the writes handed in so far to be made (a
        writer stopped mid-transaction would leave its connection to the collector). Never
        longer: a writer still going then is left to the loop's end, not cancelled and
        awaited (a cancel swallowed inside a driver's call would make that wait for ever)."""
        writer = self._writer
        if writer is not None and not writer.done():
            await asyncio.wait({writer}, timeout=timeout)

    def _take(self) -> list[tuple[W, asyncio.Future[Any]]]:
        """The next turn's writes: up to :attr:`size` of the queue, in arrival order (empty
        when none wait)."""
        size = self.size
        batch, self._queue = self._queue[:size], self._queue[size:]
        return batch

    @contextmanager
    def _turn(self, batch: list[tuple[W, asyncio.Future[Any]]]) -> Iterator[None]:
        """Around one turn of the writer: cancelled in it (the loop is closing), no caller
        of ``batch`` or of the queue is left waiting for ever."""
        try:
            yield
        except BaseException as exc:
            for _, future in batch + self._queue:
                if not future.done():
                    future.set_exception(exc)
            self._queue = []
            raise

    async def _drain(self) -> None:
        """The writer's task: a turn at a time until the queue is empty, each turn's writes
        made by :meth:`_commit`. A queue whose writes are a step's hot path makes its turn
        here itself (:class:`OutcomeBatch`): one frame less between
        the run's task and its write."""
        while batch := self._take():
            with self._turn(batch):
                await self._commit(batch)

    async def _commit(self, batch: list[tuple[W, asyncio.Future[Any]]]) -> None:
        """Make ``batch`` (together, or each alone) and answer every future in it."""
        raise NotImplementedError

    async def _one(self, conn: AsyncConnection, write: W) -> Any:
        """Make ``write`` on its own in ``conn``'s transaction; answers its outcome."""
        raise NotImplementedError

    async def _alone(self, write: W, future: asyncio.Future[Any]) -> None:
        """Make ``write`` in a transaction of its own and answer its future."""
        try:
            async with self.db.begin() as conn:
                answer = await self._one(conn, write)
        except Exception as exc:
            if not future.done():
                future.set_exception(exc)
            return
        self.transactions += 1
        self.writes += 1
        if not future.done():
            future.set_result(answer)


def defer_look(group: Batch, look: Look, *, now: datetime) -> None:
    """Keep ``look`` for the end of ``group``, with the other runs' looks."""
    group.looks.append((look, now))


async def _look_ahead(group: Batch) -> None:
    """Read every kept look's cursor in one statement and let each claim from it, in run id
    order (one order for every host's claims of the same rows)."""
    conn, looks = group.conn, group.looks
    group.looks = []
    if not looks:
        return
    if len(looks) == 1:
        look, now = looks[0]
        found = await runs.read_cursor(conn, look.run_id, batch=group)
        await look.take(conn, found, now=now, group=group)
        return
    looks = sorted(looks, key=lambda kept: kept[0].run_id)
    cursors = await runs.read_cursors(conn, [look.run_id for look, _ in looks], batch=group)
    for look, now in looks:
        await look.take(conn, cursors.get(look.run_id), now=now, group=group)


class OutcomeBatch(WriteQueue[Write]):
    """One host's queue of outcome writes, committed together as they arrive, up to
    ``size`` (the ``outcome_batch_size`` setting) a transaction.

    It lives beside the queue it extends, so that a step's write is read in one file from
    the hand-off (:meth:`WriteQueue.run`) to the turn that makes it (docs/engine.md, "The
    walk of one step")."""

    name = "pageant-outcomes"

    def __init__(self, db: AsyncEngine, size: int) -> None:
        super().__init__(db)
        self.size = size

    async def _drain(self) -> None:
        # Each turn is made here, not in a _commit of its own: the writer's frame is the one
        # a step's write is called from (docs/engine.md, "The walk of one step").
        while batch := self._take():
            with self._turn(batch):
                answers: list[Any] = []
                try:
                    async with self.db.begin() as conn:
                        group = Batch(conn)
                        for write, _ in batch:
                            answers.append(await write(conn, group))
                        # What the writes kept: new runs' steps and the finishes before the
                        # cursors are read, the lines before the looks write theirs, every
                        # claim after.
                        await steps.flush_new(group)
                        await steps.flush_finishes(group)
                        await runlog.flush(group)
                        await _look_ahead(group)
                        await steps.flush_claims(group)
                        await runlog.flush(group)
                except Exception as exc:
                    if len(batch) == 1 and not isinstance(exc, steps.Shortfall):
                        if not batch[0][1].done():
                            batch[0][1].set_exception(exc)
                        continue
                    log.debug("a batch of %d outcome writes failed; each runs alone", len(batch))
                    for write, future in batch:
                        await self._alone(write, future)
                    continue
                self.transactions += 1
                self.writes += len(batch)
                for (_, future), answer in zip(batch, answers, strict=True):
                    if not future.done():
                        future.set_result(answer)

    async def _one(self, conn: AsyncConnection, write: Write) -> Any:
        return await write(conn, None)
