"""SQL over ``event_run_phase_gates``: one row per gated phase a run has entered.

The row is the gate's whole state — its clock (``entered_at``, ``deadline``), its tally and
when it was satisfied — so a firing between two ticks is a write that survives anything, and
a restart never zeroes a tally. A gate is written satisfied exactly once: every statement
that closes one carries ``satisfied_at IS NULL`` in its WHERE (SQLAlchemy's MySQL dialects
report matched rows, so the expected old state has to be in the WHERE for rowcount to mean
"this statement changed it").
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, case, literal, or_, select, update
from sqlalchemy.engine import Row, RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import BindParameter

from pageant.db.engine import defer_with_next
from pageant.db.idempotent import insert_keeping_existing, inserted_id
from pageant.db.tables import (
    LIVE_RUN_STATUSES,
    by_primary_key,
    changed_one,
    event_run_phase_gates,
    event_runs,
    trigger_last_firings,
)
from pageant.db.types import UTCDateTime
from pageant.states import RunStatus

g = event_run_phase_gates.c
_r = event_runs.c

GATE_COLUMNS = (
    g.id,
    g.run_id,
    g.phase,
    g.kind,
    g.trigger_id,
    g.condition,
    g.needed,
    g.tally,
    g.entered_at,
    g.deadline,
    g.last_event_at,
    g.last_event_counted,
    g.satisfied_at,
    g.satisfied_by,
    g.match_key,
)

_l = trigger_last_firings.c
#: The index a firing's read of its gates goes through.
MATCH_KEY_INDEX = "ix_event_run_phase_gates_trigger_id_match_key_satisfied_at"
# A held gate's diagnosis reads its trigger's last firing beside it: "the last firing, at
# 20:05, did not match" is that firing, later than the last one the gate counted.
_GATE = (
    select(
        *GATE_COLUMNS,
        _l.last_at.label("trigger_last_at"),
        _l.payload.label("trigger_last_payload"),
    )
    .select_from(
        event_run_phase_gates.outerjoin(trigger_last_firings, _l.trigger_id == g.trigger_id)
    )
    .where(g.run_id == bindparam("run_id"), g.phase == bindparam("phase"))
)
_GATE_BY_ID = select(*GATE_COLUMNS).where(g.id == bindparam("gate_id"))

# The gates a firing of one trigger may count for: open, of a live run, and of the phase
# that run is in, whose match key the firing carries (pageant.gates.matching): the
# (trigger_id, match_key, satisfied_at) index finds them without reading the gates of the
# other keys. Ordered by id so that concurrent firings lock the rows in one order. SQLite's
# planner, without statistics, takes the (trigger_id, satisfied_at) index instead and reads
# every open gate of the trigger (and its run): it is told which index to use.
_OPEN_ON = (
    select(*GATE_COLUMNS)
    .select_from(event_run_phase_gates.join(event_runs, _r.id == g.run_id))
    .with_hint(event_run_phase_gates, f"INDEXED BY {MATCH_KEY_INDEX}", dialect_name="sqlite")
    .where(
        g.trigger_id == bindparam("trigger_id"),
        g.match_key.in_(bindparam("keys", expanding=True)),
        g.kind == "on",
        g.satisfied_at.is_(None),
        _r.status.in_(LIVE_RUN_STATUSES),
        _r.current_phase == g.phase,
    )
    .order_by(g.id)
)

# Whether any open gate waits on a trigger: the (trigger_id, satisfied_at) index answers it.
_OPEN_AMONG = (
    select(g.trigger_id)
    .where(
        g.trigger_id.in_(bindparam("trigger_ids", expanding=True)),
        g.kind == "on",
        g.satisfied_at.is_(None),
    )
    .distinct()
)

# The open reading gates of running runs in their current phase, with what the reading's
# params are written out from (the run's params and scope).
_OPEN_READING = (
    select(*GATE_COLUMNS, _r.params.label("run_params"), _r.scope.label("run_scope"))
    .select_from(event_run_phase_gates.join(event_runs, _r.id == g.run_id))
    .where(
        g.kind == "reading",
        g.satisfied_at.is_(None),
        _r.status == RunStatus.RUNNING,
        _r.current_phase == g.phase,
    )
    .order_by(g.id)
    .limit(bindparam("limit"))
)

_NOW_AT = bindparam("now", type_=UTCDateTime)
_SATISFY_BY_READING = by_primary_key(
    update(event_run_phase_gates)
    .where(g.id == bindparam("gate_id"), g.satisfied_at.is_(None))
    .values(satisfied_at=_NOW_AT, satisfied_by="reading", tally=bindparam("tally"))
)

_NOW = bindparam("now", type_=UTCDateTime)
_REACHED = g.tally + 1 >= g.needed


def count_assignments() -> list[tuple[Any, Any]]:
    """The SET list of a counted firing, in the order it must be written.

    **The order is load-bearing.** MariaDB evaluates an UPDATE's assignments left to right,
    each seeing the values already assigned; SQLite evaluates every one against the old
    row. With ``tally = tally + 1`` first, MariaDB's CASEs would read the incremented tally
    and a gate needing two firings would close on its first. With the increment last, both
    servers read the old tally in every CASE and agree.
    """
    return [
        (g.satisfied_at, case((_REACHED, _NOW), else_=g.satisfied_at)),
        (g.satisfied_by, case((_REACHED, literal("tally")), else_=g.satisfied_by)),
        (g.last_event_at, _NOW),
        (g.last_event_counted, True),
        (g.tally, g.tally + 1),
    ]


#: The conditional increment: counts only into an open gate that still needs firings.
COUNT_WHERE = (
    g.id == bindparam("gate_id"),
    g.satisfied_at.is_(None),
    g.tally < g.needed,
)
_COUNT = by_primary_key(
    update(event_run_phase_gates).where(*COUNT_WHERE).ordered_values(*count_assignments())
)

# The gates a transaction's firings count for, read again under a write lock on each row
# (MariaDB; SQLite's writer is alone) and in id order, as every writer of gates locks them:
# what it reads is what its counts are added to.
_LOCK = (
    select(*GATE_COLUMNS)
    .where(g.id.in_(bindparam("gate_ids", expanding=True)))
    .order_by(g.id)
    .with_for_update()
)


#: The counted firings of one transaction, a gate a row of one statement: its new tally,
#: and its close when the tally reached ``needed``. A compare-and-set on the tally read
#: under the lock, so a row that changed anyway is not written (and the count tells).
_COUNT_MANY = by_primary_key(
    update(event_run_phase_gates)
    .where(
        g.id == bindparam("gate_id"),
        g.satisfied_at.is_(None),
        g.tally == bindparam("was"),
    )
    .values(
        satisfied_at=bindparam("closed_at", type_=UTCDateTime),
        satisfied_by=bindparam("closed_by"),
        last_event_at=bindparam("counted_at", type_=UTCDateTime),
        last_event_counted=True,
        tally=bindparam("new_tally"),
    )
)

# Satisfied at the deadline itself, not when a tick got round to it: the phase's clock ran
# out then, whatever the engine was doing.
_CLOSE_AT_DEADLINE = by_primary_key(
    update(event_run_phase_gates)
    .where(
        g.id == bindparam("gate_id"),
        g.satisfied_at.is_(None),
        g.deadline <= bindparam("now"),
    )
    .values(satisfied_at=g.deadline, satisfied_by="deadline")
)

# A gate whose deadline already passed is past its gate, not forceable.
_FORCE = by_primary_key(
    update(event_run_phase_gates)
    .where(
        g.id == bindparam("gate_id"),
        g.satisfied_at.is_(None),
        or_(g.deadline.is_(None), g.deadline > bindparam("now")),
    )
    .values(satisfied_at=bindparam("now"), satisfied_by="forced")
)


async def open_gate(conn: AsyncConnection, values: dict[str, Any]) -> bool:
    """Insert a phase's gate row unless (run, phase) has one; True when it was made."""
    stmt = insert_keeping_existing(event_run_phase_gates, (g.run_id, g.phase), conn.dialect).values(
        **values
    )
    return inserted_id(await conn.execute(stmt), conn.dialect) is not None


async def gate_of(conn: AsyncConnection, run_id: int, phase: str) -> Row | None:
    """The gate row of one phase of a run, or None."""
    return (await conn.execute(_GATE, {"run_id": run_id, "phase": phase})).first()


async def gate_by_id(conn: AsyncConnection, gate_id: int) -> RowMapping:
    """A gate read again by its id, inside the transaction that read or changed it (so it
    exists; a gate goes only with its run)."""
    return (await conn.execute(_GATE_BY_ID, {"gate_id": gate_id})).one()._mapping


async def open_on_gates(conn: AsyncConnection, trigger_id: str, keys: Sequence[str]) -> list[Row]:
    """Every open ``on`` gate waiting on ``trigger_id`` in the current phase of a live run
    whose match key is one of ``keys``."""
    params = {"trigger_id": trigger_id, "keys": list(keys)}
    return list((await conn.execute(_OPEN_ON, params)).all())


async def open_on(conn: AsyncConnection, trigger_ids: Sequence[str]) -> set[str]:
    """Which of ``trigger_ids`` an open ``on`` gate waits on (of any run, live or not), in
    one read."""
    if not trigger_ids:
        return set()
    rows = await conn.execute(_OPEN_AMONG, {"trigger_ids": sorted(trigger_ids)})
    return set(rows.scalars())


async def count_firing(conn: AsyncConnection, gate_id: int, now: datetime) -> bool:
    """Count one matching firing; the gate is satisfied (``tally``) when it reaches
    ``needed``. False when the gate was already satisfied (nothing written)."""
    return await changed_one(conn, _COUNT, {"gate_id": gate_id, "now": now})


async def lock_gates(conn: AsyncConnection, gate_ids: Sequence[int]) -> dict[int, RowMapping]:
    """The gates ``gate_ids`` as they are now, each locked until the transaction ends, by
    id (a gate gone with its run is absent)."""
    if not gate_ids:
        return {}
    rows = await conn.execute(_LOCK, {"gate_ids": sorted(gate_ids)})
    return {row.id: row._mapping for row in rows}


async def count_firings(conn: AsyncConnection, counts: Sequence[dict[str, Any]]) -> int:
    """Write counted firings, one statement for every gate: each of ``counts`` is
    ``{gate_id, was, new_tally, closed_at, closed_by, counted_at}`` (``was``: the tally
    :func:`lock_gates` read; ``closed_at``/``closed_by``: None, or the instant and
    ``"tally"`` when ``new_tally`` reached ``needed``). Answers how many gates were
    written: every one, unless a gate changed despite its lock.

    On SQLite the statement is an ``executemany`` in one turn of the driver's thread, and it
    rides with the transaction's next statement (:func:`pageant.db.engine.defer_with_next`),
    which fails, before anything commits, unless every gate was written. On MariaDB, whose
    drivers send an ``executemany`` of an ``UPDATE`` as a round trip a row, it is one
    ``UPDATE`` of every gate (:func:`_count_all`)."""
    if not counts:
        return 0
    if conn.dialect.name == "sqlite":
        defer_with_next(conn, len(counts))
        return (await conn.execute(_COUNT_MANY, list(counts))).rowcount
    by_gate = sorted(counts, key=lambda count: count["gate_id"])
    params = {"counted_at": by_gate[0]["counted_at"]}
    for i, count in enumerate(by_gate):
        for field in _PER_GATE:
            params[f"{field}_{i}"] = count[field]
    return (await conn.execute(_count_all(len(by_gate)), params)).rowcount


#: What each gate of :func:`_count_all` is given, as its parameters ``<field>_<i>``.
_PER_GATE = ("gate_id", "was", "new_tally", "closed_at", "closed_by")


@functools.lru_cache(maxsize=64)
def _count_all(gates: int) -> Any:
    """:data:`_COUNT_MANY` for ``gates`` gates in one statement, built once a number of
    gates (a statement built a call costs more than the round trips it saves): each
    column a ``CASE`` on the gate's id, and the compare-and-set on each gate's own tally
    read. No assignment reads a column another one sets, so MariaDB's left-to-right
    assignments and SQLite's old-row ones agree."""
    ids: list[BindParameter[Any]] = [bindparam(f"gate_id_{i}") for i in range(gates)]

    def each(field: str, type_: Any) -> Any:
        return case(
            *((g.id == ids[i], bindparam(f"{field}_{i}", type_=type_)) for i in range(gates))
        )

    return (
        update(event_run_phase_gates)
        .where(g.id.in_(ids), g.satisfied_at.is_(None), g.tally == each("was", g.tally.type))
        .values(
            satisfied_at=each("closed_at", UTCDateTime()),
            satisfied_by=each("closed_by", g.satisfied_by.type),
            last_event_at=bindparam("counted_at", type_=UTCDateTime),
            last_event_counted=True,
            tally=each("new_tally", g.tally.type),
        )
    )


async def close_at_deadline(conn: AsyncConnection, gate_id: int, now: datetime) -> bool:
    """Satisfy an ``after`` gate whose deadline has come; True only for the one call that
    closed it."""
    return await changed_one(conn, _CLOSE_AT_DEADLINE, {"gate_id": gate_id, "now": now})


async def force(conn: AsyncConnection, gate_id: int, now: datetime) -> bool:
    """Satisfy an open gate by a person's decision; False when it was already past."""
    return await changed_one(conn, _FORCE, {"gate_id": gate_id, "now": now})


_GATES_OF_RUN = select(*GATE_COLUMNS).where(g.run_id == bindparam("run_id")).order_by(g.id)


async def gates_of_run(conn: AsyncConnection, run_id: int) -> list[Row]:
    """Every gate row of a run (one per phase it entered that had a gate), oldest first."""
    return list((await conn.execute(_GATES_OF_RUN, {"run_id": run_id})).all())


async def open_reading_gates(conn: AsyncConnection, *, limit: int) -> list[Row]:
    """The open ``reading`` gates of running runs in their current phase, oldest first: each
    gate's columns, and ``run_params`` and ``run_scope``."""
    return list((await conn.execute(_OPEN_READING, {"limit": limit})).all())


async def satisfy_by_reading(
    conn: AsyncConnection, gate_id: int, now: datetime, *, tally: int
) -> bool:
    """Satisfy a reading gate whose reading reached its number (``tally``: the number read);
    True only for the one call that closed it."""
    return await changed_one(
        conn, _SATISFY_BY_READING, {"gate_id": gate_id, "now": now, "tally": tally}
    )
