"""Group commit: the answers of many runs' steps recorded in one transaction.

A run task whose step answered hands its write to the engine's :class:`OutcomeBatch` and
waits. Writes that arrive while a transaction is committing wait for the next one, which
takes up to ``outcome_batch_size`` of them in arrival order, runs each in turn on one
connection and commits them together: a batch costs one ``BEGIN``, one ``COMMIT`` and one
turn of SQLite's writer lock however many steps it records, its log lines are inserted in
one statement and each action's switchboard flag is read once (:mod:`pageant.db.shared`).
Nothing waits for a batch to fill — a lone answer is written at once, exactly as before.

A ``done`` answer's look ahead (its run's cursor, and the claim of the next step when it is
ready) is kept for the end of the batch (:func:`defer_look`): every run's cursor is then read
in one statement and each ready step claimed, in run id order, in the same transaction — one
read a batch instead of one a step.

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
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db import runlog, runs, shared, steps

if TYPE_CHECKING:
    from pageant.hosting import Host

log = logging.getLogger("pageant.engine")

Write = Callable[[AsyncConnection], Awaitable[Any]]


class Look(Protocol):
    """A run's look ahead (:class:`pageant.engine.dispatch.Ahead`), as the batch runs it."""

    run_id: int

    async def take(
        self, conn: AsyncConnection, found: runs.Cursor | None, *, now: datetime
    ) -> None: ...


#: The looks ahead kept for the end of the shared batch on this connection, while one runs.
_looks: ContextVar[tuple[AsyncConnection, list[tuple[Look, datetime]]] | None] = ContextVar(
    "pageant_batch_looks", default=None
)


def defer_look(conn: AsyncConnection, look: Look, *, now: datetime) -> bool:
    """Keep ``look`` for the end of the batch ``conn`` is recording; False (nothing kept)
    when ``conn`` is in no shared batch, and the caller looks at once."""
    scope = _looks.get()
    if scope is None or scope[0] is not conn:
        return False
    scope[1].append((look, now))
    return True


async def _look_ahead(conn: AsyncConnection, looks: list[tuple[Look, datetime]]) -> None:
    """Read every kept look's cursor in one statement and let each claim from it, in run id
    order (one order for every host's claims of the same rows)."""
    if not looks:
        return
    if len(looks) == 1:
        look, now = looks[0]
        await look.take(conn, await runs.read_cursor(conn, look.run_id), now=now)
        return
    looks = sorted(looks, key=lambda kept: kept[0].run_id)
    cursors = await runs.read_cursors(conn, [look.run_id for look, _ in looks])
    for look, now in looks:
        await look.take(conn, cursors.get(look.run_id), now=now)


class OutcomeBatch:
    """One host's queue of outcome writes, committed together as they arrive."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self._queue: list[tuple[Write, asyncio.Future[Any]]] = []
        self._writer: asyncio.Task[None] | None = None
        #: How many transactions and writes went through (for benchmarks and /metrics).
        self.transactions = 0
        self.writes = 0

    async def run(self, write: Write) -> Any:
        """Run ``write`` in the next shared transaction; answers what it answered once that
        transaction committed (or raises what it raised on its own)."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.append((write, future))
        # One writer, on either database: four shared transactions side by side on MariaDB
        # were measured to deadlock with each other, and ran slower than one.
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._drain(), name="pageant-outcomes")
        return await future

    async def _drain(self) -> None:
        size = self.host.settings.outcome_batch_size
        while self._queue:
            batch, self._queue = self._queue[:size], self._queue[size:]
            try:
                await self._commit(batch)
            except BaseException as exc:
                # Cancelled (the loop is closing): no waiter is left waiting for ever.
                for _, future in batch + self._queue:
                    if not future.done():
                        future.set_exception(exc)
                self._queue = []
                raise

    async def _commit(self, batch: list[tuple[Write, asyncio.Future[Any]]]) -> None:
        answers: list[Any] = []
        try:
            async with self.host.db.begin() as conn:
                with shared.shared(conn):
                    looks: list[tuple[Look, datetime]] = []
                    token = _looks.set((conn, looks))
                    try:
                        for write, _ in batch:
                            answers.append(await write(conn))
                    finally:
                        _looks.reset(token)
                    # The answers' finishes before their cursors are read; every claim after.
                    await steps.flush_finishes(conn)
                    await _look_ahead(conn, looks)
                    await steps.flush_claims(conn)
                    await runlog.flush(conn)
        except Exception as exc:
            if len(batch) == 1 and not isinstance(exc, steps.Shortfall):
                if not batch[0][1].done():
                    batch[0][1].set_exception(exc)
                return
            log.debug("a batch of %d outcome writes failed; each runs alone", len(batch))
            for write, future in batch:
                await self._alone(write, future)
            return
        self.transactions += 1
        self.writes += len(batch)
        for (_, future), answer in zip(batch, answers, strict=True):
            if not future.done():
                future.set_result(answer)

    async def _alone(self, write: Write, future: asyncio.Future[Any]) -> None:
        try:
            async with self.host.db.begin() as conn:
                answer = await write(conn)
        except Exception as exc:
            if not future.done():
                future.set_exception(exc)
            return
        self.transactions += 1
        self.writes += 1
        if not future.done():
            future.set_result(answer)


async def in_outcome_transaction(host: Host, write: Write) -> Any:
    """Run ``write`` in the engine's shared outcome transaction, or in a transaction of its
    own where there is no engine to share one."""
    batch = getattr(host.engine, "outcomes", None)
    if isinstance(batch, OutcomeBatch):
        return await batch.run(write)
    async with host.db.begin() as conn:
        return await write(conn)
