"""SQL for an announcement: what its template may say of a run, read in one statement.

The run's occurrence and scope, its event's title, slug and visibility, and the time zone
and spec of the version it runs (the template lives in the spec, so a run announces with
the template it was published with, not an edit made since).
"""

from __future__ import annotations

from sqlalchemy import bindparam, select
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db.tables import event_definitions, event_runs, event_versions

_FACTS = (
    select(
        event_runs.c.scheduled_for,
        event_runs.c.scope,
        event_definitions.c.title,
        event_definitions.c.slug,
        event_definitions.c.visibility,
        event_versions.c.timezone,
        event_versions.c.spec,
    )
    .select_from(
        event_runs.join(
            event_definitions, event_definitions.c.id == event_runs.c.definition_id
        ).join(event_versions, event_versions.c.id == event_runs.c.version_id)
    )
    .where(event_runs.c.id == bindparam("run_id"))
)


async def run_facts(conn: AsyncConnection, run_id: int) -> Row | None:
    """The run ``run_id``'s ``scheduled_for``, ``scope``, its event's ``title``, ``slug`` and
    ``visibility``, and its version's ``timezone`` and ``spec``; ``None`` for no such run."""
    return (await conn.execute(_FACTS, {"run_id": run_id})).first()
