"""The pinned versions' specs, read once: a published version never changes."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pageant.db.definitions import Pinned, pinned_version


async def read_pinned(conn: AsyncConnection, version_id: int) -> Pinned | None:
    """The version ``version_id`` as :class:`Pinned`, or None when there is no such row."""
    row = await pinned_version(conn, version_id)
    return None if row is None else Pinned(row.number, row.spec, row.timezone)


def phases_of(spec: Any) -> list[dict[str, Any]] | None:
    """The spec's phases when they are readable (a non-empty list of keyed objects)."""
    phases = spec.get("phases") if isinstance(spec, dict) else None
    if not isinstance(phases, list) or not phases:
        return None
    if not all(isinstance(p, dict) and isinstance(p.get("key"), str) for p in phases):
        return None
    return phases


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
