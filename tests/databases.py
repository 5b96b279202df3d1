"""Throwaway EMPTY databases (the ``db`` fixture's are already migrated).

For the tests that watch a migration happen, or a command refuse an unmigrated database:
a fresh SQLite file, or a fresh database on the MariaDB server named by
``PAGEANT_TEST_MYSQL_URL``, dropped afterwards.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from pageant.db.engine import create_engine
from tests.conftest import MYSQL_ENV

#: A test about MariaDB alone: its ``db`` fixture (and the rest) on MariaDB only. Without
#: the server it cannot run; CI always sets the variable.
MARIADB_ONLY = pytest.mark.parametrize(
    "dialect",
    [
        pytest.param(
            "mariadb",
            marks=pytest.mark.skipif(
                not os.environ.get(MYSQL_ENV), reason=f"needs MariaDB ({MYSQL_ENV}); CI sets it"
            ),
        )
    ],
    indirect=True,
)


async def _admin(statement: str) -> None:
    server = make_url(os.environ[MYSQL_ENV]).render_as_string(hide_password=False)
    engine = create_engine(server)
    try:
        async with engine.begin() as conn:
            await conn.execute(text(statement))
    finally:
        await engine.dispose()


@contextmanager
def empty_database(dialect: str, tmp_path: Path) -> Iterator[str]:
    """The URL of a database with nothing in it on ``dialect``. Call it outside an event loop."""
    if dialect == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / f'empty-{secrets.token_hex(3)}.db'}"
        return
    server = make_url(os.environ[MYSQL_ENV])
    name = f"{server.database or 'pageant'}_e{os.getpid()}_{secrets.token_hex(3)}"
    asyncio.run(_admin(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"))
    try:
        yield server.set(database=name).render_as_string(hide_password=False)
    finally:
        asyncio.run(_admin(f"DROP DATABASE IF EXISTS `{name}`"))
