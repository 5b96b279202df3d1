"""SQL over ``event_run_log``: one line per state change, written by whoever decided it."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, func, insert, literal, select
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db import shared
from pageant.db.log_kinds import LogKind
from pageant.db.tables import TERMINAL_RUN_STATUSES, event_run_log, event_runs
from pageant.timefmt import iso

g = event_run_log.c

_WRITE = insert(event_run_log)

_LINES = (
    select(g.id, g.at, g.kind, g.phase, g.step_id, g.detail, g.actor)
    .where(g.run_id == bindparam("run_id"))
    .order_by(g.id)
)
# The newest lines first, for a tail; and how many lines there are (the (run_id, id) index
# answers both without reading the older lines).
_TAIL = (
    select(g.id, g.at, g.kind, g.phase, g.step_id, g.detail, g.actor)
    .where(g.run_id == bindparam("run_id"))
    .order_by(g.id.desc())
    .limit(bindparam("limit"))
)
_COUNT = select(func.count()).select_from(event_run_log).where(g.run_id == bindparam("run_id"))

# Only lines of runs that ended before the cutoff; a live run's story is never pruned. The
# lines are found through their own instant (indexed), so a prune reads what it deletes and
# not every run that ever ended. SQLite, without statistics, would rather walk every ended
# run through the status index (17 ms at 100,000 runs against 0.3 ms); comparing an
# expression of the status instead of the column takes that index out of its choice.
_PRUNABLE = (
    select(g.id)
    .select_from(event_run_log.join(event_runs, event_runs.c.id == g.run_id))
    .where(
        g.at < bindparam("cutoff"),
        (event_runs.c.status + literal("")).in_(TERMINAL_RUN_STATUSES),
        event_runs.c.ended_at < bindparam("cutoff"),
    )
    .limit(bindparam("limit"))
)
_DELETE = event_run_log.delete().where(g.id.in_(bindparam("ids", expanding=True)))


def _json_ready(value: Any) -> Any:
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, dict):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    return value


log = logging.getLogger("pageant.runs")


def _announce(
    run_id: int, kind: str, phase: str | None, step_id: int | None, detail: Any, level: int
) -> None:
    if not log.isEnabledFor(level):
        return
    detail = detail or {}
    outcome = detail.get("to") or kind.partition(".")[2] or kind
    fields: dict[str, Any] = {"run_id": run_id, "event": kind, "outcome": outcome}
    if step_id is not None:
        fields["step_id"] = step_id
    if phase is not None:
        fields["phase"] = phase
    for key in ("action", "attempt", "because", "error"):
        if detail.get(key) is not None:
            fields[key] = detail[key]
    subject = f"run {run_id}" if step_id is None else f"run {run_id} step {step_id}"
    why = detail.get("because") or detail.get("error")
    log.log(level, "%s %s: %s%s", subject, kind, outcome, f" ({why})" if why else "", extra=fields)


async def write(
    conn: AsyncConnection,
    run_id: int,
    kind: LogKind,
    *,
    at: datetime,
    phase: str | None = None,
    step_id: int | None = None,
    detail: dict[str, Any] | None = None,
    actor: str | None = None,
    level: int = logging.INFO,
) -> None:
    """Append one line of ``kind`` to a run's log (instants in ``detail`` become ISO
    strings), and log it for the operator at ``level``. In a shared transaction
    (:mod:`pageant.db.shared`) the line is inserted with the others by :func:`flush`."""
    row = {
        "run_id": run_id,
        "step_id": step_id,
        "kind": str(kind),
        "phase": phase,
        "detail": _json_ready(detail) if detail is not None else None,
        "actor": actor,
        "at": at,
    }
    scope = shared.of(conn)
    if scope is not None:
        scope.lines.append(row)
    else:
        await conn.execute(_WRITE, row)
    _announce(run_id, str(kind), phase, step_id, detail, level)


async def flush(conn: AsyncConnection) -> int:
    """Insert the lines a shared transaction kept back, in the order they were written, in
    one statement; answers how many."""
    scope = shared.of(conn)
    if scope is None or not scope.lines:
        return 0
    lines, scope.lines = scope.lines, []
    await conn.execute(_WRITE, lines)
    return len(lines)


async def lines_of(conn: AsyncConnection, run_id: int) -> list[Row]:
    """A run's log, oldest first."""
    return list((await conn.execute(_LINES, {"run_id": run_id})).all())


async def tail_of(conn: AsyncConnection, run_id: int, limit: int) -> tuple[list[Row], int]:
    """The newest ``limit`` lines of a run's log, oldest first, and how many it has in all."""
    newest = list((await conn.execute(_TAIL, {"run_id": run_id, "limit": limit})).all())
    total = len(newest)
    if total == limit:
        total = int((await conn.execute(_COUNT, {"run_id": run_id})).scalar_one())
    newest.reverse()
    return newest, total


async def prune(conn: AsyncConnection, cutoff: datetime, *, limit: int) -> int:
    """Delete up to ``limit`` log lines of runs that ended before ``cutoff``."""
    ids = list((await conn.execute(_PRUNABLE, {"cutoff": cutoff, "limit": limit})).scalars())
    if not ids:
        return 0
    await conn.execute(_DELETE, {"ids": ids})
    return len(ids)


async def creators(conn: AsyncConnection, run_ids: list[int]) -> dict[int, str | None]:
    """Who made each of these runs: the actor of its ``run.created`` line (None for a run
    the scheduler made, or one whose first line was pruned)."""
    if not run_ids:
        return {}
    log = event_run_log.c
    rows = await conn.execute(
        select(log.run_id, log.actor).where(
            log.run_id.in_(run_ids), log.kind == LogKind.RUN_CREATED.value
        )
    )
    return {row.run_id: row.actor for row in rows}
