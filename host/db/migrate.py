"""Alembic, driven from code: upgrade to head, and report where a database stands."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

MIGRATIONS = Path(__file__).with_name("migrations")


class _NamedKeyNote(logging.Filter):
    """MariaDB notes that it ignores the name the schema gives a primary key (``pk_...``),
    and asyncmy logs every server note at WARNING: nothing for an operator to act on."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().endswith("ignored for PRIMARY key.")


logging.getLogger("asyncmy").addFilter(_NamedKeyNote())


def alembic_config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


# The migrations ship inside the package and cannot change while it runs: each is read (and
# compiled) once a process, not on every /healthz (about 10 ms each time).
@functools.cache
def head_revision() -> str | None:
    """The newest revision this pageant's migrations know."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


@functools.cache
def known_revisions() -> frozenset[str]:
    """Every revision this pageant's migrations know."""
    return frozenset(
        script.revision for script in ScriptDirectory.from_config(alembic_config()).walk_revisions()
    )


@dataclass(frozen=True)
class SchemaState:
    current: str | None
    head: str | None

    @property
    def up_to_date(self) -> bool:
        return self.current == self.head

    def as_dict(self) -> dict[str, object]:
        return {"current": self.current, "head": self.head, "up_to_date": self.up_to_date}


async def upgrade(engine: AsyncEngine, revision: str = "head") -> SchemaState:
    """Apply every migration up to ``revision``; a no-op on a database already there."""

    def _upgrade(connection: Connection) -> None:
        command.upgrade(alembic_config(connection), revision)

    async with engine.begin() as conn:
        await conn.run_sync(_upgrade)
    return await schema_state(engine)


async def schema_state(engine: AsyncEngine) -> SchemaState:
    def _current(connection: Connection) -> str | None:
        return MigrationContext.configure(connection).get_current_revision()

    async with engine.connect() as conn:
        current = await conn.run_sync(_current)
        await conn.rollback()
    return SchemaState(current=current, head=head_revision())


async def stamp(engine: AsyncEngine, revision: str = "head") -> SchemaState:
    """Record ``revision`` as the schema's without running any migration (for tables made
    by hand or restored without their ``alembic_version``)."""

    def _stamp(connection: Connection) -> None:
        command.stamp(alembic_config(connection), revision)

    async with engine.begin() as conn:
        await conn.run_sync(_stamp)
    return await schema_state(engine)


async def tables_of_pageant(engine: AsyncEngine) -> list[str]:
    """Which of pageant's tables the database holds, sorted (to tell an empty database from
    one whose schema lost its ``alembic_version``)."""
    from pageant.db.tables import ALL_TABLES

    def _names(connection: Connection) -> list[str]:
        return list(inspect(connection).get_table_names())

    async with engine.connect() as conn:
        names = set(await conn.run_sync(_names))
        await conn.rollback()
    return sorted(table.name for table in ALL_TABLES if table.name in names)
