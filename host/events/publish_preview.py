"""A publish's preview: the publish itself, in a transaction that is rolled back.

``POST /api/v1/admin/events/{id}/publish?preview=1``, ``pageant events publish --preview``
and the console's *Preview changes* all answer :func:`preview_publish`. It makes the very
publish the real one makes (:func:`pageant.events.definitions.publish_and_compare`: the same
checks, the same schedule reconciliation), reads what that changed in the runs, and then
rolls everything back, so the preview can never disagree with the publish it shows, and
changes nothing: no version, no run, no log line stays, and no ``core.run.scheduled`` is
fired. A publish that would be refused is refused by its preview in the same words.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncEngine

from pageant.db import occurrences
from pageant.events import definitions
from pageant.schedules import preview

if TYPE_CHECKING:
    from pageant.plugins.registry import Registry

__all__ = ["preview_publish"]


async def preview_publish(
    db: AsyncEngine,
    definition_id: int,
    registry: Registry,
    *,
    now: datetime,
    actor: str | None,
    horizon_days: int,
    per_scope: int = preview.DEFAULT_PER_SCOPE,
) -> dict[str, Any]:
    """What publishing the working copy would change (:func:`pageant.schedules.preview.render`
    over the publish's own changes), with ``event_id`` and the ``version`` number it would
    become. Raises what the publish would raise (``Invalid``, ``Dormant``, ``Conflict``,
    ``NotFound``), except the want of a reason, which it reports (``reason_required``)."""
    async with db.begin() as conn:
        published = await definitions.publish_and_compare(
            conn, definition_id, registry, now=now, actor=actor, horizon_days=horizon_days
        )
        rows = [*published.before.values(), *published.after.values()]
        version_ids = sorted({row.version_id for row in rows})
        frame = preview.Frame(
            zones=await preview.zones_of(conn, rows),
            numbers=await occurrences.version_numbers(conn, version_ids),
            before=published.before,
            after=published.after,
            now=now,
            per_scope=per_scope,
        )
        answer = {"event_id": definition_id, "version": published.version.number}
        answer |= preview.render(published.changes, frame)
        # Everything the publish wrote goes: the transaction's block then has nothing left
        # to commit.
        await conn.rollback()
    return answer
