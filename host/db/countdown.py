"""SQL over a run's countdown rungs: the ``event_run_steps`` rows of the countdown ladder.

A rung is an ordinary step row (a ``core.announce`` with its own idempotency key, attempts
and claim) whose ``phase`` is :data:`COUNTDOWN_PHASE`, a name no authored phase can take
(a phase key is a slug), so the run's cursor, which reads only its current phase, never
sees one. What reads them is here: the countdown stage's due rungs, and a moved run's rungs.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import bindparam, select, update
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db.tables import RUN_PHASE_ORDER, by_primary_key, changed_one, event_run_steps
from pageant.states import StepStatus

#: The phase every rung row carries: parentheses never pass the phase-key grammar.
COUNTDOWN_PHASE = "(countdown)"

s = event_run_steps.c

# Pending rungs whose time came, with their run; ``(status, due_at)`` leads the read, so an
# idle stage costs one index range however many steps the database holds.
_DUE = (
    select(s.id, s.run_id)
    .where(
        s.status == StepStatus.PENDING,
        s.due_at <= bindparam("now"),
        s.phase == COUNTDOWN_PHASE,
    )
    .order_by(s.due_at, s.id)
    .limit(bindparam("limit"))
)

_PENDING_OF_RUN = (
    select(s.id, s.due_at)
    .where(
        s.run_id == bindparam("run_id"),
        s.phase == COUNTDOWN_PHASE,
        s.status == StepStatus.PENDING,
    )
    .with_hint(event_run_steps, RUN_PHASE_ORDER, dialect_name="mysql")
    .order_by(s.seq)
)

_SET_DUE = by_primary_key(
    update(event_run_steps)
    .where(s.id == bindparam("step_id"), s.status == StepStatus.PENDING)
    .values(due_at=bindparam("due_at"))
)

_PASS = by_primary_key(
    update(event_run_steps)
    .where(s.id == bindparam("step_id"), s.status == StepStatus.PENDING)
    .values(
        status=StepStatus.SKIPPED,
        note=bindparam("why"),
        lease_until=None,
        finished_at=bindparam("now"),
    )
)


async def due_rungs(conn: AsyncConnection, now: datetime, *, limit: int) -> list[Row]:
    """Pending rungs whose ``due_at`` has come, earliest first: ``(id, run_id)`` each."""
    return list((await conn.execute(_DUE, {"now": now, "limit": limit})).all())


async def pending_rungs(conn: AsyncConnection, run_id: int) -> list[Row]:
    """A run's rungs not yet sent or passed: ``(id, due_at)`` each."""
    return list((await conn.execute(_PENDING_OF_RUN, {"run_id": run_id})).all())


async def set_rung_due(conn: AsyncConnection, step_id: int, due_at: datetime) -> bool:
    """Move a pending rung to ``due_at`` (its run moved); False when it is no longer pending."""
    return await changed_one(conn, _SET_DUE, {"step_id": step_id, "due_at": due_at})


async def pass_rungs(
    conn: AsyncConnection, step_ids: Sequence[int], *, why: str, now: datetime
) -> list[int]:
    """Mark pending rungs ``skipped`` with ``why`` (never sent): answers the ids that were
    still pending, each a compare-and-set of its own."""
    passed = []
    for step_id in step_ids:
        if await changed_one(conn, _PASS, {"step_id": step_id, "why": why, "now": now}):
            passed.append(step_id)
    return passed
