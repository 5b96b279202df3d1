"""One step's dispatch: claim, authorize, perform, record — and what a failure does to the run.

Outcomes, for the run's loop: ``continue`` (look at the run again: the next step, or why it
now waits), ``stop`` (the run stopped or this claim was lost) and ``taken`` (another tick
claimed the step first).

A step that ends ``done`` looks ahead in its answer's own transaction (:class:`Ahead`): it
reads the run's cursor and, when the next step is plainly ready (the run still running and
not held, the step pending, due and available, the host not stopping), claims it there with
the same compare-and-set, decision and ledger placeholder a claim of its own would make.
Consecutive ready steps of a run therefore cost one transaction each, and a pause that
commits before the answer still lands between the two steps.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db import outcomes, runlog, runs, steps
from pageant.db.engine_rows import RunRow, RunState, StepRow
from pageant.db.group import defer_look
from pageant.db.runs import Cursor, read_cursor
from pageant.db.shared import Batch
from pageant.engine import contention, transitions
from pageant.engine.policy import Decision, may_invoke, settle_spend
from pageant.engine.readiness import readiness, stopping
from pageant.engine.step_services import StepServices
from pageant.hookspecs import ActionContext, Envelope, RunInfo
from pageant.ledger import cleanup as ledger
from pageant.plugins.calls import run_with_envelope
from pageant.plugins.tracing import describe_exception
from pageant.runs import lifecycle, waiting
from pageant.runs.holding import NotifyHold
from pageant.states import PARKED, Dispatched, Health, Readiness, RunStatus, StepStatus

if TYPE_CHECKING:
    from pageant.hosting import Host

log = logging.getLogger("pageant.engine")

#: The three paths on which a step is claimed (see :func:`claim_ready`).
PER_RUN = "per run"
AHEAD = "claimed ahead"
SET_WISE = "set-wise"

#: The claim lease budget of a step whose action nobody registers (it is refused at once anyway).
UNKNOWN_ACTION_BUDGET_MS = 10_000


@dataclass(frozen=True)
class Claim:
    """Who dispatched a step, and which attempt: the fence every outcome write carries."""

    owner: str
    attempt: int


@dataclass(frozen=True)
class Claimed:
    """A step claimed ahead, in the transaction that recorded the step before it."""

    step: StepRow
    decision: Decision
    now: datetime


class Ahead:
    """What a ``done`` answer saw of its run, in its own transaction: the run's cursor, and
    the next step when it was ready and could be claimed there (``claimed``)."""

    def __init__(self, host: Host, run_id: int) -> None:
        self.host = host
        self.run_id = run_id
        #: How many more steps the run's loop may take after the one being recorded.
        self.remaining = 0
        self.found: Cursor | None = None
        self.seen = False
        self.claimed: Claimed | None = None

    def clear(self) -> None:
        self.found, self.seen, self.claimed = None, False, None

    async def look(self, conn: AsyncConnection, *, now: datetime, group: Batch | None) -> None:
        """Read the run's cursor in ``conn`` and claim its next step if it is ready — at the
        end of ``group``, with the other runs' cursors, when the answer is recorded in one
        (:func:`pageant.db.group.defer_look`)."""
        self.clear()
        if self.remaining <= 0:
            return
        if group is not None:
            defer_look(group, self, now=now)
            return
        found = await read_cursor(conn, self.run_id)
        await self.take(conn, found, now=now, group=None)

    async def take(
        self,
        conn: AsyncConnection,
        found: Cursor | None,
        *,
        now: datetime,
        group: Batch | None,
        path: str = AHEAD,
    ) -> None:
        """Keep ``found`` (the run's cursor, read in ``conn``) for the run's loop, and claim
        its next step in ``conn`` if it is ready (:func:`claim_ready`, on ``path``). On the
        set-wise path a note of what the run waited on does not stop the claim, and is
        cleared in ``conn`` with it."""
        self.found, self.seen = found, True
        if found is None:
            return
        state, step = found
        if not self._ready(state, step, now, waiting_ok=path == SET_WISE):
            return
        assert step is not None
        action = self.host.registry.actions.get(step["action"])
        decision = await claim_ready(
            self.host, conn, step, action, now=now, group=group, waited=state, path=path
        )
        state["waiting_reason"] = None
        if decision is not None:
            self.claimed = Claimed(step, decision, now)

    def _ready(
        self,
        state: RunState,
        step: StepRow | None,
        now: datetime,
        *,
        waiting_ok: bool = False,
    ) -> bool:
        # Only the plain case: anything else (a hold, a wait to note, a gate, an unavailable
        # action, a stopping host) is the run's loop to look at, as ever.
        return readiness(self.host, state, step, now) is Readiness.READY and (
            waiting_ok or state["waiting_reason"] is None
        )


def _step_name(step: StepRow) -> str:
    return f"step {step['id']} ({step['label']})"


async def _degrade(conn: AsyncConnection, run_id: int, *, because: str, now: datetime) -> None:
    await runs.escalate_health(conn, run_id, Health.DEGRADED, because=because, at=now)


async def _stale(
    conn: AsyncConnection,
    step: StepRow,
    claim: Claim,
    *,
    outcome: str,
    error: str | None,
    now: datetime,
) -> Dispatched:
    # The claim was reclaimed (and maybe re-dispatched) while this answer was on its way:
    # recording it would overwrite the successor's outcome, so it is only told.
    await runlog.step_stale(
        conn,
        step,
        at=now,
        attempt=claim.attempt,
        claimed_by=claim.owner,
        outcome=outcome,
        error=error,
    )
    return Dispatched.STOP


async def fail_step(
    host: Host,
    step: StepRow,
    claim: Claim,
    error: str,
    *,
    now: datetime,
    status: StepStatus = StepStatus.FAILED,
    extra: dict[str, Any] | None = None,
    expired: bool = False,
) -> Dispatched:
    """Write the step ``failed`` (or ``refused``) under its claim and apply ``on_failure``.

    All three dispositions write the step's own status the same way; ``on_failure`` says
    what happens to the run: ``skip`` carries on degraded, ``pause`` stops it for a person,
    ``abort_run`` cancels what is pending and fails it. ``expired`` is the reclaim's call,
    fenced on the expired claim lease as well.
    """
    outcome, failed = await _write_failure(
        host,
        step,
        claim,
        error,
        now=now,
        status=status,
        extra=extra,
        expired=expired,
    )
    if failed:
        await lifecycle.announce(host, step["run_id"], lifecycle.RUN_FAILED)
    return outcome


async def _write_failure(
    host: Host,
    step: StepRow,
    claim: Claim,
    error: str,
    *,
    now: datetime,
    status: str,
    extra: dict[str, Any] | None,
    expired: bool,
) -> tuple[Dispatched, bool]:
    """:func:`fail_step`'s transaction; answers ``(outcome, whether it failed the run)``."""
    run_id = step["run_id"]
    async with host.db.begin() as conn:
        if not await steps.finish_step(
            conn,
            step["id"],
            owner=claim.owner,
            attempt=claim.attempt,
            to=status,
            error=error,
            now=now,
            expired=expired,
        ):
            return await _stale(conn, step, claim, outcome=status, error=error, now=now), False
        if status is StepStatus.REFUSED:
            await runlog.step_refused(
                conn, step, at=now, attempt=claim.attempt, error=error, more=extra or {}
            )
        else:
            await runlog.step_status(
                conn,
                step,
                at=now,
                to=status,
                attempt=claim.attempt,
                on_failure=step["on_failure"],
                error=error,
                more=extra,
            )
        await _degrade(conn, run_id, because=f"{_step_name(step)} {status}", now=now)
        refused = status is StepStatus.REFUSED
        counter = host.metrics.steps_refused if refused else host.metrics.steps_failed
        counter.labels(action=step["action"]).inc()
        because = f"{_step_name(step)} {status}: {error}"
        if step["on_failure"] == "abort_run":
            ended = await transitions.abort_in(conn, run_id, because, phase=step["phase"], now=now)
            return Dispatched.STOP, ended
        if step["on_failure"] == "pause":
            if await runs.pause_run(conn, run_id, error=because):
                await runlog.run_status(
                    conn,
                    run_id,
                    at=now,
                    to=RunStatus.PAUSED,
                    because=because,
                    phase=step["phase"],
                )
                failed = {**step, "status": status, "last_error": error}
                stopped = waiting.describe(
                    {"status": RunStatus.PAUSED}, [failed], now=now, max_attempts=0
                )
                await waiting.note(conn, run_id, stopped, now=now, phase=step["phase"])
            return Dispatched.STOP, False
    return Dispatched.CONTINUE, False


async def _note_drift(host: Host, step: StepRow, action: Any, *, now: datetime) -> None:
    # Once per step (on its first attempt): the author wrote the params against an older
    # declaration of the action, which may read them differently now.
    async with host.db.begin() as conn:
        await runlog.step_version_drift(conn, step, at=now, declared_version=action.version)


async def claim_ready(
    host: Host,
    conn: AsyncConnection,
    step: StepRow,
    action: Any,
    *,
    now: datetime,
    group: Batch | None,
    waited: RunState | None,
    path: str,
    held: NotifyHold | None = None,
) -> Decision | None:
    """Claim ``step`` in ``conn`` and decide whether it may run: the one function every claim
    of a step goes through. Answers the decision, or None when the claim lost (another
    claimer moved the step first).

    A step is claimed on one of three paths (``path``), each in a write of the engine's
    group commit (:mod:`pageant.db.group`), so ``group`` is that transaction's batch
    (None when the write runs alone):

    - :data:`PER_RUN` — the run's own task found the step ready and holds no claim for it
      (:func:`dispatch_step` without ``claimed``): the run's first step after a start, a
      wait or a retry, or any step after an answer that could not look ahead. Its
      transaction holds this claim alone (with other runs' writes).
    - :data:`AHEAD` — the step before it answered ``done`` and this one was plainly ready
      when that answer was recorded (:meth:`Ahead.take`, at the end of the answer's group,
      with the other runs' cursors read in one statement): the claim commits with the
      answer, and the run's task performs the step at once.
    - :data:`SET_WISE` — the advance stage found two or more runs due at once and claimed
      them together (:func:`pageant.engine.claiming.claim_due`): their starts, run claims,
      cursors and the ready steps' claims (through :meth:`Ahead.take`) in one transaction.

    What it writes is the same on every path: the note of what the run waited on, cleared
    (``waited``, the run's state as read, when it shows one: a ``run.waiting`` line); the
    compare-and-set ``pending -> running`` with the claim lease, attempts + 1 — kept for
    the group's one statement when ``group`` is given (:func:`pageant.db.steps.keep_claim`;
    a kept claim that would have lost fails the whole group, whose writes then run alone
    and this one is told it lost); the decision (switchboard, availability, price, and the
    budget spent); and for a ledger-recorded action its placeholder (``resource.placeholder``).
    """
    log.debug("run %s step %s: claiming it %s", step["run_id"], step["id"], path)
    if waited is not None:
        await waiting.clear(conn, step["run_id"], waited, now=now)
    budget_ms = action.budget_ms if action is not None else UNKNOWN_ACTION_BUDGET_MS
    # The claim lease outlives the action's own timeout by the margin, so a dispatch that is
    # still inside its budget is never reclaimed underneath itself.
    lease = now + timedelta(seconds=budget_ms / 1000 + host.settings.step_lease_margin_seconds)
    seen, owner = step["attempts"], host.identity
    if group is not None:
        steps.keep_claim(group, step["id"], seen_attempts=seen, owner=owner, lease=lease, now=now)
    elif not await steps.claim_step(
        conn, step["id"], seen_attempts=seen, owner=owner, lease=lease, now=now
    ):
        return None
    # In the claim's transaction: after the claim (so two ticks cannot both spend) and
    # before the dispatch (a refusal means nothing reached the plugin).
    decision = await may_invoke(host, step, action, conn=conn, batch=group)
    if held is not None:
        await runlog.step_held(
            conn,
            step,
            at=now,
            held_seconds=round(held.held, 1),
            hold_seconds=held.seconds,
            outcome="dispatched" if decision.allowed else StepStatus.REFUSED,
        )
    if decision.allowed and ledger.recorded(action):
        # Record before confirm: the placeholder is written with the claim, so no
        # world-changing perform ever starts without a row that can give it back.
        await ledger.record_placeholder(conn, step, action, now=now)
    return decision


async def dispatch_step(
    host: Host,
    run: RunRow,
    step: StepRow,
    *,
    ahead: Ahead | None = None,
    claimed: Claimed | None = None,
    waited: RunState | None = None,
    held: NotifyHold | None = None,
) -> Dispatched:
    """Claim ``step`` of ``run``, check it may run, perform it and record the answer.

    ``claimed`` is the step's claim made ahead (by the answer before it); ``ahead``, given,
    looks past a ``done`` answer in its transaction; ``waited``, the run's state as its loop
    read it: a waiting note on it is cleared in the claim's transaction; ``held``, the hold
    that kept the step back while its plugin was down, told in the claim's transaction.
    """
    action = host.registry.actions.get(step["action"])
    budget_ms = action.budget_ms if action is not None else UNKNOWN_ACTION_BUDGET_MS
    if claimed is not None:
        decision, now = claimed.decision, claimed.now
    else:
        now = host.clock.now()
        if stopping(host):
            return Dispatched.STOP  # the host began a clean stop since the run's loop looked

        found = await host.outcomes.run(
            lambda conn, group: claim_ready(
                host,
                conn,
                step,
                action,
                now=now,
                group=group,
                waited=waited,
                path=PER_RUN,
                held=held,
            ),
        )
        if found is None:
            return Dispatched.TAKEN
        decision = found
    claim = Claim(host.identity, step["attempts"] + 1)
    metrics = host.metrics
    metrics.steps_dispatched.labels(action=step["action"]).inc()
    if step["due_at"] is not None:
        metrics.step_lateness_seconds.observe(max(0.0, (now - step["due_at"]).total_seconds()))

    if not decision.allowed or action is None:
        return await fail_step(
            host,
            step,
            claim,
            decision.reason or StepStatus.REFUSED,
            now=host.clock.now(),
            status=StepStatus.REFUSED,
            extra={"code": decision.code, **decision.detail},
        )
    if stopping(host):
        return await _hand_back_untried(host, step, claim)
    if action.version > step["action_version"] and claim.attempt == 1:
        await _note_drift(host, step, action, now=now)

    engine = host.engine
    if engine is None:
        raise RuntimeError("a step is dispatched under an engine")
    services = StepServices(
        host,
        run_id=run["id"],
        step_id=step["id"],
        phase=step["phase"],
        session=engine.http_session,
        run=run,
    )
    context = ActionContext(
        params=dict(step["params"] or {}),
        idempotency_key=step["idempotency_key"],
        run=RunInfo(
            id=run["id"], scope=run["scope"], definition_id=run["definition_id"], slug=run["slug"]
        ),
        verify=False,
        deadline=now + timedelta(milliseconds=budget_ms),
        services=services,
    )
    started = time.perf_counter()
    envelope = None
    async with engine.plugin_call(ledger.owner_of(action.id)):
        # The last moment before anything reaches the game. A step claimed before the host
        # began to stop (ahead, in the answer before it; or by a pass, or a set, whose
        # transaction was committing) is handed back untried, never performed after it.
        if not stopping(host):
            envelope = await run_with_envelope(action.perform, context, timeout=budget_ms / 1000)
    if envelope is None:
        return await _hand_back_untried(host, step, claim)
    metrics.dispatch_seconds.labels(action=step["action"]).observe(time.perf_counter() - started)
    extra = None
    if envelope.exception is not None:
        envelope, extra = explain_exception(host, run, step, envelope)
    # The answer is in hand: a collision while writing it must not cost a second delivery
    # (the reclaim would dispatch again), so the write is retried as a whole. The loop is
    # here, and a ``done`` answer (the common one) goes to the group commit from here as a
    # value: nothing stands between the run's loop and its write (docs/engine.md).
    if ahead is not None:
        ahead.clear()
    attempt = 1
    while True:
        try:
            if not envelope.ok or envelope.park:
                return await record(host, step, claim, envelope, extra=extra, services=services)
            done = Done(host, step, claim, envelope, host.clock.now(), ahead, services)
            outcome = Dispatched(await host.outcomes.run(done))
            if services is not None:
                services.settle()
            return outcome
        except Exception as exc:
            await contention.again(host, f"recording step {step['id']}", exc, attempt)
        attempt += 1


async def _hand_back_untried(host: Host, step: StepRow, claim: Claim) -> Dispatched:
    """The host began to stop after ``step`` was claimed and before it was performed: back
    to ``pending`` unmarked, its attempts as before the claim, so another host (or this one
    restarted) dispatches it under the same idempotency key as if it had never been claimed.
    The run's loop stops here; its claim goes back with the pass."""
    now = host.clock.now()
    async with host.db.begin() as conn:
        if not await steps.return_untried_step(
            conn, step["id"], owner=claim.owner, attempt=claim.attempt
        ):
            return Dispatched.STOP  # reclaimed meanwhile: whoever holds it now decides
        await runlog.step_status(
            conn,
            step,
            at=now,
            to=StepStatus.PENDING,
            because="the host stopped before it was dispatched",
            attempt=step["attempts"],
            claimed_by=claim.owner,
        )
    log.info(
        "stopping: step %s (%s) of run %s was claimed but not yet dispatched; handed back untried",
        step["id"],
        step["action"],
        step["run_id"],
        extra={
            "run_id": step["run_id"],
            "step_id": step["id"],
            "action": step["action"],
            "outcome": "untried",
        },
    )
    return Dispatched.STOP


async def _record_outcome(
    conn: AsyncConnection, step: StepRow, envelope: Envelope, *, now: datetime
) -> None:
    """Keep who took part and how the phase ended, in the answer's own transaction."""
    people = [{"name": who.name, "role": who.role} for who in envelope.participants]
    await outcomes.add_participants(conn, step["run_id"], step["id"], people, now=now)
    if envelope.results is not None:
        await outcomes.add_results(
            conn,
            step["run_id"],
            step["id"],
            phase=step["phase"],
            title=envelope.results.title,
            entries=[
                {"rank": e.rank, "name": e.name, "detail": e.detail}
                for e in envelope.results.entries
            ],
            now=now,
        )


def explain_exception(
    host: Host, run: RunRow, step: StepRow, envelope: Envelope
) -> tuple[Envelope, dict[str, Any]]:
    """Log a plugin's exception with its whole traceback, naming the plugin, run and step;
    answer the envelope whose error names the plugin's line, and the log line's detail."""
    exc = envelope.exception
    assert exc is not None
    owner = host.registry.owner_of("actions", step["action"]) or "an unknown plugin"
    label = host.plugins.raised_in(exc) or owner
    through = f" (called through {owner})" if label != owner else ""
    about = describe_exception(exc, host.plugins.code_roots())
    at = f" at {about['at']}" if about["at"] else ""
    log.error(
        "plugin %s raised in %s.perform%s, run %s %s%s",
        label,
        step["action"],
        through,
        run["id"],
        _step_name(step),
        at,
        exc_info=exc,
    )
    error = f"{about['type']}: {about['message']}{at}"
    return replace(envelope, error=error), {"exception": about, "plugin": label}


@dataclass(frozen=True)
class Done:
    """A ``done`` answer's write under the claim that dispatched it, handed to the group
    commit as a value (:mod:`pageant.db.group`): shared with other runs' answers, one
    commit for all, and it may run twice. It commits the lines the perform wrote
    (``services``) and looks ahead (``ahead``) in its own transaction."""

    host: Host
    step: StepRow
    claim: Claim
    envelope: Envelope
    now: datetime
    ahead: Ahead | None
    services: StepServices | None

    async def __call__(self, conn: AsyncConnection, group: Batch | None) -> Dispatched:
        host, step, claim, envelope, now = self.host, self.step, self.claim, self.envelope, self.now
        run_id = step["run_id"]
        if self.ahead is not None:
            self.ahead.clear()
        action = host.registry.actions.get(step["action"])
        # The lines are kept for the group's one insert unless the ledger writes its own
        # after them (at once: kept, they would come after its).
        lines = None if ledger.recorded(action) else group
        if self.services is not None:
            await self.services.write_held(conn, lines=lines)
        owner, attempt = claim.owner, claim.attempt
        if group is not None:
            steps.keep_finish(group, step["id"], owner=owner, attempt=attempt, now=now)
        elif not await steps.finish_step(
            conn, step["id"], owner=owner, attempt=attempt, to=StepStatus.DONE, now=now
        ):
            return await _stale(conn, step, claim, outcome=StepStatus.DONE, error=None, now=now)
        holds = envelope.hold_for > 0
        until = now + timedelta(seconds=envelope.hold_for) if holds else None
        if until is not None:
            # The wait is the *next* step's due_at, set here by the runner: a perform
            # that slept would hold its claim for the whole wait. With nothing after it
            # in the phase, the wait travels on the run across the phase boundary.
            held_step = await steps.hold_next_step(conn, run_id, step["phase"], step["seq"], until)
            if not held_step:
                await runs.set_hold(conn, run_id, until)
        made = [{"kind": res.kind, "ref": res.ref, **res.detail} for res in envelope.resources]
        await runlog.step_status(
            conn,
            step,
            at=now,
            to=StepStatus.DONE,
            attempt=claim.attempt,
            hold_seconds=envelope.hold_for if holds else None,
            hold_until=until,
            resources=made or None,
            batch=lines,
        )
        await _record_outcome(conn, step, envelope, now=now)
        # The settle point: the answer says what the game made, and the reservation
        # taken at the claim is lowered to it with the step's own record.
        await settle_spend(conn, step, envelope)
        if ledger.recorded(action):
            await ledger.confirm(conn, step, action, envelope.resources, now=now)  # type: ignore[arg-type]  # recorded() is true only of an Action; mypy cannot narrow through it
        elif envelope.resources and action is not None:
            ledger.unrecorded_resources(host, action)
        if self.ahead is not None:
            await self.ahead.look(conn, now=now, group=group)
        return Dispatched.CONTINUE


async def record(
    host: Host,
    step: StepRow,
    claim: Claim,
    envelope: Envelope,
    *,
    extra: dict[str, Any] | None = None,
    services: StepServices | None = None,
) -> Dispatched:
    """Record an answer other than a plain ``done`` (which is :class:`Done`'s) under the
    claim that dispatched it: parked, retried or failed. ``extra`` goes on the failure's log
    line (what a plugin's exception was, and where); the lines the perform wrote
    (``services``) are committed just before the answer's own record."""
    settings = host.settings
    now = host.clock.now()
    run_id = step["run_id"]
    if services is not None:
        await services.flush()
    if envelope.ok and envelope.park:
        async with host.db.begin() as conn:
            if not await steps.park_step(
                conn, step["id"], owner=claim.owner, attempt=claim.attempt
            ):
                return await _stale(conn, step, claim, outcome=PARKED, error=None, now=now)
            await runlog.step_parked(conn, step, at=now, attempt=claim.attempt)
            await _record_outcome(conn, step, envelope, now=now)
            await settle_spend(conn, step, envelope)
        return Dispatched.CONTINUE

    error = envelope.error or "failed without an error message"
    if envelope.retry and claim.attempt < settings.max_attempts:
        # Flat backoff: due_at is also the event's own clock, and a doubling backoff would
        # push a step arbitrarily far past the moment the event was about.
        until = now + timedelta(seconds=settings.retry_seconds)
        async with host.db.begin() as conn:
            if not await steps.reschedule_step(
                conn, step["id"], owner=claim.owner, attempt=claim.attempt, until=until, error=error
            ):
                return await _stale(conn, step, claim, outcome="retry", error=error, now=now)
            await runlog.step_retry(
                conn,
                step,
                at=now,
                attempt=claim.attempt,
                of=settings.max_attempts,
                error=error,
                next_at=until,
                more=extra,
            )
            # Degraded from the first retry: an event whose steps land on the second try
            # is in trouble now, and now is when an operator wants to know.
            await _degrade(conn, run_id, because=f"{_step_name(step)} is retrying", now=now)
        host.metrics.steps_retried.labels(action=step["action"]).inc()
        return Dispatched.CONTINUE

    return await fail_step(host, step, claim, error, now=now, extra=extra)
