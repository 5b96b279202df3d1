"""SQL over the published schedules: each definition's current version (its schedule and
zone) and ``event_definitions.expanded_until``, how far that schedule has been turned into runs.

``expanded_until`` is the instant of the first occurrence *not* yet materialised: every
occurrence before it has its row. The expansion reads only definitions whose value has come
inside the horizon (or was never set), through the ``(state, expanded_until)`` index, so a tick
with nothing new to expand reads no definition at all.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import bindparam, select, update
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db.tables import by_primary_key, changed_one, event_definitions, event_versions

d = event_definitions.c
v = event_versions.c

#: What the expansion, the calendar and ``next_occurrence`` read of a published schedule.
_PUBLISHED = select(
    d.id,
    d.title,
    d.state,
    d.grace_seconds,
    d.concurrency_key,
    d.series_id,
    d.current_version_id,
    d.expanded_until,
    v.spec,
    v.timezone,
).select_from(event_definitions.join(event_versions, v.id == d.current_version_id))

# Two reads, each one range of the (state, expanded_until) index: as one "IS NULL OR <"
# condition SQLite walks every ready definition's entry to find that nothing is due.
_NEVER_EXPANDED = (
    _PUBLISHED.where(d.state == "ready", d.expanded_until.is_(None))
    .order_by(d.id)
    .limit(bindparam("limit"))
)
_INSIDE_HORIZON = (
    _PUBLISHED.where(d.state == "ready", d.expanded_until < bindparam("horizon_end"))
    .order_by(d.expanded_until, d.id)
    .limit(bindparam("limit"))
)

# The claim on one expansion. The old value is in the WHERE clause (NULL-safe), so on
# MariaDB, whose driver reports matched rows, a match is a change; a second host that read
# the same candidate matches nothing and leaves it. The row lock it takes also makes a
# publish or an archive of this definition wait for the expansion's transaction.
_CLAIM = by_primary_key(
    update(event_definitions)
    .where(
        d.id == bindparam("definition_id"),
        d.state == "ready",
        d.current_version_id == bindparam("version_id"),
        d.expanded_until.is_not_distinct_from(bindparam("seen")),
    )
    .values(expanded_until=bindparam("until"))
)

_SET = (
    update(event_definitions)
    .where(d.id == bindparam("definition_id"))
    .values(expanded_until=bindparam("until"))
)


async def expansion_candidates(
    conn: AsyncConnection, horizon_end: datetime, *, limit: int
) -> list[Row]:
    """Up to ``limit`` ready definitions with an occurrence before ``horizon_end`` that has
    no row yet (or never expanded), never-expanded and longest-waiting first."""
    found = list((await conn.execute(_NEVER_EXPANDED, {"limit": limit})).all())
    if len(found) < limit:
        params = {"horizon_end": horizon_end, "limit": limit - len(found)}
        found += (await conn.execute(_INSIDE_HORIZON, params)).all()
    return found


async def claim_expansion(
    conn: AsyncConnection,
    definition_id: int,
    *,
    version_id: int,
    seen: datetime | None,
    until: datetime,
) -> bool:
    """Move ``expanded_until`` from ``seen`` to ``until`` if the definition is still ready on
    ``version_id`` and nobody moved it meanwhile; True when this caller holds the expansion."""
    params = {
        "definition_id": definition_id,
        "version_id": version_id,
        "seen": seen,
        "until": until,
    }
    return await changed_one(conn, _CLAIM, params)


async def set_expanded_until(
    conn: AsyncConnection, definition_id: int, until: datetime | None
) -> None:
    """Write ``expanded_until`` (None: expand at the next tick)."""
    await conn.execute(_SET, {"definition_id": definition_id, "until": until})


async def published_schedules(
    conn: AsyncConnection,
    *,
    definition_ids: list[int] | None = None,
    series_id: int | None = None,
) -> list[Row]:
    """Ready definitions with their current version's spec and zone, in id order,
    optionally only ``definition_ids`` and only those of ``series_id``."""
    statement = _PUBLISHED.where(d.state == "ready").order_by(d.id)
    if definition_ids is not None:
        statement = statement.where(d.id.in_(definition_ids))
    if series_id is not None:
        statement = statement.where(d.series_id == series_id)
    return list((await conn.execute(statement)).all())


_OF_SERIES = select(d.id).where(d.series_id == bindparam("series_id")).order_by(d.id)


async def definitions_of_series(conn: AsyncConnection, series_id: int) -> list[int]:
    """The ids of every definition in a series, whatever its state."""
    return list((await conn.execute(_OF_SERIES, {"series_id": series_id})).scalars())
