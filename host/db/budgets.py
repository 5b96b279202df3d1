"""SQL over ``event_run_budget``: what a run may spend per dimension, and what it has.

A run's rows are pinned when it is created, one per dimension its version can spend. The
spend is one conditional increment per dimension; a row that is missing is a refusal, a
NULL cap is metered and unbounded.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import bindparam, insert, null, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db.rows import AnyRow
from pageant.db.tables import (
    TERMINAL_RUN_STATUSES,
    by_primary_key,
    changed_one,
    event_run_budget,
    event_run_steps,
    event_runs,
)

b = event_run_budget.c
_s = event_run_steps.c

_INSERT = insert(event_run_budget)
_OF_RUN = (
    select(b.id, b.dimension, b.cap, b.consumed, b.cap_source_action, b.actions)
    .where(b.run_id == bindparam("run_id"))
    .order_by(b.dimension)
)
_ROW = select(b.dimension, b.cap, b.consumed, b.cap_source_action).where(
    b.run_id == bindparam("run_id"), b.dimension == bindparam("dimension")
)
_DELETE_OF_RUN = event_run_budget.delete().where(b.run_id == bindparam("run_id"))

# The conditional increment (DESIGN §3). It has one assignment, so MariaDB's left-to-right
# SET evaluation and SQLite's old-row evaluation cannot disagree; the condition is in the
# WHERE clause, so the matched-rows count MariaDB reports is the changed-rows count. Two
# concurrent spenders of one row serialise on its row lock (MariaDB) or the write lock
# (SQLite), and the second one's WHERE sees what the first committed.
_SPEND = (
    update(event_run_budget)
    .where(
        b.run_id == bindparam("of_run"),
        b.dimension == bindparam("of_dimension"),
        or_(b.cap.is_(None), b.consumed + bindparam("amount") <= b.cap),
    )
    .values(consumed=b.consumed + bindparam("amount"))
)
# Written in the spend's transaction: a step that has paid carries what it paid, and the
# "IS NULL" makes a second payment for the same step impossible (a retry, a re-dispatch).
_MARK_SPENT = by_primary_key(
    update(event_run_steps)
    .where(_s.id == bindparam("step_id"), _s.spent.is_(None))
    .values(spent=bindparam("spent"))
)
_GIVE_BACK = (
    update(event_run_budget)
    .where(b.run_id == bindparam("of_run"), b.dimension == bindparam("of_dimension"))
    .values(consumed=b.consumed - bindparam("amount"))
)
# null(), not None: None would store the JSON value null, which "spent IS NULL" never matches,
# and the step could then never pay again.
_UNMARK_SPENT = by_primary_key(
    update(event_run_steps).where(_s.id == bindparam("step_id")).values(spent=null())
)
_SPENT_OF = select(_s.spent).where(_s.id == bindparam("step_id"))
# Only a step that has paid is settled, and only ever down (the caller never asks for more
# than the reservation), so a settle can never carry a run past its cap.
_SETTLE_SPENT = by_primary_key(
    update(event_run_steps)
    .where(_s.id == bindparam("step_id"), _s.spent.is_not(None))
    .values(spent=bindparam("spent"))
)
_LIVE_ROWS = (
    select(b.id, b.run_id, b.dimension, b.cap, b.cap_source_action, b.actions)
    .select_from(event_run_budget.join(event_runs, event_runs.c.id == b.run_id))
    .where(
        b.dimension.in_(bindparam("dimensions", expanding=True)),
        event_runs.c.status.not_in(TERMINAL_RUN_STATUSES),
    )
)
_RECAP = (
    update(event_run_budget)
    .where(b.id == bindparam("row_id"))
    .values(cap=bindparam("cap"), cap_source_action=bindparam("source"))
)


async def pin_budget(conn: AsyncConnection, run_id: int, rows: Sequence[Mapping[str, Any]]) -> None:
    """Insert a new run's budget rows: ``{dimension, cap, cap_source_action, actions}``."""
    if rows:
        await conn.execute(_INSERT, [{"run_id": run_id, "consumed": 0, **row} for row in rows])


async def unpin_budget(conn: AsyncConnection, run_id: int) -> None:
    """Drop a run's budget rows (a run re-pinned to another version before it started)."""
    await conn.execute(_DELETE_OF_RUN, {"run_id": run_id})


async def budget_of(conn: AsyncConnection, run_id: int) -> list[AnyRow]:
    """A run's budget rows, by dimension."""
    return list(await conn.execute(_OF_RUN, {"run_id": run_id}))


async def budget_row(conn: AsyncConnection, run_id: int, dimension: str) -> AnyRow | None:
    return (await conn.execute(_ROW, {"run_id": run_id, "dimension": dimension})).first()


async def mark_spent(conn: AsyncConnection, step_id: int, spent: Mapping[str, int]) -> bool:
    """Record what ``step_id`` pays; False when it has already paid."""
    return await changed_one(conn, _MARK_SPENT, {"step_id": step_id, "spent": dict(spent)})


async def spend(conn: AsyncConnection, run_id: int, dimension: str, amount: int) -> bool:
    """Add ``amount`` to the run's ``dimension`` if the cap allows; False if it does not
    (or the run has no row for the dimension). Nothing changes on False."""
    params = {"of_run": run_id, "of_dimension": dimension, "amount": amount}
    return await changed_one(conn, _SPEND, params)


async def give_back(conn: AsyncConnection, run_id: int, dimension: str, amount: int) -> None:
    """Undo :func:`spend` inside the transaction that spent (a partial spend unwound)."""
    params = {"of_run": run_id, "of_dimension": dimension, "amount": amount}
    await conn.execute(_GIVE_BACK, params)


async def unmark_spent(conn: AsyncConnection, step_id: int) -> None:
    """Undo :func:`mark_spent` inside the transaction that marked it."""
    await conn.execute(_UNMARK_SPENT, {"step_id": step_id})


async def spent_of(conn: AsyncConnection, step_id: int) -> dict[str, int] | None:
    """What ``step_id`` has paid, or None when it has paid nothing."""
    spent = (await conn.execute(_SPENT_OF, {"step_id": step_id})).scalar()
    return dict(spent) if spent is not None else None


async def settle(
    conn: AsyncConnection,
    run_id: int,
    step_id: int,
    paid: Mapping[str, int],
    keep: Mapping[str, int],
) -> None:
    """Lower what ``step_id`` paid (``paid``) to ``keep`` (never more, per dimension), and
    give the difference back to the run's meters for its later steps."""
    for dimension in sorted(paid):
        released = paid[dimension] - keep.get(dimension, paid[dimension])
        if released > 0:
            await give_back(conn, run_id, dimension, released)
    await conn.execute(_SETTLE_SPENT, {"step_id": step_id, "spent": dict(keep)})


async def live_rows(conn: AsyncConnection, dimensions: Iterable[str]) -> list[AnyRow]:
    """Budget rows of runs that have not ended, for ``dimensions``."""
    wanted = sorted(set(dimensions))
    if not wanted:
        return []
    return list(await conn.execute(_LIVE_ROWS, {"dimensions": wanted}))


async def set_cap(conn: AsyncConnection, row_id: int, cap: int | None, source: str | None) -> None:
    await conn.execute(_RECAP, {"row_id": row_id, "cap": cap, "source": source})
