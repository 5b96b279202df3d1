"""Whether a run's next step may be dispatched now, and if not, why: the one rule that the
run's own loop (:func:`pageant.engine.advance_stage.move_run`), the claim made ahead with the
answer before it (:class:`pageant.engine.dispatch.Ahead`) and the set-wise claim
(:mod:`pageant.engine.claiming`) all ask.

The run's loop acts on every answer (it waits, notes, holds or dispatches); the two claims
that run inside another write's transaction act only on
:attr:`~pageant.states.Readiness.READY` and leave everything else to the run's loop, as they
always did.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pageant.states import Readiness, RunStatus, StepStatus, WaitingReason

if TYPE_CHECKING:
    from pageant.hosting import EngineSeam, Host


def stopping(host: Host) -> bool:
    """True once the host's engine began a clean stop: from then on nothing is claimed."""
    return host.engine is not None and host.engine.stopping


def attached(host: Host, stage: str) -> EngineSeam:
    """The engine the ``stage`` runs under: a stage of the tick is never called without one."""
    engine = host.engine
    if engine is None:
        raise RuntimeError(f"the {stage} stage runs under an engine")
    return engine


def run_may_move(state: Mapping[str, Any]) -> bool:
    """The run's half of the rule: running and carrying no wait."""
    return state["status"] == RunStatus.RUNNING and state["hold_until"] is None


def readiness(
    host: Host, state: Mapping[str, Any], step: Mapping[str, Any] | None, now: datetime
) -> Readiness:
    """Whether ``step``, the next step of the run in ``state`` (its cursor), may be
    dispatched at ``now``; the first thing that stands in its way when it may not."""
    if state["status"] != RunStatus.RUNNING:
        return Readiness.NOT_RUNNING
    if state["hold_until"] is not None:
        return Readiness.HELD
    if step is None:
        return Readiness.NO_STEP
    if step["status"] == StepStatus.RUNNING:
        return Readiness.IN_FLIGHT if step["lease_until"] is not None else Readiness.PARKED
    if step["status"] != StepStatus.PENDING:
        return Readiness.NO_STEP  # a cursor points at open steps only; kept total
    if step["due_at"] is not None and step["due_at"] > now:
        return Readiness.NOT_DUE
    if host.unavailable(step["action"]) is not None:
        return Readiness.UNAVAILABLE
    if stopping(host):
        return Readiness.STOPPING
    if (
        host.plugin_unavailable(step["action"].split(".", 1)[0]) is not None
        or state["waiting_reason"] == WaitingReason.UNAVAILABLE
    ):
        return Readiness.PLUGIN_DOWN
    return Readiness.READY
