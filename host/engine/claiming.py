"""Claiming set-wise: the advance stage claims the due runs, and their ready steps, together.

When the advance stage finds several runs due at once — a hundred runs started in the same
second, a hundred waits ending in it, twenty runs moving side by side — it claims them in
**one transaction** instead of one task at a time:

- a run that is ``scheduled`` (its instant come, within its grace, verified, with no
  concurrency key to look up) is started: ``scheduled -> starting``, its first phase
  entered with its steps and gate, ``-> running`` — the same writes as a run's own start;
  one whose params are to be checked against an option source is left to its own task,
  which asks the source outside any transaction (:mod:`pageant.runs.options`);
- a ``running`` run that is not held is claimed for the pass (the same compare-and-set as a
  run's own task makes);
- their cursors are read in one statement, and each step that is plainly ready (pending and
  due, the run running and not held, the action available) is claimed with the same
  compare-and-set, budget check and ledger placeholder as any claim; a note of what the run
  waited on is cleared with it.

Once the claim has committed, the advance stage fires the lifecycle triggers of the set's
starts, together (:func:`pageant.runs.lifecycle.announce_all`), and then hands each claimed
run to its task with all of that in hand: it performs its claimed step at once. A run whose
step is not ready (a gate, a due instant not come) is looked at by its task as ever.

On MariaDB the run rows are first locked ``FOR UPDATE SKIP LOCKED``: a run another host is
claiming right now is skipped, not waited for, so two hosts share the due runs instead of
queueing on each other's locks. Every due run found is started and claimed (a run's claim
lease, ``run_lease_seconds``, outlasts its task's wait for a dispatch slot), but only as many
**steps** are claimed as there are dispatch slots free: a step's claim lease runs from its
claim, and a claimed step must not wait for a slot. The runs started beyond that read their
cursors in their own tasks, once a slot is theirs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pageant.db import runlog, runs, steps
from pageant.db.engine_rows import RunRow
from pageant.db.shared import Batch
from pageant.engine.dispatch import SET_WISE, Ahead
from pageant.engine.readiness import run_may_move, stopping
from pageant.engine.transitions import is_late, start_all_in, start_in
from pageant.runs import quorum, waiting
from pageant.runs import requires as campaigns
from pageant.runs.options import takes_option_values
from pageant.runs.params import with_scope
from pageant.runs.versions import phases_of
from pageant.states import RunStatus

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

    from pageant.hosting import Host

log = logging.getLogger("pageant.engine")

#: Fewer due runs than this are claimed by their own tasks (one run gains nothing).
MIN_SET = 2


@dataclass
class SetClaim:
    """What a run's task starts from after a set-wise claim."""

    #: The cursor read in the claim, and the step claimed when it was ready.
    ahead: Ahead
    #: The run's status after the claim (``running``, or ``starting`` when its first phase
    #: was left to its task: a pinned version that cannot be read).
    status: str
    #: When the run's claim lapses (``run_lease_seconds`` from the claim).
    lease_until: datetime
    #: The key of the phase the run was started into, in this claim (None: not started).
    started_into: str | None = None
    #: The firing of the set's starts' triggers, which the run waits for before it moves.
    announced: asyncio.Future[None] | None = None


def _startable(row: RunRow, now: datetime) -> bool:
    # Only the plain start: lateness, an unverified hold, a concurrency key (whose holder
    # must be looked up and told) and a catch-up's turn are the run's own task to see to.
    return (
        row["status"] == RunStatus.SCHEDULED
        and not row["catch_up"]
        and not is_late(row, now)
        and not waiting.held_unverified(row)
        and not row["concurrency_key"]
    )


def candidates(host: Host, found: Sequence[RunRow], now: datetime) -> list[RunRow]:
    """The due runs a set-wise claim may take: running and not held (a hold that ran out is
    the run's loop to clear), or plainly startable. A running run is taken only while
    dispatch slots are free for its step (nothing else of it is set-wise); every startable
    run is taken, so a burst of starts is one transaction however many slots are busy."""
    room = free_slots(host)
    plain = []
    for row in found:
        if _startable(row, now):
            plain.append(row)
        elif run_may_move(row) and room > 0:
            plain.append(row)
            room -= 1
    return plain


def free_slots(host: Host) -> int:
    """How many steps a set-wise claim may claim: the dispatch slots no run task holds."""
    busy = len(host.engine.inflight) if host.engine is not None else 0
    return max(0, host.settings.dispatch_concurrency - busy)


async def claim_due(host: Host, found: Sequence[RunRow]) -> tuple[dict[int, SetClaim], set[int]]:
    """Claim what of ``found`` (the advance stage's due runs) can be claimed set-wise.

    Answers ``(claimed, tried)``: run id -> what its task starts from, and every run id this
    tried — one tried and not claimed is another claimer's, and not handed to a task.
    """
    now = host.clock.now()
    rows = {int(row["id"]): row for row in candidates(host, found, now)}
    if len(rows) < MIN_SET or stopping(host):
        return {}, set()
    owner = host.identity
    lease = now + timedelta(seconds=host.settings.run_lease_seconds)
    room = free_slots(host)

    # Runs whose values are to be checked, or whose quorum read, before they start: their
    # own tasks' to start.
    deferred: set[int] = set()

    async def claim(conn: AsyncConnection, group: Batch | None) -> dict[int, SetClaim]:
        # Shared with other runs' writes; may run twice (each time from the start).
        claimed: dict[int, SetClaim] = {}
        deferred.clear()
        starts: list[tuple[RunRow, list[dict[str, Any]]]] = []
        for run_id in await runs.lock_free(conn, sorted(rows), now=now):
            row = rows[run_id]
            if row["status"] == RunStatus.RUNNING:
                if await runs.claim_tick(conn, run_id, owner=owner, lease=lease, now=now):
                    claimed[run_id] = SetClaim(Ahead(host, run_id), RunStatus.RUNNING, lease)
                continue
            pinned = await host.versions.get(conn, row["version_id"])
            if pinned is not None and (
                quorum.of_spec(pinned.spec) is not None
                or campaigns.of_spec(pinned.spec) is not None
            ):
                # A quorum reads the game first (engine/start_when), a requirement reads the
                # other event's runs (engine/requires): each is decided by the run's own task.
                deferred.add(run_id)
                continue
            if (
                row["params"]
                and pinned is not None
                and takes_option_values(
                    pinned.spec, with_scope(row["params"], row["scope"]), host.registry
                )
            ):
                deferred.add(run_id)
                continue
            phases = phases_of(pinned.spec) if pinned else None
            if phases:
                starts.append((row, phases))
                continue
            # Started; what a version that cannot be read does is the task's to say.
            if await start_in(conn, row, owner=owner, lease=lease, now=now, batch=group):
                claimed[run_id] = SetClaim(Ahead(host, run_id), RunStatus.STARTING, lease)
        # The plain starts together: one statement each for their claims and their entries.
        first = {row["id"]: phases[0]["key"] for row, phases in starts}
        started = await start_all_in(
            conn, host, starts, owner=owner, lease=lease, now=now, batch=group
        )
        for run_id in started:
            claimed[run_id] = SetClaim(Ahead(host, run_id), RunStatus.RUNNING, lease, first[run_id])
        claimed = dict(sorted(claimed.items()))
        if group is not None:
            # The started runs' steps are read next; their lines go before any a claim
            # writes at once.
            await steps.flush_new(group)
            await runlog.flush(group)
        # Steps only for the free slots; the other started runs look in their own tasks.
        running = [run_id for run_id, got in claimed.items() if got.status == RunStatus.RUNNING]
        running = running[:room]
        cursors = await runs.read_cursors(conn, running, batch=group)
        for run_id in running:
            await claimed[run_id].ahead.take(
                conn, cursors.get(run_id), now=now, group=group, path=SET_WISE
            )
        return claimed

    try:
        claimed = await host.outcomes.run(claim)
        return claimed, set(rows) - deferred
    except Exception:
        # Rolled back whole, so nothing was claimed: each run goes to its own task as
        # without a set, where one bad run (or a lock collision) stays that run's alone.
        log.debug("the set-wise claim failed; each run is claimed by its own task", exc_info=True)
        return {}, set()
