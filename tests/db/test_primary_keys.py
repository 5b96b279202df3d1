"""Every table the migrations make has a primary key.

Galera replicates a row by its key: a table without one is refused outright by a cluster run
with ``wsrep_mode=REQUIRED_PRIMARY_KEY`` (what docs/operators.md asks), and without that
setting its DELETEs replicate badly. So a new table without a primary key fails here first.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import inspect

from pageant.db.engine import create_engine


async def test_every_migrated_table_has_a_primary_key(db_url: str) -> None:
    engine = create_engine(db_url)
    try:
        async with engine.connect() as conn:

            def keys(sync_conn: Any) -> dict[str, list[str]]:
                seen = inspect(sync_conn)
                return {
                    name: seen.get_pk_constraint(name)["constrained_columns"]
                    for name in seen.get_table_names()
                }

            found = await conn.run_sync(keys)
    finally:
        await engine.dispose()
    assert "alembic_version" in found and "event_runs" in found, sorted(found)
    assert [name for name, columns in found.items() if not columns] == []
