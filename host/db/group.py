"""Group commit's queue: writes handed in by many tasks, taken in turns by one writer.

A task hands its write to :meth:`WriteQueue.run` and waits. Writes that arrive while a
transaction is committing wait for the next one, which takes up to :attr:`WriteQueue.size`
of them in arrival order: the subclass's :meth:`WriteQueue._commit` makes them in one
transaction and answers each one's future. Nothing waits for a batch to fill: a lone write
is committed at once. One writer at a time, on either database: shared transactions side by
side on MariaDB were measured to deadlock with each other, and ran slower than one.

The engine's step outcomes (:class:`pageant.engine.batch.OutcomeBatch`) and the game link's
writes (:class:`pageant.link.writes.LinkWrites`) are its two queues.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

W = TypeVar("W")


class WriteQueue(Generic[W]):
    """One queue of writes of kind ``W``, committed together as they arrive."""

    #: The name of the writer's task.
    name = "pageant-writes"

    def __init__(self, db: AsyncEngine) -> None:
        self.db = db
        self._queue: list[tuple[W, asyncio.Future[Any]]] = []
        self._writer: asyncio.Task[None] | None = None
        #: How many transactions and writes went through (for benchmarks and /metrics).
        self.transactions = 0
        self.writes = 0

    @property
    def size(self) -> int:
        """The most writes one transaction takes."""
        raise NotImplementedError

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
        here itself (:class:`pageant.engine.batch.OutcomeBatch`): one frame less between
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
