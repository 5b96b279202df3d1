"""Event series: named arcs that group events ("The Winter Invasion"), for the calendar and
the public pages. A series carries no schedule of its own; an event joins one through its
``series_id``.

Every function takes an open connection; the caller owns the transaction.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db import series as rows
from pageant.db.rows import AnyRow, columns_of
from pageant.db.schedules import definitions_of_series
from pageant.errors import NotFound
from pageant.events.slugs import insert_with_slug, update_with_slug

#: What a title with no letters or digits derives to.
FALLBACK_SLUG = "series"


async def get_series(conn: AsyncConnection, series_id: int) -> AnyRow | None:
    """The series row, or None."""
    return await rows.get_series(conn, series_id)


async def require_series(conn: AsyncConnection, series_id: int) -> AnyRow:
    """:func:`get_series`, or :class:`NotFound` naming the id."""
    row = await get_series(conn, series_id)
    if row is None:
        raise NotFound(f"no series {series_id}")
    return row


async def list_series(
    conn: AsyncConnection, *, after_id: int | None = None, limit: int
) -> list[AnyRow]:
    """Up to ``limit`` series in ascending id order, after ``after_id``."""
    return await rows.list_series(conn, after_id=after_id, limit=limit)


async def events_of_series(conn: AsyncConnection, series_id: int) -> list[int]:
    """The ids of every event in a series, whatever its state, in id order."""
    return await definitions_of_series(conn, series_id)


def series_object(row: AnyRow) -> dict[str, Any]:
    """The one rendering of a series."""
    return columns_of(row, ("id", "title", "slug", "description", "visibility"))


async def create_series(
    conn: AsyncConnection,
    *,
    title: str,
    slug: str | None,
    derived_slug: str,
    description: str,
    visibility: str,
    now: datetime,
) -> int:
    """Insert a series and answer its id. Slugs follow the events' rules: an explicit one
    that is taken is a :class:`~pageant.errors.Conflict`, a derived one is suffixed."""
    values = dict(
        title=title, description=description, visibility=visibility, created_at=now, updated_at=now
    )
    return await insert_with_slug(
        conn, "event_series", values, slug=slug, derived_slug=derived_slug, noun="series"
    )


async def update_series(
    conn: AsyncConnection, series_id: int, changes: dict[str, Any], *, now: datetime
) -> None:
    """Write ``changes`` (already validated) to a series; a taken slug is a conflict."""
    if changes:
        await update_with_slug(
            conn, "event_series", series_id, {**changes, "updated_at": now}, noun="series"
        )
