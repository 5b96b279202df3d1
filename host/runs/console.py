"""The run console: one function builds what a person sees of a run, and the run list and
start-now answer with the same run shape."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db import outcomes, resources, runlog, runs, steps
from pageant.db.definitions import Pinned
from pageant.db.rows import columns_of
from pageant.errors import NotFound
from pageant.gates import phase as gates
from pageant.ledger.held import held_by
from pageant.runs import quorum, requires, waiting
from pageant.runs.holding import NotifyHold, notify_hold
from pageant.runs.versions import phases_of
from pageant.states import RUN_ENDED, STEP_OPEN, WaitingReason
from pageant.switchboard.board import run_budget

if TYPE_CHECKING:
    from pageant.hosting import Host


def step_json(step: Any) -> dict[str, Any]:
    """One step as the console shows it (``parked``: running with no claim lease)."""
    return {
        "id": step["id"],
        "phase": step["phase"],
        "seq": step["seq"],
        "label": step["label"],
        "action": step["action"],
        "action_version": step["action_version"],
        "params": step["params"],
        "on_failure": step["on_failure"],
        "status": step["status"],
        "attempts": step["attempts"],
        "parked": step["status"] == "running" and step["lease_until"] is None,
        "due_at": step["due_at"],
        "last_error": step["last_error"],
        "note": step["note"],
        "spent": step["spent"],
        "started_at": step["started_at"],
        "finished_at": step["finished_at"],
    }


def log_json(line: Row) -> dict[str, Any]:
    return columns_of(line, ("id", "at", "kind", "phase", "step_id", "detail", "actor"))


def _run_json(row: Row, waiting_on: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "id": row.id,
        "definition_id": row.definition_id,
        "definition_slug": row.slug,
        "definition_title": row.title,
        "version_id": row.version_id,
        "version_number": row.version_number,
        "scope": row.scope,
        "params": dict(row.params or {}),
        "source": row.source,
        "status": row.status,
        "health": row.health,
        "cleanup_status": row.cleanup_status,
        "current_phase": row.current_phase,
        "scheduled_for": row.scheduled_for,
        "hold_until": row.hold_until,
        "last_error": row.last_error,
        "cancel_reason": row.cancel_reason,
        "concurrency_key": row.concurrency_key,
        "dst_adjusted": row.dst_adjusted,
        "moved_from": row.moved_from,
        "created_at": row.created_at,
        "started_at": row.started_at,
        "ended_at": row.ended_at,
        "waiting_on": waiting_on,
    }


async def pinned_spec(host: Host, conn: AsyncConnection, version_id: int) -> Pinned | None:
    """A pinned version, from the host's cache (a published version never changes)."""
    return await host.versions.get(conn, version_id)


async def _phase_of(
    conn: AsyncConnection, host: Host, row: Row, specs: dict[int, Any]
) -> dict[str, Any] | None:
    if row.version_id not in specs:
        found = await pinned_spec(host, conn, row.version_id)
        specs[row.version_id] = phases_of(found.spec) if found else None
    for phase in specs[row.version_id] or []:
        if phase["key"] == row.current_phase:
            return phase
    return None


async def _quorum(
    conn: AsyncConnection, host: Host, row: Row, now: datetime
) -> dict[str, Any] | None:
    """What a due scheduled run waits on by its event's ``start_when``, with the reading's
    last answer (the console never reads the game itself)."""
    found = await pinned_spec(host, conn, row.version_id)
    start_when = quorum.of_spec(found.spec) if found else None
    if start_when is None:
        return None
    run = dict(row._mapping)
    read = host.readings.last(str(start_when["reading"]), quorum.reading_params(start_when, run))
    since = row.waiting_since or now
    return quorum.waiting_note(start_when, host.registry, read, since=since)


async def _required(
    conn: AsyncConnection, host: Host, row: Row, now: datetime
) -> dict[str, Any] | None:
    # A run the engine held for its event's requirement: what it waits for now, read again.
    found = await pinned_spec(host, conn, row.version_id)
    requirement = requires.of_spec(found.spec if found else None)
    if requirement is None:
        return None
    decision = await requires.read_decision(conn, requirement, row._mapping, now)
    if decision.verdict is not requires.Verdict.HOLD:
        return None  # decided on the engine's next look
    return requires.waiting_on(decision, row._mapping, now)


async def _notify_hold(
    conn: AsyncConnection,
    host: Host,
    row: Row,
    phase_steps: Sequence[Any],
    specs: dict[int, Any],
    now: datetime,
) -> NotifyHold | None:
    open_steps = [st for st in phase_steps if st["status"] in STEP_OPEN]
    phase = await _phase_of(conn, host, row, specs) if open_steps else None
    if phase is None:
        return None
    step = min(open_steps, key=lambda st: st["seq"])
    state = {key: row._mapping[key] for key in ("waiting_reason", "waiting_since")}
    return notify_hold(host, step, phase, state, now)  # type: ignore[arg-type]  # a row's mapping carries the StepRow and RunState keys notify_hold reads


async def run_views(
    conn: AsyncConnection,
    host: Host,
    rows: Sequence[Row],
    *,
    now: datetime,
    run_steps: Sequence[Any] | None = None,
    specs: dict[int, Any] | None = None,
) -> list[dict[str, Any]]:
    """Each run row as JSON with its ``waiting_on`` derived from its rows at ``now``
    (``specs``: version id -> its phases, as far as the caller has read them)."""
    if run_steps is None:
        ids = [row.id for row in rows]
        fetched = await steps.steps_of_runs(conn, ids)
        run_steps = [st._mapping for st in fetched]
    by_run: dict[int, list[Any]] = defaultdict(list)
    for st in run_steps:
        by_run[st["run_id"]].append(st)
    specs = {} if specs is None else specs
    held = await resources.tryable_owners(
        conn,
        [row.id for row in rows if row.status in RUN_ENDED and row.cleanup_status == "pending"],
    )
    views = []
    for row in rows:
        phase_steps = [st for st in by_run[row.id] if st["phase"] == row.current_phase]
        holder = None
        if row.status == "scheduled" and row.scheduled_for <= now and row.concurrency_key:
            found = await runs.concurrency_holder(conn, row.concurrency_key, row.id)
            holder = found._mapping if found is not None else None
        required = None
        if row.status == "scheduled" and row.waiting_reason == WaitingReason.REQUIRES:
            required = await _required(conn, host, row, now)
        gate = None
        settled = all(st["status"] not in STEP_OPEN for st in phase_steps)
        if row.status == "running" and settled:
            phase = await _phase_of(conn, host, row, specs)
            if phase is not None:
                gate = await gates.waiting(conn, run_id=row.id, phase=phase, now=now)
        unavailable = host.unavailable
        if row.status == "running" and row.waiting_reason == "unavailable":
            # A notify step held while its plugin is down: the same sentence the engine noted.
            hold = await _notify_hold(conn, host, row, phase_steps, specs, now)
            if hold is not None and hold.waits:
                unavailable = hold.reason
        waits_quorum = None
        if row.status == "scheduled" and row.waiting_reason == WaitingReason.QUORUM:
            waits_quorum = await _quorum(conn, host, row, now)
        waiting_on = waiting.describe(
            row._mapping,
            phase_steps,
            now=now,
            max_attempts=host.settings.max_attempts,
            holder=holder,
            required=required,
            gate=gate,
            unavailable=unavailable,
            cleanup_held=held_by(held[row.id], host.plugin_unavailable) if row.id in held else None,
            quorum=waits_quorum,
        )
        views.append(_run_json(row, waiting_on))
    return views


#: What the console shows of a ledger row.
RESOURCE_FIELDS = (
    "id",
    "step_id",
    "owner",
    "kind",
    "ref",
    "status",
    "revert_attempts",
    "last_error",
    "lease_until",
    "payload",
)


def resource_json(row: Any) -> dict[str, Any]:
    """One ledger row as the console shows it."""
    return columns_of(row, RESOURCE_FIELDS)


def _named(row: Any) -> str:
    if row.kind == resources.PLACEHOLDER:
        return f"what step {row.step_id} may have done (its answer never came)"
    payload = row.payload or {}
    if payload.get("lease"):
        return f"{payload['lease']} for {payload.get('target', row.ref)}"
    return f"{row.kind} {row.ref}"


def cleanup_summary(rows: Sequence[Any], *, ended: bool) -> str:
    """The one line a person reads about what the run did to the world."""
    if not rows:
        return "This run has recorded nothing in the world."
    out = [r for r in rows if r.status in ("pending", "confirmed", "revert_failed")]
    drifted = [r for r in rows if r.status == "drifted"]
    orphaned = [r for r in rows if r.status == "orphaned"]
    parts: list[str] = []
    if not out:
        parts.append("Everything this run created or borrowed has been given back")
    elif not ended:
        parts.append(f"{len(out)} held while the run goes on")
    else:
        parts.append(
            f"{len(out)} of these {'is' if len(out) == 1 else 'are'} still out there"
            + (
                " (nothing is left to try; an admin can try cleanup again)"
                if all(r.status == "revert_failed" for r in out)
                or not any(r.status in ("pending", "confirmed") for r in out)
                else ""
            )
        )
    for row in drifted:
        parts.append(f"someone else changed {_named(row)}; it was left alone")
    for row in rows:
        if row.status == "reverted" and (row.payload or {}).get("restored_by") == "game":
            parts.append(f"the game had already put back {_named(row)} itself")
    if orphaned:
        parts.append(f"{len(orphaned)} no longer in the game (orphaned), never reverted")
    return "; ".join(parts)


async def run_view(host: Host, run_id: int) -> dict[str, Any]:
    """One run in the shape the run list and start-now answer with."""
    async with host.db.connect() as conn:
        row = await runs.get_run(conn, run_id)
        if row is None:
            raise NotFound(f"no such run: {run_id}")
        return (await run_views(conn, host, [row], now=host.clock.now()))[0]


async def run_views_of(host: Host, run_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    """The runs of ``run_ids`` in the shape :func:`run_view` answers, by id (read together:
    a batch's runs cost one read, not one each)."""
    async with host.db.connect() as conn:
        rows = await runs.get_runs(conn, run_ids)
        views = await run_views(conn, host, list(rows.values()), now=host.clock.now())
    return {view["id"]: view for view in views}


async def runs_page(
    host: Host, definition_id: int, *, after_id: int, limit: int
) -> tuple[list[dict[str, Any]], list[int]]:
    """An event's runs in id order after ``after_id``: the views of up to ``limit`` of them,
    and the ids of up to ``limit + 1`` (the one past the page tells the pager there is more)."""
    async with host.db.connect() as conn:
        rows = await runs.runs_of_definition(
            conn, definition_id, after_id=after_id, limit=limit + 1
        )
        items = await run_views(conn, host, rows[:limit], now=host.clock.now())
    return items, [row.id for row in rows]


async def step_view(host: Host, step_id: int) -> dict[str, Any]:
    """One step as the console shows it."""
    async with host.db.connect() as conn:
        step = await steps.get_step(conn, step_id)
    if step is None:
        raise NotFound(f"no such step: {step_id}")
    return step_json(step._mapping)


async def console(host: Host, run_id: int, *, log_tail: int | None = None) -> dict[str, Any]:
    """The run console: ``{run, phases, steps, gate, participants, results, budget,
    resources, cleanup_summary, log}`` — the run with why it is waiting, its pinned
    version's phases (key and label), every step, the current
    phase's gate, who took part, how its phases ended, its budget meters, what it recorded
    in the world (the ledger) with the one line a person reads about it, and the whole log
    in order.

    With ``log_tail``, ``log`` is only the newest ``log_tail`` lines (oldest first) and
    ``log_total`` says how many there are: the web console's page, refreshed every two
    seconds, shows a tail and should not read a long run's whole story to do so.

    Read within the host's read budget (:attr:`pageant.hosting.Host.console_reads`), and built
    afresh every time: what it says moves with the clock ("seen 1 of 2 since 12:00 UTC
    (6 min)") and with rows beyond the run's own (the trigger's last firing, another run
    holding its key, a plugin's availability).
    """
    async with host.console_reads:
        now = host.clock.now()
        async with host.db.connect() as conn:
            row = await runs.get_run(conn, run_id)
            if row is None:
                raise NotFound(f"no such run: {run_id}")
            return await _build(conn, host, row, now=now, log_tail=log_tail)


async def _build(
    conn: AsyncConnection, host: Host, row: Row, *, now: datetime, log_tail: int | None
) -> dict[str, Any]:
    run_id = row.id
    all_steps = [st._mapping for st in await steps.steps_of_run(conn, run_id)]
    if log_tail is None:
        lines = await runlog.lines_of(conn, run_id)
        total = len(lines)
    else:
        lines, total = await runlog.tail_of(conn, run_id, log_tail)
    gate = None
    specs: dict[int, Any] = {}
    if row.current_phase is not None:
        phase = await _phase_of(conn, host, row, specs)
        if phase is not None:
            gate = await gates.console_gate(conn, run_id=run_id, phase=phase, now=now)
    view = (await run_views(conn, host, [row], now=now, run_steps=all_steps, specs=specs))[0]
    if row.version_id not in specs:
        found = await pinned_spec(host, conn, row.version_id)
        specs[row.version_id] = phases_of(found.spec) if found else None
    phases = [
        {"key": p["key"], "label": p.get("label") or p["key"]}
        for p in specs.get(row.version_id) or []
    ]
    people = await outcomes.participants_of(conn, run_id)
    tables = await outcomes.results_of(conn, run_id)
    budget = await run_budget(conn, run_id, host.registry)
    ledger = await resources.resources_of_run(conn, run_id)
    ended = row.status in RUN_ENDED
    return {
        "run": view,
        "phases": phases,
        "steps": [step_json(st) for st in all_steps],
        "gate": gate,
        "participants": [
            {"name": who.name, "role": who.role, "step_id": who.step_id} for who in people
        ],
        "results": [
            {"phase": t.phase, "step_id": t.step_id, "title": t.title, "entries": t.entries}
            for t in tables
        ],
        "budget": budget,
        "resources": [resource_json(r) for r in ledger],
        "cleanup_summary": cleanup_summary(ledger, ended=ended),
        "log": [log_json(line) for line in lines],
    } | ({} if log_tail is None else {"log_total": total})


async def runs_by_status(host: Host) -> dict[str, int]:
    """How many runs the database holds in each status, every status named (the metrics)."""
    async with host.db.connect() as conn:
        counts = await runs.count_by_status(conn)
        await conn.rollback()
    return counts
