"""The one check that an event's ``requires`` names another event that exists: made at
save (the API's create and edit, the console editor) and again at publish, each answering
the same sentence.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db import slugs
from pageant.runs import requires

__all__ = ["unknown_required"]


async def unknown_required(
    conn: AsyncConnection, spec: dict[str, Any] | None, *, own_slug: str | None = None
) -> list[str]:
    """The problems of ``spec.requires``, each prefixed by its path: an event slug no event
    holds, or the event's own (``own_slug``, when it is known: an occurrence would wait on
    its siblings). Empty when the spec requires nothing or names another event."""
    requirement = requires.of_spec(spec)
    if requirement is None:
        return []
    if own_slug is not None and requirement.event == own_slug:
        return [
            f'spec.requires.event: "{requirement.event}" is this event; an event requires '
            "another event's outcome"
        ]
    if await slugs.slug_owner(conn, "event_definitions", requirement.event) is None:
        return [
            f'spec.requires.event: no event "{requirement.event}" '
            "(GET /api/v1/admin/events lists them)"
        ]
    return []
