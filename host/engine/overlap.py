"""Overlap: what a run does when it becomes due while another run still holds its key.

A concurrency key is held by one live run at a time (the unique index on
``concurrency_lock``). When a run's instant comes and another run holds its key, its event's
``overlap`` (:class:`~pageant.states.Overlap`, read at that instant) decides:

- ``hold`` — it stays ``scheduled``, waiting on the key, and its grace window decides
  whether it ever starts (what every key did before overlap existed);
- ``skip`` — it ends at once as ``skipped``, the reason :data:`SKIP_REASON`;
- ``replace`` — the run holding the key is cancelled through the control every cancel goes
  through (its open steps cancelled, its cleanup run by the cleanup stage as for any cancel),
  its reason naming the newcomer; the newcomer then starts, once the key is free;
- ``allow`` — it starts beside the holder. It lets go of the key first, since the index
  admits one live holder: it neither waits for, nor holds off, anyone.

Every decision is a compare-and-set on the run (``scheduled`` is where each acts from), and
the start itself still goes through the unique index, so two hosts deciding the same
newcomer at once write one outcome, and ``hold``, ``skip`` and ``replace`` never leave two
runs live on one key. What was done is written on both runs' logs (``run.overlap``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from pageant.db import definitions, runlog, runs
from pageant.db.engine_rows import RunRow
from pageant.db.rows import Record
from pageant.engine import transitions
from pageant.errors import Conflict
from pageant.runs import controls
from pageant.states import Overlap
from pageant.support.timefmt import iso

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

    from pageant.hosting import Host

#: Why a ``skip`` newcomer never started (its ``cancel_reason``, and its log's).
SKIP_REASON = "the previous run of this key was still going"
#: Who the log names for what the engine decided about an overlap.
ACTOR = "engine:overlap"


@dataclass(frozen=True)
class Meeting:
    """A due run and the live run holding its key, as the overlap sees them."""

    run: RunRow
    holder: Record
    policy: Overlap
    key: str

    async def note(self, host: Host, now: datetime) -> None:
        """Write what was done on both runs' logs, in one transaction."""
        async with host.db.begin() as conn:
            await self.note_in(conn, now)

    async def note_in(self, conn: AsyncConnection, now: datetime) -> None:
        """:meth:`note`, in ``conn``."""
        both = (
            (self.run["id"], True, self.holder["id"], self.holder["scheduled_for"]),
            (self.holder["id"], False, self.run["id"], self.run["scheduled_for"]),
        )
        for run_id, newcomer, other, other_due in both:
            await runlog.run_overlap(
                conn,
                run_id,
                at=now,
                overlap=self.policy,
                key=self.key,
                newcomer=newcomer,
                other_run_id=other,
                other_scheduled_for=other_due,
                actor=ACTOR,
            )


def replaced_reason(run: RunRow) -> str:
    """The cancel reason of a run replaced by ``run``: the newcomer's id and slot."""
    return f"replaced by run {run['id']}, due at {iso(run['scheduled_for'])} (overlap: replace)"


async def policy_of(host: Host, run: RunRow) -> Overlap:
    """The overlap of ``run``'s event, as it stands now."""
    async with host.db.connect() as conn:
        found = await definitions.overlap_of(conn, run["definition_id"])
    try:
        return Overlap(found)
    except ValueError:  # a word written by a newer host: the safe reading is to wait
        return Overlap.HOLD


async def skip(host: Host, meeting: Meeting, now: datetime) -> bool:
    """scheduled -> skipped, with both logs written; False when another claimer moved the
    run first (it is then theirs, and nothing is written)."""
    run_id = meeting.run["id"]
    async with host.db.begin() as conn:
        if not await transitions.skip_in(conn, run_id, SKIP_REASON, now=now):
            return False
        await meeting.note_in(conn, now)
    return True


async def replace(host: Host, meeting: Meeting, now: datetime) -> bool:
    """Cancel the holder through the cancel control, naming the newcomer; True when this
    call cancelled it (the logs are then written), False when the holder could not be
    cancelled by it — another host's replace got there first, or it is ``ending`` and lets
    go of the key by itself in a moment. Either way the newcomer tries its start next."""
    try:
        await controls.cancel(
            host, meeting.holder["id"], actor=ACTOR, reason=replaced_reason(meeting.run)
        )
    except Conflict:
        return False
    await meeting.note(host, now)
    return True


async def go_beside(host: Host, meeting: Meeting) -> bool:
    """Let the newcomer go of its key so it may start beside the holder; False when it is
    no longer scheduled (another claimer has it)."""
    async with host.db.begin() as conn:
        return await runs.let_go_of_key(conn, meeting.run["id"])
