"""Throwaway databases for the benchmarks: a migrated SQLite file, or a MariaDB database
created beside the one a server URL names and dropped afterwards."""

from __future__ import annotations

import secrets
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from pageant.db.engine import create_engine
from pageant.db.migrate import upgrade


@asynccontextmanager
async def scratch_database(mysql_url: str | None) -> AsyncIterator[AsyncEngine]:
    """A migrated, empty database: SQLite when ``mysql_url`` is None, else MariaDB."""
    if mysql_url is None:
        with tempfile.TemporaryDirectory() as folder:
            engine = create_engine(f"sqlite+aiosqlite:///{Path(folder) / 'bench.db'}")
            try:
                await upgrade(engine)
                yield engine
            finally:
                await engine.dispose()
        return
    server = make_url(mysql_url)
    name = f"pageant_bench_{secrets.token_hex(4)}"
    admin = create_engine(server.render_as_string(hide_password=False))
    try:
        async with admin.begin() as conn:
            await conn.execute(
                text(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
            )
        engine = create_engine(server.set(database=name).render_as_string(hide_password=False))
        try:
            await upgrade(engine)
            yield engine
        finally:
            await engine.dispose()
            async with admin.begin() as conn:
                await conn.execute(text(f"DROP DATABASE IF EXISTS `{name}`"))
    finally:
        await admin.dispose()
