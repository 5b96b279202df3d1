"""The kinds of a run log line: one enumeration, the only spelling of each kind in code.

Every writer of ``event_run_log`` names its line with a member of :class:`LogKind`, and
``docs/runs.md`` lists the same set (a test keeps the two equal). The module imports nothing
of pageant, so storage, the engine and the domain modules may all use it.
"""

from __future__ import annotations

from enum import StrEnum


class LogKind(StrEnum):
    """What a run log line records; the value is what the ``kind`` column holds."""

    RUN_CREATED = "run.created"
    RUN_STATUS = "run.status"
    RUN_HEALTH = "run.health"
    RUN_WAITING = "run.waiting"
    RUN_REPINNED = "run.repinned"
    RUN_MOVED = "run.moved"
    RUN_OVERLAP = "run.overlap"
    STEP_STATUS = "step.status"
    STEP_RETRY = "step.retry"
    STEP_REFUSED = "step.refused"
    STEP_PARKED = "step.parked"
    STEP_STALE = "step.stale"
    STEP_VERSION_DRIFT = "step.version_drift"
    STEP_HELD = "step.held"
    PHASE_ENTERED = "phase.entered"
    PHASE_COMPLETED = "phase.completed"
    PHASE_GATE = "phase.gate"
    PHASE_ADVANCED = "phase.advanced"
    CONDITION_EVALUATED = "condition.evaluated"
    CONTROL_PAUSE = "control.pause"
    CONTROL_RESUME = "control.resume"
    CONTROL_CANCEL = "control.cancel"
    CONTROL_CONFIRM = "control.confirm"
    CONTROL_SKIP = "control.skip"
    CONTROL_RETRY = "control.retry"
    CONTROL_CLEANUP = "control.cleanup"
    CONTROL_RESCHEDULE = "control.reschedule"
    ANNOUNCE = "announce"
    RESOURCE_PLACEHOLDER = "resource.placeholder"
    RESOURCE_RESERVED = "resource.reserved"
    RESOURCE_CONFIRMED = "resource.confirmed"
    RESOURCE_REVERTED = "resource.reverted"
    RESOURCE_REVERT_FAILED = "resource.revert_failed"
    RESOURCE_DRIFTED = "resource.drifted"
    RESOURCE_ORPHANED = "resource.orphaned"
    RESOURCE_RECONCILE_FAILED = "resource.reconcile_failed"
    RESOURCE_CLEANUP = "resource.cleanup"
