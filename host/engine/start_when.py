"""A quorum at a run's start: its event's ``start_when``, decided when the run is due.

When a scheduled run's instant comes and its pinned version has a ``start_when``, the
reading is read (through the host's :class:`~pageant.plugins.readings.Readings`, so at most
once per ``reading_interval_seconds`` for the same params, shared by every run asking):

- at least the number: it starts, its start saying ``started with 6 players online``;
- short of it (or unknown) inside the wait: it stays ``scheduled``, waiting on
  :attr:`~pageant.states.WaitingReason.QUORUM` (``waiting for 4 players online (2 now)``),
  and is looked at again on the engine's next passes — the run's task returns at once, so
  nothing waits in the tick and no connection is held while the game is read;
- short of it when the wait (counted from the first look) has ended: the ``else`` decides
  (:class:`~pageant.states.OrElse`): ``start`` starts it, saying so; ``skip`` ends it
  ``skipped`` with ``skipped: 2 of 4 players online after 10 minutes``;
  ``announce_and_skip`` first sends the call-off on the named legs (a ``core.announce``
  step each, in the run's phase ``(call-off)``, sent once), then skips it.

A run waiting on its quorum is not late: its grace window does not miss it
(:func:`pageant.engine.transitions.is_late`), its wait does.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pageant.db import steps
from pageant.db.engine_rows import RunRow, step_row
from pageant.engine import transitions
from pageant.engine.dispatch import dispatch_step
from pageant.runs import quorum, waiting
from pageant.states import OrElse, Outcome, StepStatus, WaitingReason

if TYPE_CHECKING:
    from pageant.hosting import Host

CALL_OFF_PHASE = quorum.CALL_OFF_PHASE


@dataclass(frozen=True)
class Decision:
    """What a due run's quorum came to: ``outcome`` None starts it now, ``because`` saying
    why when it has a quorum to speak of; otherwise the run's outcome for this pass."""

    outcome: Outcome | None = None
    because: str | None = None

    def joined(self, other: str | None) -> str | None:
        """This decision's words with another reason the start gives (a catch-up's)."""
        words = [w for w in (self.because, other) if w]
        return "; ".join(words) or None


async def decide(host: Host, run: RunRow, now: datetime) -> Decision:
    """Whether ``run`` (scheduled, due) starts now by its event's ``start_when``."""
    pinned = await host.versions.fetch(host.db, run["version_id"])
    start_when = quorum.of_spec(pinned.spec) if pinned is not None else None
    if start_when is None:
        return Decision()
    read = await host.readings.read(
        str(start_when["reading"]), quorum.reading_params(start_when, run)
    )
    registry = host.registry
    if read.amount is not None and read.amount >= start_when["at_least"]:
        return Decision(because=quorum.started_words(start_when, registry, read))
    # The wait runs from the run's first look, kept as its waiting note's ``since``.
    noted = run["waiting_since"] if run["waiting_reason"] == WaitingReason.QUORUM else None
    since = noted or now
    if now < since + timedelta(seconds=quorum.wait_seconds(start_when)):
        note = quorum.waiting_note(start_when, registry, read, since=since)
        async with host.db.begin() as conn:
            await waiting.note(conn, run["id"], note, now=now)
        return Decision(Outcome.WAITING)
    short = quorum.short_words(start_when, registry, read)
    otherwise = OrElse(start_when["else"])
    if otherwise is OrElse.START:
        return Decision(because=f"started anyway: {short} (else: start)")
    if otherwise is OrElse.ANNOUNCE_AND_SKIP:
        await _call_off(host, run, start_when, short, now)
    async with host.db.begin() as conn:
        skipped = await transitions.skip_in(conn, run["id"], f"skipped: {short}", now=now)
    return Decision(Outcome.SKIPPED if skipped else Outcome.TAKEN)


def call_off_message(run: RunRow, start_when: dict[str, Any], short: str) -> str:
    """The call-off's text: the spec's ``message``, or one saying what and why."""
    message = start_when.get("message")
    if message:
        return str(message)
    return f"{run['title']} is called off: {short}"


async def _call_off(
    host: Host, run: RunRow, start_when: dict[str, Any], short: str, now: datetime
) -> None:
    """Send the call-off on each leg, a step of the run each, kept under (run, phase, seq):
    a second host deciding the same run finds the steps made and sends nothing twice."""
    message = call_off_message(run, start_when, short)
    legs = list(start_when.get("legs") or [])
    rows = quorum.call_off_rows(run["id"], legs, message, registry=host.registry, now=now)
    async with host.db.begin() as conn:
        await steps.insert_steps(conn, rows)
    async with host.db.connect() as conn:
        made = await steps.steps_of_runs(conn, [run["id"]])
    for row in made:
        if row.phase == CALL_OFF_PHASE and row.status == StepStatus.PENDING:
            await dispatch_step(host, run, step_row(row))
