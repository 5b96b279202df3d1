"""Core's lifecycle triggers: a run's transitions, fired through the emit path.

``core.run.scheduled`` (an occurrence materialised), ``core.run.started``,
``core.run.ending`` (the last phase ended, cleanup under way), ``core.run.completed``,
``core.run.failed``, ``core.run.cancelled`` and ``core.phase.entered`` are declared by the
``core`` plugin like any trigger, and fired here through :meth:`pageant.hosting.Host.emit` —
the path a game server's firing takes — so a gate waits on them like on any other
(``on: core.run.completed where event eq "muster"``).

Each is fired once per transition, by whoever won the transition's compare-and-set, and
only **after** its transaction committed: a gate must never count a transition that was
then rolled back. A firing carries the run's public facts only (``event``, ``run_id``,
``scope``, ``status``, ``phase``, ``health``); a failure's error stays on the staff's
console, never in a payload a gate's log line could copy.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pageant.db import runs
from pageant.db.errors import is_retryable_conflict

if TYPE_CHECKING:
    from pageant.hosting import Host

log = logging.getLogger("pageant.runs.lifecycle")

RUN_SCHEDULED = "core.run.scheduled"
RUN_STARTED = "core.run.started"
RUN_ENDING = "core.run.ending"
RUN_COMPLETED = "core.run.completed"
RUN_FAILED = "core.run.failed"
RUN_CANCELLED = "core.run.cancelled"
PHASE_ENTERED = "core.phase.entered"
#: Every lifecycle trigger: an event may not wait on its own (see :mod:`pageant.events`).
TRIGGERS = (
    RUN_SCHEDULED,
    RUN_STARTED,
    RUN_ENDING,
    RUN_COMPLETED,
    RUN_FAILED,
    RUN_CANCELLED,
    PHASE_ENTERED,
)
#: The run status each run trigger reports.
STATUS = {
    RUN_SCHEDULED: "scheduled",
    RUN_STARTED: "running",
    RUN_ENDING: "ending",
    RUN_COMPLETED: "completed",
    RUN_FAILED: "failed",
    RUN_CANCELLED: "cancelled",
}
#: Who the firings' log lines name.
ACTOR = "core"
#: Tries of one lifecycle firing that loses a race with another writer, as the engine's own
#: work gets (pageant.engine.contention.BOUND).
CONFLICT_ATTEMPTS = 5

#: One lifecycle firing: ``(run_id, trigger_id, phase)`` (phase None: the run's current).
Firing = tuple[int, str, str | None]


def started(run_id: int, phase: str) -> list[Firing]:
    """What a run's start fires, in order: ``core.run.started``, then its first phase's
    ``core.phase.entered``."""
    return [(run_id, RUN_STARTED, phase), (run_id, PHASE_ENTERED, phase)]


def payload_of(row: Any, trigger_id: str, phase: str | None) -> dict[str, Any]:
    """The firing's variables from the run's row (:func:`pageant.db.runs.get_run`, read after
    the commit; the status is the transition's own)."""
    return {
        "event": row.slug,
        "run_id": row.id,
        "scope": row.scope,
        "status": STATUS.get(trigger_id, "running"),
        "phase": phase if phase is not None else (row.current_phase or ""),
        "health": row.health,
    }


async def announce_scheduled(host: Host, run_ids: list[int]) -> None:
    """Fire ``core.run.scheduled`` for each occurrence a schedule made: call it after the
    transaction that made them committed."""
    await announce_all(host, [(run_id, RUN_SCHEDULED, None) for run_id in run_ids])


async def announce(host: Host, run_id: int, trigger_id: str, *, phase: str | None = None) -> None:
    """Fire ``trigger_id`` for run ``run_id``: call it after the transition committed, and
    only when this caller made it. Never raises (:func:`announce_all`)."""
    await announce_all(host, [(run_id, trigger_id, phase)])


async def announce_all(host: Host, firings: Sequence[Firing]) -> None:
    """Fire each ``(run_id, trigger_id, phase)`` in order, as :func:`announce` does one.

    Most lifecycle firings concern no gate: one read tells which of their triggers an open
    gate may wait on (:meth:`pageant.gates.emit.Firings.open_among`), and only the runs of
    those are read for their payloads, in one connection; they are recorded together, in
    order, through the emit path (:meth:`pageant.gates.emit.Firings.fire`). Never raises: a
    failure is logged, and the runs it describes have already moved on regardless."""
    wanted = [f for f in firings if f[1] in host.registry.triggers]
    if not wanted:
        return  # a host built without core (a test's bare host) has nothing to fire
    for attempt in range(1, CONFLICT_ATTEMPTS + 1):
        try:
            await _fire(host, wanted)
            return
        except Exception as exc:
            what = ", ".join(f"{trigger_id} for run {run_id}" for run_id, trigger_id, _ in wanted)
            if is_retryable_conflict(exc):
                # Lost a race (a deadlock; on a Galera cluster a certification conflict):
                # rolled back whole, so firing again counts each firing once.
                host.metrics.deadlocks_retried.labels(where="firing lifecycle triggers").inc()
                if attempt < CONFLICT_ATTEMPTS:
                    log.debug("firing %s met lock contention; retrying", what)
                    await asyncio.sleep(random.uniform(0, 0.05 * 2 ** (attempt - 1)))
                    continue
                log.warning(
                    "firing %s met lock contention %d times in a row; not fired", what, attempt
                )
                return
            # A database outage is the engine's to report, once (pageant.db.outage).
            if host.engine is not None and host.outage.noted(exc, f"firing {what}"):
                return
            log.exception("firing %s failed", what)
            return


async def _fire(host: Host, wanted: list[Firing]) -> None:
    open_ = await host.firings.open_among({f[1] for f in wanted})
    counted = [f for f in wanted if f[1] in open_]
    if not counted:
        return
    async with host.db.connect() as conn:
        rows = {i: await runs.get_run(conn, i) for i in dict.fromkeys(f[0] for f in counted)}
    checked = [
        host.firings.check(trigger_id, payload_of(rows[run_id], trigger_id, phase))
        for run_id, trigger_id, phase in counted
        if rows[run_id] is not None
    ]
    if checked:
        await host.firings.fire(checked, issuer=None, actor=ACTOR)
