"""The ledger's state, read and written inside a caller's transaction: what a run's
``cleanup_status`` is (derived from its rows, never the other way round), and releasing one
row with its log line. It imports nothing of the host, so the host, the runs and the engine
may all use it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db import resources, runlog, runs


def derive(counts: Mapping[str, int]) -> str:
    """``cleanup_status`` from the run's rows: ``pending`` while something is left to try,
    ``incomplete`` once something is still out there and nothing is left to try,
    ``complete`` when nothing holds, ``not_required`` when nothing was ever recorded."""
    if counts.get("pending", 0) or counts.get("confirmed", 0):
        return "pending"
    if counts.get("revert_failed", 0):
        return "incomplete"
    return "complete" if sum(counts.values()) else "not_required"


async def settle(
    conn: AsyncConnection,
    run_id: int,
    *,
    now: datetime,
    rescue: bool = False,
    because: str | None = None,
) -> str:
    """Derive and write the run's ``cleanup_status``; a change is logged once, with
    ``because`` (why it is ``incomplete``) when given.

    A run left in the world by ``cancel {cleanup: false}`` stays ``incomplete`` (nothing
    is left to try for it) until an admin's cleanup (``rescue``) settles it again.
    """
    value = derive(await resources.counts_of_run(conn, run_id))
    if value == "pending" and not rescue:
        run = await runs.get_run(conn, run_id)
        if run is not None and run.cleanup_status == "incomplete":
            return "incomplete"
    if await resources.set_cleanup_status(conn, run_id, value):
        why = because if value == "incomplete" else None
        await runlog.resource_cleanup(conn, run_id, at=now, to=value, because=why)
    return value


#: The log line of each way a row is released.
RELEASED_LINES: dict[str, Callable[..., Awaitable[None]]] = {
    "reverted": runlog.resource_reverted,
    "drifted": runlog.resource_drifted,
    "orphaned": runlog.resource_orphaned,
}


async def released(
    conn: AsyncConnection,
    row: Any,
    *,
    to: str,
    now: datetime,
    attempted: bool,
    error: str | None = None,
    payload: dict[str, Any] | None = None,
    detail: dict[str, Any] | None = None,
) -> None:
    """Release ``row`` to ``to`` (``reverted``, ``drifted``, ``orphaned``) and log it once."""
    if await resources.release(
        conn, row.id, to=to, now=now, attempted=attempted, error=error, payload=payload
    ):
        await RELEASED_LINES[to](conn, row, at=now, **(detail or {}))
