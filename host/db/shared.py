"""A group commit's economies, as a value: log lines inserted together, switchboard flags
read once, steps claimed and finished together.

The engine records many steps' answers in one transaction (group commit). That transaction's
:class:`Batch` is handed, explicitly, to the functions that keep work for it instead of
doing it at once: :func:`pageant.db.runlog.write` with ``batch=`` keeps its line, inserted
with the others by :func:`pageant.db.runlog.flush`; :func:`pageant.db.switchboard.enabled_flag`
with ``batch=`` reads each action's flag once (the whole batch commits at one instant, so one
read is as fresh as many); :func:`pageant.db.steps.keep_claim` and
:func:`pageant.db.steps.keep_finish` keep a step's claim and a ``done`` answer's finish, made
for all of the batch's steps in one compare-and-set each (:func:`pageant.db.steps.flush_claims`,
:func:`pageant.db.steps.flush_finishes`). A function not handed the batch does its work at
once, whatever transaction it runs in: nothing here is found through the context.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db.engine_rows import RunState, StepRow


class Look(Protocol):
    """A run's look ahead kept for the end of a batch (:class:`pageant.engine.dispatch.Ahead`):
    its run's cursor is read then, with the other looks', and handed to :meth:`take`."""

    run_id: int

    async def take(
        self,
        conn: AsyncConnection,
        found: tuple[RunState, StepRow | None] | None,
        *,
        now: datetime,
        group: Batch | None,
    ) -> None: ...


class Batch:
    """What one shared transaction has kept back or read so far."""

    def __init__(self, conn: AsyncConnection) -> None:
        self.conn = conn
        #: The log lines kept for one insert, in the order they were written.
        self.lines: list[dict[str, Any]] = []
        #: Each action's switchboard flag as read in this transaction.
        self.flags: dict[str, bool | None] = {}
        #: The claims and ``done`` finishes kept for one statement each (their binds).
        self.claims: list[dict[str, Any]] = []
        self.finishes: list[dict[str, Any]] = []
        #: New step rows (phases materialised) kept for one insert.
        self.new_steps: list[dict[str, Any]] = []
        #: Each started event's facts as read in this transaction (its definition's row and
        #: its current version's), by definition id: read once however many starts it has.
        self.start_facts: dict[int, tuple[Any, Any]] = {}
        #: The looks ahead kept for the end of the batch, and the instant of each.
        self.looks: list[tuple[Look, datetime]] = []


#: One write of a group commit: called with the transaction's connection and its
#: :class:`Batch`, or None when the write runs in a transaction of its own.
Write = Callable[[AsyncConnection, Batch | None], Awaitable[Any]]
