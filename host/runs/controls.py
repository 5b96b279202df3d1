"""The run controls a person presses: pause, resume, cancel, advance, confirm, skip, retry.

Each is one compare-and-set on the status it may act from (DESIGN §7) together with its
``control.*`` log line (actor and reason), in one transaction. When the CAS matches nothing
the control changes nothing and answers Conflict naming the status the run or step is
actually in — a console rendered a minute ago describes a run that has moved since.

The HTTP layer checks existence first (:func:`require_run`, :func:`require_step`, 404), then
the body (400), then calls the control (409).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db import phase_gates as gate_rows
from pageant.db import resources, runlog, runs, steps
from pageant.db.definitions import read_pinned
from pageant.db.errors import IntegrityError
from pageant.db.rows import Record
from pageant.errors import Conflict, Invalid, NotFound
from pageant.gates import phase as gates
from pageant.ledger.cleanup import give_back, leave_in_world
from pageant.runs import countdown, lifecycle, waiting
from pageant.runs.versions import phases_of
from pageant.states import (
    PARKED,
    RUN_ADVANCE,
    RUN_CANCEL,
    RUN_CLEANUP,
    RUN_PAUSE,
    RUN_RESCHEDULE,
    RUN_RESUME,
    STEP_CONFIRM,
    STEP_RETRY,
    STEP_SKIP,
    Move,
    RunStatus,
    StepStatus,
    either,
)
from pageant.support.timefmt import iso

if TYPE_CHECKING:
    from pageant.hosting import Host


async def require_run(host: Host, run_id: int) -> Record:
    """The run, or NotFound."""
    async with host.db.connect() as conn:
        row = await runs.get_run(conn, run_id)
    if row is None:
        raise NotFound(f"no such run: {run_id}")
    return row._mapping


async def require_step(host: Host, run_id: int, step_id: int) -> Record:
    """The step of that run, or NotFound (also when the step belongs to another run)."""
    await require_run(host, run_id)
    async with host.db.connect() as conn:
        row = await steps.get_step(conn, step_id)
    if row is None or row.run_id != run_id:
        raise NotFound(f"no such step: {step_id} in run {run_id}")
    return row._mapping


async def run_of_step(host: Host, step_id: int) -> int:
    """The id of the run a step belongs to, or NotFound."""
    async with host.db.connect() as conn:
        row = await steps.get_step(conn, step_id)
    if row is None:
        raise NotFound(f"no such step: {step_id}")
    return int(row.run_id)


async def _run_status(conn: AsyncConnection, run_id: int) -> str:
    row = await runs.get_run(conn, run_id)
    return row.status if row is not None else "gone"


async def _step_of(conn: AsyncConnection, run_id: int, step_id: int) -> Any:
    # Read again inside the control's transaction: a scheduled run's steps are remade when
    # a new version is published, so the step seen a moment ago may be gone.
    row = await steps.get_step(conn, step_id)
    if row is None or row.run_id != run_id:
        raise NotFound(f"no such step: {step_id} in run {run_id}")
    return row


def _step_state(step: Record) -> str:
    if step["status"] == StepStatus.RUNNING:
        return PARKED if step["lease_until"] is None else "running (being dispatched)"
    return str(step["status"])


def _acts_on(move: Move, noun: str) -> str:
    """``pause acts on a starting or running run``: the 409's half that names the move."""
    return f"{move.name} acts on {move.acts_on(noun)}"


async def _run_conflict(conn: AsyncConnection, run_id: int, move: Move) -> Conflict:
    return Conflict(f"run {run_id} is {await _run_status(conn, run_id)}; {_acts_on(move, 'run')}")


async def _step_conflict(conn: AsyncConnection, step_id: int, move: Move) -> Conflict:
    row = await steps.get_step(conn, step_id)
    state = _step_state(row._mapping) if row is not None else "gone"
    return Conflict(f"step {step_id} is {state}; {_acts_on(move, 'step')}")


# ── run controls ──────────────────────────────────────────────────────────────


async def pause(host: Host, run_id: int, *, actor: str, reason: str | None = None) -> None:
    """starting|running -> paused; the runner stops between two steps."""
    now = host.clock.now()
    async with host.db.begin() as conn:
        if not await runs.pause_run(conn, run_id):
            raise await _run_conflict(conn, run_id, RUN_PAUSE)
        await runlog.control_pause(conn, run_id, at=now, reason=reason, actor=actor)
        paused = waiting.describe({"status": RunStatus.PAUSED}, [], now=now, max_attempts=0)
        await waiting.note(conn, run_id, paused, now=now, actor=actor)


async def resume(host: Host, run_id: int, *, actor: str, reason: str | None = None) -> None:
    """paused -> running. A failed step the run stopped at is stepped over; ``retry`` is
    the control that runs it again."""
    now = host.clock.now()
    async with host.db.begin() as conn:
        if not await runs.resume_run(conn, run_id):
            raise await _run_conflict(conn, run_id, RUN_RESUME)
        await runlog.control_resume(conn, run_id, at=now, reason=reason, actor=actor)
        await waiting.note(conn, run_id, None, now=now, actor=actor)
    host.wake()


async def cancel(host: Host, run_id: int, *, actor: str, reason: str, cleanup: bool = True) -> None:
    """scheduled|starting|running|paused -> cancelled; pending and parked steps cancelled.
    A step mid-dispatch keeps its claim and its answer is still recorded.

    With ``cleanup`` false (an admin's call, checked by the route) what the run holds is
    left in the world as it is: its ``cleanup_status`` is ``incomplete`` at once, honestly,
    and the cleanup stage passes it by until an admin asks for a cleanup.
    """
    now = host.clock.now()
    async with host.db.begin() as conn:
        before = await _run_status(conn, run_id)
        if not await runs.cancel_run(conn, run_id, reason=reason, now=now):
            raise await _run_conflict(conn, run_id, RUN_CANCEL)
        cancelled = await steps.cancel_open_steps(conn, run_id, now=now)
        await runlog.control_cancel(
            conn,
            run_id,
            at=now,
            from_=before,
            reason=reason,
            cancelled_steps=cancelled,
            cleanup=cleanup,
            actor=actor,
        )
        if not cleanup:
            await leave_in_world(conn, run_id, now=now)
    host.wake()  # its concurrency key is free: a run waiting on it may start
    await lifecycle.announce(host, run_id, lifecycle.RUN_CANCELLED)


async def reschedule(
    host: Host, run_id: int, *, actor: str, scheduled_for: datetime, reason: str
) -> None:
    """Move one scheduled occurrence to ``scheduled_for`` (later than now). The run keeps
    its occurrence slot, so the schedule never moves it back or makes it again; the log
    keeps the old and the new instant. Raises :class:`Conflict` for a run that is no longer
    scheduled, or when another run of its event and scope already holds that instant."""
    now = host.clock.now()
    if scheduled_for <= now:
        raise Invalid(
            "a run is rescheduled into the future",
            details=[
                f"body.scheduled_for: {iso(scheduled_for)} is not later than now ({iso(now)})"
            ],
        )
    try:
        async with host.db.begin() as conn:
            before = await runs.get_run(conn, run_id)
            if before is None:
                raise NotFound(f"no such run: {run_id}")
            scope = before.scope
            if not await runs.reschedule(conn, run_id, scheduled_for):
                raise await _run_conflict(conn, run_id, RUN_RESCHEDULE)
            await countdown.follow_move(
                conn, run_id, old=before.scheduled_for, new=scheduled_for, now=now
            )
            await runlog.control_reschedule(
                conn,
                run_id,
                at=now,
                from_=before.scheduled_for,
                to=scheduled_for,
                reason=reason,
                actor=actor,
            )
            if before.waiting_reason is not None:
                await waiting.note(conn, run_id, None, now=now, actor=actor)
    except IntegrityError:
        raise Conflict(
            f"another run of this event (scope {scope!r}) is already at {iso(scheduled_for)}",
            details=[f"body.scheduled_for: {iso(scheduled_for)} is taken"],
        ) from None
    host.wake()


#: The statuses a forced advance acts from: a run that is in a phase and may move again.
ADVANCEABLE = RUN_ADVANCE.froms


async def _current_phase(conn: AsyncConnection, run: Any) -> dict[str, Any] | None:
    pinned = await read_pinned(conn, run.version_id)
    for phase in (phases_of(pinned.spec) if pinned else None) or []:
        if phase["key"] == run.current_phase:
            return phase
    return None


async def advance(host: Host, run_id: int, *, actor: str, reason: str) -> None:
    """Force the current phase's open gate (``satisfied_by: forced``); the phase then
    advances through the engine's one transition path, at once (the engine is woken).

    A gate is an additional condition, never a replacement, so this refuses (409) a phase
    held by a step (skip and confirm act on steps, one at a time), a phase already past
    its gate or without one, and a run that is not running or paused. The decision is
    logged once, as ``phase.advanced`` with ``because: forced``, the actor and the reason.
    """
    now = host.clock.now()
    async with host.db.begin() as conn:
        run = await runs.get_run(conn, run_id)
        if run is None:
            raise NotFound(f"no such run: {run_id}")
        if run.status not in ADVANCEABLE or run.current_phase is None:
            where = run.status if run.current_phase is not None else f"{run.status}, in no phase"
            raise Conflict(f"run {run_id} is {where}; {_acts_on(RUN_ADVANCE, 'run')}")
        key = run.current_phase
        phase = await _current_phase(conn, run)
        if phase is None or not phase.get("advance"):
            raise Conflict(
                f"phase {key!r} of run {run_id} has no gate; it advances when its steps are done"
            )
        step = await steps.next_open_step(conn, run_id, key)
        if step is not None:
            raise Conflict(
                f"phase {key!r} is held by step {step.id} ({step.label}), which is "
                f"{_step_state(step._mapping)}, not by its gate; advance forces a gate, never "
                "a step: confirm or skip the step"
            )
        row = await gate_rows.gate_of(conn, run_id, key)
        if row is None:
            raise Conflict(
                f"phase {key!r} of run {run_id} has no gate row; it advances when its steps "
                "are done"
            )
        was_open = gates.satisfied(row._mapping, now)[0] is None
        # The CAS, not the read above, decides: a firing may close the gate in between.
        if not (was_open and await gate_rows.force(conn, row.id, now)):
            at, by = gates.satisfied(await gate_rows.gate_by_id(conn, row.id), now)
            raise Conflict(
                f"phase {key!r} of run {run_id} is already past its gate "
                f"(satisfied by {by} at {iso(at)})"
            )
        forced = await gate_rows.gate_by_id(conn, row.id)
        await gates.log_advanced(conn, forced, now=now, reason=reason, actor=actor)
    host.wake()


# ── step controls ─────────────────────────────────────────────────────────────


async def confirm(
    host: Host, run_id: int, step_id: int, *, actor: str, note: str | None = None
) -> None:
    """A parked step (running with no claim lease) -> done, with the person's note."""
    now = host.clock.now()
    async with host.db.begin() as conn:
        row = await _step_of(conn, run_id, step_id)
        if not await steps.confirm_step(conn, step_id, note=note, now=now):
            raise await _step_conflict(conn, step_id, STEP_CONFIRM)
        await runlog.control_confirm(conn, row._mapping, at=now, note=note, actor=actor)
    host.wake()


async def skip(
    host: Host, run_id: int, step_id: int, *, actor: str, reason: str | None = None
) -> None:
    """A pending or parked step -> skipped (only ever a person's decision)."""
    now = host.clock.now()
    async with host.db.begin() as conn:
        before = await _step_of(conn, run_id, step_id)
        if not await steps.skip_step(conn, step_id, note=reason, now=now):
            raise await _step_conflict(conn, step_id, STEP_SKIP)
        was = _step_state(before._mapping)
        await runlog.control_skip(
            conn, before._mapping, at=now, from_=was, reason=reason, actor=actor
        )
    host.wake()


#: Retry resumes the run the step stopped: the 409 when that run is not paused.
_RETRY_RUN = f"retry acts on a step of {RUN_RESUME.acts_on('run')}"


async def retry(
    host: Host, run_id: int, step_id: int, *, actor: str, reason: str | None = None
) -> None:
    """The furthest failed or refused step of a paused run -> pending with attempts 0, and
    the run resumed: one control, because re-queueing a step of a run that stays paused
    would change nothing."""
    now = host.clock.now()
    async with host.db.begin() as conn:
        step = await _step_of(conn, run_id, step_id)
        if step.status not in STEP_RETRY.froms:
            raise Conflict(
                f"step {step_id} is {_step_state(step._mapping)}; {_acts_on(STEP_RETRY, 'step')}"
            )
        run = await runs.get_run(conn, run_id)
        if run is None:
            raise NotFound(f"no such run: {run_id}")
        if run.status not in RUN_RESUME.froms:
            raise Conflict(f"run {run_id} is {run.status}; {_RETRY_RUN}")
        if step.phase != run.current_phase:
            raise Conflict(
                f"step {step_id} is in phase {step.phase!r}, and run {run_id} is in phase "
                f"{run.current_phase!r}; retry acts on the current phase"
            )
        furthest = await steps.furthest_reached_seq(conn, run_id, step.phase)
        if furthest != step.seq:
            raise Conflict(
                f"step {step_id} is not the furthest step phase {step.phase!r} reached "
                f"(seq {step.seq}, furthest {furthest}); retry acts on the step the run "
                "stopped at"
            )
        if not await runs.resume_run(conn, run_id):
            raise Conflict(f"run {run_id} is {await _run_status(conn, run_id)}; {_RETRY_RUN}")
        if not await steps.retry_step(conn, step_id):
            raise await _step_conflict(conn, step_id, STEP_RETRY)
        await runlog.control_retry(
            conn, step._mapping, at=now, from_=step.status, reason=reason, actor=actor
        )
        await waiting.note(conn, run_id, None, now=now, actor=actor)
    host.wake()


async def cleanup(host: Host, run_id: int, *, actor: str) -> str:
    """An admin's "try cleanup again": every resource the run still holds is tried once
    more now, ``revert_failed`` ones included (each a real attempt, counted). Refused (409)
    while the run is in flight and when it recorded nothing; answers its cleanup_status."""
    async with host.db.connect() as conn:
        row = await runs.get_run(conn, run_id)
        recorded = await resources.resources_of_run(conn, run_id)
    if row is None:
        raise NotFound(f"no such run: {run_id}")
    if row.status not in RUN_CLEANUP.froms:
        raise Conflict(
            f"run {run_id} is {row.status}; cleanup acts on a run that has ended "
            f"({either(RUN_CLEANUP.froms)})"
        )
    if not recorded:
        raise Conflict(f"run {run_id} recorded nothing in the world; there is nothing to clean up")
    status = await give_back(host, run_id, now=host.clock.now(), rescue=True, actor=actor)
    host.wake()
    return status
