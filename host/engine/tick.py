"""The tick's stages, in order. Each is ``async def stage(host, now)``; the engine runs each
in its own error boundary, and each runs every row in one, so one bad row never stops a
stage and one failing stage never stops the others."""

from __future__ import annotations

import logging
import weakref
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db import due, runlog, runs, steps
from pageant.db.engine_rows import StepRow, step_row
from pageant.engine import catchup, requires, transitions
from pageant.engine.advance_stage import advance
from pageant.engine.contention import noted
from pageant.engine.countdown import countdown
from pageant.engine.dispatch import Claim, fail_step
from pageant.engine.expand import expand
from pageant.engine.milestones import milestones
from pageant.engine.readiness import attached
from pageant.engine.reading_gates import read_gates
from pageant.engine.transitions import is_late
from pageant.ledger.cleanup import cleanup
from pageant.states import Health, StepStatus

if TYPE_CHECKING:
    from pageant.hosting import Host

log = logging.getLogger("pageant.engine")

Stage = Callable[["Host", datetime], Awaitable[None]]

#: How often the log is pruned: it shares the tick, on a clock of its own.
PRUNE_EVERY = timedelta(hours=6)
PRUNE_BATCH = 1_000
PRUNE_BATCHES_PER_RUN = 20
#: When each engine's prune stage last ran (the stage's own state: an engine, one start of
#: its host, prunes at its first tick and then every ``PRUNE_EVERY``).
_pruned_at: weakref.WeakKeyDictionary[Any, datetime] = weakref.WeakKeyDictionary()


async def reclaim(host: Host, now: datetime) -> None:
    """Take back expired claim leases — never resetting ``attempts``.

    A run's expired claim lease is simply cleared. An expired step goes back to ``pending`` with
    its attempts as they were, or, at the attempt ceiling, is failed with its disposition
    applied. A parked step (NULL claim lease) is never touched.

    A host whose step claim lease expired did not answer within the action's time limit and
    the margin: it is gone (killed, or hung). Every run claim it holds is taken back with its
    steps, so its runs move on at once rather than after ``run_lease_seconds``; its late
    answers stay fenced, as every answer is, by the step's claim.
    """
    settings = host.settings
    async with host.db.begin() as conn:
        cleared = await runs.reclaim_stale_runs(conn, now)
    if cleared:
        log.warning("reclaimed %d expired run claim lease(s)", cleared)
    async with host.db.connect() as conn:
        expired = await steps.expired_steps(conn, now, limit=settings.runs_per_tick)
    gone: set[str] = set()
    for row in expired:
        step = step_row(row)
        try:
            if await _reclaim_step(host, step, now):
                gone.add(str(step["claimed_by"]))
        except Exception as exc:
            if not noted(host, f"reclaiming step {step['id']}", exc):
                log.exception("could not reclaim step %s of run %s", step["id"], step["run_id"])
    # This host is here to run this: its own run claims are its tasks' to hand back.
    gone.discard(host.identity)
    for owner in sorted(gone):
        try:
            async with host.db.begin() as conn:
                taken = await runs.release_claims_of(conn, owner)
        except Exception as exc:
            if not noted(host, f"taking back the run claims of {owner}", exc):
                log.exception("could not take back the run claims of %s", owner)
            continue
        if taken:
            log.warning(
                "took back %d run claim(s) of %s, whose step claim lease expired", taken, owner
            )


async def handed_back(
    conn: AsyncConnection,
    step: runlog.StepRow,
    owner: str,
    because: str,
    *,
    now: datetime,
    of: int | None = None,
) -> None:
    """``step.status``: a step ``owner`` claimed goes back to ``pending`` for another
    dispatch under the same attempt count."""
    await runlog.step_status(
        conn,
        step,
        at=now,
        to=StepStatus.PENDING,
        because=because,
        attempt=step["attempts"],
        of=of,
        claimed_by=owner,
    )


async def _reclaim_step(host: Host, step: StepRow, now: datetime) -> bool:
    """Take back one expired step (at the attempt ceiling, fail it); answers False when its
    answer, or another host's reclaim, got there first."""
    max_attempts = host.settings.max_attempts
    owner = step["claimed_by"]
    assert owner is not None  # an expired claim lease is always someone's
    claim = Claim(owner, step["attempts"])
    if step["attempts"] >= max_attempts:
        await fail_step(
            host,
            step,
            claim,
            f"no answer from attempt {step['attempts']} of {max_attempts} before its lease "
            f"expired (claimed by {step['claimed_by']})",
            now=now,
            expired=True,
        )
        return True
    async with host.db.begin() as conn:
        if not await steps.release_expired_step(
            conn, step["id"], owner=claim.owner, attempt=claim.attempt, now=now
        ):
            return False  # its answer arrived, or another reclaim got there first
        await handed_back(conn, step, claim.owner, "lease expired", now=now, of=max_attempts)
        await runs.escalate_health(
            conn,
            step["run_id"],
            Health.DEGRADED,
            because=f"step {step['id']} lost its dispatcher",
            at=now,
        )
    return True


async def sweep_missed(host: Host, now: datetime) -> None:
    """Scheduled runs whose grace window passed become ``missed``: terminal and visible,
    never started late and silently. Those of an event that catches up are decided by its
    policy instead (:mod:`pageant.engine.catchup`): let in to start late, said so, or
    missed with the reason. One held for its requirement is skipped, saying what it waited
    for (:mod:`pageant.engine.requires`)."""
    async with host.db.connect() as conn:
        candidates = await due.missed_candidates(conn, now, limit=host.settings.runs_per_tick)
    late = [row for row in candidates if is_late(row._mapping, now)]
    caught = await requires.give_up(host, late, now) if late else set()
    if late:
        caught |= await catchup.settle_late(host, late, now)
    for row in late:
        if row.id in caught:
            continue
        try:
            async with host.db.begin() as conn:
                await transitions.miss_in(conn, row._mapping, now=now)
        except Exception as exc:
            if not noted(host, f"marking run {row.id} missed", exc):
                log.exception("could not mark run %s missed", row.id)


async def prune(host: Host, now: datetime) -> None:
    """Delete the log of runs that ended more than ``log_retention_days`` ago, at most every
    six hours and in bounded batches. Only terminal runs are ever eligible."""
    engine = attached(host, "prune")
    last = _pruned_at.get(engine)
    if last is not None and now - last < PRUNE_EVERY:
        return
    _pruned_at[engine] = now
    cutoff = now - timedelta(days=host.settings.log_retention_days)
    total = 0
    for _ in range(PRUNE_BATCHES_PER_RUN):
        async with host.db.begin() as conn:
            deleted = await runlog.prune(conn, cutoff, limit=PRUNE_BATCH)
        total += deleted
        if deleted < PRUNE_BATCH:
            break
    if total:
        log.info("pruned %d run log line(s) of runs that ended before %s", total, cutoff)


#: The tick, in order. Cleanup follows advance, so a run that ends in a tick is given back in
#: the same one; the countdown goes before advance, so a rung still pending at its run's
#: instant is passed over before the run starts; the reading gates go before advance too,
#: so a run whose gate ran out with ``else: fail`` is failed before advance looks at it; and
#: so do the milestones, so a milestone the gate's last firing reached is made due before its
#: run moves on.
STAGES: tuple[Stage, ...] = (
    reclaim,
    expand,
    sweep_missed,
    countdown,
    read_gates,
    milestones,
    advance,
    cleanup,
    prune,
)
