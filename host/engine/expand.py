"""The expand stage: every ``ready`` definition's published schedule into ``scheduled`` runs,
from ``now - grace`` to the horizon (``horizon_days``) — or from further back, inside its
catch-up window, for an event that catches up the occurrences no host materialised while
none ran (:func:`catch_up_from`).

Cheap when nothing is new. After expanding a definition its ``expanded_until`` is set to the
instant of its first occurrence *past* the horizon, so the stage reads it again only once that
occurrence has come inside the horizon: a weekly event is touched once a week, a monthly one
once a month, a manual one or a past ``once`` never. An idle tick is one indexed read that
finds nothing.

Bounded: at most ``runs_per_tick`` definitions per tick, never-expanded and longest-waiting
first; a full batch wakes the engine so the next batch follows at once instead of a poll
later. Each definition is expanded in a transaction of its own behind a compare-and-set on
``expanded_until`` (two hosts never both expand one), and in an error boundary of its own: a
definition that fails is logged and set aside for :data:`RETRY_AFTER`, and the others go on.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pageant.db import schedules
from pageant.engine.contention import noted
from pageant.runs import lifecycle
from pageant.schedules import catchup, fan_out
from pageant.schedules import reconcile as schedule

if TYPE_CHECKING:
    from pageant.hosting import Host

log = logging.getLogger("pageant.engine")

#: How long a definition whose expansion failed waits before it is tried again, so a
#: schedule that cannot be read is not retried (and logged) every tick.
RETRY_AFTER = timedelta(minutes=10)


async def expand(host: Host, now: datetime) -> None:
    """Materialise the occurrences of every ready definition up to the horizon."""
    limit = host.settings.runs_per_tick
    end = now + timedelta(days=host.settings.horizon_days)
    async with host.db.connect() as conn:
        candidates = await schedules.expansion_candidates(conn, end, limit=limit)
    for row in candidates:
        try:
            await expand_definition(host, row, now=now, end=end)
        except Exception as exc:
            if noted(host, f"expanding event {row.id}", exc):
                continue  # nothing was written; the next tick expands it
            log.exception(
                "could not expand the schedule of event %s; trying again in %s",
                row.id,
                RETRY_AFTER,
            )
            await _set_aside(host, row, end + RETRY_AFTER)
    if len(candidates) == limit:
        host.wake()


async def expand_definition(host: Host, row: Any, *, now: datetime, end: datetime) -> bool:
    """Expand one candidate (a :func:`pageant.db.schedules.expansion_candidates` row) to
    ``end``; False when another host got there first or the definition changed since it was
    read (a publish or an archive, which do their own)."""
    plan = schedule.Plan.of(row)
    # A fan-out over an option source: its values are read here, outside the transaction,
    # and read again within fan_out.REFRESH however far off the next occurrence is.
    read = await fan_out.read_sets(plan.spec, host.registry, event=row.id)
    until = schedule.expanded_until(plan, end)
    if read is not None and schedule.produces_after(plan, now):
        until = min(until, end + fan_out.REFRESH)
    async with host.db.begin() as conn:
        if not await schedules.claim_expansion(
            conn, row.id, version_id=row.current_version_id, seen=row.expanded_until, until=until
        ):
            return False
        outcome = await schedule.reconcile_schedule(
            conn,
            plan,
            now=now,
            end=end,
            registry=host.registry,
            supersede=False,
            catch_up_from=catch_up_from(plan, row.expanded_until, now),
            read=read,
        )
    if outcome.created or outcome.moved:
        log.debug("expanded event %s to %s: %s", row.id, end, outcome)
    await lifecycle.announce_scheduled(host, outcome.created_runs)
    return True


def catch_up_from(plan: schedule.Plan, seen: datetime | None, now: datetime) -> datetime | None:
    """Where the expansion makes missing occurrences from for an event that catches up:
    back to its window (``now - within``), but never before what an earlier expansion already
    reached (``seen``: every occurrence before it has its row, or never had one because the
    event was not yet published). None: from ``now - grace`` as ever."""
    policy = catchup.of_spec(plan.spec)
    if not policy.catches_up or seen is None:
        return None
    return max(now - policy.within, seen)


async def _set_aside(host: Host, row: Any, until: datetime) -> None:
    try:
        async with host.db.begin() as conn:
            await schedules.claim_expansion(
                conn,
                row.id,
                version_id=row.current_version_id,
                seen=row.expanded_until,
                until=until,
            )
    except Exception:
        log.exception("could not set event %s aside after a failed expansion", row.id)
