"""SQL over a run's milestone steps: the ``event_run_steps`` rows a public count gate's
milestones become (:mod:`pageant.runs.milestones`).

A milestone step waits for its count with ``due_at`` at :data:`UNREACHED`, so the steps
still waiting are one range of the ``(status, due_at)`` index, however many other steps are
pending; it is made due (a compare-and-set from :data:`UNREACHED`) when the gate's tally
reaches its count, and is then read as the due milestone steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import bindparam, select, update
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db.tables import (
    by_primary_key,
    changed_one,
    event_run_phase_gates,
    event_run_steps,
    event_runs,
)
from pageant.states import StepStatus

#: How the phase of every milestone step begins: parentheses never pass the phase-key
#: grammar. The authored phase's index and a ``)`` follow.
PHASE_PREFIX = "(milestones:"
#: The ``due_at`` of a milestone step whose count has not been reached: never due by time.
UNREACHED = datetime(9999, 12, 31, tzinfo=UTC)

s = event_run_steps.c
r = event_runs.c
g = event_run_phase_gates.c

_WAITING = (
    select(s.id, s.run_id, s.phase, s.seq, r.status.label("run_status"), r.version_id)
    .select_from(event_run_steps.join(event_runs, r.id == s.run_id))
    .where(
        s.status == StepStatus.PENDING,
        s.due_at == UNREACHED,
        s.phase.startswith(PHASE_PREFIX, autoescape=True),
    )
    .order_by(s.id)
    .limit(bindparam("limit"))
)

_TALLIES = select(g.run_id, g.phase, g.tally).where(
    g.run_id.in_(bindparam("run_ids", expanding=True)), g.kind == "on"
)

_DUE = (
    select(s.id, s.run_id)
    .where(
        s.status == StepStatus.PENDING,
        s.due_at <= bindparam("now"),
        s.phase.startswith(PHASE_PREFIX, autoescape=True),
    )
    .order_by(s.due_at, s.id)
    .limit(bindparam("limit"))
)

# ``due_at = UNREACHED`` in the WHERE clause: the second host making the same step due
# matches nothing, on MariaDB (which reports matched rows) as on SQLite.
_REACH = by_primary_key(
    update(event_run_steps)
    .where(
        s.id == bindparam("step_id"),
        s.status == StepStatus.PENDING,
        s.due_at == UNREACHED,
    )
    .values(due_at=bindparam("now"))
)


async def waiting_steps(conn: AsyncConnection, *, limit: int) -> list[Row]:
    """Milestone steps whose count has not been reached, with their run's status and
    version: ``(id, run_id, phase, seq, run_status, version_id)`` each."""
    return list((await conn.execute(_WAITING, {"limit": limit})).all())


async def tallies(conn: AsyncConnection, run_ids: Sequence[int]) -> dict[tuple[int, str], int]:
    """The tally of each count gate of ``run_ids``, by ``(run id, phase key)``."""
    if not run_ids:
        return {}
    rows = await conn.execute(_TALLIES, {"run_ids": list(run_ids)})
    return {(row.run_id, row.phase): row.tally for row in rows}


async def reach(conn: AsyncConnection, step_id: int, now: datetime) -> bool:
    """Make a waiting milestone step due at ``now`` (its count was reached); False when it
    is no longer waiting (sent, cancelled, or made due by another host)."""
    return await changed_one(conn, _REACH, {"step_id": step_id, "now": now})


async def due_steps(conn: AsyncConnection, now: datetime, *, limit: int) -> list[Row]:
    """Milestone steps that are due (reached, or a retry's time come), earliest first:
    ``(id, run_id)`` each."""
    return list((await conn.execute(_DUE, {"now": now, "limit": limit})).all())
