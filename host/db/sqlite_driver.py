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
runs in its first statement's turn, a commit asked for with the last statement
(:meth:`Connection.commit_with_next`) in that statement's turn, and a write whose answer
nobody reads (:meth:`Connection.defer_next`) in the next statement's turn, before it.
Everything else — the thread, the queue, commit, rollback, close, errors — is aiosqlite's.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import aiosqlite
from sqlalchemy.engine import URL

#: What one turn answers: description, rowcount, lastrowid, rows.
_Answer = tuple[Any, int, int | None, list[Any]]


#: A deferred write that may change any number of rows, answered as DB-API's "unknown".
_ANY_ROWS = -1


class DeferredCountMismatch(sqlite3.DatabaseError):
    """A deferred write (:meth:`Connection.defer_next`) changed another number of rows than
    its caller was promised: raised in the turn that ran it, before anything commits."""


@dataclass(frozen=True)
class _Deferred:
    """A write kept for the next statement's turn, and the rows it must change (None: any)."""

    many: bool
    sql: str
    parameters: Any
    rowcount: int | None


def _run(
    conn: sqlite3.Connection,
    begin: str | None,
    deferred: Sequence[_Deferred],
    commit: bool,
    many: bool,
    sql: str | None,
    parameters: Any,
) -> _Answer:
    cursor = conn.cursor()
    try:
        if begin is not None:
            cursor.execute(begin)
        for write in deferred:
            if write.many:
                cursor.executemany(write.sql, write.parameters)
            else:
                cursor.execute(write.sql, write.parameters)
            if write.rowcount is not None and cursor.rowcount != write.rowcount:
                raise DeferredCountMismatch(
                    f"a deferred write changed {cursor.rowcount} rows, not {write.rowcount}: "
                    f"{write.sql}"
                )
        if sql is None:  # a commit with only the deferred writes before it
            conn.commit()
            return None, -1, None, []
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
        if conn.defer_pending is not None:
            # Kept for the next statement's turn; the caller reads no answer but the rows
            # it promised to change, and the turn that runs it holds it to them.
            rowcount, conn.defer_pending = conn.defer_pending, None
            held = None if rowcount == _ANY_ROWS else rowcount
            conn.deferred.append(_Deferred(many, sql, parameters, held))
            self.description, self.rowcount, self.lastrowid, self._rows = None, rowcount, None, []
            return self
        # Taken before the turn: a statement that fails may have run its BEGIN, so the
        # rollback after it takes its turn as any other.
        begin, conn.begin_pending = conn.begin_pending, None
        deferred, conn.deferred = conn.deferred, []
        commit, conn.commit_pending = conn.commit_pending, False
        answer = await conn._execute(
            _run, conn._conn, begin, deferred, commit, many, sql, parameters
        )
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
    #: The rows the next statement must change, when it is to be deferred
    #: (:meth:`defer_next`; :data:`_ANY_ROWS`: any number).
    defer_pending: int | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: The writes deferred to the next statement's turn, in the order they were made.
        self.deferred: list[_Deferred] = []

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

    def defer_next(self, rowcount: int | None = None) -> None:
        """Keep the next statement, a write whose answer nobody reads, for the turn of the
        statement after it (or of the commit), where it runs first: one turn cheaper. Its
        caller is answered at once, with ``rowcount`` the rows it must change (None: any,
        answered as -1); the turn that runs it raises :class:`DeferredCountMismatch`
        when it changed another number, and its error, as any other, before the next
        statement runs and before anything commits. A rollback forgets it."""
        self.defer_pending = _ANY_ROWS if rowcount is None else rowcount

    async def commit(self) -> None:
        deferred, self.deferred = self.deferred, []
        if deferred and not self.committed:
            # The deferred writes, and the commit after them, in one turn.
            begin, self.begin_pending = self.begin_pending, None
            self.commit_pending = False
            try:
                await self._execute(_run, self._conn, begin, deferred, True, False, None, ())
            except BaseException:
                # A deferred write failed before the commit: the transaction is still open,
                # and no rollback follows a failed commit, so it ends here.
                await super().rollback()
                raise
            return
        if self._ended_without_a_turn():
            return
        await super().commit()

    async def rollback(self) -> None:
        self.deferred = []
        self.defer_pending = None
        if self._ended_without_a_turn():
            return
        await super().rollback()

    def _ended_without_a_turn(self) -> bool:
        """Whether a transaction ends with nothing to end: its BEGIN never ran, or its last
        statement's turn committed it."""
        pending, self.begin_pending = self.begin_pending, None
        committed, self.committed = self.committed, False
        self.commit_pending = False
        self.defer_pending = None
        return pending is not None or committed


#: The prepared statements one connection keeps (Python's default is 128). The engine's
#: set-wise statements differ with the size of their set (an ``IN`` list, a batch's
#: ``CASE``), and a prepared statement of a large set is large: with the pool's connections
#: kept open, 128 of them each held 1.2 GB in a host that had run 10,000 starts at once.
#: The statements a step repeats stay prepared within 16; measured, no slower.
STATEMENT_CACHE = 16


def connector(url: URL) -> Callable[[], Connection]:
    """The ``async_creator`` for ``url`` (a ``sqlite+aiosqlite`` URL): the file and options
    SQLAlchemy's own dialect would open, on a :class:`Connection` that keeps
    :data:`STATEMENT_CACHE` prepared statements (unless the URL names its own)."""
    args, options = url.get_dialect()().create_connect_args(url)
    database = args[0]
    options = {"cached_statements": STATEMENT_CACHE, **options}

    def connect() -> Connection:
        conn = Connection(lambda: sqlite3.connect(database, **options), 64)
        # As SQLAlchemy does for aiosqlite's own: the thread never holds the process open.
        conn._thread.daemon = True
        return conn

    return connect
