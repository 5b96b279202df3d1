"""SQL over ``event_definitions`` and their published ``event_versions``.

A definition and its versions are one aggregate: a version is only ever written by a
publish of its definition, and read by what is pinned to it. The rules (which state may
publish, what a publish validates) live in :mod:`pageant.events.definitions`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import bindparam, func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pageant.db.rows import AnyRow, inserted_id
from pageant.db.runs import WAITING_ON_PERSON
from pageant.db.tables import (
    by_primary_key,
    changed_one,
    event_definitions,
    event_runs,
    event_versions,
)

defs = event_definitions
versions = event_versions
_vc = versions.c

#: The states an edit, a publish or an archive may act from.
OPEN_STATES = ("draft", "ready")

# ── Statements (built once) ─────────────────────────────────────────────────────────────────

#: A definition with its current version's public half, as the event object renders it.
_VIEW = select(
    *defs.c,
    _vc.number.label("version_number"),
    _vc.published_at.label("version_published_at"),
    _vc.published_by.label("version_published_by"),
    _vc.verified_at.label("version_verified_at"),
    _vc.verified_by.label("version_verified_by"),
    _vc.spec.label("version_spec"),
).select_from(defs.outerjoin(versions, _vc.id == defs.c.current_version_id))

_VIEW_ONE = _VIEW.where(defs.c.id == bindparam("definition_id"))
_GET = select(defs).where(defs.c.id == bindparam("definition_id"))
# FOR UPDATE serialises writers of one definition on MariaDB (two publishes would otherwise
# both read the same highest version number); SQLite renders no FOR UPDATE and needs none,
# since every transaction there begins IMMEDIATE and so already holds the write lock.
_GET_LOCKED = _GET.with_for_update()
#: What a run whose concurrency key is held needs of its event: the policy it follows.
_OVERLAP = select(defs.c.overlap).where(defs.c.id == bindparam("definition_id"))
#: What a start-now needs of a definition, and no more.
_START_FACTS = select(
    defs.c.id, defs.c.state, defs.c.current_version_id, defs.c.concurrency_key, defs.c.overlap
).where(defs.c.id == bindparam("definition_id"))

#: Runs waiting on a person, per definition (the rule is the run list's summary's).
_RUNS_WAITING = (
    select(event_runs.c.definition_id, func.count().label("waiting"))
    .where(
        event_runs.c.definition_id.in_(bindparam("ids", expanding=True)),
        WAITING_ON_PERSON,
    )
    .group_by(event_runs.c.definition_id)
)

_NEXT_NUMBER = select(func.coalesce(func.max(_vc.number), 0) + 1).where(
    _vc.definition_id == bindparam("definition_id")
)
_VERSION_BY_NUMBER = select(versions).where(
    _vc.definition_id == bindparam("definition_id"),
    _vc.number == bindparam("number"),
)
_VERSION_BY_ID = select(versions).where(_vc.id == bindparam("version_id"))
#: What a run pinned to a version reads of it (a published version never changes).
_PINNED = select(_vc.id, _vc.number, _vc.spec, _vc.timezone).where(
    _vc.id == bindparam("version_id")
)

# The CAS: the state it may act from is in the WHERE clause, so MariaDB's matched-rows count
# and SQLite's changed-rows count agree on whether it happened.
_ARCHIVE = by_primary_key(
    update(defs)
    .where(defs.c.id == bindparam("definition_id"), defs.c.state.in_(OPEN_STATES))
    .values(state="archived", updated_at=bindparam("now"))
)


# ── Definitions ─────────────────────────────────────────────────────────────────────────────


async def get_definition(
    conn: AsyncConnection, definition_id: int, *, lock: bool = False
) -> AnyRow | None:
    """The ``event_definitions`` row, or None. ``lock`` holds it until the transaction ends
    (on MariaDB; SQLite's transactions already exclude each other)."""
    statement = _GET_LOCKED if lock else _GET
    return (await conn.execute(statement, {"definition_id": definition_id})).first()


async def start_facts(conn: AsyncConnection, definition_id: int) -> AnyRow | None:
    """``(id, state, current_version_id, concurrency_key, overlap)`` of a definition, or
    None."""
    return (await conn.execute(_START_FACTS, {"definition_id": definition_id})).first()


async def overlap_of(conn: AsyncConnection, definition_id: int) -> str:
    """The event's overlap policy (``hold`` for an event that is not there)."""
    found = await conn.scalar(_OVERLAP, {"definition_id": definition_id})
    return str(found) if found is not None else "hold"


async def list_view(
    conn: AsyncConnection, *, state: str | None = None, after_id: int | None = None, limit: int
) -> list[AnyRow]:
    """Up to ``limit`` rows of the definition view in ascending id order, after
    ``after_id``, optionally only those in ``state``."""
    statement = _VIEW.order_by(defs.c.id).limit(limit)
    if state is not None:
        statement = statement.where(defs.c.state == state)
    if after_id is not None:
        statement = statement.where(defs.c.id > after_id)
    return list(await conn.execute(statement))


async def view_one(conn: AsyncConnection, definition_id: int) -> AnyRow | None:
    """One row of the definition view (the definition with its current version)."""
    return (await conn.execute(_VIEW_ONE, {"definition_id": definition_id})).first()


async def count_runs_waiting(
    conn: AsyncConnection, definition_ids: Sequence[int]
) -> dict[int, int]:
    """Runs waiting on a person per definition id; ids with none are absent."""
    rows = await conn.execute(_RUNS_WAITING, {"ids": list(definition_ids)})
    return {row.definition_id: row.waiting for row in rows}


async def set_current_version(
    conn: AsyncConnection,
    definition_id: int,
    version_id: int,
    *,
    expanded_until: datetime | None,
    now: datetime,
) -> None:
    """Point a definition at its newly published version and make it ``ready``."""
    await conn.execute(
        update(defs)
        .where(defs.c.id == definition_id)
        .values(
            current_version_id=version_id,
            state="ready",
            expanded_until=expanded_until,
            updated_at=now,
        )
    )


async def archive_if_open(conn: AsyncConnection, definition_id: int, *, now: datetime) -> bool:
    """Archive a draft or ready definition; False when it was neither (or is missing)."""
    return await changed_one(conn, _ARCHIVE, {"definition_id": definition_id, "now": now})


# ── Versions ────────────────────────────────────────────────────────────────────────────────


async def get_version_by_id(conn: AsyncConnection, version_id: int) -> AnyRow | None:
    """An ``event_versions`` row by its id (what a run is pinned to), or None."""
    return (await conn.execute(_VERSION_BY_ID, {"version_id": version_id})).first()


async def get_version(conn: AsyncConnection, definition_id: int, number: int) -> AnyRow | None:
    """Version ``number`` of a definition, or None."""
    params = {"definition_id": definition_id, "number": number}
    return (await conn.execute(_VERSION_BY_NUMBER, params)).first()


class Pinned(NamedTuple):
    """What the engine reads of a run's pinned version: its number, its spec, its zone."""

    number: int
    spec: Any
    timezone: str


async def pinned_version(conn: AsyncConnection, version_id: int) -> AnyRow | None:
    """``(id, number, spec, timezone)`` of a version, or None when there is no such row."""
    return (await conn.execute(_PINNED, {"version_id": version_id})).first()


async def list_versions(
    conn: AsyncConnection, definition_id: int, *, after_id: int | None = None, limit: int
) -> list[AnyRow]:
    """Up to ``limit`` versions of a definition in ascending id (and so number) order."""
    statement = (
        select(versions).where(_vc.definition_id == definition_id).order_by(_vc.id).limit(limit)
    )
    if after_id is not None:
        statement = statement.where(_vc.id > after_id)
    return list(await conn.execute(statement))


async def next_version_number(conn: AsyncConnection, definition_id: int) -> int:
    """The number the definition's next published version takes."""
    return (await conn.execute(_NEXT_NUMBER, {"definition_id": definition_id})).scalar_one()


async def insert_version(conn: AsyncConnection, values: dict[str, Any]) -> int | None:
    """Insert a version and answer its id, or None when UNIQUE (definition_id, number)
    refused it. The insert runs in a savepoint, so a refusal leaves the transaction usable."""
    try:
        async with conn.begin_nested():
            result = await conn.execute(insert(versions).values(values))
    except IntegrityError:
        return None
    return inserted_id(result)


async def read_pinned(conn: AsyncConnection, version_id: int) -> Pinned | None:
    """The version ``version_id`` as :class:`Pinned`, or None when there is no such row."""
    row = await pinned_version(conn, version_id)
    return None if row is None else Pinned(row.number, row.spec, row.timezone)


class PinnedSpecs:
    """A bounded cache of version specs by id (immutable rows, so never stale)."""

    def __init__(self, size: int = 512) -> None:
        self._size = size
        self._cache: OrderedDict[int, Pinned] = OrderedDict()

    def _kept(self, version_id: int) -> Pinned | None:
        found = self._cache.get(version_id)
        if found is not None:
            self._cache.move_to_end(version_id)
        return found

    def _keep(self, version_id: int, found: Pinned | None) -> Pinned | None:
        if found is not None:
            self._cache[version_id] = found
            if len(self._cache) > self._size:
                self._cache.popitem(last=False)
        return found

    async def get(self, conn: AsyncConnection, version_id: int) -> Pinned | None:
        """The version, read in ``conn`` unless it is kept."""
        found = self._kept(version_id)
        if found is None:
            found = self._keep(version_id, await read_pinned(conn, version_id))
        return found

    async def fetch(self, db: AsyncEngine, version_id: int) -> Pinned | None:
        """The version, read on a connection of its own only when it is not kept: a step's
        hot path (a run's pass, an announcement) costs no connection on a hit."""
        found = self._kept(version_id)
        if found is None:
            async with db.connect() as conn:
                found = self._keep(version_id, await read_pinned(conn, version_id))
        return found
