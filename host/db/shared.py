"""A shared transaction's economies: log lines inserted together, switchboard flags read once,
steps claimed and finished together.

The engine records many steps' answers in one transaction (group commit). Inside
:func:`shared`, :func:`pageant.db.runlog.write` on that connection keeps its line to insert
with the others in one statement when the block flushes, and
:func:`pageant.db.switchboard.enabled_flag` reads each action's flag once: the whole batch
commits at one instant, so one read is as fresh as many. A step's claim and a ``done``
answer's finish are kept too, and made for all of the block's steps in one compare-and-set
each (:func:`pageant.db.steps.flush_claims`, :func:`pageant.db.steps.flush_finishes`).
Nothing changes on any other connection, nor outside the block.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection


class Shared:
    """What one shared transaction has kept back or read so far."""

    def __init__(self, conn: AsyncConnection) -> None:
        self.conn = conn
        self.lines: list[dict[str, Any]] = []
        self.flags: dict[str, bool | None] = {}
        #: The claims and ``done`` finishes kept for one statement each (their binds).
        self.claims: list[dict[str, Any]] = []
        self.finishes: list[dict[str, Any]] = []


_current: ContextVar[Shared | None] = ContextVar("pageant_shared_transaction", default=None)


@contextmanager
def shared(conn: AsyncConnection) -> Iterator[Shared]:
    """Make ``conn``'s transaction shared for the block (flush its lines before leaving)."""
    scope = Shared(conn)
    token = _current.set(scope)
    try:
        yield scope
    finally:
        _current.reset(token)


def of(conn: AsyncConnection) -> Shared | None:
    """The shared scope of ``conn``, if the running block made one."""
    scope = _current.get()
    return scope if scope is not None and scope.conn is conn else None


def know_flag(conn: AsyncConnection, action_id: str, enabled: bool | None) -> None:
    """Keep an action's switchboard flag read in ``conn``'s shared transaction by another
    statement (a run's cursor), so :func:`pageant.db.switchboard.enabled_flag` need not read
    it again; nothing outside a shared block."""
    scope = of(conn)
    if scope is not None:
        scope.flags[action_id] = enabled
