"""SQL over ``event_runs`` for catch-up: a late run let start, and whose turn it is.

A catch-up is decided once per run by a compare-and-set from ``scheduled`` with no catch-up
yet, so two hosts deciding at once never both let one run in (and the start itself is the
start's own compare-and-set). Catch-up runs of one event and scope follow one another: a run
waits while another of them is live, or while an earlier one let in has not started.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, or_, select, update
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db.states import RUN_LIVE, RunStatus
from pageant.db.tables import by_primary_key, changed_one, event_runs, status_in

r = event_runs.c

_GRANT = by_primary_key(
    update(event_runs)
    .where(
        r.id == bindparam("run_id"),
        r.status == RunStatus.SCHEDULED,
        r.catch_up.is_(None),
    )
    .values(catch_up=bindparam("note"))
)

# Served by the occurrence key's unique index (definition_id, scope, scheduled_for).
_AHEAD = (
    select(r.id, r.status, r.scheduled_for)
    .where(
        r.definition_id == bindparam("definition_id"),
        r.scope == bindparam("scope"),
        r.id != bindparam("run_id"),
        or_(
            status_in(r.status, RUN_LIVE),
            (r.status == RunStatus.SCHEDULED)
            & r.catch_up.is_not(None)
            & (r.scheduled_for < bindparam("scheduled_for")),
        ),
    )
    .order_by(r.scheduled_for, r.id)
    .limit(1)
)


async def grant_catch_up(conn: AsyncConnection, run_id: int, note: str) -> bool:
    """Let a scheduled run start after its grace window, saying why (``note``); False when
    it is no longer scheduled or another host decided it first."""
    return await changed_one(conn, _GRANT, {"run_id": run_id, "note": note})


async def catch_up_ahead(conn: AsyncConnection, run: Any) -> Row | None:
    """The run a catch-up run waits for (None: it is its turn): another run of its event and
    scope that is live, or an earlier catch-up run that has not started."""
    params = {
        "definition_id": run["definition_id"],
        "scope": run["scope"],
        "run_id": run["id"],
        "scheduled_for": run["scheduled_for"],
    }
    return (await conn.execute(_AHEAD, params)).first()
