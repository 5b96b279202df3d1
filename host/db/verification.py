"""SQL for a version's verification: ``event_versions.verified_at`` and ``verified_by``."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import bindparam, update
from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db.tables import event_versions

v = event_versions.c

_MARK = (
    update(event_versions)
    .where(v.id == bindparam("version_id"))
    .values(verified_at=bindparam("at"), verified_by=bindparam("by"))
)


async def mark_verified(
    conn: AsyncConnection, version_id: int, *, at: datetime, by: str | None
) -> None:
    """Record that ``version_id`` passed its dry run (the latest pass wins)."""
    await conn.execute(_MARK, {"version_id": version_id, "at": at, "by": by})
