"""What is due: the tick's reads over ``event_runs`` and the rows that belong to a run.

Everything here filters by status first, through an index, so an idle tick costs the same
beside a hundred thousand finished runs as in an empty database: history is never scanned.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, bindparam, func, literal, or_, select
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db.runs import RUN_COLUMNS, RUN_FROM, r
from pageant.db.tables import (
    LIVE_RUN_STATUSES,
    RUN_PHASE_ORDER,
    event_definitions,
    event_run_phase_gates,
    event_run_resources,
    event_run_steps,
    event_runs,
)
from pageant.states import RUN_ACTIVE, STEP_OPEN, Health, RunStatus, StepStatus, WaitingReason

d = event_definitions.c
_st = event_run_steps.c
_g = event_run_phase_gates.c
_s = event_run_steps.alias("s")
_before = event_run_steps.alias("before_s")
OPEN_STEP = STEP_OPEN

_DUE_SCHEDULED = (
    select(*RUN_COLUMNS)
    .select_from(RUN_FROM)
    .where(
        r.status == RunStatus.SCHEDULED,
        r.scheduled_for <= bindparam("now"),
        r.id.not_in(bindparam("busy", expanding=True)),
    )
    .order_by(r.scheduled_for, r.id)
    .limit(bindparam("limit"))
)


def _exists(*where: Any, outer: tuple[Any, ...] = (event_runs,), steps: Any = None) -> Any:
    # Correlated to the run row explicitly: left to auto-correlation, a nested EXISTS
    # re-adds event_runs to its own FROM and quietly becomes a cross join over every run.
    # ``steps``: the step alias read by (run_id, phase), hinted to that index on MariaDB.
    query = select(literal(1)).where(*where).correlate(*outer)
    if steps is not None:
        query = query.with_hint(steps, RUN_PHASE_ORDER, dialect_name="mysql")
    return query.exists()


# A running run has something to do when the first open step of its current phase is
# pending and due, or when its phase has no open step left and no gate holds it. Derived
# from the step rows (the fact), never from a summary column.
_step_due = _exists(
    _s.c.run_id == r.id,
    _s.c.phase == r.current_phase,
    _s.c.status == StepStatus.PENDING,
    or_(_s.c.due_at.is_(None), _s.c.due_at <= bindparam("now")),
    ~_exists(
        _before.c.run_id == r.id,
        _before.c.phase == r.current_phase,
        _before.c.status.in_(OPEN_STEP),
        _before.c.seq < _s.c.seq,
        outer=(event_runs, _s),
        steps=_before,
    ),
    steps=_s,
)
_phase_settled = ~_exists(
    _s.c.run_id == r.id, _s.c.phase == r.current_phase, _s.c.status.in_(OPEN_STEP), steps=_s
)
# Agrees with pageant.gates.phase.is_open: a gate holds its phase while it is unsatisfied and, for
# an ``after`` gate, its deadline is still ahead (a deadline that has come is the tick's to
# close, so the run is due).
_gate_holds = _exists(
    _g.run_id == r.id,
    _g.phase == r.current_phase,
    _g.satisfied_at.is_(None),
    or_(_g.deadline.is_(None), _g.deadline > bindparam("now")),
)
# A held gate that has waited ``stall_seconds`` makes its run due once more, so the advance
# stage can raise its health to ``stalled`` (and, that done, the run is not due again).
_gate_stalls = and_(
    r.health != Health.STALLED,
    _exists(
        _g.run_id == r.id,
        _g.phase == r.current_phase,
        _g.satisfied_at.is_(None),
        _g.entered_at <= bindparam("stall_cutoff"),
    ),
)

_DUE_ACTIVE = (
    select(*RUN_COLUMNS)
    .select_from(RUN_FROM)
    .where(
        or_(r.lease_until.is_(None), r.lease_until <= bindparam("now")),
        r.id.not_in(bindparam("busy", expanding=True)),
        or_(
            r.status.in_([s for s in RUN_ACTIVE if s is not RunStatus.RUNNING]),
            and_(
                r.status == RunStatus.RUNNING,
                or_(r.hold_until.is_(None), r.hold_until <= bindparam("now")),
                or_(
                    _step_due,
                    and_(_phase_settled, or_(~_gate_holds, _gate_stalls)),
                    # A hold that has run out is due once: the advance clears it and notes
                    # what the run waits on next (a gate, say).
                    r.hold_until.is_not(None),
                ),
            ),
        ),
    )
    .order_by(r.id)
    .limit(bindparam("limit"))
)

#: What the missed sweep and a catch-up decision read of a late run.
LATE_COLUMNS = (
    r.id,
    r.scheduled_for,
    d.grace_seconds,
    r.definition_id,
    r.scope,
    r.version_id,
    r.waiting_reason,
    r.catch_up,
)

_MISSED_CANDIDATES = (
    select(*LATE_COLUMNS)
    .select_from(event_runs.join(event_definitions, d.id == r.definition_id))
    .where(
        r.status == RunStatus.SCHEDULED,
        r.scheduled_for <= bindparam("now"),
        # A run let in to catch up is the advance stage's to start, never the sweep's to miss.
        r.catch_up.is_(None),
        # Nor is a run waiting on its quorum: its start_when's wait decides, and a crowd of
        # them must not fill the sweep's batch ahead of the runs it is for.
        or_(r.waiting_reason.is_(None), r.waiting_reason != WaitingReason.QUORUM),
    )
    .order_by(r.scheduled_for, r.id)
    .limit(bindparam("limit"))
)


def _min_after(column: Any, *where: Any, after: str = "now", joined: Any = None) -> Any:
    query = select(func.min(column))
    if joined is not None:
        query = query.select_from(joined)
    return query.where(*where, column > bindparam(after)).scalar_subquery()


_res = event_run_resources.c
_gated_run = event_run_phase_gates.join(event_runs, r.id == _g.run_id)
_held_gate = (_g.satisfied_at.is_(None), r.status == RunStatus.RUNNING, r.current_phase == _g.phase)


# The earliest instant after ``now`` at which anything could become due; each part is a
# MIN over an index, so an idle tick stays cheap however many finished runs there are.
_NEXT_INSTANT = select(
    _min_after(_st.due_at, _st.status == StepStatus.PENDING),
    _min_after(_st.lease_until, _st.status == StepStatus.RUNNING),
    _min_after(r.scheduled_for, r.status == RunStatus.SCHEDULED),
    _min_after(r.lease_until, r.status.in_(LIVE_RUN_STATUSES)),
    _min_after(r.hold_until, r.status == RunStatus.RUNNING),
    _min_after(_g.deadline, *_held_gate, joined=_gated_run),
    # A lease's deadline: the cleanup stage gives it back then (read over the holding rows).
    _min_after(_res.lease_until, _res.holding == 1),
    # Last, and read differently: when the next held gate's stall clock started (add
    # stall_seconds to it for the instant it stalls).
    _min_after(
        _g.entered_at,
        *_held_gate,
        r.health != Health.STALLED,
        after="stall_cutoff",
        joined=_gated_run,
    ),
)


def _stall_cutoff(now: datetime, stall_seconds: float | None) -> datetime | None:
    # NULL when there is no stall clock: ``entered_at <= NULL`` is never true.
    return None if stall_seconds is None else now - timedelta(seconds=stall_seconds)


async def find_due(
    conn: AsyncConnection,
    now: datetime,
    *,
    limit: int,
    busy: list[int],
    stall_seconds: float | None = None,
    starts: int | None = None,
) -> list[Row]:
    """Runs with something to do now: scheduled ones whose instant came, then active ones
    whose next step is due or whose phase may advance — or whose gate has held the phase
    for ``stall_seconds`` and whose health is not ``stalled`` yet. ``busy`` runs are left
    out. At most ``limit`` runs, active ones first; or, given ``starts``, up to ``limit``
    active runs and up to ``starts`` (at least ``limit``) scheduled ones, for a scan that
    starts them together."""
    most = max(limit, starts or limit)
    params = {
        "now": now,
        "limit": limit,
        "busy": busy,
        "stall_cutoff": _stall_cutoff(now, stall_seconds),
    }
    scheduled = list((await conn.execute(_DUE_SCHEDULED, params | {"limit": most})).all())
    active = list((await conn.execute(_DUE_ACTIVE, params)).all())
    if starts is None:
        return (active + scheduled)[:limit]
    return active + scheduled


async def missed_candidates(conn: AsyncConnection, now: datetime, *, limit: int) -> list[Row]:
    """Scheduled runs whose instant has passed and that no catch-up let in, earliest first,
    with their grace and what the catch-up decision reads (event, scope, version, waiting)."""
    return list((await conn.execute(_MISSED_CANDIDATES, {"now": now, "limit": limit})).all())


#: For each part of ``_NEXT_INSTANT``, in order, the tick stages its instant is due to.
INSTANT_STAGES: tuple[frozenset[str], ...] = (
    # A pending step's due_at (a countdown's rung, a milestone's retry too).
    frozenset({"advance", "countdown", "milestones"}),
    frozenset({"reclaim"}),  # a step's claim lease
    frozenset({"advance", "sweep_missed"}),  # a run's scheduled_for
    frozenset({"reclaim", "advance"}),  # a run's claim lease
    frozenset({"advance"}),  # a run's hold_until
    frozenset({"advance"}),  # a gate's deadline
    frozenset({"cleanup"}),  # a resource lease's deadline
    frozenset({"advance"}),  # a held gate stalls
)


async def next_instant(
    conn: AsyncConnection, now: datetime, *, stall_seconds: float | None = None
) -> datetime | None:
    """The earliest future instant at which a step, run, claim lease or gate becomes due — a
    gate's deadline, and the instant a held gate stalls (with ``stall_seconds``)."""
    return (await next_instant_and_stages(conn, now, stall_seconds=stall_seconds))[0]


async def next_instant_and_stages(
    conn: AsyncConnection, now: datetime, *, stall_seconds: float | None = None
) -> tuple[datetime | None, frozenset[str]]:
    """:func:`next_instant`, and the tick stages that instant is due to (every part that
    falls on it: see ``INSTANT_STAGES``)."""
    cutoff = _stall_cutoff(now, stall_seconds)
    row = (await conn.execute(_NEXT_INSTANT, {"now": now, "stall_cutoff": cutoff})).one()
    *instants, stall_entry = row
    found = list(instants)
    found.append(
        stall_entry + timedelta(seconds=stall_seconds)
        if stall_entry is not None and stall_seconds is not None
        else None
    )
    present = [value for value in found if value is not None]
    if not present:
        return None, frozenset()
    earliest = min(present)
    stages: frozenset[str] = frozenset()
    for value, due_to in zip(found, INSTANT_STAGES, strict=True):
        if value == earliest:
            stages |= due_to
    return earliest, stages
