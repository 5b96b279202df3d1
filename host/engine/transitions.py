"""A run's moves, each written once, in the caller's transaction: its start and its entry
into a phase (a run's own task's, or the advance stage's set-wise claim,
:mod:`pageant.engine.claiming`), and its endings — missed, refused, failed, aborted,
completed — each the compare-and-set of a move of the table (:mod:`pageant.states`), the
run's open steps cancelled and its ``run.status`` line, or nothing at all."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pageant.db import runlog, runs, steps
from pageant.db.shared import Batch
from pageant.gates import phase as gates
from pageant.runs import params as run_params
from pageant.runs import waiting
from pageant.runs.create import materialise_phase
from pageant.runs.milestones import materialise_milestones
from pageant.states import (
    RUN_ABORT,
    RUN_COMPLETE,
    RUN_FAIL,
    RUN_MISS,
    RUN_REFUSE,
    RUN_SKIP,
    Move,
    RunStatus,
    WaitingReason,
)

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

    from pageant.hosting import Host


#: A missed run's ``error``: its log line says the same with the instant and the window.
MISSED_BECAUSE = "the grace window passed before it could start"


class Lost(Exception):
    """The run changed underneath a transition (a control won): roll the transaction back."""


def is_late(run: Mapping[Any, Any], now: datetime) -> bool:
    """Whether a scheduled run's grace window has passed: the missed sweep's, not a start's.
    A run its event's catch-up policy let in (``catch_up`` set) is never late: it starts
    when its turn comes (:mod:`pageant.engine.catchup`); nor is one waiting on its quorum."""
    if run.get("catch_up"):
        return False
    if run.get("waiting_reason") == WaitingReason.QUORUM:
        return False  # its start_when's wait decides (pageant.engine.start_when)
    return bool(now > run["scheduled_for"] + timedelta(seconds=run["grace_seconds"]))


async def start_in(
    conn: AsyncConnection,
    run: Mapping[str, Any],
    *,
    owner: str,
    lease: datetime,
    now: datetime,
    batch: Batch | None = None,
    because: str | None = None,
) -> bool:
    """``scheduled -> starting`` under ``owner``'s claim lease, in ``conn``; False when another
    claimer got there first. Raises IntegrityError when the run's concurrency key is held
    by another live run. Its log lines are kept for ``batch``'s one insert when given;
    ``because`` is what its ``run.status`` line says of why it starts (a catch-up's)."""
    if not await runs.claim_start(conn, run["id"], owner=owner, lease=lease, now=now):
        return False
    await runlog.run_status(
        conn,
        run["id"],
        at=now,
        from_=RunStatus.SCHEDULED,
        to=RunStatus.STARTING,
        because=because,
        batch=batch,
    )
    if run["waiting_reason"] is not None:
        await waiting.note(conn, run["id"], None, now=now, batch=batch)
    return True


async def start_all_in(
    conn: AsyncConnection,
    host: Host,
    starts: Sequence[tuple[Mapping[str, Any], list[dict[str, Any]]]],
    *,
    owner: str,
    lease: datetime,
    now: datetime,
    batch: Batch | None = None,
) -> list[int]:
    """Start each run of ``starts`` (a scheduled run's row, and its pinned version's phases)
    into its first phase, in ``conn``: what :func:`start_in` and :func:`enter_phase_in` make
    for one run, made for the set with one statement each — the compare-and-set of the
    starts, one read of the runs' params, the notes of what they waited on cleared, the
    entries into each first phase — and each run's steps, gate and lines as its own start
    makes them (the lines and steps kept for ``batch`` when given). None may carry a
    concurrency key. Answers the ids started, in the order given: a run another claimer
    (or a control) moved first is left out. Raises :class:`Lost` when a run started here
    was not as its claim left it at its phase's entry; the caller rolls back."""
    started = await runs.claim_starts(
        conn, [run["id"] for run, _ in starts], owner=owner, lease=lease, now=now
    )
    ours = [(run, phases) for run, phases in starts if run["id"] in started]
    ids = [run["id"] for run, _ in ours]
    facts = await runs.start_values(conn, ids)
    waited = [run_id for run_id in ids if facts[run_id].waiting_reason is not None]
    if await runs.clear_waiting(conn, waited) != len(waited):
        raise Lost
    entering: dict[str, list[int]] = {}
    entries = []
    for run, phases in ours:
        run_id, phase = run["id"], phases[0]
        await runlog.run_status(
            conn, run_id, at=now, from_=RunStatus.SCHEDULED, to=RunStatus.STARTING, batch=batch
        )
        if facts[run_id].waiting_reason is not None:
            await runlog.run_waiting(conn, run_id, at=now, waiting=None, batch=batch)
        values = run_params.with_scope(dict(facts[run_id].params or {}), facts[run_id].scope)
        count = await materialise_phase(
            conn, run_id=run_id, phase=phase, registry=host.registry, values=values, batch=batch
        )
        gate = await gates.enter_phase(
            conn, run_id=run_id, phase=run_params.resolve(phase, values), now=now
        )
        entering.setdefault(phase["key"], []).append(run_id)
        entries.append((run_id, phase["key"], count, gate))
    for key, run_ids in entering.items():
        if await runs.enter_first_phases(conn, run_ids, phase=key) != len(run_ids):
            raise Lost
    for run_id, key, count, gate in entries:
        await runlog.run_status(
            conn, run_id, at=now, from_=RunStatus.STARTING, to=RunStatus.RUNNING, batch=batch
        )
        await runlog.phase_entered(
            conn, run_id, at=now, phase=key, index=0, steps=count, gate=gate, batch=batch
        )
    return ids


async def enter_phase_in(
    conn: AsyncConnection,
    host: Host,
    run_id: int,
    phases: list[dict[str, Any]],
    index: int,
    *,
    from_status: str,
    old_phase: str | None,
    now: datetime,
    batch: Batch | None = None,
) -> None:
    """Make ``phases[index]`` current in ``conn``: its steps and gate are made before the
    transition (so the gate's clock and tally start with the phase), and the phase left
    behind records going past its gate. Raises :class:`Lost` when the run changed
    underneath; the caller rolls back, so nothing is written then. Given ``batch``, the
    new steps and the entry's lines are kept for its set-wise inserts (the caller flushes
    them before anything reads the run's steps)."""
    phase = phases[index]
    scope, params = await runs.param_values(conn, run_id)
    values = run_params.with_scope(params, scope)
    count = await materialise_phase(
        conn, run_id=run_id, phase=phase, registry=host.registry, values=values, batch=batch
    )
    # The gate opens with its condition's {"param": ...} values written out, so the emit
    # path compares plain values and finds the gate by them (pageant.gates.matching).
    gate = await gates.enter_phase(
        conn, run_id=run_id, phase=run_params.resolve(phase, values), now=now
    )
    # A public count gate's milestones, each waiting for its count (pageant.runs.milestones).
    await materialise_milestones(
        conn, run_id=run_id, phase=phase, index=index, registry=host.registry
    )
    if not await runs.enter_phase(
        conn, run_id, from_status=from_status, old_phase=old_phase, phase=phase["key"]
    ):
        raise Lost
    if old_phase is None:
        await runlog.run_status(
            conn, run_id, at=now, from_=RunStatus.STARTING, to=RunStatus.RUNNING, batch=batch
        )
    else:
        await gates.leave_phase(conn, run_id=run_id, phase=phases[index - 1], now=now)
        await runlog.phase_completed(conn, run_id, at=now, phase=old_phase, index=index - 1)
    await runlog.phase_entered(
        conn, run_id, at=now, phase=phase["key"], index=index, steps=count, gate=gate, batch=batch
    )


async def end_in(
    conn: AsyncConnection,
    run_id: int,
    move: Move,
    *,
    now: datetime,
    because: str | None = None,
    error: str | None = None,
    cancel_steps: bool = True,
    batch: Batch | None = None,
    **detail: Any,
) -> bool:
    """Make ``move``, an ending of the table, in ``conn``: the compare-and-set, the run's open
    steps cancelled (unless ``cancel_steps`` is False: a run that completes has none) and
    its ``run.status`` line with ``detail`` (kept for ``batch``'s one insert when given).
    The run's ``error`` is ``error``, else ``because``. False, having written nothing, when
    the run was
    in none of the move's statuses: another writer (a control, another host) ended it
    first, and its own line says so."""
    if not await runs.end_run(conn, run_id, move, now=now, error=error or because):
        return False
    cancelled = await steps.cancel_open_steps(conn, run_id, now=now) if cancel_steps else None
    await runlog.run_status(
        conn,
        run_id,
        at=now,
        to=move.to[0],
        because=because,
        cancelled_steps=cancelled,
        batch=batch,
        **detail,
    )
    return True


async def miss_in(
    conn: AsyncConnection, run: Mapping[Any, Any], *, now: datetime, because: str | None = None
) -> bool:
    """``scheduled -> missed``: its grace window passed before it could start (``because``:
    what else a catch-up policy says of it)."""
    return await end_in(
        conn,
        run["id"],
        RUN_MISS,
        now=now,
        because=because,
        error=because or MISSED_BECAUSE,
        from_=RunStatus.SCHEDULED,
        scheduled_for=run["scheduled_for"],
        grace_seconds=run["grace_seconds"],
    )


async def refuse_in(conn: AsyncConnection, run_id: int, because: str, *, now: datetime) -> bool:
    """``scheduled -> failed`` at its instant: a param it was made with no longer fits."""
    return await end_in(
        conn, run_id, RUN_REFUSE, now=now, because=because, from_=RunStatus.SCHEDULED
    )


async def fail_in(conn: AsyncConnection, run_id: int, because: str, *, now: datetime) -> bool:
    """An active run ``-> failed``: its pinned version or phase cannot be read, or its
    phase's reading gate waited out its wait short (``else: fail``)."""
    return await end_in(conn, run_id, RUN_FAIL, now=now, because=because)


async def abort_in(
    conn: AsyncConnection, run_id: int, because: str, *, phase: str, now: datetime
) -> bool:
    """A live run ``-> failed``: a step of ``phase`` failed with ``on_failure: abort_run``."""
    return await end_in(conn, run_id, RUN_ABORT, now=now, because=because, phase=phase)


async def complete_in(
    conn: AsyncConnection, run_id: int, *, now: datetime, batch: Batch | None = None
) -> bool:
    """``ending -> completed``: every phase is done (or a run found ending after a crash);
    its line kept for ``batch``'s one insert when given."""
    return await end_in(
        conn,
        run_id,
        RUN_COMPLETE,
        now=now,
        cancel_steps=False,
        batch=batch,
        from_=RunStatus.ENDING,
    )


async def end_and_complete_in(
    conn: AsyncConnection,
    run_id: int,
    *,
    phase: Mapping[str, Any],
    index: int,
    now: datetime,
    batch: Batch | None = None,
) -> bool:
    """``running -> ending -> completed``, the run's last phase (``phase``, at ``index``)
    done: the moves ``end`` and ``complete`` in one compare-and-set (both were always made
    in this one transaction, so ``ending`` was never committed alone), the phase left, and
    the lines of each (kept for ``batch``'s one insert when given): ``phase.completed``,
    ``run.status`` to ``ending``, ``run.status`` to ``completed``. False, having written
    nothing, when the run was no longer running (a control won)."""
    if not await runs.end_and_complete(conn, run_id, now=now):
        return False
    await gates.leave_phase(conn, run_id=run_id, phase=phase, now=now)
    await runlog.phase_completed(conn, run_id, at=now, phase=phase["key"], index=index, batch=batch)
    await runlog.run_status(
        conn, run_id, at=now, from_=RunStatus.RUNNING, to=RunStatus.ENDING, batch=batch
    )
    await runlog.run_status(
        conn, run_id, at=now, from_=RunStatus.ENDING, to=RUN_COMPLETE.to[0], batch=batch
    )
    return True


async def skip_in(conn: AsyncConnection, run_id: int, because: str, *, now: datetime) -> bool:
    """``scheduled -> skipped``: another run holds its concurrency key and its event's
    overlap is ``skip``. The reason is the run's ``cancel_reason`` (it never started, like a
    cancelled one), so this ending makes its own compare-and-set; the rest is
    :func:`end_in`'s."""
    if not await runs.skip_run(conn, run_id, reason=because, now=now):
        return False
    cancelled = await steps.cancel_open_steps(conn, run_id, now=now)
    await runlog.run_status(
        conn,
        run_id,
        at=now,
        from_=RunStatus.SCHEDULED,
        to=RUN_SKIP.to[0],
        because=because,
        cancelled_steps=cancelled,
    )
    return True
