"""The async database engine for both dialects, configured for how pageant writes."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import time
import weakref
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from sqlalchemy import event, exc, select
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.sql.compiler import SQLCompiler

from pageant.db import sqlite_driver
from pageant.support import jsoncodec

SQLITE_BUSY_TIMEOUT_MS = 10_000

#: The longest a MariaDB connection may take to be made, and (with asyncmy) a statement's
#: answer to begin arriving. Without them a server that accepts and never answers (a
#: black-holed network) holds every caller for as long as the outage lasts; with them they
#: meet an error that says the database is out of reach. A statement's bound is above
#: MariaDB's own lock wait (50 s by default), so a lock wait still answers as itself.
MARIADB_CONNECT_SECONDS = 10.0
MARIADB_STATEMENT_SECONDS = 60.0

#: A MariaDB connection back from the pool after resting this long is pinged before use (a
#: server restart or its ``wait_timeout`` may have closed it meanwhile); one handed straight
#: on under load is not, so a busy host pays no round trip a checkout for the check.
PING_AFTER_IDLE_SECONDS = 5.0

#: The execution option that marks a SQLite connection's transaction as a writer's.
_WRITER = "pageant_writer"


class _WriterLock:
    """One writer at a time per SQLite file inside one event loop.

    Waiters queue on an asyncio lock and are woken the moment the writer before them
    commits, instead of SQLite's busy handler sleeping and polling. Not re-entrant by
    design: a task that opens a second write transaction inside its first goes straight to
    the database (whose busy timeout then answers, exactly as without the lock), and a
    waiter that waited the whole busy timeout does too, so a writer outside this process
    (or a holder that never lets go) meets the database's own lock and its error.
    """

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.holder: asyncio.Task[Any] | None = None

    @contextlib.asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        task = asyncio.current_task()
        if task is not None and self.holder is task:
            yield  # nested in this task's own write: the database decides, as before
            return
        try:
            # asyncio.timeout, not wait_for: on Python 3.11, wait_for swallows a cancellation
            # that arrives as the lock is handed over, and the cancelled task runs on.
            async with asyncio.timeout(SQLITE_BUSY_TIMEOUT_MS / 1000):
                await self.lock.acquire()
        except TimeoutError:
            yield  # the busy timeout passed: the database's lock answers instead
            return
        self.holder = task
        try:
            yield
        finally:
            self.holder = None
            self.lock.release()


#: (event loop, database file) -> its writer lock; an ended loop drops its locks.
_LOCKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, _WriterLock]] = (
    weakref.WeakKeyDictionary()
)


def _writer_lock(database: str) -> _WriterLock:
    per_loop = _LOCKS.setdefault(asyncio.get_running_loop(), {})
    lock = per_loop.get(database)
    if lock is None:
        lock = per_loop[database] = _WriterLock()
    return lock


class SQLiteEngine(AsyncEngine):
    """An :class:`AsyncEngine` for SQLite whose ``begin()`` is the only way to write.

    ``begin()`` takes the file's in-process writer lock, then ``BEGIN IMMEDIATE``; a
    ``connect()`` (a read) begins a deferred transaction, so readers never take the write
    lock nor wait for it (WAL gives them their snapshot).
    """

    __slots__ = ()

    @classmethod
    def _regenerate_proxy_for_target(cls, target: Engine, **additional_kw: Any) -> SQLiteEngine:
        return cls(target)

    @contextlib.asynccontextmanager
    async def begin(self) -> AsyncIterator[AsyncConnection]:
        database = self.sync_engine.url.database or ":memory:"
        async with _writer_lock(database).held():
            conn = self.connect()
            async with conn:
                await conn.execution_options(**{_WRITER: True})
                async with conn.begin():
                    yield conn


def commit_with_next(conn: AsyncConnection) -> None:
    """Commit ``conn``'s transaction with its next statement, which must be its last, in
    that statement's turn of SQLite's driver thread
    (:meth:`pageant.db.sqlite_driver.Connection.commit_with_next`); elsewhere nothing
    changes. The transaction is committed when its block ends, as always; nothing may be
    written after that statement."""
    driver = _sqlite_driver(conn)
    if driver is not None:
        driver.commit_with_next()


def defer_with_next(conn: AsyncConnection, rowcount: int | None = None) -> None:
    """Run ``conn``'s next statement, a write whose answer nobody reads, in the turn of the
    statement after it on SQLite's driver thread
    (:meth:`pageant.db.sqlite_driver.Connection.defer_next`): its caller is answered at
    once with ``rowcount``, the rows it must change (None: any), and that turn raises,
    before anything commits, when it changed another number. Elsewhere it runs at once,
    as always, and the caller checks its rowcount itself."""
    driver = _sqlite_driver(conn)
    if driver is not None:
        driver.defer_next(rowcount)


def _sqlite_driver(conn: AsyncConnection) -> sqlite_driver.Connection | None:
    driver = conn.sync_connection.connection.driver_connection if conn.sync_connection else None
    return driver if isinstance(driver, sqlite_driver.Connection) else None


def is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def sqlite_file(url: str) -> str | None:
    """The file a SQLite URL names (None for another server, memory or a ``file:`` URI)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database:
        return None
    if parsed.database == ":memory:" or parsed.database.startswith("file:"):
        return None
    return parsed.database


def shown_url(url: str) -> str:
    """``url`` as it may be printed: any password masked, and a SQLite file named by a
    relative path shown at its absolute one (the folder the command runs in decides which
    file a relative URL opens)."""
    parsed = make_url(url)
    path = sqlite_file(url)
    if path is not None and not Path(path).expanduser().is_absolute():
        parsed = parsed.set(database=str(Path(path).expanduser().absolute()))
    return parsed.render_as_string(hide_password=True)


def is_relative_sqlite(url: str) -> bool:
    """Whether ``url`` names a SQLite file by a path relative to the current folder."""
    path = sqlite_file(url)
    return path is not None and not Path(path).expanduser().is_absolute()


#: The connections a pool keeps open (the ``database_pool_size`` setting's default): enough
#: for the engine's run tasks, its group commit, the console's reads and the API's requests
#: at once. SQLAlchemy's default of 5 made a burst of 200 starts open (and close) a new
#: connection for one checkout in five.
POOL_SIZE = 20
#: The connections a pool opens beyond ``pool_size`` under a burst, each closed on return.
MAX_OVERFLOW = 10


def create_engine(
    url: str, *, statement_seconds: float | None = MARIADB_STATEMENT_SECONDS, **kwargs: Any
) -> AsyncEngine:
    """Create the engine for ``url`` (``sqlite+aiosqlite``, or ``mysql+asyncmy`` — the MariaDB
    driver to name — or ``mysql+aiomysql``).

    SQLite (:class:`SQLiteEngine`): WAL with a busy timeout; a write transaction
    (``begin()``) waits for the file's in-process writer lock and begins ``IMMEDIATE`` (a
    deferred transaction that upgrades to a write answers "database is locked" when
    another writer got there first); a read (``connect()``) begins deferred and takes no
    lock at all. Its connections are :class:`pageant.db.sqlite_driver.Connection`: one turn of
    the driver's thread a statement.

    MariaDB: READ COMMITTED (a compare-and-set must see the latest committed row, and gap
    locks of REPEATABLE READ serialise claims for nothing), no rollback-on-return (every
    caller commits or rolls back itself, and the extra round trip costs ~13%), and a ping
    only for a connection that rested in the pool (:func:`ping_when_rested`). A connection
    is given up after :data:`MARIADB_CONNECT_SECONDS`, and (asyncmy) a statement after
    ``statement_seconds`` (None: never; a migration's ``ALTER TABLE`` may take long).
    """
    # JSON columns are read through orjson (pageant.support.jsoncodec): the same values, faster.
    kwargs.setdefault("json_deserializer", jsoncodec.loads)
    if "poolclass" not in kwargs and make_url(url).database not in (None, "", ":memory:"):
        # Connections kept open between uses; up to MAX_OVERFLOW more are opened under a
        # burst and closed on return (on SQLite a thread each, on MariaDB a login each). An
        # in-memory SQLite database has one connection, in a pool of its own kind.
        kwargs.setdefault("pool_size", POOL_SIZE)
        kwargs.setdefault("max_overflow", MAX_OVERFLOW)
    if is_sqlite(url):
        # Closing a connection rolls back whatever it began: the pool's own rollback on
        # return would be a second round trip for nothing.
        kwargs.setdefault("pool_reset_on_return", None)
        # One turn of the driver's thread a statement instead of four (sqlite_driver).
        kwargs.setdefault("async_creator", sqlite_driver.connector(make_url(url)))
        engine = SQLiteEngine(create_async_engine(url, **kwargs).sync_engine)
        dialect = engine.sync_engine.dialect
        dialect.statement_compiler = _hinted(dialect.statement_compiler)

        @event.listens_for(engine.sync_engine, "connect")
        def _on_connect(dbapi_connection: Any, _record: Any) -> None:
            # Take transaction control from the driver so BEGIN IMMEDIATE below is ours.
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

        @event.listens_for(engine.sync_engine, "begin")
        def _on_begin(connection: Any) -> None:
            writer = connection.get_execution_options().get(_WRITER, False)
            begin = "BEGIN IMMEDIATE" if writer else "BEGIN"
            driver = connection.connection.driver_connection
            if isinstance(driver, sqlite_driver.Connection):
                driver.begin_with_next(begin)  # with the first statement, in its turn
            else:
                connection.exec_driver_sql(begin)

        return engine

    kwargs.setdefault("isolation_level", "READ COMMITTED")
    kwargs.setdefault("pool_reset_on_return", None)
    kwargs.setdefault("pool_recycle", 3600)
    kwargs.setdefault(
        "async_creator", bounded_connector(url, MARIADB_CONNECT_SECONDS, statement_seconds)
    )
    server = create_async_engine(url, **kwargs)
    if not kwargs.get("pool_pre_ping"):
        ping_when_rested(server)
    return server


def _hinted(compiler: type[SQLCompiler]) -> type[SQLCompiler]:
    """SQLite's statement compiler, writing a table's hint for ``sqlite``
    (``with_hint(table, "INDEXED BY ix", dialect_name="sqlite")``) after its name, as
    MariaDB's writes ``FORCE INDEX``: SQLAlchemy's own drops it."""

    class Hinted(compiler):  # type: ignore[valid-type,misc]  # a subclass of the dialect's own compiler
        def get_from_hint_text(self, table: Any, text: str | None) -> str | None:
            return text

    return Hinted


def bounded_connector(url: str, seconds: float, statement_seconds: float | None) -> Any:
    """A MariaDB driver's ``connect`` for ``url``, given up after ``seconds`` (the drivers'
    own connect timeout covers the socket, not the server's greeting); asyncmy's statements
    are bounded by ``statement_seconds`` (its ``read_timeout``)."""
    parsed = make_url(url)
    cargs, cparams = parsed.get_dialect()().create_connect_args(parsed)
    driver = parsed.get_driver_name()
    if driver == "asyncmy":
        module = importlib.import_module("asyncmy")
        driver_error = importlib.import_module("asyncmy.errors").OperationalError
        if statement_seconds is not None:
            cparams.setdefault("read_timeout", statement_seconds)
    else:
        module = importlib.import_module("aiomysql")
        driver_error = importlib.import_module("pymysql.err").OperationalError

    async def connect() -> Any:
        try:
            async with asyncio.timeout(seconds):
                return await module.connect(*cargs, **cparams)
        except TimeoutError as exc:
            # The driver's own "cannot connect" (2003), so it reaches callers as every
            # other failure to connect does.
            raise driver_error(2003, f"no answer from the server within {seconds:g} s") from exc

    return connect


async def answers(engine: AsyncEngine) -> None:
    """Ask the database one trivial question; raises what meeting it raised."""
    async with engine.connect() as conn:
        await conn.execute(select(1))
        await conn.rollback()


def ping_when_rested(engine: AsyncEngine, rest_seconds: float = PING_AFTER_IDLE_SECONDS) -> None:
    """Ping a pooled connection on checkout only when it rested ``rest_seconds`` or more.

    SQLAlchemy's ``pool_pre_ping`` pings on every checkout: a round trip for each
    transaction a busy host opens. This pings only a connection that has lain in the pool a
    while; one that does not answer is thrown away and the pool connects anew (a server
    that is down then answers with its own error).
    """
    pool = engine.sync_engine.pool
    dialect = engine.sync_engine.dialect

    @event.listens_for(pool, "checkin")
    def _rested_from(_dbapi_connection: Any, record: Any) -> None:
        record.info["pageant_checked_in"] = time.monotonic()

    @event.listens_for(pool, "checkout")
    def _ping_if_rested(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        since = record.info.get("pageant_checked_in")
        if since is None or time.monotonic() - since < rest_seconds:
            return  # new, or handed straight on: it answered moments ago
        try:
            dialect.do_ping(dbapi_connection)
        except Exception as err:
            raise exc.DisconnectionError(f"a rested connection did not answer: {err}") from err
