"""The countdown stage: sending the rungs of countdown ladders whose time has come.

A rung (:mod:`pageant.runs.countdown`) is a step of a run that has not begun, so the advance
stage, which moves a run through its current phase, never reaches it. This stage reads the
pending rungs that are due and hands each run's to a task of its own beside the tick
(:meth:`pageant.engine.loop.Engine.spawn`, so the run is busy to the advance stage until
they are sent). Each rung is dispatched as any step is
(:func:`~pageant.engine.dispatch.dispatch_step`): claimed under its idempotency key, sent
through its leg, retried as the leg answers, and recorded. A rung whose moment has gone —
the run began, or it is more than :data:`~pageant.runs.countdown.LATE_SECONDS` late — is
skipped instead, with a note.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, Iterable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pageant.db import countdown as rungs
from pageant.db import runs, steps
from pageant.db.engine_rows import run_row, step_row
from pageant.engine.contention import noted
from pageant.engine.dispatch import dispatch_step
from pageant.engine.readiness import attached
from pageant.runs import countdown as ladder
from pageant.states import Dispatched, RunStatus, StepStatus

if TYPE_CHECKING:
    from pageant.hosting import Host

log = logging.getLogger("pageant.engine")


async def countdown(host: Host, now: datetime) -> None:
    """Dispatch every due rung (at most ``runs_per_tick`` of them a tick), each run's in a
    task of its own; a rung whose moment has gone is skipped, never sent late."""
    async with host.db.connect() as conn:
        due = await rungs.due_rungs(conn, now, limit=host.settings.runs_per_tick)
    spawn_each_run(
        host, "countdown", due, lambda run_id, step_ids: _send(host, run_id, step_ids, now)
    )


def spawn_each_run(
    host: Host,
    stage: str,
    due: Iterable[Any],
    send: Callable[[int, list[int]], Coroutine[Any, Any, tuple[str, bool]]],
) -> None:
    """Hand the due steps of each run (rows with ``run_id`` and ``id``) to a task of the
    engine's, one a run, as the ``stage`` that found them."""
    by_run: dict[int, list[int]] = {}
    for row in due:
        by_run.setdefault(row.run_id, []).append(row.id)
    engine = attached(host, stage)
    for run_id, step_ids in by_run.items():
        engine.spawn(run_id, send(run_id, step_ids))


def why_passed(run: Any, due_at: datetime, now: datetime) -> str | None:
    """Why a due rung of ``run`` is not sent now (None: send it)."""
    if run.status != RunStatus.SCHEDULED or now >= run.scheduled_for:
        return ladder.PASSED_STARTED
    if now > due_at + timedelta(seconds=ladder.LATE_SECONDS):
        return ladder.PASSED_LATE
    return None


async def _send(host: Host, run_id: int, step_ids: list[int], now: datetime) -> tuple[str, bool]:
    for step_id in step_ids:
        try:
            await _send_one(host, run_id, step_id, now)
        except Exception as exc:
            if not noted(host, f"sending countdown step {step_id}", exc):
                log.exception("could not send countdown step %s of run %s", step_id, run_id)
    return Dispatched.CONTINUE, True


async def _send_one(host: Host, run_id: int, step_id: int, now: datetime) -> None:
    async with host.db.connect() as conn:
        run = await runs.get_run(conn, run_id)
        step = await steps.get_step(conn, step_id)
    if run is None or step is None or step.status != StepStatus.PENDING:
        return  # cancelled with its run, or sent by another host meanwhile
    why = why_passed(run, step.due_at, now)
    if why is not None:
        async with host.db.begin() as conn:
            await ladder.pass_over(conn, [step_id], why=why, now=now)
        return
    await dispatch_step(host, run_row(run), step_row(step))
