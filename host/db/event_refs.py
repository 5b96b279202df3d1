"""SQL that turns what a person types for an event (an id or a slug) into its id."""

from __future__ import annotations

from sqlalchemy import bindparam, select
from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db.tables import event_definitions

_BY_SLUG = select(event_definitions.c.id).where(event_definitions.c.slug == bindparam("slug"))


async def definition_id_by_slug(conn: AsyncConnection, slug: str) -> int | None:
    return (await conn.execute(_BY_SLUG, {"slug": slug})).scalar_one_or_none()
