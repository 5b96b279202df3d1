"""The states of a run and of its steps, and the moves between them: one home for every
status word.

A run's and a step's ``status``, a run's ``health`` and ``cleanup_status``, the outcome of
advancing a run once, and an action's risk are enumerations here; each value is what the
column holds and what the JSON says. :data:`RUN_MOVES` and :data:`STEP_MOVES` are the one
table of the allowed transitions: the compare-and-set updates of :mod:`pageant.db.runs` and
:mod:`pageant.db.steps` name the statuses they act from by reading it, the controls' 409
answers say what a control acts on from it, and ``docs/runs.md``'s state tables are written
from it (a test keeps them equal). The module imports nothing of pageant but the plugin
contract, so storage, the domain, the engine and every surface may all use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pageant.hookspecs.models import changes_world


class RunStatus(StrEnum):
    """Where a run is in its life; the value is what ``event_runs.status`` holds."""

    SCHEDULED = "scheduled"
    STARTING = "starting"
    RUNNING = "running"
    PAUSED = "paused"
    ENDING = "ending"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    MISSED = "missed"
    SKIPPED = "skipped"
    #: It falls inside a blackout it subscribes to and never starts (the blackout's name is
    #: its ``cancel_reason``); the one ended status the schedule may take back.
    BLACKED_OUT = "blacked_out"

    @property
    def ended(self) -> bool:
        """Terminal: it never starts or runs again (only :data:`RUN_LIFT` takes a
        ``blacked_out`` run back to ``scheduled``, when its blackout no longer covers it)."""
        return self in RUN_ENDED

    @property
    def public(self) -> PublicStatus:
        """The status as players are told it (a run under way is ``running``, a failed
        one ``cancelled``)."""
        return _PUBLIC[self]


class StepStatus(StrEnum):
    """Where a step is; the value is what ``event_run_steps.status`` holds. A ``running``
    step with no claim lease is *parked* (:data:`PARKED`): it waits for a person."""

    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    REFUSED = "refused"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"

    @property
    def ended(self) -> bool:
        """Terminal: the step is settled (the run's cursor reads only the open ones)."""
        return self not in STEP_OPEN


class Health(StrEnum):
    """How well a run is going, in rising order of trouble; it only ever rises."""

    OK = "ok"
    DEGRADED = "degraded"
    STALLED = "stalled"

    @property
    def below(self) -> tuple[Health, ...]:
        """The healths this one is worse than (what an escalation to it moves from)."""
        order = list(Health)
        return tuple(order[: order.index(self)])


class CleanupStatus(StrEnum):
    """What a run still holds in the world, derived from its ledger rows."""

    NOT_REQUIRED = "not_required"
    PENDING = "pending"
    COMPLETE = "complete"
    INCOMPLETE = "incomplete"


class Outcome(StrEnum):
    """What advancing a run once came to (the engine's answer for one run in one pass)."""

    COMPLETED = "completed"
    FAILED = "failed"
    WAITING = "waiting"
    BLOCKED = "blocked"
    LATE = "late"
    CATCHING_UP = "catching_up"
    #: Held for its event's requirement: a run of the required event is still going.
    REQUIRES = "requires"
    SKIPPED = "skipped"
    UNVERIFIED = "unverified"
    STOPPING = "stopping"
    STOPPED = "stopped"
    TAKEN = "taken"
    IN_FLIGHT = "in-flight"
    BOUNDED = "bounded"
    ERROR = "error"

    @property
    def finished(self) -> bool:
        """The run is done: its claim went with its last transition."""
        return self in (Outcome.COMPLETED, Outcome.FAILED)


class WaitingReason(StrEnum):
    """Why a run that is not ended waits (its ``waiting_reason``), as the run console and
    the log say it (:mod:`pageant.runs.waiting` writes the sentences)."""

    NOT_DUE = "not_due"
    UNVERIFIED = "unverified"
    CONCURRENCY = "concurrency"
    BACKOFF = "backoff"
    PARKED = "parked"
    PAUSED = "paused"
    GATE = "gate"
    UNAVAILABLE = "unavailable"
    #: A due run whose event's ``start_when`` waits for a reading to reach its number.
    QUORUM = "quorum"
    #: A due occurrence held until a run of the event its spec requires ends.
    REQUIRES = "requires"


class ResourceStatus(StrEnum):
    """A ledger row's status: what a run holds in the world, and how it was given back."""

    PENDING = "pending"
    CONFIRMED = "confirmed"
    REVERT_FAILED = "revert_failed"
    REVERTED = "reverted"
    DRIFTED = "drifted"
    ORPHANED = "orphaned"

    @property
    def holding(self) -> bool:
        """Still held in the world (given back later, or failed to be)."""
        return self in (
            ResourceStatus.PENDING,
            ResourceStatus.CONFIRMED,
            ResourceStatus.REVERT_FAILED,
        )


class Refusal(StrEnum):
    """Why a claimed step's action may not run now (``may_invoke``'s code), layer by layer
    (:mod:`pageant.engine.policy`)."""

    UNAVAILABLE = "unavailable"
    DISABLED = "disabled"
    COST = "cost"
    UNDECLARED = "undeclared"
    UNBUDGETED = "unbudgeted"
    CAP = "cap"


class Readiness(StrEnum):
    """What stands between a run's next step and its dispatch, in the order it is asked
    (:func:`pageant.engine.readiness.readiness`)."""

    #: The run is not running (scheduled, starting, paused, ending or ended).
    NOT_RUNNING = "not_running"
    #: The run carries a wait (``hold_until``); the run's loop clears one that ran out.
    HELD = "held"
    #: No step is left in the phase: its gate, or the next phase, is the run's loop's.
    NO_STEP = "no_step"
    #: The step runs under a live claim lease.
    IN_FLIGHT = "in_flight"
    #: The step is ``running`` with no lease: parked, waiting for a person.
    PARKED = "parked"
    #: The step's ``due_at`` has not come.
    NOT_DUE = "not_due"
    #: No loaded plugin may take the action now (``Host.unavailable``).
    UNAVAILABLE = "unavailable"
    #: The host began a clean stop: nothing new is claimed.
    STOPPING = "stopping"
    #: The action's plugin reported itself down, or the run holds the step for it: the run's
    #: loop decides whether the step is held (a notify step's ``hold_seconds``) or goes to
    #: its dispatch, where the plugin's being down refuses it.
    PLUGIN_DOWN = "plugin_down"
    #: Dispatch it.
    READY = "ready"


class Dispatched(StrEnum):
    """What dispatching one step came to, for the run's loop: go on to its next step, stop
    this pass (a wait, a failure, a stop), or let go (another claimer holds the step)."""

    CONTINUE = "continue"
    STOP = "stop"
    TAKEN = "taken"


class Risk(StrEnum):
    """An action's risk, as the contract declares it (``pageant.hookspecs.models.Risk``), in
    rising order; a test keeps the two equal."""

    NOTIFY = "notify"
    INSPECT = "inspect"
    CHANGE = "change"
    IRREVERSIBLE = "irreversible"

    @property
    def changes_world(self) -> bool:
        """The contract's :func:`~pageant.hookspecs.models.changes_world` of this risk."""
        return changes_world(self)


class Overlap(StrEnum):
    """What a run does when it is due and another run still holds its concurrency key: the
    event's ``overlap``, read from the newcomer's event at the instant it would start."""

    #: It stays scheduled and starts once the key is free; its grace window decides.
    HOLD = "hold"
    #: It ends at once as ``skipped``; the run holding the key goes on.
    SKIP = "skip"
    #: The run holding the key is cancelled (its cleanup runs as any cancel's); it starts
    #: once that run has let go of the key.
    REPLACE = "replace"
    #: It starts beside the run holding the key.
    ALLOW = "allow"


class OrElse(StrEnum):
    """What a run does when its ``start_when`` wait ends short of the number, or with the
    reading unknown: the spec's ``else``."""

    #: It ends as ``skipped``, the reason saying how far short it was.
    SKIP = "skip"
    #: It starts anyway, its start saying so.
    START = "start"
    #: The call-off is sent on the named announce legs, then it ends as ``skipped``.
    ANNOUNCE_AND_SKIP = "announce_and_skip"


class PublicStatus(StrEnum):
    """A run's status as players are told it (:attr:`RunStatus.public`)."""

    SCHEDULED = "scheduled"
    RUNNING = "running"
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    MISSED = "missed"
    BLACKED_OUT = "blacked_out"


class PublicEnd(StrEnum):
    """How an occurrence that is over ended, as players are told it."""

    COMPLETED = "completed"
    CANCELLED = "cancelled"
    MISSED = "missed"
    BLACKED_OUT = "blacked_out"


_PUBLIC = {
    RunStatus.SCHEDULED: PublicStatus.SCHEDULED,
    RunStatus.STARTING: PublicStatus.RUNNING,
    RunStatus.RUNNING: PublicStatus.RUNNING,
    RunStatus.PAUSED: PublicStatus.RUNNING,
    RunStatus.ENDING: PublicStatus.RUNNING,
    RunStatus.COMPLETED: PublicStatus.COMPLETED,
    RunStatus.FAILED: PublicStatus.CANCELLED,
    RunStatus.CANCELLED: PublicStatus.CANCELLED,
    RunStatus.MISSED: PublicStatus.MISSED,
    # Players are told an occurrence did not happen, not why (the reason is staff's).
    RunStatus.SKIPPED: PublicStatus.CANCELLED,
    RunStatus.BLACKED_OUT: PublicStatus.BLACKED_OUT,
}

# ── the sets a reader asks about ───────────────────────────────────────────────

#: The statuses of a run that has ended for good, in the order messages name them.
RUN_ENDED = (
    RunStatus.COMPLETED,
    RunStatus.FAILED,
    RunStatus.CANCELLED,
    RunStatus.MISSED,
    RunStatus.SKIPPED,
    RunStatus.BLACKED_OUT,
)
#: The statuses of a run that has not ended.
RUN_NOT_ENDED = tuple(s for s in RunStatus if s not in RUN_ENDED)
#: The statuses of a run under way, live in the world: it holds its concurrency key.
RUN_LIVE = tuple(s for s in RUN_NOT_ENDED if s is not RunStatus.SCHEDULED)
#: The statuses of a run the engine claims and advances each pass (not one paused).
RUN_ACTIVE = tuple(s for s in RUN_LIVE if s is not RunStatus.PAUSED)
#: The statuses of a step still to settle: the run's cursor is its phase's first of these.
STEP_OPEN = (StepStatus.PENDING, StepStatus.RUNNING)
#: The statuses of a step that went wrong (the ones ``retry`` runs again).
STEP_TROUBLED = (StepStatus.FAILED, StepStatus.REFUSED)
#: The outcomes after which a run is done (:attr:`Outcome.finished`).
OUTCOME_FINISHED = tuple(o for o in Outcome if o.finished)
#: Not a status: a ``running`` step with no claim lease, waiting for a person.
PARKED = "parked"


# ── the table of moves ─────────────────────────────────────────────────────────


def either(words: tuple[str, ...], last: str = "or") -> str:
    """``a``, ``a or b``, ``a, b or c``: words joined as a sentence names them."""
    if len(words) < 2:
        return "".join(words)
    return f"{', '.join(words[:-1])} {last} {words[-1]}"


@dataclass(frozen=True)
class Move:
    """One allowed transition: from any of ``froms`` into ``to`` (empty: the status stays
    what it was), made by ``by`` when ``when``."""

    name: str
    froms: tuple[str, ...]
    to: tuple[str, ...]
    by: str
    when: str

    def acts_on(self, noun: str) -> str:
        """``a starting or running run``: what the move acts from, in words."""
        return f"a {either(self.froms)} {noun}"


RUN_START = Move(
    "start",
    (RunStatus.SCHEDULED,),
    (RunStatus.STARTING,),
    "the engine",
    "its instant came and its concurrency key is free",
)
RUN_MISS = Move(
    "miss",
    (RunStatus.SCHEDULED,),
    (RunStatus.MISSED,),
    "the engine",
    "its grace window passed before it could start",
)
RUN_SKIP = Move(
    "skip",
    (RunStatus.SCHEDULED,),
    (RunStatus.SKIPPED,),
    "the engine",
    "at its instant, another run holds its concurrency key and its event's overlap is `skip`; "
    "or its `start_when` wait ended short of the number and its `else` is `skip` or "
    "`announce_and_skip`",
)
RUN_REFUSE = Move(
    "refuse",
    (RunStatus.SCHEDULED,),
    (RunStatus.FAILED,),
    "the engine",
    "at its instant, a param's value is not one its option source offers",
)
RUN_ENTER = Move(
    "enter",
    (RunStatus.STARTING, RunStatus.RUNNING),
    (RunStatus.RUNNING,),
    "the engine",
    "it enters its first phase, or the next",
)
RUN_END = Move(
    "end", (RunStatus.RUNNING,), (RunStatus.ENDING,), "the engine", "every phase is done"
)
RUN_COMPLETE = Move(
    "complete",
    (RunStatus.ENDING,),
    (RunStatus.COMPLETED,),
    "the engine",
    "at once, with its end, in the one compare-and-set that ends its last phase (a run found "
    "ending completes)",
)
RUN_FAIL = Move(
    "fail",
    RUN_ACTIVE,
    (RunStatus.FAILED,),
    "the engine",
    "the version it pinned cannot be read, or its phase is no longer in it, or its phase's "
    "reading gate waited out its `wait` short with `else: fail`",
)
RUN_ABORT = Move(
    "abort",
    RUN_LIVE,
    (RunStatus.FAILED,),
    "the engine",
    "a step failed with `on_failure: abort_run`",
)
RUN_PAUSE = Move(
    "pause",
    (RunStatus.STARTING, RunStatus.RUNNING),
    (RunStatus.PAUSED,),
    "a person, or the engine",
    "someone pressed pause, or a step failed with `on_failure: pause`",
)
RUN_RESUME = Move(
    "resume",
    (RunStatus.PAUSED,),
    (RunStatus.STARTING, RunStatus.RUNNING),
    "a person",
    "resume or retry (`starting` when it never entered a phase)",
)
RUN_CANCEL = Move(
    "cancel",
    (RunStatus.SCHEDULED, RunStatus.STARTING, RunStatus.RUNNING, RunStatus.PAUSED),
    (RunStatus.CANCELLED,),
    "a person, the schedule, or the engine",
    "someone cancelled it, the schedule no longer produces it, or a run of its concurrency "
    "key whose event's overlap is `replace` became due",
)
RUN_RESCHEDULE = Move(
    "reschedule",
    (RunStatus.SCHEDULED,),
    (),
    "a person",
    "someone moved it to another instant",
)
RUN_ADVANCE = Move(
    "advance",
    (RunStatus.RUNNING, RunStatus.PAUSED),
    (),
    "a person",
    "someone forced its current phase's gate",
)
RUN_BLACK_OUT = Move(
    "black out",
    (RunStatus.SCHEDULED,),
    (RunStatus.BLACKED_OUT,),
    "the schedule",
    "its instant falls inside a period of a blackout its event subscribes to",
)
RUN_LIFT = Move(
    "lift",
    (RunStatus.BLACKED_OUT,),
    (RunStatus.SCHEDULED,),
    "the schedule",
    "no blackout its event subscribes to covers its instant any more (a period edited out, "
    "the blackout archived, the event unsubscribed)",
)
RUN_WITHDRAW = Move(
    "withdraw",
    (RunStatus.BLACKED_OUT,),
    (RunStatus.CANCELLED,),
    "the schedule",
    "a publish no longer produces it (reason `superseded`, as a scheduled one's)",
)
RUN_CLEANUP = Move("cleanup", RUN_ENDED, (), "an admin", "someone asked for its cleanup again")
#: Every move of a run, in the order a run lives them.
RUN_MOVES = (
    RUN_START,
    RUN_MISS,
    RUN_SKIP,
    RUN_REFUSE,
    RUN_ENTER,
    RUN_END,
    RUN_COMPLETE,
    RUN_FAIL,
    RUN_ABORT,
    RUN_PAUSE,
    RUN_RESUME,
    RUN_CANCEL,
    RUN_RESCHEDULE,
    RUN_BLACK_OUT,
    RUN_LIFT,
    RUN_WITHDRAW,
    RUN_ADVANCE,
    RUN_CLEANUP,
)

STEP_CLAIM = Move(
    "claim",
    (StepStatus.PENDING,),
    (StepStatus.RUNNING,),
    "the engine",
    "it is due and its run's cursor reached it",
)
STEP_FINISH = Move(
    "finish",
    (StepStatus.RUNNING,),
    (StepStatus.DONE, *STEP_TROUBLED),
    "the engine",
    "its action answered (or was refused before its dispatch)",
)
STEP_PARK = Move(
    "park",
    (StepStatus.RUNNING,),
    (PARKED,),
    "the engine",
    "its action asked a person to confirm it",
)
STEP_RELEASE = Move(
    "release",
    (StepStatus.RUNNING,),
    (StepStatus.PENDING,),
    "the engine",
    "it will be tried again after its backoff, its claim lease ran out, or its host stopped",
)
STEP_CANCEL = Move(
    "cancel",
    (StepStatus.PENDING, PARKED),
    (StepStatus.CANCELLED,),
    "the engine, or a person",
    "its run was cancelled or failed",
)
STEP_CONFIRM = Move("confirm", (PARKED,), (StepStatus.DONE,), "a person", "someone confirmed it")
STEP_SKIP = Move(
    "skip",
    (StepStatus.PENDING, PARKED),
    (StepStatus.SKIPPED,),
    "a person",
    "someone skipped it",
)
STEP_RETRY = Move(
    "retry",
    STEP_TROUBLED,
    (StepStatus.PENDING,),
    "a person",
    "someone retried the step a paused run stopped at (its attempts start again at 0)",
)
#: Every move of a step, in the order a step lives them.
STEP_MOVES = (
    STEP_CLAIM,
    STEP_FINISH,
    STEP_PARK,
    STEP_RELEASE,
    STEP_CANCEL,
    STEP_CONFIRM,
    STEP_SKIP,
    STEP_RETRY,
)


def moves_table(moves: tuple[Move, ...]) -> str:
    """The Markdown table of ``moves``, as ``docs/runs.md`` shows it."""
    rows = ["| move | from | to | by | when |", "| --- | --- | --- | --- | --- |"]
    for move in moves:
        froms = ", ".join(f"`{s}`" for s in move.froms)
        to = ", ".join(f"`{s}`" for s in move.to) or "unchanged"
        rows.append(f"| {move.name} | {froms} | {to} | {move.by} | {move.when} |")
    return "\n".join(rows) + "\n"


#: The generated tables of ``docs/runs.md``: the marker that opens each, and its moves.
DOC_TABLES = {"run-moves": RUN_MOVES, "step-moves": STEP_MOVES}


def render_doc(text: str) -> str:
    """``text`` (``docs/runs.md``) with each generated table written again from the moves:
    the lines between ``<!-- NAME: ... -->`` and ``<!-- /NAME -->``."""
    for name, moves in DOC_TABLES.items():
        head = f"<!-- {name}: "
        start = text.index("\n", text.index(head)) + 1
        end = text.index(f"<!-- /{name} -->", start)
        text = text[:start] + moves_table(moves) + text[end:]
    return text


if __name__ == "__main__":  # python -m pageant.states docs/runs.md
    import sys
    from pathlib import Path

    doc = Path(sys.argv[1])
    doc.write_text(render_doc(doc.read_text(encoding="utf-8")), encoding="utf-8")
