"""The milestones stage: sending a public count gate's milestones whose count was reached.

A milestone step (:mod:`pageant.runs.milestones`) is a step of a phase the run's cursor never
reads, waiting for its count. Each tick this stage

- reads the waiting milestone steps and their gates' tallies, and makes due (a
  compare-and-set, so two hosts make it due once) each whose count the tally has reached —
  also when the run has just completed, the firing that reached the last milestone having
  opened the gate: the count was reached, so players are told;
- passes over, with a note, those of a run that ended before their count was reached (a
  cancel has already cancelled them with the run's other open steps);
- hands the due ones, each run's in a task of its own beside the tick
  (:meth:`pageant.engine.loop.Engine.spawn`), to :func:`~pageant.engine.dispatch.dispatch_step`:
  claimed under its idempotency key, sent through its leg, retried as the leg answers, and
  recorded, as any step.

A firing is never slowed by a milestone: the emit path only counts, and this stage, on the
engine's full ticks (at least every ``poll_seconds``), does the rest.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING

from pageant.db import milestones as milestone_rows
from pageant.db import runs, steps
from pageant.db.engine_rows import run_row, step_row
from pageant.engine.contention import noted
from pageant.engine.countdown import spawn_each_run
from pageant.engine.dispatch import dispatch_step
from pageant.runs import countdown
from pageant.runs import milestones as spec_milestones
from pageant.runs.versions import phases_of
from pageant.states import RUN_ENDED, Dispatched, RunStatus, StepStatus

if TYPE_CHECKING:
    from sqlalchemy.engine import Row
    from sqlalchemy.ext.asyncio import AsyncConnection

    from pageant.hosting import Host

log = logging.getLogger("pageant.engine")


async def milestones(host: Host, now: datetime) -> None:
    """Make due the milestone steps whose count was reached, pass over those a run ended
    without reaching, and send the due ones (at most ``runs_per_tick`` of each a tick)."""
    limit = host.settings.runs_per_tick
    async with host.db.connect() as conn:
        waiting = await milestone_rows.waiting_steps(conn, limit=limit)
        reached: list[int] = []
        passed: list[int] = []
        if waiting:
            tallies = await milestone_rows.tallies(conn, sorted({row.run_id for row in waiting}))
            for row in waiting:
                needed = await _needed(host, conn, row)
                tally = tallies.get((row.run_id, needed[0]), 0) if needed else 0
                if needed is not None and tally >= needed[1]:
                    reached.append(row.id)
                elif row.run_status in RUN_ENDED:
                    passed.append(row.id)
    if reached or passed:
        async with host.db.begin() as conn:
            for step_id in reached:
                await milestone_rows.reach(conn, step_id, now)
            await countdown.pass_over(conn, passed, why=spec_milestones.PASSED_UNREACHED, now=now)
    async with host.db.connect() as conn:
        due = await milestone_rows.due_steps(conn, now, limit=limit)
    spawn_each_run(host, "milestones", due, lambda run_id, step_ids: _send(host, run_id, step_ids))


async def _needed(host: Host, conn: AsyncConnection, row: Row) -> tuple[str, int] | None:
    """The phase key of a waiting milestone step's gate and the tally that reaches it."""
    index = spec_milestones.phase_index(row.phase)
    pinned = await host.versions.get(conn, row.version_id)
    phases = phases_of(pinned.spec) if pinned is not None else None
    if index is None or phases is None or index >= len(phases):
        return None
    at = spec_milestones.reached_by(phases[index], row.seq)
    return None if at is None else (phases[index]["key"], at)


async def _send(host: Host, run_id: int, step_ids: list[int]) -> tuple[str, bool]:
    for step_id in step_ids:
        try:
            async with host.db.connect() as conn:
                run = await runs.get_run(conn, run_id)
                step = await steps.get_step(conn, step_id)
            if run is None or step is None or step.status != StepStatus.PENDING:
                continue  # cancelled with its run, or sent by another host meanwhile
            if run.status == RunStatus.CANCELLED:
                continue  # its cancel cancels it; never announce past a cancel
            await dispatch_step(host, run_row(run), step_row(step))
        except Exception as exc:
            if not noted(host, f"sending milestone step {step_id}", exc):
                log.exception("could not send milestone step %s of run %s", step_id, run_id)
    return Dispatched.CONTINUE, True
