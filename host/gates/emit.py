"""The emit path: trigger firings, counted against the open gates they can count for.

A game server fires through ``POST /api/v1/triggers/{trigger_id}/fire`` (one firing) or
``POST /api/v1/triggers/fire`` (a batch); a plugin through its context's ``emit``. All of
them arrive at :meth:`Firings.fire`.

**The emit path writes, the tick reads.** A gate waiting on three firings counts things that
happen *between* two ticks; by the next tick there is nothing left to see, and a tally kept in
a process's memory is one a restart silently zeroes. So each firing is a database write: the
matching gates' tallies are raised in the firing's transaction, and the engine is woken
only to act on a gate that closed. A firing is answered only once
its transaction has committed, so an answered firing survives a crash.

**A firing costs what it can match.** It reads only the open gates whose match key it
carries (:mod:`pageant.gates.matching`), and writes only to the ones it counts for; a gate
it misses is not written. What a held gate's diagnosis needs about the firings it missed is
its trigger's last firing, one row a trigger (:func:`pageant.db.firings.note_last_firing`).

**Firings arriving together are committed together.** Like the engine's step answers
(:mod:`pageant.db.group`), firings that arrive while a transaction is committing wait
for the next one, which records up to ``firing_batch_size`` of them; a lone firing is
written at once. A transaction's firings are counted set-wise: one read of the open gates a
trigger, the firings judged against them in order in memory, the gates they count for read
again under their row locks, and one statement writing every gate's new tally (a
compare-and-set on the tally read). When a shared transaction fails, each submission in it
is written again in a transaction of its own, so one's error is its own.

**A token is checked where its firings are recorded.** The firing routes take a token seen
live before from memory; the transaction that records its firings reads whether it is still
live, so a revoke stops its next request however the token was revoked.

**A key makes a retry safe.** A firing sent with an idempotency key records the key with
its answer, per issuer (the game token, or the plugin); the same key again answers that
answer and counts nothing, for ``firing_key_hours``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.access.tokens import live_or_refused
from pageant.db import firings as firing_rows
from pageant.db import phase_gates as gate_rows
from pageant.db import runlog
from pageant.db.engine import commit_with_next
from pageant.db.shared import Batch
from pageant.errors import Invalid, NotFound, PageantError
from pageant.gates import phase as gates
from pageant.gates.conditions import check_payload, evaluate, named_values
from pageant.gates.matching import firing_keys
from pageant.support.timefmt import parse_instant
from pageant.support.typedtext import read_words

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from pageant.plugins.registry import Registry
    from pageant.support.clock import Clock
    from pageant.support.settings import Settings

log = logging.getLogger("pageant.gates")

#: The most firings one batch request may carry.
MAX_BATCH = 500
#: The longest idempotency key, in characters (the column holds 200 of any UTF-8 text).
MAX_KEY = 200
#: How far ahead of the host's clock a firing's ``at`` may be: a game server's clock that
#: runs a little fast is not refused, and the firing is kept as happening now.
CLOCK_SKEW = timedelta(seconds=5)
#: How long a trigger seen with an open gate is taken to have one, without a read.
OPEN_SEEN_SECONDS = 1.0
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
    return read_words(
        pairs,
        types,
        name="KEY",
        where=lambda key, text, kind: f"payload.{key}: {text!r} is not a {kind}",
        refusal=f"the payload does not fit {trigger_id}'s variables",
    )


# ── one firing, checked ───────────────────────────────────────────────────────


def key_problem(key: Any) -> str | None:
    """What is wrong with an idempotency key, or None: a key is 1 to :data:`MAX_KEY`
    printable characters of text (ASCII or any other UTF-8). A header's bytes that are not
    UTF-8 reach here as surrogates (aiohttp keeps them so), as does a JSON ``"\\ud800"``;
    neither can be stored, and a control character breaks every log that shows the key."""
    if not isinstance(key, str):
        return f"expected a key of 1 to {MAX_KEY} characters; got {key!r}"
    if not 1 <= len(key) <= MAX_KEY:
        return f"expected 1 to {MAX_KEY} characters; got {len(key)}"
    for i, char in enumerate(key):
        if "\ud800" <= char <= "\udfff":
            return (
                f"is not UTF-8 text: character {i + 1} is U+{ord(char):04X} (a byte that is "
                "not UTF-8, or half of a surrogate pair); a key is printable UTF-8 text"
            )
        if not char.isprintable():
            return (
                f"character {i + 1} is U+{ord(char):04X}, which is not printable; a key is "
                "printable UTF-8 text"
            )
    return None


@dataclass(frozen=True)
class Firing:
    """A firing that passed its checks: what is recorded."""

    trigger_id: str
    payload: dict[str, Any]
    key: str | None = None
    #: When it happened in the game, as the game said (None: when it arrived).
    at: datetime | None = None
    #: The firing in words, from its trigger's ``sentence`` (contract 1.3), if it has one.
    sentence: str | None = None


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
    trigger does not declare or of the wrong type, a key that is not 1 to 200 printable
    characters of text (:func:`key_problem`), an ``at`` that is not an instant with an
    offset, is ahead of the host's clock (by more than :data:`CLOCK_SKEW`) or older than
    ``max_age_seconds``. Problems are named under ``path`` (the payload's under
    ``payload_path``, by default the same)."""
    trigger = registry.triggers.get(trigger_id) if isinstance(trigger_id, str) else None
    if trigger is None:
        raise NotFound(f"no such trigger: {trigger_id!r} (no installed plugin registers it)")
    checked, errors = check_payload(trigger, payload, payload_path or path)
    problem = None if key is None else key_problem(key)
    if problem:
        errors.append(f"{path}.id: {problem}")
    when = None
    if at is not None:
        when, problem = _instant(at, now, max_age_seconds)
        if problem:
            errors.append(f"{path}.at: {problem}")
    if errors:
        raise Invalid(f"the firing does not fit {trigger_id}", details=errors)
    return Firing(trigger_id, checked, key, when, trigger.say(checked))


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


@dataclass
class CheckedBatch:
    """A batch of firings checked item by item (:meth:`Firings.check_batch`): the firings
    that fit, the indexes of their items, and each refused item's answer (None where the
    item fits, until its firing is recorded)."""

    answers: list[Answer | None]
    firings: list[Firing] = field(default_factory=list)
    kept: list[int] = field(default_factory=list)


# ── recording ─────────────────────────────────────────────────────────────────


#: One submission to record: its firings, whose keys they are kept among, who fired.
Submission = tuple[Sequence[Firing], str | None, str | None]


@dataclass
class _Entry:
    """A firing to judge against the open gates: where its answer goes, who fired it."""

    firing: Firing
    actor: str | None
    at: tuple[int, int]


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
    (answers,) = await record_all(conn, [(firings, issuer, actor)], now=now, batch=batch)
    return answers


async def record_all(
    conn: AsyncConnection,
    submissions: Sequence[Submission],
    *,
    now: datetime,
    batch: Batch | None = None,
) -> list[list[Answer]]:
    """Record several submissions in ``conn``, as if one after the other, set-wise: one read
    of the open gates a trigger, one locking read of the gates they count for, one statement
    counting into all of them, one note of each trigger's last firing. Answers each
    submission's answers. The log lines are kept for ``batch``'s one insert when given."""
    answers: list[list[Answer | None]] = [[None] * len(firings) for firings, _, _ in submissions]
    copies: dict[tuple[int, int], tuple[int, int]] = {}
    claimed: dict[tuple[int, int], int] = {}
    first: dict[tuple[str, str], tuple[int, int]] = {}
    todo: dict[str, list[_Entry]] = {}
    for s, (firings, issuer, actor) in enumerate(submissions):
        keyed = [f.key for f in firings if f.key is not None] if issuer is not None else []
        known = await firing_rows.answers(conn, issuer, keyed) if issuer is not None else {}
        for i, firing in enumerate(firings):
            if firing.key is not None and issuer is not None:
                if (issuer, firing.key) in first:
                    copies[(s, i)] = first[(issuer, firing.key)]
                    continue
                if firing.key in known:
                    answers[s][i] = _replayed(known[firing.key])
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
                    answers[s][i] = _replayed(again.get(firing.key))
                    continue
                first[(issuer, firing.key)] = (s, i)
                claimed[(s, i)] = key_id
            todo.setdefault(firing.trigger_id, []).append(_Entry(firing, actor, (s, i)))
    for trigger_id, entries in todo.items():
        keys = sorted({key for e in entries for key in firing_keys(e.firing.payload)})
        open_gates = [row._mapping for row in await gate_rows.open_on_gates(conn, trigger_id, keys)]
        for entry, answer in zip(
            entries, await _judge(conn, open_gates, entries, now=now, batch=batch), strict=True
        ):
            s, i = entry.at
            answers[s][i] = answer
        await firing_rows.note_last_firing(conn, trigger_id, now, entries[-1].firing.payload)
    await firing_rows.keep_answers(
        conn, [(key_id, answers[s][i] or {}) for (s, i), key_id in claimed.items()]
    )
    for (s, i), (fs, fi) in copies.items():
        answers[s][i] = answers[fs][fi]
    return [[answer or _replayed(None) for answer in row] for row in answers]


def _replayed(answer: Any) -> Answer:
    if isinstance(answer, dict):
        return dict(answer)
    return {"gates_matched": 0, "gates_closed": 0}


async def _judge(
    conn: AsyncConnection,
    open_gates: Sequence[gates.Gate],
    entries: Sequence[_Entry],
    *,
    now: datetime,
    batch: Batch | None,
) -> list[Answer]:
    """Count each firing, in order, for each gate it matches; answers one
    ``{gates_matched, gates_closed}`` a firing. The gates counted for are read again under
    their locks, counted in memory and written in one statement; a gate that closed before
    a firing reached it counts nothing for it."""
    by_key: dict[str, list[gates.Gate]] = {}
    for gate in open_gates:
        by_key.setdefault(gate["match_key"], []).append(gate)
    matches: list[list[int]] = []
    for entry in entries:
        payload = entry.firing.payload
        found = {
            gate["id"]
            for key in firing_keys(payload)
            for gate in by_key.get(key, ())
            if evaluate(gate["condition"], payload)
        }
        matches.append(sorted(found))
    counted_for = sorted({i for m in matches for i in m})
    locked: Mapping[int, gates.Gate]
    if conn.dialect.name == "sqlite":
        # The writer's transaction began IMMEDIATE: no one else has written since the read.
        read = {gate["id"]: gate for gate in open_gates}
        locked = {gate_id: read[gate_id] for gate_id in counted_for}
    else:
        locked = await gate_rows.lock_gates(conn, counted_for)
    state = {gate_id: dict(row) for gate_id, row in locked.items()}
    answers = []
    for entry, gate_ids in zip(entries, matches, strict=True):
        matched = closed = 0
        for gate_id in gate_ids:
            counted = state.get(gate_id)
            if counted is None or not _still_open(counted):
                continue  # closed (or gone) before this firing: nothing counted
            counted["tally"] += 1
            counted["last_event_at"] = now
            counted["last_event_counted"] = True
            closes = counted["tally"] >= counted["needed"]
            if closes:
                counted["satisfied_at"], counted["satisfied_by"] = now, "tally"
            await _log_count(conn, counted, entry, closes=closes, now=now, batch=batch)
            matched += 1
            closed += closes
        answers.append({"gates_matched": matched, "gates_closed": closed})
    counts = [
        {
            "gate_id": gate_id,
            "was": locked[gate_id]["tally"],
            "new_tally": counted["tally"],
            "closed_at": counted["satisfied_at"],
            "closed_by": counted["satisfied_by"],
            "counted_at": now,
        }
        for gate_id, counted in state.items()
        if counted["tally"] != locked[gate_id]["tally"]
    ]
    if await gate_rows.count_firings(conn, counts) != len(counts):
        raise RuntimeError("a gate changed under its lock; the firings are not recorded")
    return answers


def _still_open(gate: dict[str, Any]) -> bool:
    return gate["satisfied_at"] is None and gate["tally"] < gate["needed"]


async def _log_count(
    conn: AsyncConnection,
    gate: dict[str, Any],
    entry: _Entry,
    *,
    closes: bool,
    now: datetime,
    batch: Batch | None,
) -> None:
    """The log lines of one counted firing: what it matched and the tally it made, and the
    gate's close when it closed it."""
    firing = entry.firing
    # The payload is kept as the trigger declared it (the host checked it against the
    # trigger's variables before it got here): the firing's sentence names who did what.
    # A line a counted firing is the operator's at DEBUG; INFO has one a transaction
    # (:func:`_announce_counts`) and each gate's close.
    await runlog.condition_evaluated(
        conn,
        gate,
        at=now,
        condition=gates.condition_text(gate),
        values=named_values(gate["condition"], firing.payload),
        fired_at=firing.at,
        key=firing.key,
        sentence=firing.sentence,
        payload=firing.payload if isinstance(firing.payload, dict) else None,
        actor=entry.actor,
        batch=batch,
        level=logging.DEBUG,
    )
    if closes:
        await gates.log_closed(conn, gate, now=now, actor=entry.actor, batch=batch)


# ── the group commit ──────────────────────────────────────────────────────────


@dataclass
class _Submission:
    firings: list[Firing]
    issuer: str | None
    actor: str | None
    #: The API token that sent them, checked live in the transaction (None: a plugin).
    token_id: int | None
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
        #: When each trigger was last seen with an open gate (monotonic).
        self._open_seen: dict[str, float] = {}
        #: The triggers asked of the next shared read of open gates, the answer its askers
        #: wait for, and the task reading (see :meth:`_read_shared`).
        self._asked: set[str] = set()
        self._answer: asyncio.Future[set[str]] | None = None
        self._reader: asyncio.Task[None] | None = None

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

    def check_batch(self, items: Any, check: Callable[[str], None] | None = None) -> CheckedBatch:
        """Check a batch of firings, ``[{"trigger", "payload", "id"?, "at"?}, ...]``, each
        item by itself: an item that does not fit is answered with its own :func:`refusal`
        (``body[i]`` named in it) and does not sink the others. ``check`` is asked about each
        item's trigger (who may fire it, :mod:`pageant.gates.firers`); what it raises is that
        item's answer. Raises :class:`~pageant.errors.Invalid` when ``items`` is not a list
        of 1 to :data:`MAX_BATCH` items."""
        if not isinstance(items, list) or not 1 <= len(items) <= MAX_BATCH:
            raise Invalid(
                f"expected a list of 1 to {MAX_BATCH} firings",
                details=[f"body: a list of {{trigger, payload, id?, at?}}, at most {MAX_BATCH}"],
            )
        checked = CheckedBatch(answers=[None] * len(items))
        for i, item in enumerate(items):
            path = f"body[{i}]"
            try:
                if not isinstance(item, dict):
                    raise Invalid("a firing is an object", details=[f"{path}: expected an object"])
                unknown = sorted(set(item) - {"trigger", "payload", "id", "at"})
                if unknown:
                    raise Invalid(
                        "unknown keys in a firing",
                        details=[
                            f"{path}.{name}: unknown key; expected trigger, payload, id, at"
                            for name in unknown
                        ],
                    )
                if check is not None and isinstance(item.get("trigger"), str):
                    check(item["trigger"])
                firing = self.check(
                    item.get("trigger"),
                    item.get("payload", {}),
                    key=item.get("id"),
                    at=item.get("at"),
                    path=path,
                    payload_path=f"{path}.payload",
                )
            except PageantError as refused:
                checked.answers[i] = refusal(refused)
                continue
            checked.firings.append(firing)
            checked.kept.append(i)
        return checked

    async def fire(
        self,
        firings: Sequence[Firing],
        *,
        issuer: str | None,
        actor: str | None,
        token_id: int | None = None,
    ) -> list[Answer]:
        """Record checked ``firings`` (one transaction, shared with whatever arrives at the
        same time); answers one ``{gates_matched, gates_closed}`` each, once committed.

        The firings of an API token (``token_id``) are recorded only while the token is
        live: it is read again in the transaction that records them (or in the read that
        finds no gate to count for), and a revoked or expired token's firings raise
        :class:`~pageant.errors.Unauthenticated`, recording nothing."""
        firings = list(firings)
        if not firings:
            return []
        if not any(f.key for f in firings) and not await self._any_open(firings, token_id):
            # Most firings concern no gate (core's lifecycle fires on every transition): a
            # read tells, and the writer's lock is left alone. A gate committed after this
            # look misses the firing, as one committed after the write's read would.
            return [{"gates_matched": 0, "gates_closed": 0} for _ in firings]
        future: asyncio.Future[list[Answer]] = asyncio.get_running_loop().create_future()
        self._waiting.append(_Submission(firings, issuer, actor, token_id, future))
        if self._drain_task is None or self._drain_task.done():
            self._drain_task = asyncio.create_task(self._drain())
        # Shielded: a caller that gives up (a client that hung up) does not cancel a
        # transaction other callers' firings share.
        answers = await asyncio.shield(future)
        if any(answer.get("gates_closed") for answer in answers):
            self._wake()  # a gate's run moves on
        return answers

    async def _any_open(self, firings: list[Firing], token_id: int | None) -> bool:
        """Whether an open gate may wait on one of the firings' triggers
        (:meth:`open_among`); the token is checked live in the same read."""
        return bool(await self.open_among({f.trigger_id for f in firings}, token_id=token_id))

    async def open_among(self, triggers: Iterable[str], *, token_id: int | None = None) -> set[str]:
        """Which of ``triggers`` an open gate may wait on. A trigger seen with an open gate
        in the last :data:`OPEN_SEEN_SECONDS` is taken to have one still, without a read
        (the firing's transaction reads its gates anyway, and at worst takes the writer's
        lock for nothing); the others are read together, in one statement, which callers
        asking at the same moment share (:meth:`_read_shared`). A ``token_id`` is
        checked live in a read of its own (:class:`~pageant.errors.Unauthenticated` when
        it is not).

        A gate committed after this look misses the firing, as one committed after the
        write's read would. Core's lifecycle asks before it reads a run for a payload."""
        seen = time.monotonic()
        wanted = set(triggers)
        known = {
            t for t in wanted if seen - self._open_seen.get(t, float("-inf")) < OPEN_SEEN_SECONDS
        }
        unknown = sorted(wanted - known)
        if unknown and token_id is None:
            found = await self._read_shared(unknown)
        elif unknown:
            async with self._db.connect() as conn:
                await self._refuse_dead_tokens(conn, [token_id])
                found = await gate_rows.open_on(conn, unknown)
        else:
            found = set()
        for trigger_id in found:
            self._open_seen[trigger_id] = seen
        return known | found

    async def _read_shared(self, triggers: Sequence[str]) -> set[str]:
        """Which of ``triggers`` an open gate waits on, from a read that began after this
        call: callers that ask while a read is under way share the next one (so a thousand
        runs ending at once cost a few reads of the open gates, not a thousand), and none is
        answered from a read that began before it asked."""
        self._asked.update(triggers)
        if self._answer is None:
            self._answer = asyncio.get_running_loop().create_future()
        answer = self._answer
        if self._reader is None or self._reader.done():
            self._reader = asyncio.get_running_loop().create_task(
                self._read_open(), name="pageant-open-gates"
            )
        # Shielded: a caller that gives up does not cancel a read others share.
        return await asyncio.shield(answer) & set(triggers)

    async def _read_open(self) -> None:
        while self._answer is not None:
            answer, asked = self._answer, sorted(self._asked)
            self._answer, self._asked = None, set()
            try:
                async with self._db.connect() as conn:
                    found = await gate_rows.open_on(conn, asked)
            except Exception as exc:
                answer.set_exception(exc)
                answer.exception()  # each asker raises it; none left means none to tell
                continue
            answer.set_result(found)

    async def _refuse_dead_tokens(
        self, conn: AsyncConnection, token_ids: Sequence[int | None]
    ) -> dict[int, PageantError]:
        """The refusal of each of ``token_ids`` that is no longer live, by id; raised at
        once when there is one."""
        ids = [i for i in token_ids if i is not None]
        refused: dict[int, PageantError] = dict(await live_or_refused(conn, ids, self._clock.now()))
        if len(token_ids) == 1 and refused:
            raise next(iter(refused.values()))
        return refused

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
                refused = await self._refuse_dead_tokens(conn, [s.token_id for s in group])
                live = [s for s in group if s.token_id not in refused]
                await self._prune(conn, now)
                # The log lines of the whole group are inserted in one statement, the
                # transaction's last: on SQLite it commits in the same turn.
                batch = Batch(conn)
                results = await record_all(
                    conn, [(s.firings, s.issuer, s.actor) for s in live], now=now, batch=batch
                )
                commit_with_next(conn)
                await runlog.flush(batch)
        except Exception as exc:
            if len(group) > 1:
                log.warning("a shared firing transaction failed; each submission alone: %r", exc)
                for submission in group:
                    await self._commit([submission])
                return
            if not group[0].answer.done():
                group[0].answer.set_exception(exc)
            return
        for submission in group:
            if submission.token_id in refused and not submission.answer.done():
                submission.answer.set_exception(refused[submission.token_id])
        for submission, result in zip(live, results, strict=True):
            if not submission.answer.done():
                submission.answer.set_result(result)
        _announce_counts(results)

    async def _prune(self, conn: AsyncConnection, now: datetime) -> None:
        if time.monotonic() - self._pruned_at < _PRUNE_EVERY_SECONDS:
            return
        self._pruned_at = time.monotonic()
        hours = self._settings.firing_key_hours
        await firing_rows.prune_keys(conn, now - timedelta(hours=hours))


def _announce_counts(results: Sequence[Sequence[Answer]]) -> None:
    """One INFO line for a committed transaction that counted firings into gates: how many
    firings it recorded, the counts they made and the gates they closed (each close has its
    own line too; each count its own at DEBUG)."""
    counted = sum(answer.get("gates_matched", 0) for answers in results for answer in answers)
    if not counted or not log.isEnabledFor(logging.INFO):
        return
    fired = sum(len(answers) for answers in results)
    closed = sum(answer.get("gates_closed", 0) for answers in results for answer in answers)
    log.info(
        "firings recorded: %d, counted %d times into gates, %d closed",
        fired,
        counted,
        closed,
        extra={"event": "firings.recorded", "firings": fired, "counted": counted, "closed": closed},
    )
