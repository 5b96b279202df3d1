"""The game link's writes, committed together: a hundred agents cost a few statements a
transaction, not a few each.

Every call and sync on a host hands its write here as data (:class:`Note`, :class:`Answer`,
:class:`Queue`, :class:`Deliver`) and waits. Writes that arrive while a transaction commits
wait for the next one, which takes them all (up to :data:`BATCH`) and makes each kind in
bulk: every heartbeat in one upsert, every answer in one compare-and-set run over the lot,
every new command found and inserted in three statements, every delivery read in one
statement and marked in one more. Nothing waits for a batch to fill: a lone write is
committed at once.

A bulk compare-and-set that moved fewer rows than it named (an answer sent twice, a command
withdrawn as it was handed out) rolls the whole transaction back, and each write then runs
alone, row by row, as :mod:`pageant.db.link` says: so a write's outcome is always the one
it would have had on its own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pageant.db import link as link_rows
from pageant.db.group import WriteQueue
from pageant.hookspecs.link import NotDelivered

log = logging.getLogger("pageant.link")

#: The most writes one transaction takes.
BATCH = 500
#: The most commands one sync hands out.
TAKE_LIMIT = 100

#: Raises :class:`NotDelivered` when a server's queue is full (it writes nothing).
Refuse = Callable[[AsyncConnection, str, str, str], Awaitable[None]]


class Shortfall(Exception):
    """A bulk compare-and-set moved fewer rows than it named: each write runs alone."""


@dataclass
class Note:
    """A server synced at ``at`` (its heartbeat, for other hosts to read)."""

    server: str
    at: datetime


@dataclass
class Answer:
    """An agent's answers: each ``(command, key, said)``; answered with each one's outcome,
    ``answered``, ``late`` or None (see :func:`pageant.db.link.answer`)."""

    server: str
    answers: list[tuple[str, str, dict[str, Any]]]
    now: datetime


@dataclass
class Queue:
    """A command to queue: answered ``(id, True)`` when queued now, ``(id, False)`` when
    found queued before (and made to wait for the later deadline, or queued again after a
    withdrawal), the :class:`NotDelivered` of ``refuse`` when the queue is full, or None
    when the command is new and ``insert`` is False."""

    values: dict[str, Any]
    insert: bool
    refuse: Refuse
    #: Whether the server's queue surely has room for one more (then counts it as used).
    room: Callable[[str], bool]


@dataclass
class Deliver:
    """The commands due for ``server`` now, marked delivered: answered ``(rows, moved
    ids)``."""

    server: str
    now: datetime
    redeliver_before: datetime


Write = Note | Answer | Queue | Deliver


@dataclass
class _Kept:
    """One transaction's writes, by kind, with where each one's answer goes."""

    notes: list[tuple[Note, asyncio.Future[Any]]] = field(default_factory=list)
    answers: list[tuple[Answer, asyncio.Future[Any]]] = field(default_factory=list)
    queues: list[tuple[Queue, asyncio.Future[Any]]] = field(default_factory=list)
    delivers: list[tuple[Deliver, asyncio.Future[Any]]] = field(default_factory=list)


class LinkWrites(WriteQueue[Write]):
    """One host's queue of link writes, committed together as they arrive."""

    name = "pageant-link-writes"
    size = BATCH

    def __init__(self, db: AsyncEngine) -> None:
        super().__init__(db)

    async def _commit(self, batch: list[tuple[Write, asyncio.Future[Any]]]) -> None:
        if len(batch) == 1:
            await self._alone(*batch[0])
            return
        kept = _Kept()
        for write, future in batch:
            if isinstance(write, Note):
                kept.notes.append((write, future))
            elif isinstance(write, Answer):
                kept.answers.append((write, future))
            elif isinstance(write, Queue):
                kept.queues.append((write, future))
            else:
                kept.delivers.append((write, future))
        outcomes: list[tuple[asyncio.Future[Any], Any]] = []
        try:
            async with self.db.begin() as conn:
                outcomes += await _notes(conn, kept.notes)
                outcomes += await _answers(conn, kept.answers)
                outcomes += await _queues(conn, kept.queues)
                outcomes += await _delivers(conn, kept.delivers)
        except Exception as exc:
            if not isinstance(exc, Shortfall):
                log.debug("a batch of %d link writes failed; each runs alone", len(batch))
            for write, future in batch:
                await self._alone(write, future)
            return
        self.transactions += 1
        self.writes += len(batch)
        for future, outcome in outcomes:
            if not future.done():
                future.set_result(outcome)

    async def _one(self, conn: AsyncConnection, write: Write) -> Any:
        return await _one(conn, write)


# ── each write alone, row by row ───────────────────────────────────────────────


async def _one(conn: AsyncConnection, write: Write) -> Any:
    if isinstance(write, Note):
        await link_rows.note_sync(conn, write.server, write.at)
        return None
    if isinstance(write, Answer):
        return [
            await link_rows.answer(conn, write.server, command, key, said=said, now=write.now)
            for command, key, said in write.answers
        ]
    if isinstance(write, Queue):
        return await _queue_one(conn, write)
    due = await link_rows.due_for(
        conn,
        write.server,
        now=write.now,
        redeliver_before=write.redeliver_before,
        limit=TAKE_LIMIT,
    )
    return due, await link_rows.mark_delivered(conn, [row.id for row in due], now=write.now)


async def _queue_one(conn: AsyncConnection, write: Queue) -> Any:
    values = write.values
    server, command, key = values["server"], values["command"], values["key"]
    row = await link_rows.find(conn, server, command, key)
    if row is not None:
        await _again(conn, row, values)
        return int(row.id), False
    try:
        await write.refuse(conn, server, command, key)
    except NotDelivered as refused:
        return refused
    if not write.insert:
        return None
    command_id = await link_rows.insert_command(conn, values)
    if command_id is None:  # queued under the same key by another host just now
        row = await link_rows.find(conn, server, command, key)
        assert row is not None
        return int(row.id), False
    return command_id, True


async def _again(conn: AsyncConnection, row: Row, values: dict[str, Any]) -> None:
    """The same command and key queued again (a retry of the step): a withdrawn one is
    queued again, a waiting one waits until the later deadline."""
    if row.status == "withdrawn":
        await link_rows.requeue(
            conn, row.id, deadline=values["deadline"], payload=values["payload"]
        )
    elif row.status in ("queued", "delivered"):
        await link_rows.extend(conn, row.id, deadline=values["deadline"])


# ── each kind in bulk ───────────────────────────────────────────────────────────

Outcomes = list[tuple[asyncio.Future[Any], Any]]


async def _notes(conn: AsyncConnection, kept: list[tuple[Note, asyncio.Future[Any]]]) -> Outcomes:
    if not kept:
        return []
    latest: dict[str, datetime] = {}
    for note, _ in kept:
        latest[note.server] = max(note.at, latest.get(note.server, note.at))
    await link_rows.note_syncs(conn, latest)
    return [(future, None) for _, future in kept]


async def _answers(
    conn: AsyncConnection, kept: list[tuple[Answer, asyncio.Future[Any]]]
) -> Outcomes:
    named = [
        (write.server, command, key, said, write.now)
        for write, _ in kept
        for command, key, said in write.answers
    ]
    if not named:
        return [(future, []) for _, future in kept]
    if await link_rows.answer_all(conn, named) != len(named):
        raise Shortfall("an answer was late, sent twice, or for no command")
    return [(future, ["answered"] * len(write.answers)) for write, future in kept]


async def _queues(conn: AsyncConnection, kept: list[tuple[Queue, asyncio.Future[Any]]]) -> Outcomes:
    """New commands, each with room in its server's queue by this host's count: inserted in
    one statement and read back in one more. A retry of a command queued before, or a
    server whose queue may be full, makes each write run alone (which finds, extends or
    refuses it)."""
    if not kept:
        return []
    names = [(w.values["server"], w.values["command"], w.values["key"]) for w, _ in kept]
    if len(set(names)) != len(names):
        raise Shortfall("one command queued twice in a batch")
    if not all(write.insert and write.room(write.values["server"]) for write, _ in kept):
        raise Shortfall("a queue may be full")
    if await link_rows.insert_commands(conn, [write.values for write, _ in kept]) != len(kept):
        raise Shortfall("a command was queued before")
    made = await link_rows.find_all(conn, names)
    return [
        (future, (int(made[name].id), True)) for (_, future), name in zip(kept, names, strict=True)
    ]


async def _delivers(
    conn: AsyncConnection, kept: list[tuple[Deliver, asyncio.Future[Any]]]
) -> Outcomes:
    if not kept:
        return []
    if len({write.server for write, _ in kept}) != len(kept):
        raise Shortfall("two syncs of one server in a batch")
    now = max(write.now for write, _ in kept)
    redeliver_before = max(write.redeliver_before for write, _ in kept)
    due = await link_rows.due_among(
        conn, [write.server for write, _ in kept], now=now, redeliver_before=redeliver_before
    )
    by_server: dict[str, list[Row]] = {}
    for row in due:
        rows = by_server.setdefault(row.server, [])
        if len(rows) < TAKE_LIMIT:
            rows.append(row)
    ids = [row.id for rows in by_server.values() for row in rows]
    if ids and await link_rows.mark_all_delivered(conn, ids, now=now) != len(ids):
        raise Shortfall("a command was withdrawn or answered as it was handed out")
    return [
        (
            future,
            (by_server.get(write.server, []), {row.id for row in by_server.get(write.server, [])}),
        )
        for write, future in kept
    ]
