"""A countdown ladder: announcements sent at set times before a run begins.

The first phase of a spec may carry::

    "countdown": {"before": ["30m", "15m", "5m", "1m"],
                  "legs": ["core.discord", "core.log"],
                  "message": "The Frenzy starts in {remaining}"}

Each offset on each leg is one **rung**: a ``core.announce`` step of the run, made with the
run (while it is still ``scheduled``) and due at ``scheduled_for - offset``. A rung is an
ordinary step row, so it has its own idempotency key, is retried as its leg answers, is
cancelled with the run, and shows in the run's steps; only its phase is
:data:`~pageant.db.countdown.COUNTDOWN_PHASE`, so the run's cursor never reads one. The
countdown tick stage (:mod:`pageant.engine.countdown`) dispatches the rungs that are due.

A rung is sent near its own time or not at all: one whose time had already passed when the
run was made, or that finds the run started (or its time more than :data:`LATE_SECONDS`
gone, the host having been down), is ``skipped`` with a note saying why. "Starts in 15
minutes" sent three minutes before the start is worse than nothing.

Only the first phase may carry a countdown: its start is the run's instant, known when the
run is made. A later phase starts when the phases before it end, which their steps and
gates decide as the run goes, so no rung could be placed before it.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db import countdown as rungs
from pageant.db import runlog, steps
from pageant.gates.durations import parse_after

if TYPE_CHECKING:
    from pageant.plugins.registry import Registry

#: How long after its due time a rung may still be sent (a tick late, a retry's wait); past
#: it, the moment the message speaks of has gone.
LATE_SECONDS = 60
#: The only placeholder a countdown's message has; the event's announcement template wraps
#: the rendered message as its ``{message}``, so the event's title and time are the
#: template's to say.
PLACEHOLDERS: dict[str, str] = {"remaining": 'the time left before the start ("15 minutes")'}
ACTION = "core.announce"
#: Why a rung is passed over rather than sent.
PASSED_AT_CREATION = "its time had passed when the run was made"
PASSED_LATE = "its time passed before it could be sent"
PASSED_STARTED = "the run had begun"
PASSED_MOVED = "the run was moved and its time has passed"

_UNITS = (("day", 86_400), ("hour", 3600), ("minute", 60), ("second", 1))


def remaining_words(seconds: int) -> str:
    """A countdown offset as a person says it, in its largest exact unit:
    900 -> ``"15 minutes"``, 3600 -> ``"1 hour"``, 5400 -> ``"90 minutes"``."""
    for name, size in _UNITS:
        if seconds >= size and seconds % size == 0:
            count = seconds // size
            return f"{count} {name}" if count == 1 else f"{count} {name}s"
    return f"{seconds} seconds"


@dataclass(frozen=True)
class Rung:
    """One announcement of a ladder: ``before`` seconds ahead of the start, on ``leg``."""

    seq: int
    before: int
    leg: str
    message: str

    @property
    def label(self) -> str:
        return f"Countdown: {remaining_words(self.before)} before ({self.leg})"

    def due(self, start: datetime) -> datetime:
        return start - timedelta(seconds=self.before)


def render(message: str, before: int) -> str:
    """A (validated) countdown message with ``{remaining}`` written out; ``{{`` and ``}}``
    are braces, as in the announcement template."""
    words = remaining_words(before)
    return "".join(
        literal + (words if name == "remaining" else "")
        for literal, name, _, _ in string.Formatter().parse(message)
    )


def offsets(countdown: Mapping[str, Any]) -> list[int]:
    """A (validated) countdown's ``before``, in seconds, longest first."""
    found = (parse_after(text) for text in countdown.get("before") or [])
    return sorted((seconds for seconds in found if seconds is not None), reverse=True)


def ladder(spec: Mapping[str, Any]) -> list[Rung]:
    """The rungs a (validated) spec's first phase declares, earliest first, each offset's
    legs in the order written; ``[]`` without a countdown."""
    phases = spec.get("phases") or []
    countdown = phases[0].get("countdown") if phases else None
    if not isinstance(countdown, Mapping):
        return []
    message = str(countdown.get("message") or "")
    out: list[Rung] = []
    for before in offsets(countdown):
        text = render(message, before)
        for leg in countdown.get("legs") or []:
            out.append(Rung(len(out), before, str(leg), text))
    return out


class Notice(Protocol):
    """One announcement a run makes as a step of its own: a countdown's rung, a gate's
    milestone."""

    @property
    def seq(self) -> int: ...
    @property
    def label(self) -> str: ...
    @property
    def leg(self) -> str: ...
    @property
    def message(self) -> str: ...


def announce_rows(
    run_id: int, phase: str, notices: Sequence[Notice], registry: Registry | None
) -> list[dict[str, Any]]:
    """One ``core.announce`` step row per notice, ``pending``, in ``phase`` (a phase the
    run's cursor never reads); the caller adds when each is due. A notice is a notify step:
    one that fails for good is noted, never a stop."""
    declared = registry.actions.get(ACTION) if registry is not None else None
    version = declared.version if declared is not None else 1
    keys = steps.new_idempotency_keys(len(notices))
    return [
        {
            "run_id": run_id,
            "phase": phase,
            "seq": notice.seq,
            "label": notice.label[:200],
            "action": ACTION,
            "action_version": version,
            "params": {"leg": notice.leg, "message": notice.message},
            "on_failure": "skip",
            "status": "pending",
            "attempts": 0,
            "idempotency_key": keys[i],
        }
        for i, notice in enumerate(notices)
    ]


def _due(row: dict[str, Any], rung: Rung, start: datetime, now: datetime) -> dict[str, Any]:
    """A rung's row with its time; one whose time is not after ``now`` is skipped, noted.
    Every rung row has the same columns, as the one insert of them all takes."""
    due = rung.due(start)
    passed = due <= now
    return {
        **row,
        "status": "skipped" if passed else row["status"],
        "due_at": due,
        "note": PASSED_AT_CREATION if passed else None,
        "finished_at": now if passed else None,
    }


async def materialise_rungs(
    conn: AsyncConnection,
    *,
    run_id: int,
    spec: Mapping[str, Any],
    start: datetime,
    now: datetime,
    registry: Registry | None = None,
) -> int:
    """Make the run's rungs from ``spec`` for a run beginning at ``start``; rungs that exist
    are kept as they are (a rung sent before a re-pin is not made again). A rung whose time
    is not after ``now`` is made ``skipped``, noted, and never sent. Answers how many rungs
    the ladder has."""
    made = ladder(spec)
    if not made:
        return 0
    pending = announce_rows(run_id, rungs.COUNTDOWN_PHASE, made, registry)
    rows = [_due(row, rung, start, now) for row, rung in zip(pending, made, strict=True)]
    # Inserted at once, not kept for a group's one insert: a rung row carries columns
    # (due_at, note) a phase's step rows do not, and one insert takes rows of one shape.
    await steps.insert_steps(conn, rows)
    return len(rows)


async def follow_move(
    conn: AsyncConnection, run_id: int, *, old: datetime, new: datetime, now: datetime
) -> None:
    """The run moved from ``old`` to ``new``: its pending rungs move with it, each keeping
    its offset; one whose new time is not after ``now`` is skipped (and logged), never
    sent late. Rungs already sent or skipped stay as they are."""
    shift = new - old
    passed = []
    for row in await rungs.pending_rungs(conn, run_id):
        due = row.due_at + shift
        if due <= now:
            passed.append(row.id)
        else:
            await rungs.set_rung_due(conn, row.id, due)
    await pass_over(conn, passed, why=PASSED_MOVED, now=now)


async def pass_over(conn: AsyncConnection, step_ids: list[int], *, why: str, now: datetime) -> int:
    """Skip these pending rungs with ``why``, one ``step.status`` line each; answers how many
    were still pending."""
    count = 0
    for step_id in await rungs.pass_rungs(conn, step_ids, why=why, now=now):
        step = await steps.get_step(conn, step_id)
        if step is None:
            continue
        await runlog.step_status(
            conn, step._mapping, at=now, to="skipped", because=why, attempt=step.attempts
        )
        count += 1
    return count
