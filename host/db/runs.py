"""SQL over ``event_runs``: creating a run, claiming it, moving it between statuses.

Every status change is a compare-and-set that names the statuses it may act from, so a
terminal status is written once and a stale screen or an overlapping tick changes nothing.
SQLAlchemy's MySQL dialects report *matched* rows, so each CAS carries its expected old
state in the WHERE clause: a row that matched is a row that changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    and_,
    bindparam,
    case,
    exists,
    func,
    literal,
    or_,
    select,
    update,
)
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db import runlog, switchboard
from pageant.db.engine_rows import RunState, StepRow
from pageant.db.idempotent import insert_keeping_existing, inserted_id
from pageant.db.shared import Batch
from pageant.db.tables import (
    PRIMARY_KEY_HINT,
    RUN_PHASE_STATUS_ORDER,
    by_primary_key,
    changed_one,
    event_action_settings,
    event_definitions,
    event_run_steps,
    event_runs,
    event_versions,
    status_in,
)
from pageant.states import (
    RUN_ACTIVE,
    RUN_CANCEL,
    RUN_COMPLETE,
    RUN_END,
    RUN_ENDED,
    RUN_ENTER,
    RUN_LIVE,
    RUN_MOVES,
    RUN_NOT_ENDED,
    RUN_PAUSE,
    RUN_RESCHEDULE,
    RUN_RESUME,
    RUN_SKIP,
    RUN_START,
    CleanupStatus,
    Health,
    Move,
    RunStatus,
    StepStatus,
)

r = event_runs.c
d = event_definitions.c

#: Every status a run may be in.
STATUSES = tuple(RunStatus)
HEALTH_RANK = tuple(Health)

#: What the engine and the console read about a run.
RUN_COLUMNS = (
    r.id,
    r.definition_id,
    r.version_id,
    r.scope,
    r.params,
    r.scheduled_for,
    r.source,
    r.status,
    r.health,
    r.cleanup_status,
    r.current_phase,
    r.hold_until,
    r.claimed_by,
    r.lease_until,
    r.last_error,
    r.cancel_reason,
    r.concurrency_key,
    r.waiting_reason,
    r.waiting_since,
    r.dst_adjusted,
    r.moved_from,
    r.catch_up,
    r.created_at,
    r.started_at,
    r.ended_at,
    d.slug,
    d.title,
    d.visibility,
    d.grace_seconds,
    event_versions.c.number.label("version_number"),
    event_versions.c.verified_at.label("version_verified_at"),
)
RUN_FROM = event_runs.join(event_definitions, d.id == r.definition_id).join(
    event_versions, event_versions.c.id == r.version_id
)

_RUN = select(*RUN_COLUMNS).select_from(RUN_FROM).where(r.id == bindparam("run_id"))

_ID_BY_OCCURRENCE = select(r.id).where(
    r.definition_id == bindparam("definition_id"),
    r.scope == bindparam("scope"),
    r.scheduled_for == bindparam("scheduled_for"),
)

# ── claims ────────────────────────────────────────────────────────────────────


# scheduled -> starting takes the concurrency key: the generated column concurrency_lock
# becomes non-NULL here, and its unique index refuses a second live holder (IntegrityError).
def _claiming_start(which: Any) -> Any:
    """The compare-and-set scheduled -> starting for the runs ``which`` picks."""
    return by_primary_key(
        update(event_runs)
        .where(which, status_in(r.status, RUN_START.froms), r.scheduled_for <= bindparam("now"))
        .values(
            status=RunStatus.STARTING,
            claimed_by=bindparam("owner"),
            lease_until=bindparam("lease"),
            started_at=bindparam("now"),
        )
    )


_CLAIM_START = _claiming_start(r.id == bindparam("run_id"))

# The same compare-and-set for a set of runs (the advance stage's set-wise start), and the
# read that tells which of them it changed when it changed fewer than it named.
_CLAIM_STARTS = _claiming_start(r.id.in_(bindparam("run_ids", expanding=True)))
_STARTED_BY = select(r.id).where(
    r.id.in_(bindparam("run_ids", expanding=True)),
    r.status == RunStatus.STARTING,
    r.claimed_by == bindparam("owner"),
    r.started_at == bindparam("now"),
)

# No "OR claimed_by = :owner": a live claim lease is not re-enterable even by its holder, which is
# exactly what stops a tick that overran from working a run beside its successor.
_CLAIM_TICK = by_primary_key(
    update(event_runs)
    .where(
        r.id == bindparam("run_id"),
        r.status.in_(RUN_ACTIVE),
        or_(r.lease_until.is_(None), r.lease_until <= bindparam("now")),
    )
    .values(claimed_by=bindparam("owner"), lease_until=bindparam("lease"))
)

_RELEASE = by_primary_key(
    update(event_runs)
    .where(r.id == bindparam("run_id"), r.claimed_by == bindparam("owner"))
    .values(claimed_by=None, lease_until=None)
)

# A stopping host hands back every run it still holds, whatever state each is in.
_RELEASE_ALL = (
    update(event_runs)
    .where(r.claimed_by == bindparam("owner"))
    .values(claimed_by=None, lease_until=None)
)

_RECLAIM = (
    update(event_runs)
    .where(
        r.status.in_(RUN_LIVE),
        r.lease_until.is_not(None),
        r.lease_until <= bindparam("now"),
    )
    .values(claimed_by=None, lease_until=None)
)

# ── transitions ───────────────────────────────────────────────────────────────

# One statement for starting -> running (old phase NULL) and for moving to the next phase
# (running -> running): it fails when the run stopped being what this tick saw, which is
# what a cancel or pause from the API looks like underneath a tick.
_ENTER_PHASE = by_primary_key(
    update(event_runs)
    .where(
        r.id == bindparam("run_id"),
        r.status == bindparam("from_status"),
        status_in(r.status, RUN_ENTER.froms),
        r.current_phase.is_not_distinct_from(bindparam("old_phase")),
    )
    .values(status=RunStatus.RUNNING, current_phase=bindparam("phase"))
)

# starting -> running into its first phase, for a set of runs entering the same phase.
_ENTER_FIRST_PHASES = by_primary_key(
    update(event_runs)
    .where(
        r.id.in_(bindparam("run_ids", expanding=True)),
        r.status == RunStatus.STARTING,
        r.current_phase.is_(None),
    )
    .values(status=RunStatus.RUNNING, current_phase=bindparam("phase"))
)

#: What every ending writes beside its status: when (``:now``), and that nothing holds the
#: run, delays it or is awaited by it any more.
ENDED_VALUES: dict[str, Any] = {
    "ended_at": bindparam("now"),
    "claimed_by": None,
    "lease_until": None,
    "hold_until": None,
    "waiting_reason": None,
    "waiting_since": None,
}

_END = by_primary_key(
    update(event_runs)
    .where(r.id == bindparam("run_id"), r.status.in_(bindparam("froms", expanding=True)))
    .values(
        status=bindparam("to"),
        last_error=func.coalesce(bindparam("error"), r.last_error),
        **ENDED_VALUES,
    )
)

# The moves ``end`` and ``complete`` at once: a run whose last phase ends in this transaction
# goes through ``ending`` without that status ever being committed on its own.
_END_AND_COMPLETE = by_primary_key(
    update(event_runs)
    .where(r.id == bindparam("run_id"), status_in(r.status, RUN_END.froms))
    .values(status=RUN_COMPLETE.to[0], **ENDED_VALUES)
)

_PAUSE = by_primary_key(
    update(event_runs)
    .where(r.id == bindparam("run_id"), status_in(r.status, RUN_PAUSE.froms))
    .values(status=RunStatus.PAUSED, last_error=func.coalesce(bindparam("error"), r.last_error))
)

# A run paused before it entered its first phase resumes into ``starting`` so the tick
# enters that phase; every other paused run resumes ``running``.
_RESUME = by_primary_key(
    update(event_runs)
    .where(r.id == bindparam("run_id"), status_in(r.status, RUN_RESUME.froms))
    .values(
        status=case(
            (r.current_phase.is_(None), literal(RunStatus.STARTING)),
            else_=literal(RunStatus.RUNNING),
        )
    )
)

_CANCEL = by_primary_key(
    update(event_runs)
    .where(r.id == bindparam("run_id"), status_in(r.status, RUN_CANCEL.froms))
    .values(status=RunStatus.CANCELLED, cancel_reason=bindparam("why"), **ENDED_VALUES)
)

# Only from scheduled: an overlap is decided before the run starts, and two hosts deciding
# it for the same run write it once.
_SKIP = by_primary_key(
    update(event_runs)
    .where(r.id == bindparam("run_id"), status_in(r.status, RUN_SKIP.froms))
    .values(status=RunStatus.SKIPPED, cancel_reason=bindparam("why"), **ENDED_VALUES)
)

# A run that starts beside the key's holder (overlap ``allow``) cannot hold the key too: the
# unique index on concurrency_lock admits one live holder, so it lets go of it first.
_LET_GO_OF_KEY = by_primary_key(
    update(event_runs)
    .where(r.id == bindparam("run_id"), r.status == RunStatus.SCHEDULED)
    .values(concurrency_key=None)
)

_ESCALATE = by_primary_key(
    update(event_runs)
    .where(r.id == bindparam("run_id"), r.health.in_(bindparam("below", expanding=True)))
    .values(health=bindparam("to"))
)

_HOLD = by_primary_key(
    update(event_runs).where(r.id == bindparam("run_id")).values(hold_until=bindparam("until"))
)
# Compare-and-set on the hold it read: a hold set again meanwhile is not cleared.
_RELEASE_HOLD = by_primary_key(
    update(event_runs)
    .where(r.id == bindparam("run_id"), r.hold_until == bindparam("until"))
    .values(hold_until=None)
)

# Written only when the reason changes: the WHERE is the change, so a run re-examined every
# tick logs its reason once. ``IS DISTINCT FROM`` (``<=>`` on MariaDB) because NULL is a value.
_SET_WAITING = by_primary_key(
    update(event_runs)
    .where(r.id == bindparam("run_id"), r.waiting_reason.is_distinct_from(bindparam("reason")))
    .values(waiting_reason=bindparam("reason"), waiting_since=bindparam("since"))
)

_REPIN = by_primary_key(
    update(event_runs)
    .where(
        r.id == bindparam("run_id"),
        r.status == RunStatus.SCHEDULED,
        r.version_id != bindparam("new_version"),
    )
    .values(version_id=bindparam("new_version"))
)

_HOLDER = select(r.id, r.status, r.scheduled_for).where(
    r.concurrency_lock == bindparam("key"), r.id != bindparam("run_id")
)

# A run still scheduled whose instant has come takes its key at its start, which is moments
# away; the occurrence being started is left out, so an identical start answers its run.
_DUE_CLAIMANT = (
    select(r.id, r.status)
    .where(
        r.status == RunStatus.SCHEDULED,
        r.concurrency_key == bindparam("key"),
        r.scheduled_for <= bindparam("now"),
        ~and_(
            r.definition_id == bindparam("definition_id"),
            r.scope == bindparam("scope"),
            r.scheduled_for == bindparam("now"),
        ),
    )
    .order_by(r.id)
    .limit(1)
)

_LIST_FOR_DEFINITION = (
    select(*RUN_COLUMNS)
    .select_from(RUN_FROM)
    .where(r.definition_id == bindparam("definition_id"), r.id > bindparam("after_id"))
    .order_by(r.id)
    .limit(bindparam("limit"))
)


_BY_STATUS = select(r.status, func.count()).group_by(r.status)

# ── functions ─────────────────────────────────────────────────────────────────


async def count_by_status(conn: AsyncConnection) -> dict[str, int]:
    """How many runs are in each status, every status named (for the metrics)."""
    found = {status: n for status, n in (await conn.execute(_BY_STATUS)).all()}
    return {status: found.get(status, 0) for status in RunStatus}


async def get_run(conn: AsyncConnection, run_id: int) -> Row | None:
    """One run with its definition's slug, title and grace and its version's number."""
    return (await conn.execute(_RUN, {"run_id": run_id})).first()


async def get_runs(conn: AsyncConnection, run_ids: Sequence[int]) -> dict[int, Row]:
    """The runs of ``run_ids`` (as :func:`get_run` reads each) by id, in one statement."""
    if not run_ids:
        return {}
    query = select(*RUN_COLUMNS).select_from(RUN_FROM).where(r.id.in_(sorted(set(run_ids))))
    return {row.id: row for row in (await conn.execute(query)).all()}


def _count_where(condition: Any) -> Any:
    return func.coalesce(func.sum(case((condition, 1), else_=0)), 0)


_VALUES = select(r.scope, r.params).where(r.id == bindparam("run_id"))


async def param_values(conn: AsyncConnection, run_id: int) -> tuple[str, dict[str, Any]]:
    """A run's ``(scope, params)``: what its spec's ``{"param": ...}`` references read."""
    row = (await conn.execute(_VALUES, {"run_id": run_id})).one()
    return row.scope, dict(row.params or {})


_START_VALUES = select(r.id, r.scope, r.params, r.waiting_reason).where(
    r.id.in_(bindparam("run_ids", expanding=True))
)


async def start_values(conn: AsyncConnection, run_ids: Sequence[int]) -> dict[int, Row]:
    """Each run's ``(id, scope, params, waiting_reason)`` by id, in one read: what a set of
    runs starting reads of themselves (their params, and whether a note of what they waited
    on is to be cleared)."""
    if not run_ids:
        return {}
    rows = await conn.execute(_START_VALUES, {"run_ids": list(run_ids)})
    return {row.id: row for row in rows}


async def insert_run(conn: AsyncConnection, values: dict[str, Any]) -> tuple[int, bool]:
    """Insert a run unless its occurrence (definition, scope, scheduled_for) exists.

    Answers ``(run id, created)``. The unique key, not a read beforehand, is what makes a
    second insert of the same occurrence a no-op, so two writers can never make two runs.
    """
    dialect = conn.dialect
    stmt = insert_keeping_existing(
        event_runs, (r.definition_id, r.scope, r.scheduled_for), dialect
    ).values(**values)
    new_id = inserted_id(await conn.execute(stmt), dialect)
    if new_id is not None:
        return new_id, True
    existing = (
        await conn.execute(
            _ID_BY_OCCURRENCE,
            {
                "definition_id": values["definition_id"],
                "scope": values["scope"],
                "scheduled_for": values["scheduled_for"],
            },
        )
    ).scalar_one()
    return existing, False


async def claim_start(
    conn: AsyncConnection, run_id: int, *, owner: str, lease: datetime, now: datetime
) -> bool:
    """CAS scheduled -> starting with a claim lease. Raises IntegrityError when the run's
    concurrency key is held by another live run."""
    return await changed_one(
        conn, _CLAIM_START, {"run_id": run_id, "owner": owner, "lease": lease, "now": now}
    )


async def claim_starts(
    conn: AsyncConnection, run_ids: Sequence[int], *, owner: str, lease: datetime, now: datetime
) -> set[int]:
    """:func:`claim_start` for every run of ``run_ids`` in one statement (none may carry a
    concurrency key); answers the ids it started. Those another claimer (or a control)
    moved first are left as they are: when the statement changed fewer rows than it
    named, one read tells which are this claim's."""
    if not run_ids:
        return set()
    binds = {"run_ids": list(run_ids), "owner": owner, "lease": lease, "now": now}
    changed = (await conn.execute(_CLAIM_STARTS, binds)).rowcount
    if changed == len(run_ids):
        return set(run_ids)
    binds = {"run_ids": list(run_ids), "owner": owner, "now": now}
    return set((await conn.execute(_STARTED_BY, binds)).scalars())


async def claim_tick(
    conn: AsyncConnection, run_id: int, *, owner: str, lease: datetime, now: datetime
) -> bool:
    """Claim an active run for this tick; refused while any claim lease on it is live."""
    return await changed_one(
        conn, _CLAIM_TICK, {"run_id": run_id, "owner": owner, "lease": lease, "now": now}
    )


async def release_claim(conn: AsyncConnection, run_id: int, *, owner: str) -> None:
    """Hand back this owner's claim on a run still in flight, so the next tick may take it."""
    await conn.execute(_RELEASE, {"run_id": run_id, "owner": owner})


async def release_claims_of(conn: AsyncConnection, owner: str, *, keep: Sequence[int] = ()) -> int:
    """Hand back every run claim ``owner`` holds but those of the runs in ``keep`` (a clean
    stop keeps none); answers how many."""
    statement = _RELEASE_ALL
    if keep:
        statement = statement.where(r.id.not_in(list(keep)))
    return (await conn.execute(statement, {"owner": owner})).rowcount


async def reclaim_stale_runs(conn: AsyncConnection, now: datetime) -> int:
    """Clear every expired run claim lease (the holder died or overran); answers how many."""
    return (await conn.execute(_RECLAIM, {"now": now})).rowcount


async def enter_phase(
    conn: AsyncConnection,
    run_id: int,
    *,
    from_status: str,
    old_phase: str | None,
    phase: str,
) -> bool:
    """Make ``phase`` current (starting -> running, or running -> running from ``old_phase``)."""
    return await changed_one(
        conn,
        _ENTER_PHASE,
        {"run_id": run_id, "from_status": from_status, "old_phase": old_phase, "phase": phase},
    )


async def enter_first_phases(conn: AsyncConnection, run_ids: Sequence[int], *, phase: str) -> int:
    """:func:`enter_phase` ``starting -> running`` into ``phase`` for every run of
    ``run_ids``, in one statement; answers how many it moved (each that was not as its
    claim left it is not)."""
    if not run_ids:
        return 0
    binds = {"run_ids": list(run_ids), "phase": phase}
    return int((await conn.execute(_ENTER_FIRST_PHASES, binds)).rowcount)


async def end_and_complete(conn: AsyncConnection, run_id: int, *, now: datetime) -> bool:
    """CAS running -> completed: the moves ``end`` (running -> ending) and ``complete``
    (:func:`end_run`'s ending -> completed) in one statement, for a run whose last phase
    ends in the transaction that completes it: ``ending`` would be committed in none of
    them, so it is not written."""
    return await changed_one(conn, _END_AND_COMPLETE, {"run_id": run_id, "now": now})


async def end_run(
    conn: AsyncConnection,
    run_id: int,
    move: Move,
    *,
    now: datetime,
    error: str | None = None,
) -> bool:
    """CAS a run by ``move``, one of the table's endings (:data:`~pageant.states.RUN_MOVES`,
    into a terminal status), dropping its claim, hold and waiting reason. Write-once: no
    ending acts from a terminal status. A move that is not an ending of the table is a
    ValueError and writes nothing."""
    if not (move in RUN_MOVES and len(move.to) == 1 and move.to[0] in RUN_ENDED):
        raise ValueError(f"{move.name} is not an ending of a run the table allows")
    params = {"run_id": run_id, "froms": list(move.froms), "to": move.to[0]}
    return await changed_one(conn, _END, params | {"now": now, "error": error})


async def pause_run(conn: AsyncConnection, run_id: int, *, error: str | None = None) -> bool:
    """CAS starting|running -> paused."""
    return await changed_one(conn, _PAUSE, {"run_id": run_id, "error": error})


async def resume_run(conn: AsyncConnection, run_id: int) -> bool:
    """CAS paused -> running (or starting, if it never entered a phase)."""
    return await changed_one(conn, _RESUME, {"run_id": run_id})


async def cancel_run(conn: AsyncConnection, run_id: int, *, reason: str, now: datetime) -> bool:
    """CAS scheduled|starting|running|paused -> cancelled."""
    return await changed_one(conn, _CANCEL, {"run_id": run_id, "why": reason, "now": now})


async def skip_run(conn: AsyncConnection, run_id: int, *, reason: str, now: datetime) -> bool:
    """CAS scheduled -> skipped, with the reason it never started."""
    return await changed_one(conn, _SKIP, {"run_id": run_id, "why": reason, "now": now})


async def let_go_of_key(conn: AsyncConnection, run_id: int) -> bool:
    """CAS: a scheduled run stops naming a concurrency key (it will start beside the run
    holding it); False once it is no longer scheduled."""
    return await changed_one(conn, _LET_GO_OF_KEY, {"run_id": run_id})


async def escalate_health(
    conn: AsyncConnection,
    run_id: int,
    to: Health,
    *,
    because: str,
    at: datetime,
    **detail: Any,
) -> bool:
    """Raise health to ``to`` (ok < degraded < stalled), never lowering it, and log the
    change (``run.health``, with ``detail``: a stalled gate's ``waited_seconds``, ``gate``,
    ``phase``) only when this call made it: escalation is a compare-and-set, so a run's
    health line is written once however many find the same trouble. True if it changed."""
    below = list(Health(to).below)
    if not await changed_one(conn, _ESCALATE, {"run_id": run_id, "below": below, "to": to}):
        return False
    await runlog.run_health(conn, run_id, at=at, to=to, because=because, **detail)
    return True


async def release_hold(conn: AsyncConnection, run_id: int, until: datetime) -> bool:
    """Clear a hold that has run out, once; True if this call cleared it."""
    return await changed_one(conn, _RELEASE_HOLD, {"run_id": run_id, "until": until})


async def set_hold(conn: AsyncConnection, run_id: int, until: datetime | None) -> None:
    """Carry a wait on the run itself (it outlives the phase whose last step asked for it)."""
    await conn.execute(_HOLD, {"run_id": run_id, "until": until})


async def set_waiting(
    conn: AsyncConnection, run_id: int, reason: str | None, since: datetime | None
) -> bool:
    """Record why the run is not advancing; True only when the reason changed."""
    return await changed_one(
        conn, _SET_WAITING, {"run_id": run_id, "reason": reason, "since": since}
    )


_CLEAR_WAITING = by_primary_key(
    update(event_runs)
    .where(r.id.in_(bindparam("run_ids", expanding=True)), r.waiting_reason.is_not(None))
    .values(waiting_reason=None, waiting_since=None)
)


async def clear_waiting(conn: AsyncConnection, run_ids: Sequence[int]) -> int:
    """Clear the note of what each of ``run_ids`` waits on, in one statement; answers how
    many had one."""
    if not run_ids:
        return 0
    return int((await conn.execute(_CLEAR_WAITING, {"run_ids": list(run_ids)})).rowcount)


async def repin(conn: AsyncConnection, run_id: int, version_id: int) -> bool:
    """Point a run that has not started at another version; True if it changed."""
    return await changed_one(conn, _REPIN, {"run_id": run_id, "new_version": version_id})


async def concurrency_holder(conn: AsyncConnection, key: str, run_id: int) -> Row | None:
    """The live run (id, status) holding concurrency ``key``, other than ``run_id``."""
    return (await conn.execute(_HOLDER, {"key": key, "run_id": run_id})).first()


async def due_claimant(
    conn: AsyncConnection, key: str, *, now: datetime, definition_id: int, scope: str
) -> Row | None:
    """The first run (id, status) still scheduled and due by ``now`` that will take
    concurrency ``key`` when it starts, other than the occurrence ``(definition_id, scope,
    now)`` itself."""
    binds = {"key": key, "now": now, "definition_id": definition_id, "scope": scope}
    return (await conn.execute(_DUE_CLAIMANT, binds)).first()


async def runs_of_definition(
    conn: AsyncConnection, definition_id: int, *, after_id: int, limit: int
) -> list[Row]:
    """A definition's runs in id order, after ``after_id``."""
    params = {"definition_id": definition_id, "after_id": after_id, "limit": limit}
    return list((await conn.execute(_LIST_FOR_DEFINITION, params)).all())


_NEWEST_FOR_DEFINITION = (
    select(event_runs)
    .where(r.definition_id == bindparam("definition_id"))
    .order_by(r.id.desc())
    .limit(bindparam("limit"))
)


async def newest_of_definition(conn: AsyncConnection, definition_id: int, limit: int) -> list[Row]:
    """A definition's newest ``limit`` runs, oldest of them first."""
    params = {"definition_id": definition_id, "limit": limit}
    return list(reversed((await conn.execute(_NEWEST_FOR_DEFINITION, params)).all()))


# A person's move of one occurrence: the row keeps its slot (``occurrence_local``) and
# remembers the first instant it was moved from, so the schedule recognises the occurrence
# as had and never moves it back or makes it again. The SET order is load-bearing: MariaDB
# evaluates assignments left to right, each seeing the ones before, so moved_from must read
# scheduled_for before it is overwritten (SQLite reads the old row either way).
_RESCHEDULE = by_primary_key(
    update(event_runs)
    .where(r.id == bindparam("run_id"), status_in(r.status, RUN_RESCHEDULE.froms))
    .ordered_values(
        (r.moved_from, func.coalesce(r.moved_from, r.scheduled_for)),
        (r.scheduled_for, bindparam("to")),
        # A person's new instant is no longer a catch-up: it starts, or is missed, as any.
        (r.catch_up, None),
    )
)


async def reschedule(conn: AsyncConnection, run_id: int, to: datetime) -> bool:
    """CAS a scheduled run to the instant ``to``; True if it moved. Raises IntegrityError
    when another run of its event and scope already holds ``to``."""
    return await changed_one(conn, _RESCHEDULE, {"run_id": run_id, "to": to})


# ── across events ─────────────────────────────────────────────────────────────

#: The statuses of a run that has not ended (the summary reads only these).


async def runs_across(
    conn: AsyncConnection,
    *,
    statuses: tuple[str, ...] = (),
    health: tuple[str, ...] = (),
    waiting: tuple[str, ...] = (),
    definition_id: int | None = None,
    series_id: int | None = None,
    scope: str | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    before_id: int | None = None,
    limit: int,
) -> list[Row]:
    """Runs of every event, newest (highest id) first, below ``before_id``; each filter
    narrows when given: ``waiting`` reads the reason the engine recorded
    (``waiting_reason``), ``start``/``end`` bound ``scheduled_for`` (``start <= t < end``)."""
    # Two reads: the page's ids from event_runs alone (walking its primary key backwards,
    # joining the definitions only for a series), then those rows whole. In one statement
    # MariaDB drove the join from the definitions and sorted every run to find the newest.
    ids = select(r.id).order_by(r.id.desc()).limit(limit)
    if statuses:
        ids = ids.where(r.status.in_(statuses))
    if health:
        ids = ids.where(r.health.in_(health))
    if waiting:
        ids = ids.where(r.waiting_reason.in_(waiting))
    if definition_id is not None:
        ids = ids.where(r.definition_id == definition_id)
    if series_id is not None:
        ids = ids.join(event_definitions, d.id == r.definition_id).where(d.series_id == series_id)
    if scope is not None:
        ids = ids.where(r.scope == scope)
    if start is not None:
        ids = ids.where(r.scheduled_for >= start)
    if end is not None:
        ids = ids.where(r.scheduled_for < end)
    if before_id is not None:
        ids = ids.where(r.id < before_id)
    found = list((await conn.execute(ids)).scalars())
    if not found:
        return []
    rows = select(*RUN_COLUMNS).select_from(RUN_FROM).where(r.id.in_(found)).order_by(r.id.desc())
    return list((await conn.execute(rows)).all())


_parked_step = exists().where(
    event_run_steps.c.run_id == r.id,
    event_run_steps.c.status == StepStatus.RUNNING,
    event_run_steps.c.lease_until.is_(None),
)
#: A run waiting on a person: paused, or live with a parked step. Derived from the rows that
#: are the fact, never from a summary column.
WAITING_ON_PERSON = or_(r.status == RunStatus.PAUSED, and_(r.status.in_(RUN_LIVE), _parked_step))

# Only runs that have not ended: naming the statuses lets the (status, scheduled_for) index
# serve the count, so its cost follows the live runs, never the size of the history.
_SUMMARY = select(
    _count_where(WAITING_ON_PERSON).label("waiting_on_person"),
    _count_where(r.health == Health.STALLED).label("stalled"),
    _count_where(r.health == Health.DEGRADED).label("degraded"),
    _count_where(r.status == RunStatus.RUNNING).label("running"),
).where(r.status.in_(RUN_NOT_ENDED))


async def live_summary(conn: AsyncConnection) -> dict[str, int]:
    """Counts over every run that has not ended: waiting on a person (paused, or at a
    parked step), stalled, degraded, and running."""
    row = (await conn.execute(_SUMMARY)).one()
    return {key: int(value) for key, value in row._mapping.items()}


# The run and its cursor — the first open step of its current phase — in one read. The
# phase's first pending step and its first running one are each the first entry for that
# status in the (run_id, phase, status, seq) index, and the cursor is the one of the two with
# the lower seq. Neither read walks the phase's finished steps, so the read costs the same at
# a phase's hundredth step as at its first. (An earlier step retried after a later one ran
# is pending again, and is found first, as it must be.)


def _first_of_phase(status: str) -> Any:
    step = event_run_steps.alias(f"first_{status}_key")
    return (
        select(step.c.id)
        .where(
            step.c.run_id == r.id,
            step.c.phase == r.current_phase,
            step.c.status == status,
        )
        # By seq alone: the first three are fixed, so the read is the index's first entry
        # for them. (Ordered by the whole key, MariaDB sorts every entry of the status.)
        .order_by(step.c.seq)
        .limit(1)
        .with_hint(step, RUN_PHASE_STATUS_ORDER, dialect_name="mysql")
        .correlate(event_runs)
        .scalar_subquery()
    )


_pending = event_run_steps.alias("first_pending")
_running = event_run_steps.alias("first_running")
_next_open_id = case(
    (or_(_running.c.id.is_(None), _pending.c.seq < _running.c.seq), _pending.c.id),
    else_=_running.c.id,
)
# With the step's action's switchboard row (if an admin set one): a claim in the same shared
# transaction then reads the flag from here rather than once more (pageant.db.shared.Batch).
_setting = event_action_settings.c
#: A cursor row, by position: the run's id, its state, the step's columns, the action's row.
_STATE = ("status", "current_phase", "hold_until", "waiting_reason", "waiting_since")
_STEP_NAMES = tuple(c.name for c in event_run_steps.c)
_STEP_FROM = 1 + len(_STATE)
_STEP_TO = _STEP_FROM + len(_STEP_NAMES)
_STEP_ID = _STEP_FROM + _STEP_NAMES.index("id")
_STEP_ACTION = _STEP_FROM + _STEP_NAMES.index("action")
_CURSOR_OF = select(
    r.id,
    *[r[name] for name in _STATE],
    *[c.label(f"step_{c.name}") for c in event_run_steps.c],
    _setting.action_id.label("setting_action"),
    _setting.enabled.label("setting_enabled"),
).select_from(
    event_runs.outerjoin(_pending, _pending.c.id == _first_of_phase(StepStatus.PENDING))
    .outerjoin(_running, _running.c.id == _first_of_phase(StepStatus.RUNNING))
    .outerjoin(event_run_steps, event_run_steps.c.id == _next_open_id)
    .outerjoin(event_action_settings, _setting.action_id == event_run_steps.c.action)
)
_CURSOR = _CURSOR_OF.where(r.id == bindparam("run_id"))
_CURSORS = _CURSOR_OF.where(r.id.in_(bindparam("run_ids", expanding=True)))

Cursor = tuple[RunState, StepRow | None]


def _cursor(row: Row, batch: Batch | None) -> Cursor:
    # By position (the columns of _CURSOR_OF): a run's every step reads one, so a name's
    # lookup for each of some thirty columns was a cost of its own.
    values = tuple(row)
    setting_action, setting_enabled = values[_STEP_TO:]
    if values[_STEP_ID] is not None and batch is not None:
        # The flag as read now, for the claim that may follow in this shared transaction.
        enabled = None if setting_action is None else bool(setting_enabled)
        switchboard.know_flag(batch, values[_STEP_ACTION], enabled)
    state = dict(zip(_STATE, values[1:_STEP_FROM], strict=True))
    if values[_STEP_ID] is None:
        return cast(RunState, state), None
    step = dict(zip(_STEP_NAMES, values[_STEP_FROM:_STEP_TO], strict=True))
    return cast(RunState, state), cast(StepRow, step)


async def read_cursor(
    conn: AsyncConnection, run_id: int, *, batch: Batch | None = None
) -> Cursor | None:
    """``(run state, next open step or None)``, or None when the run is gone. Given
    ``batch`` (a group commit's, in ``conn``), the step's switchboard flag read with it is
    kept there for the claim that may follow."""
    row = (await conn.execute(_CURSOR, {"run_id": run_id})).first()
    return None if row is None else _cursor(row, batch)


async def read_cursors(
    conn: AsyncConnection, run_ids: list[int], *, batch: Batch | None = None
) -> dict[int, Cursor]:
    """:func:`read_cursor` for many runs in one read: run id -> its cursor (a run that is
    gone is left out)."""
    if not run_ids:
        return {}
    rows = await conn.execute(_CURSORS, {"run_ids": run_ids})
    return {row.id: _cursor(row, batch) for row in rows}


# Run rows no other transaction holds and no claim lease covers, locked for this one: on
# MariaDB another host's claim in flight is skipped rather than waited for, and a row already
# claimed is not kept locked (READ COMMITTED lets go of a row its WHERE turns down). SQLite's
# writer holds the whole file, and the clause is not rendered there.
_FREE = (
    select(r.id)
    .where(
        r.id.in_(bindparam("run_ids", expanding=True)),
        or_(r.lease_until.is_(None), r.lease_until <= bindparam("now")),
    )
    .order_by(r.id)
    .with_for_update(skip_locked=True)
    .with_hint(event_runs, PRIMARY_KEY_HINT, dialect_name="mysql")
)


async def lock_free(conn: AsyncConnection, run_ids: list[int], *, now: datetime) -> list[int]:
    """Of ``run_ids``, those no other transaction has locked and no live claim lease covers
    at ``now``, locked by this one until it ends (``FOR UPDATE SKIP LOCKED``), in id order."""
    if not run_ids:
        return []
    return list((await conn.execute(_FREE, {"run_ids": run_ids, "now": now})).scalars())


async def ended_in_trouble(conn: AsyncConnection, *, since: datetime) -> dict[str, int]:
    """Of the runs that ended at or after ``since``: how many ``failed``, and how many left
    something in the world with nothing left to try (cleanup ``incomplete``)."""
    ended = r.status.in_(RUN_ENDED)
    row = (
        await conn.execute(
            select(
                _count_where(r.status == RunStatus.FAILED).label("failed"),
                _count_where(r.cleanup_status == CleanupStatus.INCOMPLETE).label("incomplete"),
            ).where(ended, r.ended_at >= since)
        )
    ).one()
    return {"failed": int(row.failed), "incomplete": int(row.incomplete)}
