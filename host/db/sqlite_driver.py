"""aiosqlite with one turn of its thread per statement.

aiosqlite runs each sqlite3 call on the connection's own thread, and SQLAlchemy's adapter
makes four such calls for one statement: make a cursor, execute, fetch the rows, close the
cursor. Every call is a hand-off to the thread and back to the event loop (a queue, a
wake-up, a write to the loop's self-pipe), and on a busy engine those hand-offs cost more
CPU than SQLite itself: measured at ~350 µs a statement, against ~150 µs in one turn.

:class:`Connection` is aiosqlite's own connection, whose cursors do their whole statement in
one turn of the thread: execute, fetch every row, note ``description``, ``rowcount`` and
``lastrowid``, close. SQLAlchemy's adapter fetched every row at once already (pageant never
streams), so nothing it sees changes but the number of turns. A transaction's ``BEGIN``
runs in its first statement's turn, and a commit asked for with the last statement
(:meth:`Connection.commit_with_next`) in that statement's turn. Everything else — the
thread, the queue, commit, rollback, close, errors — is aiosqlite's.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import aiosqlite
from sqlalchemy.engine import URL

#: What one turn answers: description, rowcount, lastrowid, rows.
_Answer = tuple[Any, int, int | None, list[Any]]


def _run(
    conn: sqlite3.Connection,
    begin: str | None,
    commit: bool,
    many: bool,
    sql: str,
    parameters: Any,
) -> _Answer:
    cursor = conn.cursor()
    try:
        if begin is not None:
            cursor.execute(begin)
        if many:
            cursor.executemany(sql, parameters)
        else:
            cursor.execute(sql, parameters)
        rows = cursor.fetchall() if cursor.description else []
        if commit:
            conn.commit()
        return cursor.description, cursor.rowcount, cursor.lastrowid, rows
    finally:
        cursor.close()


class Cursor:
    """The part of aiosqlite's cursor SQLAlchemy uses, a statement a turn (rows prefetched)."""

    arraysize = 1

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self.description: Any = None
        self.rowcount = -1
        self.lastrowid: int | None = None
        self._rows: list[Any] = []

    async def __aenter__(self) -> Cursor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._rows = []

    async def execute(self, sql: str, parameters: Any = None) -> Cursor:
        return await self._turn(False, sql, () if parameters is None else parameters)

    async def executemany(self, sql: str, parameters: Iterable[Any]) -> Cursor:
        return await self._turn(True, sql, parameters)

    async def _turn(self, many: bool, sql: str, parameters: Any) -> Cursor:
        conn = self._connection
        # Taken before the turn: a statement that fails may have run its BEGIN, so the
        # rollback after it takes its turn as any other.
        begin, conn.begin_pending = conn.begin_pending, None
        commit, conn.commit_pending = conn.commit_pending, False
        answer = await conn._execute(_run, conn._conn, begin, commit, many, sql, parameters)
        conn.committed = commit
        self.description, self.rowcount, self.lastrowid, self._rows = answer
        return self

    async def fetchall(self) -> list[Any]:
        rows, self._rows = self._rows, []
        return rows

    async def fetchone(self) -> Any:
        return self._rows.pop(0) if self._rows else None

    async def fetchmany(self, size: int | None = None) -> Sequence[Any]:
        size = size or self.arraysize
        rows, self._rows = self._rows[:size], self._rows[size:]
        return rows

    async def close(self) -> None:
        self._rows = []


class Connection(aiosqlite.Connection):
    """aiosqlite's connection, whose cursors take one turn of its thread a statement.

    :meth:`begin_with_next` begins a transaction with the next statement, in its turn. A
    ``BEGIN`` (deferred) takes no lock and reads nothing, and a ``BEGIN IMMEDIATE`` takes
    the file's write lock and reads nothing either: nothing runs on the connection between
    the BEGIN and the statement after it, so running them in one turn is the same
    transaction, one turn cheaper (the lock is taken, or waited for, before the statement
    runs, exactly as before). A transaction that ends before any statement ran ends
    without a turn at all: it read and wrote nothing.
    """

    #: The ``BEGIN`` waiting for the next statement's turn, if any.
    begin_pending: str | None = None
    #: Whether the next statement's turn commits after it (:meth:`commit_with_next`).
    commit_pending = False
    #: Whether the transaction was committed in its last statement's turn.
    committed = False

    def cursor(self) -> Cursor:  # type: ignore[override]  # a synchronous cursor, where aiosqlite's is a coroutine
        return Cursor(self)

    def begin_with_next(self, begin: str = "BEGIN") -> None:
        """Run ``begin`` (``BEGIN`` or ``BEGIN IMMEDIATE``) in the next statement's turn."""
        self.begin_pending = begin

    def commit_with_next(self) -> None:
        """Commit in the next statement's turn, just after it: for a transaction's last
        statement, one turn cheaper. The statement's error, if any, comes before the commit
        (nothing is committed, and the rollback after it runs as any other); once it ran,
        the transaction's commit (or a rollback) is its end, without a turn of its own."""
        self.commit_pending = True

    async def commit(self) -> None:
        if self._ended_without_a_turn():
            return
        await super().commit()

    async def rollback(self) -> None:
        if self._ended_without_a_turn():
            return
        await super().rollback()

    def _ended_without_a_turn(self) -> bool:
        """Whether a transaction ends with nothing to end: its BEGIN never ran, or its last
        statement's turn committed it."""
        pending, self.begin_pending = self.begin_pending, None
        committed, self.committed = self.committed, False
        self.commit_pending = False
        return pending is not None or committed


def connector(url: URL) -> Callable[[], Connection]:
    """The ``async_creator`` for ``url`` (a ``sqlite+aiosqlite`` URL): the file and options
    SQLAlchemy's own dialect would open, on a :class:`Connection`."""
    args, options = url.get_dialect()().create_connect_args(url)
    database = args[0]

    def connect() -> Connection:
        conn = Connection(lambda: sqlite3.connect(database, **options), 64)
        # As SQLAlchemy does for aiosqlite's own: the thread never holds the process open.
        conn._thread.daemon = True
        return conn

    return connect
