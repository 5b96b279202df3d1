"""Why a live run is not advancing: one function derives it, every surface renders it.

``waiting_on`` is ``None`` or ``{reason, since, until?, holder_run_id?, required_run_id?,
step_id?, attempt?, of?, sentence}`` with a reason among ``not_due``, ``unverified``,
``concurrency``, ``backoff``, ``parked``, ``paused``, ``gate``, ``quorum`` (a due run's
event's ``start_when`` waits for a reading to reach its number), ``requires`` (a due
occurrence held until a run of the event its spec requires ends, naming it as
``required_run_id``) and ``unavailable`` (the next step's action
belongs to no loaded plugin while its owner is contested: it waits rather than run someone
else's code, or an ended run's cleanup waits for a plugin that is down, naming it as
``plugin``). The engine persists the reason
(``event_runs.waiting_reason`` and ``waiting_since``) and logs ``run.waiting`` once per
change; the run console derives the whole answer again from the rows, so the two cannot
disagree about what the rows say.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db import runlog, runs
from pageant.db.rows import Record
from pageant.db.shared import Batch
from pageant.states import RUN_ENDED, STEP_OPEN, STEP_TROUBLED, WaitingReason
from pageant.support.timefmt import iso

REASONS = tuple(WaitingReason)

#: Answers why an action's steps must wait rather than run, or None (``Host.unavailable``).
Unavailable = Callable[[str], "str | None"]


def _name(step: Record) -> str:
    return f"“{step['label']}” (step {step['id']})"


def said(*parts: str | datetime) -> dict[str, Any]:
    """A waiting sentence both ways: ``sentence``, its instants written as ISO 8601 (what
    the API has always answered), and ``words``, the same parts with the instants kept as
    instants, so a surface draws them on its own clock when it shows them
    (:func:`pageant.runs.sentences.words`)."""
    text = "".join(iso(p) or "" if isinstance(p, datetime) else p for p in parts)
    return {"sentence": text, "words": list(parts)}


def furthest_failure(phase_steps: Sequence[Record]) -> Record | None:
    """The step a paused run stopped at: the furthest step of the phase that has left
    pending, when that step failed or was refused (the one ``retry`` acts on)."""
    reached = [st for st in phase_steps if st["status"] != "pending"]
    if not reached:
        return None
    furthest = max(reached, key=lambda st: st["seq"])
    return furthest if furthest["status"] in STEP_TROUBLED else None


def held_unverified(run: Record) -> bool:
    """A scheduled occurrence whose version never passed verify: the scheduler holds it (a
    person's start-now is not held — that person is the review the gate asks for)."""
    return run.get("source") == "schedule" and run.get("version_verified_at") is None


def _next_open(phase_steps: Sequence[Record]) -> Record | None:
    open_steps = [st for st in phase_steps if st["status"] in STEP_OPEN]
    return min(open_steps, key=lambda st: st["seq"]) if open_steps else None


def describe(
    run: Record,
    phase_steps: Sequence[Record],
    *,
    now: datetime,
    max_attempts: int,
    holder: Record | None = None,
    required: dict[str, Any] | None = None,
    gate: dict[str, Any] | None = None,
    unavailable: Unavailable | None = None,
    cleanup_held: dict[str, Any] | None = None,
    quorum: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    """Why ``run`` is not advancing at ``now``, or None when it is (or has ended and waits
    on nothing).

    ``phase_steps`` are the current phase's steps (any order); ``holder`` is the live run
    holding the concurrency key of a due scheduled run; ``required`` is what a due
    scheduled run held for its event's requirement waits on
    (:func:`pageant.runs.requires.waiting_on`); ``gate`` is what
    :func:`pageant.gates.phase.waiting` answered for a phase whose steps are all done;
    ``unavailable`` answers why a due step's action may not run at all; ``cleanup_held``
    is what an ended run's cleanup waits on (:func:`pageant.ledger.held.held_by`);
    ``quorum`` what a due scheduled run waits on by its event's ``start_when``
    (:func:`pageant.runs.quorum.waiting_note`).
    """
    status = run["status"]
    found: dict[str, Any] | None = None
    if status == "scheduled":
        if run["scheduled_for"] > now:
            found = {
                "reason": "not_due",
                "until": run["scheduled_for"],
                **said("scheduled to start at ", run["scheduled_for"]),
            }
        elif held_unverified(run):
            found = {
                "reason": "unverified",
                "sentence": (
                    f"held: version {run.get('version_number')} of this event has never been "
                    "verified, and scheduled occurrences start only from a verified version; "
                    "verify it (or start a run now by hand)"
                ),
            }
        elif required is not None:
            found = required
        elif holder is not None:
            found = {
                "reason": "concurrency",
                "holder_run_id": holder["id"],
                "sentence": (
                    f"waiting for run {holder['id']} ({holder['status']}) to release the "
                    f'concurrency key "{run["concurrency_key"]}"'
                ),
            }
        elif quorum is not None:
            found = quorum
    elif status == "paused":
        stopped_at = furthest_failure(phase_steps)
        if stopped_at is not None:
            found = {
                "reason": "paused",
                "step_id": stopped_at["id"],
                "sentence": (
                    f"paused after {_name(stopped_at)} {stopped_at['status']}: "
                    f"{stopped_at['last_error'] or 'no error recorded'}; "
                    "retry it, skip past it with resume, or cancel"
                ),
            }
        else:
            found = {"reason": "paused", "sentence": "paused by a person; resume to continue"}
    elif status == "running":
        found = _running(
            run,
            phase_steps,
            now=now,
            max_attempts=max_attempts,
            gate=gate,
            unavailable=unavailable,
        )
    elif status in RUN_ENDED:
        found = cleanup_held
    if found is None:
        return None
    reason = found["reason"]
    since = run.get("waiting_since") if run.get("waiting_reason") == reason else None
    return {"reason": reason, "since": since or now, **found}


def _running(
    run: Record,
    phase_steps: Sequence[Record],
    *,
    now: datetime,
    max_attempts: int,
    gate: dict[str, Any] | None,
    unavailable: Unavailable | None = None,
) -> dict[str, Any] | None:
    hold = run.get("hold_until")
    if hold is not None and hold > now:
        return {
            "reason": "not_due",
            "until": hold,
            **said(
                "holding until ",
                hold,
                f": a wait ended phase {run.get('current_phase')}, and what follows waits for it",
            ),
        }
    step = _next_open(phase_steps)
    if step is None:
        return gate
    if step["status"] == "running":
        if step["lease_until"] is None:
            return {
                "reason": "parked",
                "step_id": step["id"],
                "sentence": f"waiting for a person to confirm {_name(step)}",
            }
        return None  # being dispatched right now
    due = step["due_at"]
    if due is None or due <= now:
        why = unavailable(step["action"]) if unavailable is not None else None
        if why is None:
            return None
        return {
            "reason": "unavailable",
            "step_id": step["id"],
            "sentence": f"{_name(step)} waits: {step['action']} is unavailable ({why})",
        }
    if step["attempts"] > 0:
        return {
            "reason": "backoff",
            "step_id": step["id"],
            "until": due,
            "attempt": step["attempts"],
            "of": max_attempts,
            **said(
                f"{_name(step)} failed attempt {step['attempts']} of {max_attempts} "
                f"({step['last_error'] or 'no error recorded'}); retrying at ",
                due,
            ),
        }
    return {
        "reason": "not_due",
        "step_id": step["id"],
        "until": due,
        **said(f"holding {_name(step)} until ", due),
    }


async def note(
    conn: AsyncConnection,
    run_id: int,
    waiting: dict[str, Any] | None,
    *,
    now: datetime,
    phase: str | None = None,
    actor: str | None = None,
    batch: Batch | None = None,
) -> bool:
    """Persist the run's waiting reason and log ``run.waiting`` if (and only if) it changed
    (the line kept for ``batch``'s one insert when given).

    The CAS on the stored reason is what makes the line appear once however many ticks (or
    hosts) look at the same waiting run.
    """
    reason = waiting["reason"] if waiting else None
    since = waiting.get("since", now) if waiting else None
    if not await runs.set_waiting(conn, run_id, reason, since):
        return False
    await runlog.run_waiting(
        conn, run_id, at=now, waiting=waiting, phase=phase, actor=actor, batch=batch
    )
    return True


async def clear(
    conn: AsyncConnection, run_id: int, state: Mapping[str, Any], *, now: datetime
) -> None:
    """Clear the note of what the run waits on, if ``state`` (its cursor's) shows one."""
    if state["waiting_reason"] is not None:
        await note(conn, run_id, None, now=now, phase=state["current_phase"])
