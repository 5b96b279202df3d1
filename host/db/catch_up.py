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

from pageant.db.due import LATE_COLUMNS
from pageant.db.tables import (
    by_primary_key,
    changed_one,
    event_definitions,
    event_runs,
    status_in,
)
from pageant.states import RUN_LIVE, RunStatus

r = event_runs.c
d = event_definitions.c

#: The most late runs of one event and scope one decision reads (a week of a daily event is
#: seven; this is a paste guard, not a limit anyone meets).
MAX_LATE = 1_000

# Every late run of one event and scope, not only those in the sweep's batch: ``one`` must
# see the latest of them, wherever the batch's limit cut.
_LATE_OF = (
    select(*LATE_COLUMNS)
    .select_from(event_runs.join(event_definitions, d.id == r.definition_id))
    .where(
        r.definition_id == bindparam("definition_id"),
        r.scope == bindparam("scope"),
        r.status == RunStatus.SCHEDULED,
        r.scheduled_for <= bindparam("now"),
        r.catch_up.is_(None),
    )
    .order_by(r.scheduled_for, r.id)
    .limit(MAX_LATE)
)

# ``catch_up IS NULL`` is in the WHERE clause so that on MariaDB, whose driver reports matched
# rows, a match is a change: the second host deciding the same run matches nothing.
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


async def late_of(conn: AsyncConnection, definition_id: int, scope: str, now: Any) -> list[Row]:
    """The scheduled runs of one event and scope whose instant has passed and that no
    catch-up let in yet (the columns of :func:`pageant.db.due.missed_candidates`)."""
    params = {"definition_id": definition_id, "scope": scope, "now": now}
    return list((await conn.execute(_LATE_OF, params)).all())


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
