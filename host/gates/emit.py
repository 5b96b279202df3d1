"""The emit path: trigger firings, counted against the open gates they can count for.

A game server fires through ``POST /api/v1/triggers/{trigger_id}/fire`` (one firing) or
``POST /api/v1/triggers/fire`` (a batch); a plugin through its context's ``emit``. All of
them arrive at :meth:`Firings.fire`.

**The emit path writes, the tick reads.** A gate waiting on three firings counts things that
happen *between* two ticks; by the next tick there is nothing left to see, and a tally kept in
a process's memory is one a restart silently zeroes. So each firing is a database write: the
matching gates' tallies are raised by a conditional increment in the firing's transaction,
and the engine is woken only to act on a gate that closed. A firing is answered only once
its transaction has committed, so an answered firing survives a crash.

**A firing costs what it can match.** It reads only the open gates whose match key it
carries (:mod:`pageant.gates.matching`), and writes only to the ones it counts for; a gate
it misses is not written. What a held gate's diagnosis needs about the firings it missed is
its trigger's last firing, one row a trigger (:func:`pageant.db.firings.note_last_firing`).

**Firings arriving together are committed together.** Like the engine's step answers
(:mod:`pageant.engine.batch`), firings that arrive while a transaction is committing wait
for the next one, which records up to ``firing_batch_size`` of them; a lone firing is
written at once. When a shared transaction fails, each submission in it is written again
in a transaction of its own, so one's error is its own.

**A key makes a retry safe.** A firing sent with an idempotency key records the key with
its answer, per issuer (the game token, or the plugin); the same key again answers that
answer and counts nothing, for ``firing_key_hours``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db import firings as firing_rows
from pageant.db import phase_gates as gate_rows
from pageant.db import runlog
from pageant.db.shared import Batch
from pageant.errors import Invalid, NotFound, PageantError
from pageant.gates import phase as gates
from pageant.gates.conditions import check_payload, evaluate, named_values
from pageant.gates.matching import firing_keys
from pageant.timefmt import parse_instant
from pageant.typedtext import read_words

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from pageant.clock import Clock
    from pageant.plugins.registry import Registry
    from pageant.settings import Settings

log = logging.getLogger("pageant.gates")

#: The most firings one batch request may carry.
MAX_BATCH = 500
#: The longest idempotency key.
MAX_KEY = 200
#: How far ahead of the host's clock a firing's ``at`` may be: a game server's clock that
#: runs a little fast is not refused, and the firing is kept as happening now.
CLOCK_SKEW = timedelta(seconds=5)
#: How often a host forgets idempotency keys older than the keep.
_PRUNE_EVERY_SECONDS = 600.0

Answer = dict[str, Any]


def payload_from_text(registry: Any, trigger_id: str, pairs: Sequence[str]) -> dict[str, Any]:
    """A payload from ``key=value`` words (a command line's), each value read as the type
    its variable is declared with; a key the trigger does not declare is kept as text, for
    :func:`check_firing` to refuse with the same words as any payload. Raises
    :class:`NotFound` for an unknown trigger and :class:`Invalid` naming each word it
    cannot read."""
    trigger = registry.triggers.get(trigger_id)
    if trigger is None:
        raise NotFound(f"no such trigger: {trigger_id!r} (no installed plugin registers it)")
    types = {variable.name: variable.type for variable in trigger.variables}
    payload, problems = read_words(
        pairs,
        types,
        name="KEY",
        where=lambda key, text, kind: f"payload.{key}: {text!r} is not a {kind}",
    )
    if problems:
        raise Invalid(f"the payload does not fit {trigger_id}'s variables", details=problems)
    return payload


# ── one firing, checked ───────────────────────────────────────────────────────


@dataclass(frozen=True)
class Firing:
    """A firing that passed its checks: what is recorded."""

    trigger_id: str
    payload: dict[str, Any]
    key: str | None = None
    #: When it happened in the game, as the game said (None: when it arrived).
    at: datetime | None = None


def check_firing(
    registry: Registry,
    trigger_id: Any,
    payload: Any,
    *,
    key: Any = None,
    at: Any = None,
    now: datetime,
    max_age_seconds: float,
    path: str = "body",
    payload_path: str | None = None,
) -> Firing:
    """Check one firing before anything is written. Raises :class:`NotFound` for a trigger
    no plugin registers, and :class:`Invalid` naming each problem: a payload variable the
    trigger does not declare or of the wrong type, a key that is not text of 1 to 200
    characters, an ``at`` that is not an instant with an offset, is ahead of the host's
    clock (by more than :data:`CLOCK_SKEW`) or older than ``max_age_seconds``. Problems
    are named under ``path`` (the payload's under ``payload_path``, by default the same)."""
    trigger = registry.triggers.get(trigger_id) if isinstance(trigger_id, str) else None
    if trigger is None:
        raise NotFound(f"no such trigger: {trigger_id!r} (no installed plugin registers it)")
    checked, errors = check_payload(trigger, payload, payload_path or path)
    if key is not None and (not isinstance(key, str) or not 1 <= len(key) <= MAX_KEY):
        errors.append(f"{path}.id: expected a key of 1 to {MAX_KEY} characters; got {key!r}")
    when = None
    if at is not None:
        when, problem = _instant(at, now, max_age_seconds)
        if problem:
            errors.append(f"{path}.at: {problem}")
    if errors:
        raise Invalid(f"the firing does not fit {trigger_id}", details=errors)
    return Firing(trigger_id, checked, key, when)


def _instant(raw: Any, now: datetime, max_age_seconds: float) -> tuple[datetime | None, str]:
    if isinstance(raw, datetime):
        when = raw
    elif isinstance(raw, str):
        try:
            when = parse_instant(raw)
        except ValueError as exc:
            return None, str(exc)
    else:
        return None, f"expected an instant such as 2027-03-26T19:00:00Z; got {raw!r}"
    if when.tzinfo is None:
        return None, "expected an instant with an offset"
    if when > now + CLOCK_SKEW:
        return None, f"{raw} is in the future (the host's clock reads {now.isoformat()})"
    if when < now - timedelta(seconds=max_age_seconds):
        return None, f"{raw} is older than {round(max_age_seconds)} s; too late to count"
    return min(when, now), ""


def refusal(exc: PageantError) -> Answer:
    """A refused firing's entry in a batch's answer: its status and the API's error body."""
    return {
        "status": exc.status,
        "error": {"code": exc.code, "message": exc.message, "details": exc.details},
    }


# ── recording ─────────────────────────────────────────────────────────────────


async def record(
    conn: AsyncConnection,
    firings: Sequence[Firing],
    *,
    issuer: str | None,
    actor: str | None,
    now: datetime,
    batch: Batch | None = None,
) -> list[Answer]:
    """Record ``firings`` in ``conn``, in order; answers ``{gates_matched, gates_closed}``
    for each. A firing whose key ``issuer`` sent before answers that first answer and
    counts nothing (``issuer`` None: keys are not kept). The log lines are kept for
    ``batch``'s one insert when given."""
    answers: list[Answer | None] = [None] * len(firings)
    copies: dict[int, int] = {}
    claimed: dict[int, int] = {}
    keyed = [f.key for f in firings if f.key is not None] if issuer is not None else []
    known = await firing_rows.answers(conn, issuer, keyed) if issuer is not None else {}
    first: dict[str, int] = {}
    todo: dict[str, list[int]] = {}
    for i, firing in enumerate(firings):
        if firing.key is not None and issuer is not None:
            if firing.key in known:
                answers[i] = _replayed(known[firing.key])
                continue
            if firing.key in first:
                copies[i] = first[firing.key]
                continue
            key_id = await firing_rows.claim_key(
                conn,
                issuer=issuer,
                key=firing.key,
                trigger_id=firing.trigger_id,
                fired_at=firing.at or now,
                now=now,
            )
            if key_id is None:
                # Recorded by a transaction that committed after the read above.
                again = await firing_rows.answers(conn, issuer, [firing.key])
                answers[i] = _replayed(again.get(firing.key))
                continue
            first[firing.key] = i
            claimed[i] = key_id
        todo.setdefault(firing.trigger_id, []).append(i)
    for trigger_id, indexes in todo.items():
        keys = sorted({key for i in indexes for key in firing_keys(firings[i].payload)})
        open_gates = [row._mapping for row in await gate_rows.open_on_gates(conn, trigger_id, keys)]
        for i in indexes:
            answers[i] = await _judge(
                conn, open_gates, firings[i], now=now, actor=actor, batch=batch
            )
        last = firings[indexes[-1]]
        await firing_rows.note_last_firing(conn, trigger_id, now, last.payload)
    for i, key_id in claimed.items():
        await firing_rows.keep_answer(conn, key_id, answers[i] or {})
    for i, source in copies.items():
        answers[i] = answers[source]
    return [answer or _replayed(None) for answer in answers]


def _replayed(answer: Any) -> Answer:
    if isinstance(answer, dict):
        return dict(answer)
    return {"gates_matched": 0, "gates_closed": 0}


async def _judge(
    conn: AsyncConnection,
    open_gates: Sequence[gates.Gate],
    firing: Firing,
    *,
    now: datetime,
    actor: str | None,
    batch: Batch | None,
) -> Answer:
    """Count one firing for each gate it matches."""
    carried = set(firing_keys(firing.payload))
    matched = closed = 0
    for gate in open_gates:
        if gate["match_key"] not in carried or not evaluate(gate["condition"], firing.payload):
            continue
        outcome = await _count(conn, gate, firing, now=now, actor=actor, batch=batch)
        matched += outcome != "gone"
        closed += outcome == "closed"
    return {"gates_matched": matched, "gates_closed": closed}


async def _count(
    conn: AsyncConnection,
    gate: gates.Gate,
    firing: Firing,
    *,
    now: datetime,
    actor: str | None,
    batch: Batch | None,
) -> str:
    """Count a matching firing for one gate: ``counted``, ``closed``, or ``gone`` (the gate
    closed before this firing; nothing written)."""
    if not await gate_rows.count_firing(conn, gate["id"], now):
        return "gone"
    # Read back rather than assumed: another host's firing may have counted in between.
    gate = await gate_rows.gate_by_id(conn, gate["id"])
    # Only the variables the condition names are kept: the log is read onto an admin screen,
    # and a game's payload may carry far more than the gate tests.
    await runlog.condition_evaluated(
        conn,
        gate,
        at=now,
        condition=gates.condition_text(gate),
        values=named_values(gate["condition"], firing.payload),
        fired_at=firing.at,
        key=firing.key,
        actor=actor,
        batch=batch,
    )
    if gate["satisfied_by"] == "tally":
        await gates.log_closed(conn, gate, now=now, actor=actor, batch=batch)
        return "closed"
    return "counted"


# ── the group commit ──────────────────────────────────────────────────────────


@dataclass
class _Submission:
    firings: list[Firing]
    issuer: str | None
    actor: str | None
    answer: asyncio.Future[list[Answer]]


class Firings:
    """The host's emit path: checks firings, records them in shared transactions, wakes
    the engine when a gate closed."""

    def __init__(
        self,
        registry: Registry,
        db: AsyncEngine,
        clock: Clock,
        settings: Settings,
        wake: Callable[[], None],
    ) -> None:
        self._registry = registry
        self._db = db
        self._clock = clock
        self._settings = settings
        self._wake = wake
        self._waiting: list[_Submission] = []
        self._drain_task: asyncio.Task[None] | None = None
        self._pruned_at = float("-inf")

    def check(
        self,
        trigger_id: Any,
        payload: Any,
        *,
        key: Any = None,
        at: Any = None,
        path: str = "body",
        payload_path: str | None = None,
    ) -> Firing:
        """:func:`check_firing` against this host's registry, clock and settings."""
        return check_firing(
            self._registry,
            trigger_id,
            payload,
            key=key,
            at=at,
            now=self._clock.now(),
            max_age_seconds=self._settings.firing_max_age_seconds,
            path=path,
            payload_path=payload_path,
        )

    async def fire(
        self, firings: Sequence[Firing], *, issuer: str | None, actor: str | None
    ) -> list[Answer]:
        """Record checked ``firings`` (one transaction, shared with whatever arrives at the
        same time); answers one ``{gates_matched, gates_closed}`` each, once committed."""
        firings = list(firings)
        if not firings:
            return []
        if not any(f.key for f in firings) and not await self._any_open(firings):
            # Most firings concern no gate (core's lifecycle fires on every transition): a
            # read tells, and the writer's lock is left alone. A gate committed after this
            # look misses the firing, as one committed after the write's read would.
            return [{"gates_matched": 0, "gates_closed": 0} for _ in firings]
        future: asyncio.Future[list[Answer]] = asyncio.get_running_loop().create_future()
        self._waiting.append(_Submission(firings, issuer, actor, future))
        if self._drain_task is None or self._drain_task.done():
            self._drain_task = asyncio.create_task(self._drain())
        # Shielded: a caller that gives up (a client that hung up) does not cancel a
        # transaction other callers' firings share.
        answers = await asyncio.shield(future)
        if any(answer.get("gates_closed") for answer in answers):
            self._wake()  # a gate's run moves on
        return answers

    async def _any_open(self, firings: list[Firing]) -> bool:
        async with self._db.connect() as conn:
            for trigger_id in {f.trigger_id for f in firings}:
                if await gate_rows.any_open_on(conn, trigger_id):
                    return True
        return False

    async def _drain(self) -> None:
        size = self._settings.firing_batch_size
        while self._waiting:
            group = [self._waiting.pop(0)]
            count = len(group[0].firings)
            while self._waiting and count + len(self._waiting[0].firings) <= size:
                count += len(self._waiting[0].firings)
                group.append(self._waiting.pop(0))
            await self._commit(group)

    async def _commit(self, group: list[_Submission]) -> None:
        now = self._clock.now()
        try:
            async with self._db.begin() as conn:
                # The log lines of the whole group are inserted in one statement.
                batch = Batch(conn)
                results = [
                    await record(
                        conn, s.firings, issuer=s.issuer, actor=s.actor, now=now, batch=batch
                    )
                    for s in group
                ]
                await runlog.flush(batch)
                await self._prune(conn, now)
        except Exception as exc:
            if len(group) > 1:
                log.warning("a shared firing transaction failed; each submission alone: %r", exc)
                for submission in group:
                    await self._commit([submission])
                return
            if not group[0].answer.done():
                group[0].answer.set_exception(exc)
            return
        for submission, result in zip(group, results, strict=True):
            if not submission.answer.done():
                submission.answer.set_result(result)

    async def _prune(self, conn: AsyncConnection, now: datetime) -> None:
        if time.monotonic() - self._pruned_at < _PRUNE_EVERY_SECONDS:
            return
        self._pruned_at = time.monotonic()
        hours = self._settings.firing_key_hours
        await firing_rows.prune_keys(conn, now - timedelta(hours=hours))
