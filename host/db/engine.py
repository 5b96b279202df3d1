"""The async database engine for both dialects, configured for how pageant writes."""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

SQLITE_BUSY_TIMEOUT_MS = 10_000


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
    """``url`` as it may be printed: any password masked."""
    return make_url(url).render_as_string(hide_password=True)


def create_engine(url: str, **kwargs: Any) -> AsyncEngine:
    """Create the engine for ``url`` (``sqlite+aiosqlite`` or ``mysql+aiomysql``).

    SQLite: WAL with a busy timeout, and every transaction begins ``IMMEDIATE``: an API
    writing beside the engine otherwise answers "database is locked" when a deferred
    read transaction tries to upgrade to a write.

    MariaDB: READ COMMITTED (a compare-and-set must see the latest committed row, and gap
    locks of REPEATABLE READ serialise claims for nothing), and no rollback-on-return: every
    caller commits or rolls back itself, and the extra round trip costs ~13%.
    """
    if is_sqlite(url):
        engine = create_async_engine(url, **kwargs)

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
            connection.exec_driver_sql("BEGIN IMMEDIATE")

        return engine

    kwargs.setdefault("isolation_level", "READ COMMITTED")
    kwargs.setdefault("pool_reset_on_return", None)
    kwargs.setdefault("pool_pre_ping", True)
    kwargs.setdefault("pool_recycle", 3600)
    return create_async_engine(url, **kwargs)
