"""SQL over ``event_blackouts``: the shared calendars events subscribe to.

A slug is given explicitly (the events' specs name it), so an insert or an edit that meets
the unique index on ``slug`` answers None or False rather than choosing another.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import bindparam, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db.rows import AnyRow, inserted_id
from pageant.db.tables import event_blackouts

b = event_blackouts.c

#: The states of a blackout: ``active`` applies, ``archived`` applies to nothing.
ACTIVE = "active"
ARCHIVED = "archived"

_GET = select(event_blackouts).where(b.id == bindparam("blackout_id"))
_BY_SLUGS = select(event_blackouts).where(b.slug.in_(bindparam("slugs", expanding=True)))


async def get_blackout(conn: AsyncConnection, blackout_id: int) -> AnyRow | None:
    """The blackout row, or None."""
    return (await conn.execute(_GET, {"blackout_id": blackout_id})).first()


async def blackouts_by_slug(conn: AsyncConnection, slugs: Sequence[str]) -> list[AnyRow]:
    """The blackouts named by ``slugs`` (any state; an unknown slug has no row)."""
    if not slugs:
        return []
    return list((await conn.execute(_BY_SLUGS, {"slugs": list(slugs)})).all())


async def list_blackouts(
    conn: AsyncConnection, *, after_id: int | None = None, limit: int, state: str | None = None
) -> list[AnyRow]:
    """Up to ``limit`` blackouts in ascending id order, after ``after_id``."""
    statement = select(event_blackouts).order_by(b.id).limit(limit)
    if after_id is not None:
        statement = statement.where(b.id > after_id)
    if state is not None:
        statement = statement.where(b.state == state)
    return list(await conn.execute(statement))


async def insert_blackout(conn: AsyncConnection, values: dict[str, Any]) -> int | None:
    """Insert a blackout and answer its id; None when its slug is taken. Runs in a
    savepoint, so a taken slug leaves the transaction usable."""
    try:
        async with conn.begin_nested():
            result = await conn.execute(insert(event_blackouts).values(values))
    except IntegrityError:
        if await _slug_owner(conn, values["slug"]) is None:
            raise  # not the slug: a real error, not a taken name to report
        return None
    return inserted_id(result)


async def update_blackout(conn: AsyncConnection, blackout_id: int, values: dict[str, Any]) -> bool:
    """Write ``values`` to a blackout; False when a new slug is taken by another one."""
    try:
        async with conn.begin_nested():
            await conn.execute(update(event_blackouts).where(b.id == blackout_id).values(values))
    except IntegrityError:
        owner = await _slug_owner(conn, values.get("slug", ""))
        if owner is None or owner == blackout_id:
            raise
        return False
    return True


async def _slug_owner(conn: AsyncConnection, slug: str) -> int | None:
    return (await conn.execute(select(b.id).where(b.slug == slug))).scalar()
