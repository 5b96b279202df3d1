"""What a pinned version's spec says (its phases); the versions themselves are read, and
kept, by :mod:`pageant.db.definitions` (:class:`pageant.db.definitions.PinnedSpecs`)."""

from __future__ import annotations

from typing import Any


def phases_of(spec: Any) -> list[dict[str, Any]] | None:
    """The spec's phases when they are readable (a non-empty list of keyed objects)."""
    phases = spec.get("phases") if isinstance(spec, dict) else None
    if not isinstance(phases, list) or not phases:
        return None
    if not all(isinstance(p, dict) and isinstance(p.get("key"), str) for p in phases):
        return None
    return phases
