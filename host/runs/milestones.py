"""Milestone announcements: a public count gate telling players how far the count has come.

A public ``on`` gate's ``advance`` may carry::

    "milestones": {"at": [25, 50, 75, 100], "legs": ["core.discord", "core.log"],
                   "message": "Bosses slain tonight: {count} of {target}"}

``at`` are percentages of the gate's ``count``; each is reached when the tally is at least
``ceil(count * percent / 100)``. Each milestone on each leg is one **milestone step**: a
``core.announce`` step of the run, made when the phase is entered and sent once, when the
count reaches it. A milestone step is an ordinary step row, so it has its own idempotency
key, is retried as its leg answers, is cancelled with the run, and shows in the run's steps
and log; only its phase is :func:`milestone_phase` of the gate's phase (``(milestones:2)``
for the third phase), a name no authored phase can take, so the run's cursor never reads
one, and its ``seq`` numbers the milestone and the leg (:func:`seq_of`).

Until its count is reached a milestone step waits with its ``due_at`` at
:data:`~pageant.db.milestones.UNREACHED`; the milestones tick stage
(:mod:`pageant.engine.milestones`) makes it due when the gate's tally reaches its count, and
sends it. The message carries the gate's numbers only (``{count}``, ``{target}``,
``{percent}``): nothing a player may not read.
"""

from __future__ import annotations

import math
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pageant.db import milestones as milestone_rows
from pageant.db import steps
from pageant.runs.countdown import announce_rows

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

    from pageant.plugins.registry import Registry

#: What a milestone's message may say: the gate's numbers, nothing of the staff's.
PLACEHOLDERS: dict[str, str] = {
    "count": "the count the milestone stands for (25 of 100 at 25%)",
    "target": "the gate's count, the number that opens it",
    "percent": "the milestone's percentage",
}
#: Each milestone's legs are numbered inside a block of this many ``seq`` values.
LEGS_PER_MILESTONE = 100
#: Why a milestone step is passed over rather than sent.
PASSED_UNREACHED = "the run ended before the count reached it"


def milestone_phase(index: int) -> str:
    """The phase the milestone steps of the run's ``index``-th phase carry."""
    return f"{milestone_rows.PHASE_PREFIX}{index})"


def phase_index(phase: str) -> int | None:
    """The index of the authored phase a milestone phase belongs to; None for another."""
    if not phase.startswith(milestone_rows.PHASE_PREFIX) or not phase.endswith(")"):
        return None
    digits = phase[len(milestone_rows.PHASE_PREFIX) : -1]
    return int(digits) if digits.isascii() and digits.isdigit() else None


def seq_of(milestone: int, leg: int) -> int:
    """The ``seq`` of a milestone's step on one leg (both numbered from 0)."""
    return milestone * LEGS_PER_MILESTONE + leg


@dataclass(frozen=True)
class Milestone:
    """One announcement of a gate's milestones: sent on ``leg`` once the tally reaches
    ``reached_at``."""

    seq: int
    percent: int
    reached_at: int
    leg: str
    message: str

    @property
    def label(self) -> str:
        return f"Milestone: {self.percent}% ({self.reached_at}) ({self.leg})"


def render(message: str, *, count: int, target: int, percent: int) -> str:
    """A (validated) milestone message with its placeholders written out; ``{{`` and ``}}``
    are braces, as in the announcement template."""
    values = {"count": str(count), "target": str(target), "percent": str(percent)}
    return "".join(
        literal + (values.get(name, "") if name is not None else "")
        for literal, name, _, _ in string.Formatter().parse(message)
    )


def reached_at(target: int, percent: int) -> int:
    """The tally at which ``percent`` of ``target`` is reached (at least 1)."""
    return max(1, math.ceil(target * percent / 100))


def milestones_of(phase: Mapping[str, Any]) -> list[Milestone]:
    """The milestones a (validated) phase's gate declares, in order, each percentage's legs
    in the order written; ``[]`` without any."""
    advance = phase.get("advance")
    if not isinstance(advance, Mapping) or advance.get("public") is not True:
        return []
    declared = advance.get("milestones")
    if not isinstance(declared, Mapping):
        return []
    target = advance.get("count") or 1
    message = str(declared.get("message") or "")
    out = []
    for i, percent in enumerate(declared.get("at") or []):
        count = reached_at(target, percent)
        text = render(message, count=count, target=target, percent=percent)
        for j, leg in enumerate(declared.get("legs") or []):
            out.append(Milestone(seq_of(i, j), percent, count, str(leg), text))
    return out


def reached_by(phase: Mapping[str, Any], seq: int) -> int | None:
    """The tally at which the milestone step ``seq`` of ``phase`` is due; None when the
    phase (edited since, in another version) declares no such step."""
    for milestone in milestones_of(phase):
        if milestone.seq == seq:
            return milestone.reached_at
    return None


async def materialise_milestones(
    conn: AsyncConnection,
    *,
    run_id: int,
    phase: Mapping[str, Any],
    index: int,
    registry: Registry | None = None,
) -> int:
    """Make the milestone steps of the run's ``index``-th phase, waiting for their counts
    (rows that exist are kept); answers how many."""
    made = milestones_of(phase)
    if not made:
        return 0
    rows = [
        {**row, "due_at": milestone_rows.UNREACHED}
        for row in announce_rows(run_id, milestone_phase(index), made, registry)
    ]
    # Inserted at once, not kept for a group's one insert: a milestone row carries a column
    # (due_at) a phase's step rows do not, and one insert takes rows of one shape.
    await steps.insert_steps(conn, rows)
    return len(rows)
