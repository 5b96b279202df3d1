"""The advance stage: claim each due run and move it as far as it will go (:func:`move_run`).

A run's loop is bounded by ``steps_per_run_per_tick`` while other runs wait for a dispatch
slot (:func:`goes_on`), and stops at the first thing it cannot
get past — a parked step, a step not yet due, a step another tick holds, a phase whose gate
is shut — recording *why* (``waiting_on``) once per change. The run's status is re-read
before every step, so a pause pressed mid-tick lands between two steps.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from pageant.db import due, runs
from pageant.db.engine_rows import RunRow, RunState, run_row
from pageant.db.errors import IntegrityError
from pageant.db.rows import Record
from pageant.db.runs import read_cursor
from pageant.db.shared import Batch
from pageant.engine import catchup, overlap, requires, start_when, transitions
from pageant.engine.claiming import SetClaim, claim_due, free_slots
from pageant.engine.dispatch import Ahead, dispatch_step
from pageant.engine.readiness import attached, readiness, stopping
from pageant.engine.transitions import Lost, enter_phase_in, is_late, start_in
from pageant.gates import phase as gates
from pageant.runs import lifecycle, waiting
from pageant.runs import params as run_params
from pageant.runs.holding import NotifyHold, notify_hold
from pageant.runs.options import check_run_values
from pageant.runs.versions import phases_of
from pageant.states import (
    OUTCOME_FINISHED,
    Dispatched,
    Health,
    Outcome,
    Overlap,
    Readiness,
    RunStatus,
    WaitingReason,
)

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

    from pageant.hosting import Host

log = logging.getLogger("pageant.engine")

#: The most scheduled runs one scan finds (``runs_per_tick`` when that is more): a set of
#: due runs is started with one statement each for its claims and its entries
#: (:mod:`.claiming`), so an occurrence fanned out to a thousand servers starts in one scan,
#: and each run's first step queues for a dispatch slot from that scan on.
STARTS_PER_SCAN = 1000


async def advance(host: Host, now: datetime) -> None:
    """Find the runs with something to do and hand each to a task of the engine."""
    engine = attached(host, "advance")
    limit = host.settings.runs_per_tick
    async with host.db.connect() as conn:
        found = await due.find_due(
            conn,
            now,
            limit=limit,
            busy=list(engine.inflight),
            stall_seconds=host.settings.stall_seconds,
            starts=STARTS_PER_SCAN,
        )
    rows = [run_row(row) for row in found]
    # Several runs due at once are started and claimed together, ready steps and all.
    claimed, tried = await claim_due(host, rows) if rows else ({}, set())
    # The set's starts committed: their triggers fire together, in a task of their own
    # which each of those runs waits for before it moves on (and fires its next).
    firings = [
        firing
        for run_id, got in claimed.items()
        if got.started_into is not None
        for firing in lifecycle.started(run_id, got.started_into)
    ]
    if firings:
        announced = asyncio.ensure_future(lifecycle.announce_all(host, firings))
        for got in claimed.values():
            got.announced = announced
    # The runs with a step claimed first: their steps' claim leases run, so they take the
    # free dispatch slots; then the others the set started or claimed.
    ordered = sorted(claimed, key=lambda run_id: claimed[run_id].ahead.claimed is None)
    by_id = {run["id"]: run for run in rows}
    for run_id in ordered:
        engine.spawn(run_id, process_run(host, by_id[run_id], claimed=claimed[run_id]))
    for run in rows:
        if run["id"] not in tried:
            engine.spawn(run["id"], process_run(host, run))


async def process_run(
    host: Host, run: RunRow, *, claimed: SetClaim | None = None
) -> tuple[Outcome, bool]:
    """Claim one run, move it, and hand the claim back if it is still in flight.

    ``claimed``: the run was claimed set-wise by the advance stage (:mod:`.claiming`), which
    may have started it, read its cursor and claimed its next step; the run's loop starts
    from there. Answers ``(outcome, progressed)``; ``progressed`` is whether anything
    changed, which is what tells the engine to look again at once rather than at the next
    due instant.
    """
    owner = host.identity
    progress = _Progress()
    ahead = None
    if claimed is not None:
        run["status"] = claimed.status
        if claimed.started_into is not None:
            # Started with the set's claim, whose triggers are fired for the whole set.
            progress.made = True
        if claimed.announced is not None:
            await asyncio.shield(claimed.announced)
        ahead, lease = claimed.ahead, claimed.lease_until
    else:
        now = host.clock.now()
        lease = now + timedelta(seconds=host.settings.run_lease_seconds)
        lost = await _claim_run(host, run, owner, now=now, lease=lease)
        if lost is not None:
            return lost, False
    outcome = Outcome.ERROR
    try:
        outcome = await move_run(host, run, progress, lease_until=lease, ahead=ahead)
    finally:
        # A run left claimed could not be advanced until its claim lease expired, which
        # would stretch every wait to the run's claim lease. A terminal transition already
        # dropped it.
        if outcome not in OUTCOME_FINISHED:
            await host.outcomes.run(
                lambda conn, _: runs.release_claim(conn, run["id"], owner=owner)
            )
    return outcome, progress.made or outcome is Outcome.BOUNDED


async def _claim_run(
    host: Host, run: RunRow, owner: str, *, now: datetime, lease: datetime
) -> Outcome | None:
    """Claim ``run`` at ``now`` for this pass until ``lease`` (starting it when it is
    ``scheduled``); None once it is this host's, else why not."""
    if stopping(host):
        return Outcome.STOPPING
    if run["status"] == RunStatus.SCHEDULED:
        not_started = await _start(host, run, now=now, owner=owner, lease=lease)
        if not_started is not None:
            return not_started
        run["status"] = RunStatus.STARTING
        return None
    # The engine's small writes share its outcome transaction: at a due instant a hundred
    # runs' claims commit together instead of queueing for a hundred commits.
    claimed = await host.outcomes.run(
        lambda conn, _: runs.claim_tick(conn, run["id"], owner=owner, lease=lease, now=now),
    )
    return None if claimed else Outcome.TAKEN


async def _start(
    host: Host, run: RunRow, *, now: datetime, owner: str, lease: datetime
) -> Outcome | None:
    """scheduled -> starting, or the reason it cannot start yet (None: it started)."""
    if is_late(run, now):
        return Outcome.LATE  # the missed sweep makes it terminal and visible
    if run["catch_up"] and await catchup.turn(host, run) is not None:
        return Outcome.CATCHING_UP  # after the one ahead of it; see pageant.engine.catchup
    campaign = await requires.check(host, run, now)
    if campaign.outcome is not None:
        return campaign.outcome  # held or skipped for its requirement; pageant.engine.requires
    if waiting.held_unverified(run):
        # Held, not refused: it stays scheduled and its grace window decides, exactly like
        # a held concurrency key; a verify lifts the hold on the next tick.
        if run["waiting_reason"] != WaitingReason.UNVERIFIED:
            held = waiting.describe(run, [], now=now, max_attempts=0)
            async with host.db.begin() as conn:
                await waiting.note(conn, run["id"], held, now=now)
        return Outcome.UNVERIFIED
    if run["params"] and await _refused_values(host, run, now=now):
        return Outcome.FAILED
    quorum = await start_when.decide(host, run, now)  # its event's start_when, if any
    if quorum.outcome is not None:
        return quorum.outcome
    key = run["concurrency_key"]
    beside: overlap.Meeting | None = None
    if key:
        async with host.db.connect() as conn:
            holder = await runs.concurrency_holder(conn, key, run["id"])
        if holder is not None:
            meeting = overlap.Meeting(run, holder._mapping, await overlap.policy_of(host, run), key)
            met = await _overlap(host, meeting, now)
            if met is not None:
                return met
            if meeting.policy is Overlap.ALLOW:
                beside = meeting
    if stopping(host):
        return Outcome.STOPPING
    try:
        # Shared with other runs' writes (a burst of starts commits together); may run twice.
        started = await host.outcomes.run(
            lambda conn, _: start_in(
                conn,
                run,
                owner=owner,
                lease=lease,
                now=now,
                because=quorum.joined(campaign.started_because(catchup.started_because(run, now))),
            )
        )
        if not started:
            return Outcome.TAKEN
        if beside is not None:
            await beside.note(host, now)
    except IntegrityError:
        # Another run took the key between the look above and the claim: the unique index
        # on concurrency_lock, not the look, is what keeps two live holders apart.
        async with host.db.connect() as conn:
            holder = await runs.concurrency_holder(conn, key or "", run["id"])
        if holder is not None:
            await _blocked(host, run, holder._mapping, now)
        return Outcome.BLOCKED
    return None


async def _overlap(host: Host, meeting: overlap.Meeting, now: datetime) -> Outcome | None:
    """What the run's event's overlap does about the run holding its key: the outcome when
    the run does not start now, None when it goes on to its start (the key freed by a
    replace, or let go of to start beside the holder)."""
    run, holder = meeting.run, meeting.holder
    if meeting.policy is Overlap.SKIP:
        return Outcome.SKIPPED if await overlap.skip(host, meeting, now) else Outcome.TAKEN
    if meeting.policy is Overlap.REPLACE:
        await overlap.replace(host, meeting, now)
        async with host.db.connect() as conn:
            still = await runs.concurrency_holder(conn, meeting.key, run["id"])
        if still is None:
            return None
        # Ending (it lets go of the key by itself), or another newcomer took it meanwhile.
        holder = still._mapping
    elif meeting.policy is Overlap.ALLOW:
        if await overlap.go_beside(host, meeting):
            run["concurrency_key"] = None
            return None
        return Outcome.TAKEN
    await _blocked(host, run, holder, now)
    return Outcome.BLOCKED


async def _refused_values(host: Host, run: RunRow, *, now: datetime) -> bool:
    """Refuse a scheduled run whose params are not values their option sources offer now (a
    server removed from the settings since the occurrence was made): it fails, with the
    sentence naming each, before it starts or takes its key; the occurrence's other runs go
    on. True when refused. A source that cannot answer refuses nothing."""
    async with host.db.connect() as conn:
        pinned = await host.versions.get(conn, run["version_id"])
    if pinned is None:
        return False  # what a version that cannot be read does is the start's to say
    values = run_params.with_scope(run["params"], run["scope"])
    problems, _ = await check_run_values(pinned.spec, values, host.registry)
    if not problems:
        return False
    because = "not started: " + "; ".join(problems)
    async with host.db.begin() as conn:
        if not await transitions.refuse_in(conn, run["id"], because, now=now):
            return False
    await lifecycle.announce(host, run["id"], lifecycle.RUN_FAILED)
    return True


async def _blocked(host: Host, run: Record, holder: Record, now: datetime) -> None:
    # A held key keeps the run scheduled; its grace window decides whether it ever starts.
    if run["waiting_reason"] == WaitingReason.CONCURRENCY:
        return
    held = waiting.describe(run, [], now=now, max_attempts=0, holder=holder)
    async with host.db.begin() as conn:
        await waiting.note(conn, run["id"], held, now=now)


class _Progress:
    made = False


async def _wait(
    host: Host,
    run: RunRow,
    state: RunState,
    phase_steps: Sequence[Record],
    *,
    now: datetime,
    gate: dict[str, Any] | None = None,
    unavailable: NotifyHold | None = None,
) -> Outcome:
    """Note why the run waits (once per change of reason); ``unavailable``: the hold on its
    next step, a notify step of a plugin that is down."""
    view = {**run, **state}
    found = waiting.describe(
        view,
        phase_steps,
        now=now,
        max_attempts=host.settings.max_attempts,
        gate=gate,
        unavailable=host.unavailable if unavailable is None else unavailable.reason,
    )
    if (found["reason"] if found else None) != state["waiting_reason"]:
        await host.outcomes.run(
            lambda conn, _: waiting.note(
                conn, run["id"], found, now=now, phase=state["current_phase"]
            ),
        )
    return Outcome.WAITING


async def _fail_run(host: Host, run_id: int, because: str, *, now: datetime) -> Outcome:
    async with host.db.begin() as conn:
        failed = await transitions.fail_in(conn, run_id, because, now=now)
    if failed:
        await lifecycle.announce(host, run_id, lifecycle.RUN_FAILED)
    return Outcome.FAILED


async def _complete(
    host: Host,
    run_id: int,
    *,
    now: datetime,
    last: tuple[dict[str, Any], int] | None = None,
) -> Outcome:
    """Finish a run: from its last phase (``last``, the phase and its index) through
    ``ending`` to ``completed``, or — for a run found in ``ending`` — straight to
    ``completed``."""

    async def finish(conn: AsyncConnection, group: Batch | None) -> bool | None:
        # Shared with other runs' writes; may run twice. None: the run changed underneath.
        # Its lines are kept for the group's one insert, after every line written at once.
        # What it holds in the world is given back by the cleanup stage once it has ended,
        # in this tick, from the ledger's rows.
        if last is not None:
            # Through ``ending`` to ``completed`` in one compare-and-set.
            phase, index = last
            ended = await transitions.end_and_complete_in(
                conn, run_id, phase=phase, index=index, now=now, batch=group
            )
            return True if ended else None
        # A run found in ``ending`` (written so by an earlier version) completes.
        return await transitions.complete_in(conn, run_id, now=now, batch=group)

    completed = await host.outcomes.run(finish)
    if completed is None:
        return Outcome.TAKEN
    fired: list[lifecycle.Firing] = []
    if last is not None:
        # This caller moved the run from its last phase into ``ending``: the cleanup of what
        # it holds is under way (the cleanup stage gives it back once the run has ended).
        fired.append((run_id, lifecycle.RUN_ENDING, last[0]["key"]))
    if completed:
        fired.append((run_id, lifecycle.RUN_COMPLETED, None))
    await lifecycle.announce_all(host, fired)
    return Outcome.COMPLETED


class _Entering(TypedDict):
    """How a phase is entered: from which run status, leaving which phase, when."""

    from_status: str
    old_phase: str | None
    now: datetime


async def _enter(
    host: Host, run_id: int, phases: list[dict[str, Any]], index: int, **how: Unpack[_Entering]
) -> bool:
    """Make ``phases[index]`` current — the one path by which a run changes phase. Its
    steps and gate are made in the transaction that makes it current (before the
    transition, so the gate's clock and tally start with the phase), and the phase left
    behind records going past its gate in the same transaction. No crash can leave a
    current phase without its steps and gate. False when the run changed underneath (a
    control won the race); nothing is then written."""
    phase = phases[index]
    try:
        # Shared with other runs' writes; may run twice. Lost rolls it back (and the batch
        # writes the others again on their own).
        await host.outcomes.run(
            lambda conn, _: enter_phase_in(conn, host, run_id, phases, index, **how),
        )
    except Lost:
        return False
    if how["old_phase"] is None:
        await lifecycle.announce_all(host, lifecycle.started(run_id, phase["key"]))
    else:
        await lifecycle.announce(host, run_id, lifecycle.PHASE_ENTERED, phase=phase["key"])
    return True


def goes_on(host: Host, taken: int, lease_until: datetime) -> bool:
    """Whether a run's pass, ``taken`` steps (and phase entries) in, takes another.

    Within ``steps_per_run_per_tick``, always. Past it the pass hands its claim back so that
    a run waiting for a dispatch slot gets its turn, unless no run waits for one: then it goes
    on while the run's claim (until ``lease_until``) has half of ``run_lease_seconds`` left
    and the host is not stopping. A long sequence on a host with slots to spare is not
    claimed afresh every few steps for the sake of runs that are not there.
    """
    if taken < host.settings.steps_per_run_per_tick:
        return True
    if stopping(host) or free_slots(host) == 0:
        return False
    half = timedelta(seconds=host.settings.run_lease_seconds / 2)
    return host.clock.now() + half < lease_until


async def move_run(
    host: Host,
    run: RunRow,
    progress: _Progress,
    *,
    lease_until: datetime,
    ahead: Ahead | None = None,
) -> Outcome:
    """Move one claimed run as far as it goes this pass (its steps, and its phases as their
    gates let it; :func:`goes_on` says how far); answers why it stopped.
    ``lease_until``: when the run's claim lapses; ``ahead``: what the run's claim already
    read (and claimed) for it."""
    run_id = run["id"]
    now = host.clock.now()
    pinned = await host.versions.fetch(host.db, run["version_id"])
    phases = phases_of(pinned.spec) if pinned else None
    if phases is None:
        progress.made = True
        return await _fail_run(
            host, run_id, f"the pinned version (id {run['version_id']}) cannot be read", now=now
        )
    keys = {phase["key"]: i for i, phase in enumerate(phases)}

    if run["status"] == RunStatus.STARTING:
        if not await _enter(
            host, run_id, phases, 0, from_status=RunStatus.STARTING, old_phase=None, now=now
        ):
            return Outcome.TAKEN
        progress.made = True
    elif run["status"] == RunStatus.ENDING:
        progress.made = True
        return await _complete(host, run_id, now=now)

    if ahead is None:
        ahead = Ahead(host, run_id)
    for taken in itertools.count():
        now = host.clock.now()
        claimed, seen, found = ahead.claimed, ahead.seen, ahead.found
        ahead.clear()
        if claimed is not None:
            # Claimed by the answer before it, in that answer's transaction: the run was
            # running, unheld and waiting on nothing, and the step ready, when it was.
            ahead.remaining = int(goes_on(host, taken + 1, lease_until))
            outcome = await dispatch_step(host, run, claimed.step, ahead=ahead, claimed=claimed)
            if outcome is Dispatched.TAKEN:
                return Outcome.TAKEN
            progress.made = True
            if outcome is not Dispatched.CONTINUE:
                return Outcome.STOPPED
            continue
        if not goes_on(host, taken, lease_until):
            return Outcome.BOUNDED
        if not seen:
            async with host.db.connect() as conn:
                found = await read_cursor(conn, run_id)
        if found is None:
            return Outcome.STOPPED
        state, step = found
        if state["status"] != RunStatus.RUNNING:
            return Outcome.STOPPED  # paused, cancelled or failed underneath this tick
        index = keys.get(state["current_phase"])
        if index is None:
            progress.made = True
            return await _fail_run(
                host,
                run_id,
                f'phase "{state["current_phase"]}" is not in the pinned version',
                now=now,
            )
        phase = phases[index]
        hold = state["hold_until"]
        if hold is not None:
            if hold > now:
                return await _wait(host, run, state, [], now=now)
            # The hold ran out: clear it, so a run whose gate still holds is not due again
            # for it, and the reason it waits on from now is noted below.
            async with host.db.begin() as conn:
                await runs.release_hold(conn, run_id, hold)
            state["hold_until"] = None

        if step is None:
            # Every step is terminal; the gate, if the phase has one, is the other half (a
            # phase without one takes no connection to say so).
            gate = None
            if gates.gated(phase):
                async with host.db.connect() as conn:
                    gate = await gates.holding(conn, run_id=run_id, phase=phase, now=now)
            if gate is not None:
                if gates.stalls(gate, now, host.settings.stall_seconds):
                    async with host.db.begin() as conn:
                        await gates.note_stall(conn, gate, now=now)
                held = gates.waiting_for(gate, now)
                return await _wait(host, run, state, [], now=now, gate=held)
            await _clear_waiting(host, run_id, state, now=now)
            progress.made = True
            if index + 1 == len(phases):
                return await _complete(host, run_id, now=now, last=(phase, index))
            if not await _enter(
                host,
                run_id,
                phases,
                index + 1,
                from_status=RunStatus.RUNNING,
                old_phase=phase["key"],
                now=now,
            ):
                return Outcome.TAKEN
            continue

        ready = readiness(host, state, step, now)
        if ready is Readiness.IN_FLIGHT:
            return Outcome.IN_FLIGHT
        if ready in (Readiness.PARKED, Readiness.NOT_DUE):
            return await _wait(host, run, state, [step], now=now)
        if ready is Readiness.UNAVAILABLE:
            # Not claimed, so nothing reaches any plugin and no attempt is spent; the run is
            # looked at again every poll until a restart settles who owns the action, or
            # until a plugin that reported itself down says it is back.
            if host.plugin_unavailable(step["action"].split(".", 1)[0]) is not None:
                async with host.db.begin() as conn:
                    await runs.escalate_health(
                        conn,
                        run_id,
                        Health.DEGRADED,
                        because=f"{step['action']} is unavailable",
                        at=now,
                    )
            return await _wait(host, run, state, [step], now=now)
        if ready is Readiness.STOPPING:
            return Outcome.STOPPING  # the host is stopping: no new step, the claim goes back
        if ready not in (Readiness.READY, Readiness.PLUGIN_DOWN):
            return Outcome.STOPPED  # seen to above: the run changed under this pass
        notify = (
            notify_hold(host, step, phase, state, now) if ready is Readiness.PLUGIN_DOWN else None
        )
        if notify is not None and notify.waits:
            # A notify step of a plugin that is down: held for its hold_seconds, unclaimed.
            async with host.db.begin() as conn:
                await runs.escalate_health(
                    conn, run_id, Health.DEGRADED, because=f"{step['action']} is held", at=now
                )
            return await _wait(host, run, state, [step], now=now, unavailable=notify)

        ahead.remaining = int(goes_on(host, taken + 1, lease_until))
        # What the run waited on is cleared in the step's claim, one transaction for both.
        outcome = await dispatch_step(host, run, step, ahead=ahead, waited=state, held=notify)
        if outcome is Dispatched.TAKEN:
            return Outcome.TAKEN
        progress.made = True
        if outcome is not Dispatched.CONTINUE:
            return Outcome.STOPPED
    raise AssertionError("unreachable: the pass ends inside its loop")


async def _clear_waiting(
    host: Host, run_id: int, state: Mapping[str, Any], *, now: datetime
) -> None:
    if state["waiting_reason"] is None:
        return
    await host.outcomes.run(lambda conn, _: waiting.clear(conn, run_id, state, now=now))
