"""SQL over ``event_run_steps``: materialising a phase, claiming a step, fencing its outcome.

A step's claim is ``(claimed_by, attempts)``: the claim increments ``attempts``, and every
write that records an outcome carries both in its WHERE clause. An answer from a claim that
was reclaimed meanwhile therefore matches no row and is dropped, never written over its
successor's. Terminal statuses are written once (the WHERE names the open status).

A step that is ``running`` with a NULL ``lease_until`` is parked, waiting for a person; the
reclaim only ever takes a claim lease that is non-NULL and expired.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Update, and_, bindparam, case, func, or_, select, update
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db.idempotent import insert_keeping_existing
from pageant.db.shared import Batch
from pageant.db.tables import (
    RUN_PHASE_ORDER,
    by_primary_key,
    changed_one,
    event_run_steps,
    status_in,
)
from pageant.states import (
    PARKED,
    STEP_CANCEL,
    STEP_CLAIM,
    STEP_CONFIRM,
    STEP_FINISH,
    STEP_OPEN,
    STEP_RETRY,
    STEP_SKIP,
    Move,
    StepStatus,
)

s = event_run_steps.c

STEP_COLUMNS = (
    s.id,
    s.run_id,
    s.phase,
    s.seq,
    s.label,
    s.action,
    s.action_version,
    s.params,
    s.on_failure,
    s.status,
    s.attempts,
    s.due_at,
    s.claimed_by,
    s.lease_until,
    s.idempotency_key,
    s.last_error,
    s.note,
    s.started_at,
    s.finished_at,
    s.spent,
)

_parked = and_(s.status == StepStatus.RUNNING, s.lease_until.is_(None))


def new_idempotency_keys(count: int) -> list[str]:
    """``count`` steps' idempotency keys, each 128 random bits in hex: fixed when the step row
    is made, the same on every retry. One read of the system's randomness for them all."""
    drawn = os.urandom(16 * count).hex()
    return [drawn[i : i + 32] for i in range(0, 32 * count, 32)]


def _acts_from(move: Move) -> Any:
    """The WHERE of a compare-and-set that makes ``move``: its statuses, a parked step being
    a running one with no claim lease."""
    statuses = [status for status in move.froms if status != PARKED]
    found = [status_in(s.status, statuses)] if statuses else []
    if PARKED in move.froms:
        found.append(_parked)
    return or_(*found) if len(found) > 1 else found[0]


def _per_step(ids: list[Any], name: str, column: Any) -> Any:
    """``CASE id WHEN :step_id_0 THEN :<name>_0 ... END``: one value a step, in one statement."""
    return case(
        *[(ids[k], bindparam(f"{name}_{k}", type_=column.type)) for k in range(len(ids))],
        value=s.id,
    )


def _ids(n: int) -> list[Any]:
    return [bindparam(f"step_id_{k}", type_=s.id.type) for k in range(n)]


def _binds(ids: list[Any] | None) -> Callable[[str, Any], Any]:
    """How a compare-and-set names a value: ``:<name>`` for the one step ``:step_id`` names
    (``ids`` None), else one value a step of ``ids`` (:func:`_per_step`)."""
    if ids is None:
        return lambda name, column: bindparam(name, type_=column.type)
    return functools.partial(_per_step, ids)


def _which(ids: list[Any] | None) -> Any:
    return s.id == bindparam("step_id") if ids is None else s.id.in_(ids)


def _claim(ids: list[Any] | None) -> Update:
    """The claim's compare-and-set, of one step or of the steps ``ids`` names (:func:`_binds`)."""
    value = _binds(ids)
    now = value("now", s.started_at)
    return by_primary_key(
        update(event_run_steps)
        .where(
            _which(ids),
            _acts_from(STEP_CLAIM),
            s.attempts == value("seen_attempts", s.attempts),
            or_(s.due_at.is_(None), s.due_at <= now),
        )
        .values(
            status=StepStatus.RUNNING,
            claimed_by=value("owner", s.claimed_by),
            lease_until=value("lease", s.lease_until),
            attempts=s.attempts + 1,
            started_at=func.coalesce(s.started_at, now),
        )
    )


def _fence(ids: list[Any] | None) -> Any:
    """The claim a step's answer is recorded under: still running, claimed by ``:owner`` at
    attempt ``:attempt`` (of one step, or of each of the steps ``ids`` names)."""
    value = _binds(ids)
    return and_(
        _which(ids),
        _acts_from(STEP_FINISH),
        s.claimed_by == value("owner", s.claimed_by),
        s.attempts == value("attempt", s.attempts),
    )


_STEPS_OF_RUN = select(*STEP_COLUMNS).where(s.run_id == bindparam("run_id")).order_by(s.id)
_STEP = select(*STEP_COLUMNS).where(s.id == bindparam("step_id"))
_STEPS_OF_RUNS = select(*STEP_COLUMNS).where(s.run_id.in_(bindparam("run_ids", expanding=True)))

_NEXT_OPEN = (
    select(*STEP_COLUMNS)
    .where(
        s.run_id == bindparam("run_id"),
        s.phase == bindparam("phase"),
        s.status.in_(STEP_OPEN),
    )
    .order_by(s.seq)
    .limit(1)
)

_NEXT_PENDING_AFTER = (
    select(s.id)
    .where(
        s.run_id == bindparam("run_id"),
        s.phase == bindparam("phase"),
        s.status == StepStatus.PENDING,
        s.seq > bindparam("after_seq"),
    )
    .order_by(s.seq)
    .limit(1)
)

_SET_DUE = by_primary_key(
    update(event_run_steps).where(s.id == bindparam("step_id")).values(due_at=bindparam("until"))
)

# pending -> running. ``attempts`` in the WHERE pins the claim to the row this tick read. No
# assignment reads a column another one writes, so MariaDB's left-to-right SET evaluation and
# SQLite's old-row evaluation agree.
_CLAIM = _claim(None)

_fenced = _fence(None)
# The reclaim's fence adds "the claim lease it saw expired is still there": a dispatcher
# that parked the step in the meantime (same owner, same attempt, NULL lease) must keep it.
_fenced_expired = and_(_fenced, s.lease_until.is_not(None), s.lease_until <= bindparam("now"))


def _finish(fence: Any) -> Update:
    """The terminal outcome ``:to`` (with ``:error``) under ``fence``."""
    return by_primary_key(
        update(event_run_steps)
        .where(fence)
        .values(
            status=bindparam("to"),
            last_error=bindparam("error"),
            lease_until=None,
            finished_at=bindparam("now"),
        )
    )


_FINISH = _finish(_fenced)
_FINISH_EXPIRED = _finish(_fenced_expired)
_PARK = by_primary_key(update(event_run_steps).where(_fenced).values(lease_until=None))

# ── kept compare-and-sets: a shared transaction's claims and finishes, one statement each ──

#: The most steps one kept compare-and-set names; more go in several statements.
CHUNK = 64


class Shortfall(Exception):
    """A kept compare-and-set changed fewer rows than it named: some step had moved since it
    was read. The shared transaction is rolled back, and each write in it runs again in a
    transaction of its own, where the step that moved is told as it would have been."""


@functools.lru_cache(maxsize=CHUNK)
def _claim_many(n: int) -> Update:
    """:data:`_CLAIM` for ``n`` steps: the same compare-and-set on each, by primary key."""
    return _claim(_ids(n))


@functools.lru_cache(maxsize=CHUNK)
def _finish_many(n: int) -> Update:
    """:data:`_FINISH` of ``n`` steps ``done``: the same fence on each, by primary key."""
    ids = _ids(n)
    return by_primary_key(
        update(event_run_steps)
        .where(_fence(ids))
        .values(
            status=StepStatus.DONE,
            last_error=None,
            lease_until=None,
            finished_at=_per_step(ids, "now", s.finished_at),
        )
    )


async def _flush_kept(
    conn: AsyncConnection, kept: list[dict[str, Any]], one: Any, many: Any
) -> int:
    # One step goes through the plain statement (``one``); several through ``many``, whose
    # binds are the plain statement's numbered a step each (``to`` and ``error`` are fixed).
    done = 0
    for start in range(0, len(kept), CHUNK):
        chunk = kept[start : start + CHUNK]
        if len(chunk) == 1:
            changed = (await conn.execute(one, chunk[0])).rowcount
        else:
            params = {
                f"{name}_{k}": value
                for k, row in enumerate(chunk)
                for name, value in row.items()
                if name not in ("to", "error")
            }
            changed = (await conn.execute(many(len(chunk)), params)).rowcount
        if changed != len(chunk):
            raise Shortfall(f"{len(chunk) - changed} of {len(chunk)} kept steps had moved")
        done += changed
    return done


async def flush_finishes(batch: Batch) -> int:
    """Make the ``done`` finishes ``batch`` kept (:func:`keep_finish`), in one statement;
    answers how many. Raises :class:`Shortfall` when any step had moved."""
    if not batch.finishes:
        return 0
    kept, batch.finishes = batch.finishes, []
    return await _flush_kept(batch.conn, kept, _FINISH, _finish_many)


async def flush_claims(batch: Batch) -> int:
    """Make the claims ``batch`` kept (:func:`keep_claim`), in one statement; answers how
    many. Raises :class:`Shortfall` when any step had moved."""
    if not batch.claims:
        return 0
    kept, batch.claims = batch.claims, []
    return await _flush_kept(batch.conn, kept, _CLAIM, _claim_many)


_RESCHEDULE = by_primary_key(
    update(event_run_steps)
    .where(_fenced)
    .values(
        status=StepStatus.PENDING,
        due_at=bindparam("until"),
        last_error=bindparam("error"),
        claimed_by=None,
        lease_until=None,
    )
)
# A reclaim hands the step back with ``attempts`` untouched: resetting it would make the
# attempt ceiling unreachable and the step would cycle for ever, never terminal.
_RELEASE_EXPIRED = by_primary_key(
    update(event_run_steps)
    .where(_fenced_expired)
    .values(status=StepStatus.PENDING, claimed_by=None, lease_until=None)
)

# A stopping host's steps still in ``perform`` when its grace ran out: handed back to
# pending unmarked (``attempts`` untouched, like a reclaim), so the next dispatcher runs them
# under the same idempotency key. Parked steps (NULL lease) wait for a person and stay.
_HELD_BY = (
    select(*STEP_COLUMNS)
    .where(
        s.status == StepStatus.RUNNING,
        s.claimed_by == bindparam("owner"),
        s.lease_until.is_not(None),
    )
    .order_by(s.id)
)
_RELEASE_HELD = by_primary_key(
    update(event_run_steps)
    .where(_fenced, s.lease_until.is_not(None))
    .values(status=StepStatus.PENDING, claimed_by=None, lease_until=None)
)

# A step claimed (ahead, in the answer before it, or by its pass) that a stopping host never
# dispatched: back to pending as it was before the claim. Nothing reached the plugin, so the
# claim's attempt is undone and the next dispatcher's attempt is the one this would have been.
# No assignment reads a column another one writes (MariaDB evaluates SET left to right).
_RETURN_UNTRIED = by_primary_key(
    update(event_run_steps)
    .where(_fenced, s.lease_until.is_not(None))
    .values(status=StepStatus.PENDING, claimed_by=None, lease_until=None, attempts=s.attempts - 1)
)

_EXPIRED = (
    select(*STEP_COLUMNS)
    .where(
        s.status == StepStatus.RUNNING,
        s.lease_until.is_not(None),
        s.lease_until <= bindparam("now"),
    )
    .order_by(s.lease_until, s.id)
    .limit(bindparam("limit"))
)

_CANCEL_OPEN = (
    update(event_run_steps)
    .where(s.run_id == bindparam("of_run"), _acts_from(STEP_CANCEL))
    .values(status=StepStatus.CANCELLED, lease_until=None, finished_at=bindparam("now"))
    # One run's steps, through the index that leads with the run (not a status index).
    .with_hint(RUN_PHASE_ORDER, dialect_name="mysql")
)

# Only for a run that is still ``scheduled`` (the caller's CAS says so in the same
# transaction): nothing of it was ever dispatched, and ``attempts = 0`` keeps it that way.
_DELETE_UNSTARTED = event_run_steps.delete().where(s.run_id == bindparam("of_run"), s.attempts == 0)

# ── the person's controls ─────────────────────────────────────────────────────

_CONFIRM = by_primary_key(
    update(event_run_steps)
    .where(s.id == bindparam("step_id"), _acts_from(STEP_CONFIRM))
    .values(status=StepStatus.DONE, note=bindparam("why"), finished_at=bindparam("now"))
)
_SKIP = by_primary_key(
    update(event_run_steps)
    .where(s.id == bindparam("step_id"), _acts_from(STEP_SKIP))
    .values(
        status=StepStatus.SKIPPED,
        note=bindparam("why"),
        lease_until=None,
        finished_at=bindparam("now"),
    )
)
_RETRY = by_primary_key(
    update(event_run_steps)
    .where(s.id == bindparam("step_id"), _acts_from(STEP_RETRY))
    .values(
        status=StepStatus.PENDING,
        attempts=0,
        due_at=None,
        claimed_by=None,
        lease_until=None,
        last_error=None,
        finished_at=None,
    )
)
# The furthest the phase has reached. The runner steps *over* failed steps (its cursor
# reads only pending and running), so "the lowest unsettled seq" would point behind it.
_FURTHEST = select(func.max(s.seq)).where(
    s.run_id == bindparam("run_id"), s.phase == bindparam("phase"), s.status != StepStatus.PENDING
)


# ── functions ─────────────────────────────────────────────────────────────────


async def insert_steps(
    conn: AsyncConnection, rows: Sequence[dict[str, Any]], *, batch: Batch | None = None
) -> None:
    """Insert a phase's step rows, keeping any that exist under (run, phase, seq). Given
    ``batch`` (a group commit's, in ``conn``), the rows are kept and inserted with every
    other phase's by :func:`flush_new`."""
    if batch is not None:
        batch.new_steps.extend(rows)
        return
    if not rows:
        return
    stmt = insert_keeping_existing(event_run_steps, (s.run_id, s.phase, s.seq), conn.dialect)
    await conn.execute(stmt, list(rows))


async def flush_new(batch: Batch) -> int:
    """Insert the step rows ``batch`` kept back, every run's, in one statement; answers how
    many. What reads a kept run's steps in the same transaction comes after this."""
    rows, batch.new_steps = batch.new_steps, []
    await insert_steps(batch.conn, rows)
    return len(rows)


async def steps_of_run(conn: AsyncConnection, run_id: int) -> list[Row]:
    """Every step of a run, in creation order (phase by phase, seq by seq)."""
    return list((await conn.execute(_STEPS_OF_RUN, {"run_id": run_id})).all())


async def steps_of_runs(conn: AsyncConnection, run_ids: Sequence[int]) -> list[Row]:
    """Every step of these runs, in one query."""
    return list((await conn.execute(_STEPS_OF_RUNS, {"run_ids": list(run_ids)})).all())


async def get_step(conn: AsyncConnection, step_id: int) -> Row | None:
    return (await conn.execute(_STEP, {"step_id": step_id})).first()


async def next_open_step(conn: AsyncConnection, run_id: int, phase: str) -> Row | None:
    """The lowest-seq step of the phase that is pending or running: the run's cursor."""
    return (await conn.execute(_NEXT_OPEN, {"run_id": run_id, "phase": phase})).first()


async def hold_next_step(
    conn: AsyncConnection, run_id: int, phase: str, seq: int, until: datetime
) -> bool:
    """Delay the next pending step after ``seq`` in the phase until ``until``.

    False when nothing follows in the phase (the hold must then travel on the run). Two
    statements: MariaDB cannot UPDATE a table ordered by a subquery over itself.
    """
    found = (
        await conn.execute(
            _NEXT_PENDING_AFTER, {"run_id": run_id, "phase": phase, "after_seq": seq}
        )
    ).scalar()
    if found is None:
        return False
    await conn.execute(_SET_DUE, {"step_id": found, "until": until})
    return True


async def claim_step(
    conn: AsyncConnection,
    step_id: int,
    *,
    seen_attempts: int,
    owner: str,
    lease: datetime,
    now: datetime,
) -> bool:
    """CAS pending -> running with a claim lease; the claim increments ``attempts``.
    False when the step had moved (another claimer got there first)."""
    return await changed_one(
        conn,
        _CLAIM,
        {
            "step_id": step_id,
            "seen_attempts": seen_attempts,
            "owner": owner,
            "lease": lease,
            "now": now,
        },
    )


async def finish_step(
    conn: AsyncConnection,
    step_id: int,
    *,
    owner: str,
    attempt: int,
    to: str,
    now: datetime,
    error: str | None = None,
    expired: bool = False,
) -> bool:
    """Record a terminal outcome (done, failed, refused) under the claim that dispatched it.

    ``expired`` is the reclaim's variant: it also requires the claim lease it saw to be expired.
    False means the claim is no longer current: the answer is stale and was not recorded.
    """
    params = {
        "step_id": step_id,
        "owner": owner,
        "attempt": attempt,
        "to": to,
        "error": error,
        "now": now,
    }
    return await changed_one(conn, _FINISH_EXPIRED if expired else _FINISH, params)


def keep_claim(
    batch: Batch, step_id: int, *, seen_attempts: int, owner: str, lease: datetime, now: datetime
) -> None:
    """Keep :func:`claim_step`'s compare-and-set for ``batch``'s one statement
    (:func:`flush_claims`, before the batch commits): a claim that would have lost then
    fails the whole batch, never silently."""
    batch.claims.append(
        {
            "step_id": step_id,
            "seen_attempts": seen_attempts,
            "owner": owner,
            "lease": lease,
            "now": now,
        }
    )


def keep_finish(batch: Batch, step_id: int, *, owner: str, attempt: int, now: datetime) -> None:
    """Keep :func:`finish_step`'s ``done`` for ``batch``'s one statement
    (:func:`flush_finishes`), which fails the whole batch if the claim was no longer current."""
    batch.finishes.append(
        {
            "step_id": step_id,
            "owner": owner,
            "attempt": attempt,
            "to": "done",
            "error": None,
            "now": now,
        }
    )


async def park_step(conn: AsyncConnection, step_id: int, *, owner: str, attempt: int) -> bool:
    """Leave the step running with no claim lease: it waits for a person, and no reclaim
    takes it."""
    return await changed_one(conn, _PARK, {"step_id": step_id, "owner": owner, "attempt": attempt})


async def reschedule_step(
    conn: AsyncConnection,
    step_id: int,
    *,
    owner: str,
    attempt: int,
    until: datetime,
    error: str | None,
) -> bool:
    """Back to pending, due again at ``until`` (a retry's backoff)."""
    return await changed_one(
        conn,
        _RESCHEDULE,
        {"step_id": step_id, "owner": owner, "attempt": attempt, "until": until, "error": error},
    )


async def expired_steps(conn: AsyncConnection, now: datetime, *, limit: int) -> list[Row]:
    """Running steps whose (non-NULL) claim lease has expired, oldest first."""
    return list((await conn.execute(_EXPIRED, {"now": now, "limit": limit})).all())


async def release_expired_step(
    conn: AsyncConnection, step_id: int, *, owner: str, attempt: int, now: datetime
) -> bool:
    """Return an expired step to pending, ``attempts`` untouched."""
    return await changed_one(
        conn, _RELEASE_EXPIRED, {"step_id": step_id, "owner": owner, "attempt": attempt, "now": now}
    )


async def steps_held_by(conn: AsyncConnection, owner: str) -> list[Row]:
    """Steps ``owner`` has claimed and not yet answered (in ``perform``; not parked)."""
    return list((await conn.execute(_HELD_BY, {"owner": owner})).all())


async def release_held_step(
    conn: AsyncConnection, step_id: int, *, owner: str, attempt: int
) -> bool:
    """Hand a claimed, unanswered step back to pending, ``attempts`` untouched, unmarked."""
    return await changed_one(
        conn, _RELEASE_HELD, {"step_id": step_id, "owner": owner, "attempt": attempt}
    )


async def return_untried_step(
    conn: AsyncConnection, step_id: int, *, owner: str, attempt: int
) -> bool:
    """Hand a step ``owner`` claimed at ``attempt`` and never dispatched back to pending,
    unmarked, its attempts as they were before the claim."""
    return await changed_one(
        conn, _RETURN_UNTRIED, {"step_id": step_id, "owner": owner, "attempt": attempt}
    )


async def cancel_open_steps(conn: AsyncConnection, run_id: int, *, now: datetime) -> int:
    """Cancel a run's pending and parked steps (a step mid-dispatch keeps its claim)."""
    return (await conn.execute(_CANCEL_OPEN, {"of_run": run_id, "now": now})).rowcount


async def delete_unstarted_steps(conn: AsyncConnection, run_id: int) -> int:
    """Remove a not-yet-started run's untouched steps (before re-materialising them)."""
    return (await conn.execute(_DELETE_UNSTARTED, {"of_run": run_id})).rowcount


async def confirm_step(
    conn: AsyncConnection, step_id: int, *, note: str | None, now: datetime
) -> bool:
    """CAS parked -> done, keeping the person's note."""
    return await changed_one(conn, _CONFIRM, {"step_id": step_id, "why": note, "now": now})


async def skip_step(
    conn: AsyncConnection, step_id: int, *, note: str | None, now: datetime
) -> bool:
    """CAS pending|parked -> skipped."""
    return await changed_one(conn, _SKIP, {"step_id": step_id, "why": note, "now": now})


async def retry_step(conn: AsyncConnection, step_id: int) -> bool:
    """CAS failed|refused -> pending with attempts 0."""
    return await changed_one(conn, _RETRY, {"step_id": step_id})


async def furthest_reached_seq(conn: AsyncConnection, run_id: int, phase: str) -> int | None:
    """The highest seq in the phase that has left pending."""
    return (await conn.execute(_FURTHEST, {"run_id": run_id, "phase": phase})).scalar()
