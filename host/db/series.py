"""SQL over ``event_series``: reading a series and a page of them. Writes go through
:mod:`pageant.db.slugs`, since every write of a series may claim a slug."""

from __future__ import annotations

from sqlalchemy import bindparam, select
from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db.rows import AnyRow
from pageant.db.tables import event_series

_GET = select(event_series).where(event_series.c.id == bindparam("series_id"))


async def get_series(conn: AsyncConnection, series_id: int) -> AnyRow | None:
    """The series row, or None."""
    return (await conn.execute(_GET, {"series_id": series_id})).first()


async def list_series(
    conn: AsyncConnection, *, after_id: int | None = None, limit: int
) -> list[AnyRow]:
    """Up to ``limit`` series in ascending id order, after ``after_id``."""
    statement = select(event_series).order_by(event_series.c.id).limit(limit)
    if after_id is not None:
        statement = statement.where(event_series.c.id > after_id)
    return list(await conn.execute(statement))
