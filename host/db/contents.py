"""What a database holds, table by table: for refusing to write into one that is not empty."""

from __future__ import annotations

from sqlalchemy import func, inspect, select
from sqlalchemy.ext.asyncio import AsyncEngine

from pageant.db.tables import ALL_TABLES

#: Alembic's own bookkeeping table: present in every database ``db upgrade`` has touched.
ALEMBIC_TABLE = "alembic_version"


async def foreign_tables_and_counts(db: AsyncEngine) -> tuple[list[str], dict[str, int]]:
    """``(foreign, counts)``: the tables pageant does not own (sorted), and - only when there
    are none - the row count of each pageant table present that holds any rows.

    A database error (unreachable, no such database) propagates as SQLAlchemy's; callers
    catch :data:`pageant.db.errors.DatabaseError`.
    """
    ours = {table.name: table for table in ALL_TABLES}
    counts: dict[str, int] = {}
    async with db.connect() as conn:
        names = await conn.run_sync(lambda sync: inspect(sync).get_table_names())
        foreign = sorted(set(names) - set(ours) - {ALEMBIC_TABLE})
        if not foreign:
            for name in sorted(set(names) & set(ours)):
                rows = await conn.execute(select(func.count()).select_from(ours[name]))
                count = rows.scalar_one()
                if count:
                    counts[name] = count
        await conn.rollback()
    return foreign, counts
