"""SQL behind the progress players see: the count gates of an event's runs under way.

A run is under way while it is live (:data:`pageant.states.RUN_LIVE`: starting, running,
paused, ending); each ``on`` gate it has entered is a row of ``event_run_phase_gates``. Which
of them players may see is the run's pinned spec's to say (``"public": true``), read above
this module; this one only answers the rows, through the ``(definition_id, status)`` index.
"""

from __future__ import annotations

from sqlalchemy import bindparam, select
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db.tables import event_run_phase_gates, event_runs
from pageant.states import RUN_LIVE

r = event_runs.c
g = event_run_phase_gates.c

_COUNT_GATES = (
    select(
        r.id.label("run_id"),
        r.version_id,
        r.scheduled_for,
        r.params,
        g.phase,
        g.tally,
        g.needed,
        g.satisfied_at,
    )
    .select_from(event_runs.join(event_run_phase_gates, g.run_id == r.id))
    .where(
        r.definition_id == bindparam("definition_id"),
        r.status.in_(list(RUN_LIVE)),
        g.kind == "on",
    )
    .order_by(r.scheduled_for, r.id, g.id)
)


async def count_gates_under_way(conn: AsyncConnection, definition_id: int) -> list[Row]:
    """Every count gate entered by a live run of ``definition_id``: the run's id, version,
    instant and params, and the gate's phase, tally, count (``needed``) and when it was
    satisfied; by the runs' instants, each run's gates in the order they opened."""
    return list((await conn.execute(_COUNT_GATES, {"definition_id": definition_id})).all())
