"""The pinned versions' specs, read once: a published version never changes."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db.definitions import pinned_version


async def read_pinned(conn: AsyncConnection, version_id: int) -> tuple[int, Any] | None:
    """``(number, spec)`` of a version, or None when there is no such row."""
    row = await pinned_version(conn, version_id)
    return None if row is None else (row.number, row.spec)


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
        self._cache: OrderedDict[int, tuple[int, Any]] = OrderedDict()

    async def get(self, conn: AsyncConnection, version_id: int) -> tuple[int, Any] | None:
        found = self._cache.get(version_id)
        if found is not None:
            self._cache.move_to_end(version_id)
            return found
        found = await read_pinned(conn, version_id)
        if found is not None:
            self._cache[version_id] = found
            if len(self._cache) > self._size:
                self._cache.popitem(last=False)
        return found
