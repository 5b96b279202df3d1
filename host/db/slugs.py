"""SQL over the ``slug`` column of the tables that carry one (``event_definitions``,
``event_series``), named by table so that callers need no table object.

The unique index on ``slug`` is what decides a race for one; these functions report a lost
race as an answer (None, False) and leave the rules - conflict or suffix - to
:mod:`pageant.events.slugs`.
"""

from __future__ import annotations

from typing import Any, Literal

from sqlalchemy import Select, Table, bindparam, insert, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db.rows import inserted_id
from pageant.db.tables import event_definitions, event_series

#: The name of a table whose rows carry a slug.
SluggedTable = Literal["event_definitions", "event_series"]
#: The tables whose rows carry a slug, by name.
SLUGGED: dict[str, Table] = {t.name: t for t in (event_definitions, event_series)}

_OWNER: dict[str, Select[Any]] = {
    name: select(table.c.id).where(table.c.slug == bindparam("slug"))
    for name, table in SLUGGED.items()
}


async def slugs_like(conn: AsyncConnection, table: SluggedTable, base: str, stem: str) -> set[str]:
    """Every slug of ``table`` that is ``base`` or starts with ``stem``.

    ``stem`` goes into LIKE unescaped: the slug grammar admits neither "%" nor "_".
    """
    column = SLUGGED[table].c.slug
    rows = await conn.execute(select(column).where(or_(column == base, column.like(f"{stem}%"))))
    return {r[0] for r in rows}


async def slug_owner(conn: AsyncConnection, table: SluggedTable, slug: str) -> int | None:
    """The id of the row of ``table`` holding ``slug``, or None."""
    return (await conn.execute(_OWNER[table], {"slug": slug})).scalar()


async def insert_claiming_slug(
    conn: AsyncConnection, table: SluggedTable, values: dict[str, Any], slug: str
) -> int | None:
    """Insert ``values`` with ``slug`` into ``table`` and answer the new id, or None when
    another row holds the slug by the time the unique index sees it.

    The insert runs in a savepoint, so that losing leaves the transaction usable for the
    next try; an integrity error that is not about the slug is raised, not hidden.
    """
    try:
        async with conn.begin_nested():
            result = await conn.execute(insert(SLUGGED[table]).values({**values, "slug": slug}))
    except IntegrityError:
        if await slug_owner(conn, table, slug) is None:
            raise  # not the slug: a real error, not a race to hide
        return None
    return inserted_id(result)


async def update_claiming_slug(
    conn: AsyncConnection, table: SluggedTable, row_id: int, changes: dict[str, Any]
) -> bool:
    """UPDATE one row of ``table`` with ``changes``; False when the unique index refused a
    ``slug`` among them. Runs in a savepoint; any other integrity error is raised."""
    target = SLUGGED[table]
    try:
        async with conn.begin_nested():
            await conn.execute(update(target).where(target.c.id == row_id).values(changes))
    except IntegrityError:
        if changes.get("slug") is None:
            raise
        return False
    return True
