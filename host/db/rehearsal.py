"""SQL of a rehearsal: its own throwaway in-memory database's, and the one read of the real
database a rehearsal from a run makes (:func:`recorded_run`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.pool import AsyncAdaptedQueuePool

from pageant.db.engine import create_engine
from pageant.db.rows import AnyRow
from pageant.db.tables import (
    event_action_settings,
    event_definitions,
    event_run_budget,
    event_run_steps,
    event_runs,
    event_versions,
    metadata,
)
from pageant.states import RUN_ENDED, RunStatus, StepStatus

#: Where a rehearsal stops: a run that has ended, or one stopped for a person.
STOPPED = (*RUN_ENDED, RunStatus.PAUSED)


def throwaway_engine() -> AsyncEngine:
    """An empty in-memory SQLite database that lives as long as this engine.

    One connection, kept for the engine's life: an in-memory database lives exactly as long
    as its connection, and a pool of one makes the engine's overlapping stages queue for it
    (as they would queue for SQLite's write lock) instead of sharing one transaction.
    """
    return create_engine(
        "sqlite+aiosqlite://", poolclass=AsyncAdaptedQueuePool, pool_size=1, max_overflow=0
    )


_r = event_runs.c
_s = event_run_steps.c
_STATE = select(_r.status, _r.health).where(_r.id == bindparam("run_id"))
_PARKED = select(_s.id).where(
    _s.run_id == bindparam("run_id"), _s.status == StepStatus.RUNNING, _s.lease_until.is_(None)
)
_RUN = select(event_runs).where(_r.id == bindparam("run_id"))
_STEPS = select(event_run_steps).where(_s.run_id == bindparam("run_id")).order_by(_s.id)
_METERS = select(event_run_budget.c.dimension, event_run_budget.c.consumed).where(
    event_run_budget.c.run_id == bindparam("run_id")
)


async def seed(
    conn: AsyncConnection,
    *,
    definition: AnyRow,
    version: AnyRow,
    spec: Mapping[str, Any],
    settings: Iterable[AnyRow],
    now: datetime,
) -> None:
    """Create the schema and copy in one definition, its version and the switchboard."""
    await conn.run_sync(metadata.create_all)
    await conn.execute(
        insert(event_definitions).values(
            id=definition.id,
            title=definition.title,
            slug=definition.slug,
            timezone=definition.timezone,
            grace_seconds=definition.grace_seconds,
            state="ready",
            spec=spec,
            created_at=now,
            updated_at=now,
        )
    )
    await conn.execute(
        insert(event_versions).values(
            id=version.id,
            definition_id=definition.id,
            number=version.number,
            spec=spec,
            timezone=version.timezone,
            published_at=version.published_at,
        )
    )
    await conn.execute(
        update(event_definitions)
        .where(event_definitions.c.id == definition.id)
        .values(current_version_id=version.id)
    )
    rows = [dict(r._mapping) for r in settings]
    if rows:
        await conn.execute(insert(event_action_settings), rows)


async def run_state(conn: AsyncConnection, run_id: int) -> tuple[AnyRow, list[int]]:
    """The run's status and health, and the ids of its parked steps."""
    state = (await conn.execute(_STATE, {"run_id": run_id})).one()
    parked = list((await conn.execute(_PARKED, {"run_id": run_id})).scalars())
    return state, parked


async def outcome(
    conn: AsyncConnection, run_id: int
) -> tuple[AnyRow, list[AnyRow], dict[str, int]]:
    """The run row, its steps, and what it consumed per dimension."""
    run = (await conn.execute(_RUN, {"run_id": run_id})).one()
    steps = list(await conn.execute(_STEPS, {"run_id": run_id}))
    meters = {r.dimension: r.consumed for r in await conn.execute(_METERS, {"run_id": run_id})}
    return run, steps, meters


_v = event_versions.c
_d = event_definitions.c
_RECORDED = (
    select(
        _r.id,
        _r.definition_id,
        _r.status,
        _r.params,
        _r.started_at,
        _r.ended_at,
        _v.number.label("version_number"),
        _v.spec.label("version_spec"),
        _d.title.label("definition_title"),
        _d.slug.label("definition_slug"),
    )
    .select_from(
        event_runs.join(event_versions, _v.id == _r.version_id).join(
            event_definitions, _d.id == _r.definition_id
        )
    )
    .where(_r.id == bindparam("run_id"))
)


async def recorded_run(conn: AsyncConnection, run_id: int) -> AnyRow | None:
    """A real run a rehearsal replays: its event (id, title, slug), status, params, start
    and end, and the number and spec of the version it ran; None when there is no such run."""
    return (await conn.execute(_RECORDED, {"run_id": run_id})).one_or_none()
