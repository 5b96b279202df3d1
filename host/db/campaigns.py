"""SQL over ``event_runs`` for campaigns: the runs of a required event a due occurrence reads.

Each question is one read served by the occurrence key's unique index (``definition_id``
first). The decision they feed is written by the ending's or the start's own
compare-and-set from ``scheduled``, so two hosts reading at once decide one outcome.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Select, bindparam, or_, select
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db.tables import event_runs, status_in
from pageant.states import RUN_ENDED, RUN_LIVE, RunStatus

r = event_runs.c
_COLUMNS = (r.id, r.status, r.scheduled_for, r.ended_at)


def _ended_since(statuses: Sequence[str]) -> Select[Any]:
    return (
        select(*_COLUMNS)
        .where(
            r.definition_id == bindparam("definition_id"),
            status_in(r.status, statuses),
            r.ended_at >= bindparam("since"),
        )
        .order_by(r.ended_at.desc(), r.id.desc())
        .limit(1)
    )


_LAST = _ended_since(RUN_ENDED)

# A run still going, or due inside the window and not started: what a held occurrence waits
# for. The occurrence itself is left out (an event may require its own earlier outcome).
_GOING = (
    select(*_COLUMNS)
    .where(
        r.definition_id == bindparam("definition_id"),
        r.id != bindparam("run_id"),
        or_(
            status_in(r.status, RUN_LIVE),
            (r.status == RunStatus.SCHEDULED)
            & (r.scheduled_for >= bindparam("since"))
            & (r.scheduled_for <= bindparam("until")),
        ),
    )
    .order_by(r.scheduled_for, r.id)
    .limit(1)
)


async def latest_ended(
    conn: AsyncConnection, definition_id: int, since: datetime, statuses: Sequence[str]
) -> Row | None:
    """The run of ``definition_id`` that ended last at or after ``since`` with one of
    ``statuses`` (every ended status when ``statuses`` is empty), or None."""
    query = _ended_since(statuses) if statuses else _LAST
    params = {"definition_id": definition_id, "since": since}
    return (await conn.execute(query, params)).first()


async def going_or_due(
    conn: AsyncConnection, definition_id: int, run_id: int, since: datetime, until: datetime
) -> Row | None:
    """A run of ``definition_id`` other than ``run_id`` that is live, or scheduled from
    ``since`` to ``until`` (the earliest), or None."""
    params = {"definition_id": definition_id, "run_id": run_id, "since": since, "until": until}
    return (await conn.execute(_GOING, params)).first()
