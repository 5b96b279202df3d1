"""SQL over ``event_run_log``: one line per state change, written by whoever decided it.

Each kind of line has one writer here (:data:`WRITERS`), handed the run, or the step, gate
or ledger row the line is about: the fields it reads from that (:data:`READS`) and its
keyword arguments are the line's detail, built in that one place, and ``docs/runs.md`` lists
them from the code. :func:`write` is the one insert they share.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import bindparam, func, insert, literal, select
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db.log_kinds import LogKind
from pageant.db.shared import Batch
from pageant.db.tables import TERMINAL_RUN_STATUSES, event_run_log, event_runs
from pageant.support.timefmt import iso

g = event_run_log.c

_WRITE = insert(event_run_log)

_LINES = (
    select(g.id, g.at, g.kind, g.phase, g.step_id, g.detail, g.actor)
    .where(g.run_id == bindparam("run_id"))
    .order_by(g.id)
)
# The newest lines first, for a tail; and how many lines there are (the (run_id, id) index
# answers both without reading the older lines).
_TAIL = (
    select(g.id, g.at, g.kind, g.phase, g.step_id, g.detail, g.actor)
    .where(g.run_id == bindparam("run_id"))
    .order_by(g.id.desc())
    .limit(bindparam("limit"))
)
_COUNT = select(func.count()).select_from(event_run_log).where(g.run_id == bindparam("run_id"))
# The primary key's last entry: one index lookup on both databases, however long the log.
_NEWEST = select(func.max(g.id))

# Only lines of runs that ended before the cutoff; a live run's story is never pruned. The
# lines are found through their own instant (indexed), so a prune reads what it deletes and
# not every run that ever ended. SQLite, without statistics, would rather walk every ended
# run through the status index (17 ms at 100,000 runs against 0.3 ms); comparing an
# expression of the status instead of the column takes that index out of its choice.
_PRUNABLE = (
    select(g.id)
    .select_from(event_run_log.join(event_runs, event_runs.c.id == g.run_id))
    .where(
        g.at < bindparam("cutoff"),
        (event_runs.c.status + literal("")).in_(TERMINAL_RUN_STATUSES),
        event_runs.c.ended_at < bindparam("cutoff"),
    )
    .limit(bindparam("limit"))
)
_DELETE = event_run_log.delete().where(g.id.in_(bindparam("ids", expanding=True)))


def _json_ready(value: Any) -> Any:
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, dict):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    return value


log = logging.getLogger("pageant.runs")


def _announce(
    run_id: int, kind: str, phase: str | None, step_id: int | None, detail: Any, level: int
) -> None:
    if not log.isEnabledFor(level):
        return
    detail = detail or {}
    outcome = detail.get("to") or kind.partition(".")[2] or kind
    fields: dict[str, Any] = {"run_id": run_id, "event": kind, "outcome": outcome}
    if step_id is not None:
        fields["step_id"] = step_id
    if phase is not None:
        fields["phase"] = phase
    for key in ("action", "attempt", "because", "error"):
        if detail.get(key) is not None:
            fields[key] = detail[key]
    subject = f"run {run_id}" if step_id is None else f"run {run_id} step {step_id}"
    why = detail.get("because") or detail.get("error")
    log.log(level, "%s %s: %s%s", subject, kind, outcome, f" ({why})" if why else "", extra=fields)


async def write(
    conn: AsyncConnection,
    run_id: int,
    kind: LogKind,
    *,
    at: datetime,
    phase: str | None = None,
    step_id: int | None = None,
    detail: dict[str, Any] | None = None,
    actor: str | None = None,
    batch: Batch | None = None,
    level: int = logging.INFO,
) -> None:
    """Append one line of ``kind`` to a run's log (instants in ``detail`` become ISO
    strings), and log it for the operator at ``level``. Given ``batch`` (a group commit's, in
    ``conn``), the line is kept and inserted with the others by :func:`flush`."""
    row = {
        "run_id": run_id,
        "step_id": step_id,
        "kind": str(kind),
        "phase": phase,
        "detail": _json_ready(detail) if detail is not None else None,
        "actor": actor,
        "at": at,
    }
    if batch is not None:
        batch.lines.append(row)
    else:
        await conn.execute(_WRITE, row)
    _announce(run_id, str(kind), phase, step_id, detail, level)


# ── the writers: one a kind ──────────────────────────────────────────────────────────────

#: Each kind's writer.
WRITERS: dict[LogKind, Callable[..., Awaitable[None]]] = {}
#: The detail fields each kind's writer reads from the row it is handed (a step, a gate, a
#: ledger row) rather than takes as arguments.
READS: dict[LogKind, tuple[str, ...]] = {}
#: The keyword arguments of a writer that place the line rather than make its detail (its
#: positional ones - the connection, the run, step, gate or row - place it too).
PLACE = ("at", "phase", "step_id", "actor", "batch", "level")

#: A step's row, or its mapping: a step's lines are placed by its ``run_id``, ``phase`` and
#: ``id``, and read what their kind says (``action`` most often) from it.
StepRow = Mapping[Any, Any]
#: A phase gate's row: its lines are placed by its ``run_id`` and ``phase``.
GateRow = Mapping[Any, Any]

_W = TypeVar("_W", bound=Callable[..., Awaitable[None]])


def _writes(kind: LogKind, *, reads: tuple[str, ...] = ()) -> Callable[[_W], _W]:
    def register(writer: _W) -> _W:
        WRITERS[kind] = writer
        READS[kind] = reads
        return writer

    return register


def _given(detail: dict[str, Any], **optional: Any) -> dict[str, Any]:
    """``detail`` and then each optional field that was given (not None), in order."""
    return detail | {key: value for key, value in optional.items() if value is not None}


def detail_fields(writer: Callable[..., Any]) -> list[tuple[str, str, bool]]:
    """The detail a writer takes: ``(key, type, always)`` for each of its arguments that is
    not the line's place (``from_`` is the key ``from``)."""
    return [
        (name.rstrip("_"), str(param.annotation), param.default is inspect.Parameter.empty)
        for name, param in inspect.signature(writer).parameters.items()
        if param.kind is inspect.Parameter.KEYWORD_ONLY and name not in PLACE
    ]


async def _of_step(
    conn: AsyncConnection,
    step: StepRow,
    kind: LogKind,
    at: datetime,
    detail: Any,
    actor: str | None = None,
    batch: Batch | None = None,
) -> None:
    place = {"phase": step["phase"], "step_id": step["id"], "actor": actor}
    await write(conn, step["run_id"], kind, at=at, detail=detail, batch=batch, **place)


async def _of_gate(conn: AsyncConnection, gate: GateRow, kind: LogKind, **line: Any) -> None:
    await write(conn, gate["run_id"], kind, phase=gate["phase"], **line)


#: What every line about a ledger row says of it first (its id, ``kind`` and ``ref``).
ROW_FIELDS = ("resource_id", "kind", "ref")


async def _of_resource(
    conn: AsyncConnection, row: Any, kind: LogKind, at: datetime, **more: Any
) -> None:
    detail = dict(zip(ROW_FIELDS, (row.id, row.kind, row.ref), strict=True)) | more
    await write(conn, row.run_id, kind, at=at, step_id=row.step_id, detail=detail)


@_writes(LogKind.RUN_CREATED)
async def run_created(
    conn: AsyncConnection,
    run_id: int,
    *,
    at: datetime,
    source: str,
    scope: str,
    scheduled_for: datetime,
    version_id: int,
    params: Mapping[str, Any] | None = None,
    dst_adjusted: Mapping[str, Any] | None = None,
    actor: str | None = None,
    batch: Batch | None = None,
) -> None:
    """A run is made; ``params`` when it has any, ``dst_adjusted`` when daylight saving
    moved its instant."""
    detail = {
        "source": source,
        "scope": scope,
        "scheduled_for": scheduled_for,
        "version_id": version_id,
    }
    detail = _given(detail, params=params or None, dst_adjusted=dst_adjusted or None)
    await write(conn, run_id, LogKind.RUN_CREATED, at=at, detail=detail, actor=actor, batch=batch)


@_writes(LogKind.RUN_STATUS)
async def run_status(
    conn: AsyncConnection,
    run_id: int,
    *,
    at: datetime,
    from_: str | None = None,
    to: str,
    reason: str | None = None,
    because: str | None = None,
    slot: str | None = None,
    version_id: int | None = None,
    scheduled_for: datetime | None = None,
    grace_seconds: int | None = None,
    cancelled_steps: int | None = None,
    publish_reason: str | None = None,
    phase: str | None = None,
    actor: str | None = None,
    batch: Batch | None = None,
) -> None:
    """A run changes status; each optional field is written when given, but ``slot``
    (which may be null) goes with ``version_id``: a schedule's reconcile names both
    (``publish_reason``: the reason the publish behind it was given)."""
    detail = _given({}, **{"from": from_}) | {"to": to}
    detail = _given(detail, reason=reason, because=because)
    if version_id is not None:
        detail |= {"slot": slot, "version_id": version_id}
    detail = _given(
        detail,
        scheduled_for=scheduled_for,
        grace_seconds=grace_seconds,
        cancelled_steps=cancelled_steps,
        publish_reason=publish_reason,
    )
    kind = LogKind.RUN_STATUS
    await write(conn, run_id, kind, at=at, phase=phase, detail=detail, actor=actor, batch=batch)


@_writes(LogKind.RUN_HEALTH)
async def run_health(
    conn: AsyncConnection,
    run_id: int,
    *,
    at: datetime,
    to: str,
    because: str,
    waited_seconds: int | None = None,
    gate: Mapping[str, Any] | None = None,
    phase: str | None = None,
) -> None:
    """A run's health changes; a stalled gate adds how long it waited and its summary."""
    detail = _given({"to": to, "because": because}, waited_seconds=waited_seconds, gate=gate)
    await write(conn, run_id, LogKind.RUN_HEALTH, at=at, phase=phase, detail=detail)


@_writes(LogKind.RUN_WAITING)
async def run_waiting(
    conn: AsyncConnection,
    run_id: int,
    *,
    at: datetime,
    waiting: Mapping[str, Any] | None,
    phase: str | None = None,
    actor: str | None = None,
    batch: Batch | None = None,
) -> None:
    """What a run waits on changed: the fields of ``waiting_on`` (``reason``, ``sentence``
    and the reason's own), or ``reason`` null when it no longer waits."""
    detail = dict(waiting) if waiting else {"reason": None, "sentence": "no longer waiting"}
    kind = LogKind.RUN_WAITING
    await write(conn, run_id, kind, at=at, phase=phase, detail=detail, actor=actor, batch=batch)


@_writes(LogKind.RUN_REPINNED)
async def run_repinned(
    conn: AsyncConnection, run_id: int, *, at: datetime, version_id: int, actor: str | None = None
) -> None:
    """A run that had not started is pinned to a new version."""
    detail = {"version_id": version_id}
    await write(conn, run_id, LogKind.RUN_REPINNED, at=at, detail=detail, actor=actor)


@_writes(LogKind.RUN_MOVED)
async def run_moved(
    conn: AsyncConnection,
    run_id: int,
    *,
    at: datetime,
    from_: datetime,
    to: datetime,
    from_slot: str | None,
    slot: str,
    timezone: str,
    version_id: int,
    dst_adjusted: Mapping[str, Any] | None = None,
    publish_reason: str | None = None,
    actor: str | None = None,
) -> None:
    """An occurrence moves to a new instant; ``dst_adjusted`` when daylight saving did,
    ``publish_reason`` when the publish that moved it was given one."""
    detail = {
        "from": from_,
        "to": to,
        "from_slot": from_slot,
        "slot": slot,
        "timezone": timezone,
        "version_id": version_id,
    }
    detail = _given(detail, dst_adjusted=dst_adjusted or None, publish_reason=publish_reason)
    await write(conn, run_id, LogKind.RUN_MOVED, at=at, detail=detail, actor=actor)


@_writes(LogKind.RUN_OVERLAP)
async def run_overlap(
    conn: AsyncConnection,
    run_id: int,
    *,
    at: datetime,
    overlap: str,
    key: str,
    newcomer: bool,
    other_run_id: int,
    other_scheduled_for: datetime,
    actor: str | None = None,
) -> None:
    """Two runs of one concurrency key met: written on both, ``newcomer`` true on the run
    that became due while ``other_run_id`` held ``key``, and ``overlap`` the newcomer's
    event's policy (what was done about it)."""
    detail = {
        "overlap": overlap,
        "key": key,
        "newcomer": newcomer,
        "other_run_id": other_run_id,
        "other_scheduled_for": other_scheduled_for,
    }
    await write(conn, run_id, LogKind.RUN_OVERLAP, at=at, detail=detail, actor=actor)


@_writes(LogKind.STEP_STATUS, reads=("action",))
async def step_status(
    conn: AsyncConnection,
    step: StepRow,
    *,
    at: datetime,
    to: str,
    because: str | None = None,
    attempt: int,
    of: int | None = None,
    claimed_by: str | None = None,
    on_failure: str | None = None,
    error: str | None = None,
    hold_seconds: float | None = None,
    hold_until: datetime | None = None,
    resources: Sequence[Mapping[str, Any]] | None = None,
    more: Mapping[str, Any] | None = None,
    batch: Batch | None = None,
) -> None:
    """A step changes status; ``action`` is the step's. A failure says ``on_failure`` and
    its ``error``, then ``more`` (the exception and the plugin, when one raised); a step taken
    back says ``because`` and ``claimed_by``; a ``done`` one its hold and ``resources``."""
    detail = _given({"to": to}, because=because) | {"action": step["action"], "attempt": attempt}
    detail = _given(
        detail,
        of=of,
        claimed_by=claimed_by,
        on_failure=on_failure,
        error=error,
        hold_seconds=hold_seconds,
        hold_until=hold_until,
        resources=resources,
    )
    line = {**detail, **(more or {})}
    await _of_step(conn, step, LogKind.STEP_STATUS, at, line, batch=batch)


@_writes(LogKind.STEP_RETRY, reads=("action",))
async def step_retry(
    conn: AsyncConnection,
    step: StepRow,
    *,
    at: datetime,
    attempt: int,
    of: int,
    error: str,
    next_at: datetime,
    more: Mapping[str, Any] | None = None,
) -> None:
    """A failed step will be tried again at ``next_at``; ``more`` as for ``step.status``."""
    detail = {"action": step["action"], "attempt": attempt, "of": of, "error": error}
    await _of_step(
        conn, step, LogKind.STEP_RETRY, at, {**detail, "next_at": next_at, **(more or {})}
    )


@_writes(LogKind.STEP_REFUSED, reads=("action", "on_failure"))
async def step_refused(
    conn: AsyncConnection,
    step: StepRow,
    *,
    at: datetime,
    attempt: int,
    error: str,
    more: Mapping[str, Any],
) -> None:
    """A step is refused before its dispatch: ``to`` is ``refused``, with the step's
    ``action`` and ``on_failure``, then ``more``: the refusal's ``code`` and its own detail."""
    detail = {"to": "refused", "action": step["action"], "attempt": attempt}
    detail |= {"on_failure": step["on_failure"], "error": error}
    await _of_step(conn, step, LogKind.STEP_REFUSED, at, {**detail, **more})


@_writes(LogKind.STEP_PARKED, reads=("action",))
async def step_parked(conn: AsyncConnection, step: StepRow, *, at: datetime, attempt: int) -> None:
    """A step waits for a person to confirm it (with the step's ``action``)."""
    await _of_step(
        conn, step, LogKind.STEP_PARKED, at, {"action": step["action"], "attempt": attempt}
    )


@_writes(LogKind.STEP_STALE, reads=("action",))
async def step_stale(
    conn: AsyncConnection,
    step: StepRow,
    *,
    at: datetime,
    attempt: int,
    claimed_by: str,
    outcome: str,
    error: str | None,
) -> None:
    """An answer came back under a claim already taken back (with the step's ``action``)."""
    detail = {"action": step["action"], "attempt": attempt, "claimed_by": claimed_by}
    await _of_step(
        conn, step, LogKind.STEP_STALE, at, detail | {"outcome": outcome, "error": error}
    )


@_writes(LogKind.STEP_VERSION_DRIFT, reads=("action", "stored_version"))
async def step_version_drift(
    conn: AsyncConnection, step: StepRow, *, at: datetime, declared_version: int
) -> None:
    """A step written against an older declaration is dispatched: its ``action`` and
    ``stored_version``, and the action's ``declared_version``."""
    detail = {"action": step["action"], "stored_version": step["action_version"]}
    detail["declared_version"] = declared_version
    await _of_step(conn, step, LogKind.STEP_VERSION_DRIFT, at, detail)


@_writes(LogKind.STEP_HELD, reads=("action",))
async def step_held(
    conn: AsyncConnection,
    step: StepRow,
    *,
    at: datetime,
    held_seconds: float,
    hold_seconds: int,
    outcome: str,
) -> None:
    """A ``notify`` step held while its plugin was down is claimed: its ``action``, how long
    it was held (``held_seconds``) of its ``hold_seconds``, and ``outcome``: ``dispatched``
    (its plugin came back) or ``refused`` (the hold ran out first)."""
    detail = {"action": step["action"], "held_seconds": held_seconds}
    detail |= {"hold_seconds": hold_seconds, "outcome": outcome}
    await _of_step(conn, step, LogKind.STEP_HELD, at, detail)


@_writes(LogKind.PHASE_ENTERED)
async def phase_entered(
    conn: AsyncConnection,
    run_id: int,
    *,
    at: datetime,
    phase: str,
    index: int,
    steps: int,
    gate: Mapping[str, Any] | None = None,
    batch: Batch | None = None,
) -> None:
    """A run enters a phase; ``gate`` is the summary of its gate, when it has one."""
    detail = _given({"index": index, "steps": steps}, gate=gate)
    await write(conn, run_id, LogKind.PHASE_ENTERED, at=at, phase=phase, detail=detail, batch=batch)


@_writes(LogKind.PHASE_COMPLETED)
async def phase_completed(
    conn: AsyncConnection,
    run_id: int,
    *,
    at: datetime,
    phase: str,
    index: int | None,
    batch: Batch | None = None,
) -> None:
    """Every step of a phase is finished and its gate, if any, is open."""
    detail = {"index": index}
    await write(
        conn, run_id, LogKind.PHASE_COMPLETED, at=at, phase=phase, detail=detail, batch=batch
    )


@_writes(LogKind.PHASE_GATE, reads=("satisfied_by", "satisfied_at"))
async def phase_gate(
    conn: AsyncConnection,
    gate: GateRow,
    *,
    at: datetime,
    summary: Mapping[str, Any],
    actor: str | None = None,
    batch: Batch | None = None,
) -> None:
    """A phase's gate is satisfied: how and when, then the fields of its ``summary``."""
    detail = {"satisfied_by": gate["satisfied_by"], "satisfied_at": gate["satisfied_at"]}
    line = detail | dict(summary)
    await _of_gate(conn, gate, LogKind.PHASE_GATE, at=at, detail=line, actor=actor, batch=batch)


@_writes(LogKind.PHASE_ADVANCED)
async def phase_advanced(
    conn: AsyncConnection,
    gate: GateRow,
    *,
    at: datetime,
    because: str | None,
    summary: Mapping[str, Any],
    waited_seconds: int,
    reason: str | None = None,
    actor: str | None = None,
) -> None:
    """A phase goes past its gate: ``because`` how it was satisfied, the fields of the gate's
    ``summary``, how long it waited; a person's forced advance (an ``actor``) adds
    ``reason``."""
    detail = {"because": because, **summary, "waited_seconds": waited_seconds}
    if actor is not None:
        detail["reason"] = reason
    await _of_gate(conn, gate, LogKind.PHASE_ADVANCED, at=at, detail=detail, actor=actor)


@_writes(LogKind.CONDITION_EVALUATED, reads=("trigger_id", "tally", "needed"))
async def condition_evaluated(
    conn: AsyncConnection,
    gate: GateRow,
    *,
    at: datetime,
    condition: str | None,
    values: Mapping[str, Any],
    fired_at: datetime | None = None,
    key: str | None = None,
    sentence: str | None = None,
    payload: Mapping[str, Any] | None = None,
    actor: str | None = None,
    batch: Batch | None = None,
    level: int = logging.INFO,
) -> None:
    """A firing matched a gate's condition: the gate's ``trigger_id``, ``matched`` (true),
    the condition and the ``values`` it named, the gate's ``tally`` and ``needed``, then the
    firing's own instant, ``key`` and ``sentence`` (its trigger's words for it) when it had
    them, and its ``payload`` (the trigger's declared variables it carried) when it had any."""
    detail = {"trigger_id": gate["trigger_id"], "matched": True, "condition": condition}
    detail |= {"values": values, "tally": gate["tally"], "needed": gate["needed"]}
    detail = _given(detail, fired_at=fired_at, key=key, sentence=sentence, payload=payload or None)
    await _of_gate(
        conn,
        gate,
        LogKind.CONDITION_EVALUATED,
        at=at,
        detail=detail,
        actor=actor,
        batch=batch,
        level=level,
    )


async def _control(
    conn: AsyncConnection,
    run_id: int,
    kind: LogKind,
    at: datetime,
    actor: str,
    detail: dict[str, Any],
    **place: Any,
) -> None:
    await write(conn, run_id, kind, at=at, detail=detail, actor=actor, **place)


@_writes(LogKind.CONTROL_PAUSE)
async def control_pause(
    conn: AsyncConnection, run_id: int, *, at: datetime, reason: str | None, actor: str
) -> None:
    """A person paused the run."""
    await _control(conn, run_id, LogKind.CONTROL_PAUSE, at, actor, {"reason": reason})


@_writes(LogKind.CONTROL_RESUME)
async def control_resume(
    conn: AsyncConnection, run_id: int, *, at: datetime, reason: str | None, actor: str
) -> None:
    """A person resumed the run."""
    await _control(conn, run_id, LogKind.CONTROL_RESUME, at, actor, {"reason": reason})


@_writes(LogKind.CONTROL_CANCEL)
async def control_cancel(
    conn: AsyncConnection,
    run_id: int,
    *,
    at: datetime,
    from_: str,
    reason: str,
    cancelled_steps: int,
    cleanup: bool = True,
    actor: str,
) -> None:
    """A person cancelled the run (``to`` is ``cancelled``); ``cleanup`` false is written
    only when they left what it holds in the world."""
    detail = {
        "from": from_,
        "to": "cancelled",
        "reason": reason,
        "cancelled_steps": cancelled_steps,
    }
    if not cleanup:
        detail["cleanup"] = False
    await _control(conn, run_id, LogKind.CONTROL_CANCEL, at, actor, detail)


@_writes(LogKind.CONTROL_CONFIRM)
async def control_confirm(
    conn: AsyncConnection, step: StepRow, *, at: datetime, note: str | None, actor: str
) -> None:
    """A person confirmed a parked step (``to`` is ``done``)."""
    await _of_step(conn, step, LogKind.CONTROL_CONFIRM, at, {"to": "done", "note": note}, actor)


@_writes(LogKind.CONTROL_SKIP)
async def control_skip(
    conn: AsyncConnection,
    step: StepRow,
    *,
    at: datetime,
    from_: str,
    reason: str | None,
    actor: str,
) -> None:
    """A person skipped a step (``to`` is ``skipped``)."""
    detail = {"from": from_, "to": "skipped", "reason": reason}
    await _of_step(conn, step, LogKind.CONTROL_SKIP, at, detail, actor)


@_writes(LogKind.CONTROL_RETRY)
async def control_retry(
    conn: AsyncConnection,
    step: StepRow,
    *,
    at: datetime,
    from_: str,
    reason: str | None,
    actor: str,
) -> None:
    """A person retried the step the run stopped at (``to`` is ``pending``)."""
    detail = {"from": from_, "to": "pending", "reason": reason}
    await _of_step(conn, step, LogKind.CONTROL_RETRY, at, detail, actor)


@_writes(LogKind.CONTROL_CLEANUP)
async def control_cleanup(
    conn: AsyncConnection, run_id: int, *, at: datetime, result: str, actor: str
) -> None:
    """An admin asked for an ended run's cleanup again: its cleanup status after."""
    await _control(conn, run_id, LogKind.CONTROL_CLEANUP, at, actor, {"result": result})


@_writes(LogKind.CONTROL_RESCHEDULE)
async def control_reschedule(
    conn: AsyncConnection,
    run_id: int,
    *,
    at: datetime,
    from_: datetime,
    to: datetime,
    reason: str | None,
    actor: str,
) -> None:
    """A person moved a scheduled run to another instant."""
    detail = {"from": from_, "to": to, "reason": reason}
    await _control(conn, run_id, LogKind.CONTROL_RESCHEDULE, at, actor, detail)


@_writes(LogKind.ANNOUNCE)
async def plugin_line(
    conn: AsyncConnection,
    step: StepRow,
    kind: LogKind,
    *,
    at: datetime,
    detail: Mapping[str, Any],
    batch: Batch | None = None,
) -> None:
    """A line a step's action wrote through its services (``write_log``), ``announce`` or
    another kind it names: the detail is the action's own (``core.log``: ``leg``, ``message``)."""
    await _of_step(conn, step, kind, at, dict(detail), batch=batch)


@_writes(LogKind.RESOURCE_PLACEHOLDER, reads=("ref",))
async def resource_placeholder(
    conn: AsyncConnection, step: StepRow, *, at: datetime, action: str
) -> None:
    """A world-changing step is recorded before its dispatch, ``ref`` its idempotency key."""
    detail = {"action": action, "ref": step["idempotency_key"]}
    await _of_step(conn, step, LogKind.RESOURCE_PLACEHOLDER, at, detail)


@_writes(LogKind.RESOURCE_RESERVED)
async def resource_reserved(
    conn: AsyncConnection, step: StepRow, *, at: datetime, lease: str, target: str, until: Any
) -> None:
    """``core.lease`` reserved its target, before applying anything."""
    detail = {"lease": lease, "target": target, "until": until}
    await _of_step(conn, step, LogKind.RESOURCE_RESERVED, at, detail)


@_writes(LogKind.RESOURCE_CONFIRMED)
async def resource_confirmed(
    conn: AsyncConnection,
    step: StepRow,
    *,
    at: datetime,
    action: str | None = None,
    resources: Sequence[Mapping[str, Any]] | None = None,
    lease: Mapping[str, Any] | None = None,
) -> None:
    """What a step reported making (its ``action`` and ``resources``), or a lease's payload
    (``lease``, ``target``, ``baseline``, ``applied``), is recorded."""
    detail = dict(lease) if lease is not None else {"action": action, "resources": resources}
    await _of_step(conn, step, LogKind.RESOURCE_CONFIRMED, at, detail)


@_writes(LogKind.RESOURCE_REVERTED, reads=ROW_FIELDS)
async def resource_reverted(
    conn: AsyncConnection, row: Any, *, at: datetime, by: str | None = None
) -> None:
    """A ledger row was given back; ``by`` is ``game`` for a lease the game had already
    put back at its baseline (it honoured ``until``, or restarted)."""
    await _of_resource(conn, row, LogKind.RESOURCE_REVERTED, at, **_given({}, by=by))


@_writes(LogKind.RESOURCE_REVERT_FAILED, reads=ROW_FIELDS)
async def resource_revert_failed(
    conn: AsyncConnection, row: Any, *, at: datetime, attempt: int, of: int, error: str
) -> None:
    """An attempt to give a ledger row back failed."""
    await _of_resource(
        conn, row, LogKind.RESOURCE_REVERT_FAILED, at, attempt=attempt, of=of, error=error
    )


@_writes(LogKind.RESOURCE_DRIFTED, reads=ROW_FIELDS)
async def resource_drifted(
    conn: AsyncConnection, row: Any, *, at: datetime, found: Any, applied: Any
) -> None:
    """A lease's value was changed by someone else: what was found, what it had applied."""
    await _of_resource(conn, row, LogKind.RESOURCE_DRIFTED, at, found=found, applied=applied)


@_writes(LogKind.RESOURCE_ORPHANED, reads=ROW_FIELDS)
async def resource_orphaned(conn: AsyncConnection, row: Any, *, at: datetime, by: str) -> None:
    """A plugin's reconcile no longer reports a ledger row."""
    await _of_resource(conn, row, LogKind.RESOURCE_ORPHANED, at, by=by)


@_writes(LogKind.RESOURCE_RECONCILE_FAILED)
async def resource_reconcile_failed(
    conn: AsyncConnection, run_id: int, *, at: datetime, owner: str, error: str
) -> None:
    """A plugin's reconcile raised; nothing changed."""
    detail = {"owner": owner, "error": error}
    await write(conn, run_id, LogKind.RESOURCE_RECONCILE_FAILED, at=at, detail=detail)


@_writes(LogKind.RESOURCE_CLEANUP)
async def resource_cleanup(
    conn: AsyncConnection, run_id: int, *, at: datetime, to: str, because: str | None = None
) -> None:
    """The run's ``cleanup_status`` changed; ``because`` says why it is ``incomplete``
    when a sentence can: a person's cancel left what it holds in the world, or its plugin
    cannot promise that a late change is refused."""
    detail = _given({"to": to}, because=because)
    await write(conn, run_id, LogKind.RESOURCE_CLEANUP, at=at, detail=detail)


async def flush(batch: Batch) -> int:
    """Insert the lines ``batch`` kept back, in the order they were written, in one
    statement; answers how many."""
    if not batch.lines:
        return 0
    lines, batch.lines = batch.lines, []
    await batch.conn.execute(_WRITE, lines)
    return len(lines)


_PHASE_MARKS = (
    select(g.run_id, g.kind, g.phase, g.at)
    .where(
        g.run_id.in_(bindparam("run_ids", expanding=True)),
        g.kind.in_([LogKind.PHASE_ENTERED.value, LogKind.PHASE_COMPLETED.value]),
    )
    .order_by(g.run_id, g.id)
)


async def phase_marks(conn: AsyncConnection, run_ids: list[int]) -> list[Row]:
    """When each of these runs entered and completed each phase (``phase.entered`` and
    ``phase.completed`` lines), by run and in order."""
    if not run_ids:
        return []
    return list((await conn.execute(_PHASE_MARKS, {"run_ids": run_ids})).all())


async def newest_id(conn: AsyncConnection) -> int | None:
    """The id of the newest line of any run's log (None when there is none)."""
    found = (await conn.execute(_NEWEST)).scalar_one_or_none()
    return None if found is None else int(found)


async def lines_of(conn: AsyncConnection, run_id: int) -> list[Row]:
    """A run's log, oldest first."""
    return list((await conn.execute(_LINES, {"run_id": run_id})).all())


async def tail_of(conn: AsyncConnection, run_id: int, limit: int) -> tuple[list[Row], int]:
    """The newest ``limit`` lines of a run's log, oldest first, and how many it has in all."""
    newest = list((await conn.execute(_TAIL, {"run_id": run_id, "limit": limit})).all())
    total = len(newest)
    if total == limit:
        total = int((await conn.execute(_COUNT, {"run_id": run_id})).scalar_one())
    newest.reverse()
    return newest, total


async def prune(conn: AsyncConnection, cutoff: datetime, *, limit: int) -> int:
    """Delete up to ``limit`` log lines of runs that ended before ``cutoff``."""
    ids = list((await conn.execute(_PRUNABLE, {"cutoff": cutoff, "limit": limit})).scalars())
    if not ids:
        return 0
    await conn.execute(_DELETE, {"ids": ids})
    return len(ids)


async def creators(conn: AsyncConnection, run_ids: list[int]) -> dict[int, str | None]:
    """Who made each of these runs: the actor of its ``run.created`` line (None for a run
    the scheduler made, or one whose first line was pruned)."""
    if not run_ids:
        return {}
    log = event_run_log.c
    rows = await conn.execute(
        select(log.run_id, log.actor).where(
            log.run_id.in_(run_ids), log.kind == LogKind.RUN_CREATED.value
        )
    )
    return {row.run_id: row.actor for row in rows}


# Which of some runs have lines of some kinds (the (run_id, id) index finds each run's).
_KINDS_OF = (
    select(g.run_id, g.kind)
    .where(
        g.run_id.in_(bindparam("run_ids", expanding=True)),
        g.kind.in_(bindparam("kinds", expanding=True)),
    )
    .distinct()
)


async def kinds_written(
    conn: AsyncConnection, run_ids: Sequence[int], kinds: Sequence[LogKind]
) -> dict[int, set[LogKind]]:
    """For each of ``run_ids`` whose log has a line of one of ``kinds``, those kinds."""
    found: dict[int, set[LogKind]] = {}
    if not run_ids or not kinds:
        return found
    params = {"run_ids": list(run_ids), "kinds": [str(kind) for kind in kinds]}
    for row in await conn.execute(_KINDS_OF, params):
        found.setdefault(row.run_id, set()).add(LogKind(row.kind))
    return found
