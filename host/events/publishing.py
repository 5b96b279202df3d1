"""A publish as every surface makes it: ``POST /api/v1/admin/events/{id}/publish``, the
console's *Publish* and ``pageant events publish`` all call :func:`publish`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pageant.events import definitions
from pageant.runs import lifecycle

if TYPE_CHECKING:
    from pageant.hosting import Host

__all__ = ["publish"]


async def publish(host: Host, definition_id: int, *, actor: str, reason: str | None) -> None:
    """Publish the working copy of ``definition_id`` in one transaction
    (:func:`pageant.events.definitions.publish_definition`, which raises what refuses it),
    then, once committed, fire ``core.run.scheduled`` for the occurrences it made and wake
    the engine: one of them may be due now, inside its grace window."""
    scheduled: list[int] = []
    async with host.db.begin() as conn:
        await definitions.publish_definition(
            conn,
            definition_id,
            host.registry,
            now=host.clock.now(),
            actor=actor,
            horizon_days=host.settings.horizon_days,
            created=scheduled,
            reason=reason,
        )
    await lifecycle.announce_scheduled(host, scheduled)
    host.wake()
