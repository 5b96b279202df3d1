"""The portable idempotent insert: a row that already exists under a unique key is kept.

Both dialects' forms are used for the one reason DESIGN §3 gives: they do nothing on a
duplicate key and still raise on every other error. ``INSERT IGNORE`` is never used on
MariaDB because it also turns NOT NULL, foreign-key and truncation errors into warnings; a
read-then-write is never used because two writers can both read "absent".
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Column, Table
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.engine import CursorResult, Dialect
from sqlalchemy.sql.dml import Insert


def insert_keeping_existing(table: Table, key: Sequence[Column], dialect: Dialect) -> Insert:
    """An INSERT into ``table`` that leaves an existing row under ``key`` untouched.

    MariaDB: ``ON DUPLICATE KEY UPDATE id = id`` (the assignment changes nothing). SQLite:
    ``ON CONFLICT (key) DO NOTHING``, naming the key so any *other* uniqueness still raises.
    """
    if dialect.name in ("mysql", "mariadb"):
        return mysql.insert(table).on_duplicate_key_update(id=table.c.id)
    return sqlite.insert(table).on_conflict_do_nothing(index_elements=list(key))


def inserted_id(result: CursorResult, dialect: Dialect) -> int | None:
    """The new row's id, or None when the key already existed.

    The two servers tell it differently. MariaDB reports *matched* rows through SQLAlchemy
    (rowcount is 1 for a duplicate as well) but answers ``lastrowid`` 0 when nothing was
    inserted; SQLite's rowcount is 0 for an ignored row, and its ``lastrowid`` is then stale.
    """
    if dialect.name in ("mysql", "mariadb"):
        return result.lastrowid or None
    return result.lastrowid if result.rowcount == 1 else None
