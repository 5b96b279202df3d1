"""SQL over ``event_run_participants`` and ``event_run_results``: who took part in a run and
how its phases ended, as its steps' envelopes reported them.

Both are written in the transaction that records the step's answer, and both keep what was
there first: a name counts once per run however many steps report it, and a step (retried
or not) records one results table.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, func, select
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db.idempotent import insert_keeping_existing
from pageant.db.tables import event_run_participants, event_run_results, event_runs
from pageant.states import RUN_ENDED, RunStatus

p = event_run_participants.c
res = event_run_results.c
r = event_runs.c

_PARTICIPANTS_OF = (
    select(p.name, p.role, p.step_id, p.at).where(p.run_id == bindparam("run_id")).order_by(p.id)
)
_RESULTS_OF = (
    select(res.step_id, res.phase, res.title, res.entries, res.at)
    .where(res.run_id == bindparam("run_id"))
    .order_by(res.id)
)
_COUNTS = (
    select(p.run_id, func.count().label("n"))
    .where(p.run_id.in_(bindparam("ids", expanding=True)))
    .group_by(p.run_id)
)
_LAST_COMPLETED = (
    select(r.id, r.scheduled_for, r.ended_at)
    .where(r.definition_id == bindparam("definition_id"), r.status == RunStatus.COMPLETED)
    .order_by(r.ended_at.desc(), r.id.desc())
    .limit(1)
)
#: The statuses of an occurrence that is over.
ENDED = RUN_ENDED


async def add_participants(
    conn: AsyncConnection,
    run_id: int,
    step_id: int,
    people: list[dict[str, Any]],
    *,
    now: datetime,
) -> None:
    """Record ``people`` (``{name, role}``) as the run's participants; a name already
    recorded for the run is kept as it was."""
    if not people:
        return
    statement = insert_keeping_existing(event_run_participants, (p.run_id, p.name), conn.dialect)
    rows = [
        {"run_id": run_id, "step_id": step_id, "name": who["name"], "role": who["role"], "at": now}
        for who in people
    ]
    await conn.execute(statement, rows)


async def add_results(
    conn: AsyncConnection,
    run_id: int,
    step_id: int,
    *,
    phase: str,
    title: str,
    entries: list[dict[str, Any]],
    now: datetime,
) -> None:
    """Record a step's results table; a step that recorded one already keeps it."""
    statement = insert_keeping_existing(event_run_results, (res.step_id,), conn.dialect)
    values = {
        "run_id": run_id,
        "step_id": step_id,
        "phase": phase,
        "title": title,
        "entries": entries,
        "at": now,
    }
    await conn.execute(statement.values(**values))


async def participants_of(conn: AsyncConnection, run_id: int) -> list[Row]:
    """A run's participants, in the order they were first reported."""
    return list((await conn.execute(_PARTICIPANTS_OF, {"run_id": run_id})).all())


async def results_of(conn: AsyncConnection, run_id: int) -> list[Row]:
    """A run's results tables, in the order they were recorded."""
    return list((await conn.execute(_RESULTS_OF, {"run_id": run_id})).all())


async def participant_counts(conn: AsyncConnection, run_ids: list[int]) -> dict[int, int]:
    """How many took part in each of ``run_ids`` (one query)."""
    if not run_ids:
        return {}
    found = {row.run_id: row.n for row in await conn.execute(_COUNTS, {"ids": run_ids})}
    return {run_id: int(found.get(run_id, 0)) for run_id in run_ids}


async def last_completed(conn: AsyncConnection, definition_id: int) -> Row | None:
    """The definition's most recently completed run (id, scheduled_for, ended_at)."""
    return (await conn.execute(_LAST_COMPLETED, {"definition_id": definition_id})).first()


async def ended_runs(
    conn: AsyncConnection, definition_id: int, *, before: datetime | None, limit: int
) -> list[Row]:
    """The definition's runs that are over, latest occurrence first, scheduled before
    ``before`` when given; at most ``limit``."""
    statement = (
        select(r.id, r.scheduled_for, r.status, r.ended_at, r.cancel_reason)
        .where(r.definition_id == definition_id, r.status.in_(ENDED))
        .order_by(r.scheduled_for.desc(), r.id.desc())
        .limit(limit)
    )
    if before is not None:
        statement = statement.where(r.scheduled_for < before)
    return list((await conn.execute(statement)).all())
