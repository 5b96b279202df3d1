"""The ledger's engine half: record before confirm, give back, and reconcile.

* **Record before confirm**: before a ``change`` or ``irreversible`` action is performed, a
  placeholder row (kind ``@step``, ref = the step's idempotency key) is written in the
  claim's transaction; the answer's ``resources`` become ``confirmed`` rows and the
  placeholder is resolved. A retry or a re-dispatch after a crash finds its own placeholder
  and reuses it; an answer that never comes leaves it, and cleanup calls ``revert`` with the
  key and no resources.
* **Cleanup** is one stage of the tick, after advance: every run with a holding row that
  can still be tried — of a run that has ended, or of a lease past its deadline — is
  selected from the rows themselves, and its rows are given back newest first, by a task of
  the run's own beside the tick. A failed revert counts one attempt; at
  ``revert_max_attempts`` the row is ``revert_failed``. ``cleanup_status`` is derived from
  the rows afterwards, never the other way round. A run whose rows wait for a plugin that
  is down is passed by, spending nothing, and says so (:mod:`pageant.ledger.held`): its
  ``waiting_on`` names the plugin, its health is ``degraded``, and it goes on by itself
  once the plugin is back.
* **A revert is final for its key** (contract 1.2): a step whose perform timed out is given
  back by reverting its key with no resources, and that ok is the plugin's word that nothing
  made under the key is, or will be, in the world. A reconcile afterwards could not add to
  it: it sees only the rows the ledger holds, at one moment. A plugin whose range admits an
  older contract (``^1.1``) never gave that word: its placeholder, reverted ok, is left
  ``revert_failed`` with the reason (:func:`pageant.plugins.notices.late_change_warning`)
  and the run's cleanup ends ``incomplete``, since a perform cut off may still land. An
  admin's cleanup (the rescue), asked for once the world was checked, reverts the key again
  and takes the plugin's ok.
* **Reconcile** asks a plugin which of the rows it holds are still in the world.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Coroutine, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pageant.db import resources, runlog, runs
from pageant.db.errors import is_retryable_conflict
from pageant.hookspecs import ActionContext, Resource, RunInfo
from pageant.hookspecs.models import WORLD_CHANGING_RISKS, changes_world
from pageant.ledger.held import clear_held, note_held, to_note
from pageant.ledger.state import released, settle
from pageant.plugins.calls import PluginSlots, run_with_envelope
from pageant.plugins.loader import PluginManager
from pageant.plugins.registry import Registry
from pageant.support.settings import Settings

if TYPE_CHECKING:
    from pageant.hookspecs import Action
    from pageant.support.clock import Clock

log = logging.getLogger("pageant.engine")

#: How long one revert, restore or reconcile may take.
REVERT_BUDGET_MS = 10_000


class CleanupRunner(Protocol):
    """What the cleanup stage uses of the engine attached to the host
    (:class:`pageant.hosting.EngineSeam`)."""

    @property
    def cleaning(self) -> Mapping[int, asyncio.Task[Any]]: ...
    def give_back_beside(self, run_id: int, work: Coroutine[Any, Any, str]) -> None: ...


class CleanupHost(Protocol):
    """What the ledger's engine half uses of the host (:class:`pageant.hosting.Host`), which
    stands above the ledger and hands itself down."""

    settings: Settings
    clock: Clock
    registry: Registry
    plugins: PluginManager
    plugin_slots: PluginSlots

    @property
    def db(self) -> AsyncEngine: ...
    def warn_once(self, key: str, message: str, *args: Any) -> bool: ...
    def plugin_unavailable(self, owner: str) -> str | None: ...
    def unavailable_owners(self) -> tuple[str, ...]: ...
    @property
    def engine(self) -> CleanupRunner | None: ...


def owner_of(action_id: str) -> str:
    return action_id.split(".", 1)[0]


def recorded(action: Action | None) -> bool:
    return action is not None and changes_world(action.risk)


def unrecorded_resources(host: CleanupHost, action: Action) -> None:
    """A ``notify`` or ``inspect`` action answered ``resources``: the ledger records only
    what ``change`` and ``irreversible`` actions make, so they are not given back at the
    run's end. Said once per action and host, naming the plugin's action and the rule."""
    host.warn_once(
        f"unrecorded-resources:{action.id}",
        "%s (risk %s) answered resources; only %s actions' resources are recorded and given "
        "back at the run's end, so these are not: declare the action's risk as change (with "
        "a revert) or stop reporting them",
        action.id,
        action.risk,
        " and ".join(WORLD_CHANGING_RISKS),
    )


def _keyed(step: Mapping[str, Any], action: Action) -> dict[str, Any]:
    """Where a step's ledger rows are found: its run, itself, its action's owner and its
    idempotency key."""
    return {
        "run_id": step["run_id"],
        "step_id": step["id"],
        "owner": owner_of(action.id),
        "key": step["idempotency_key"],
        "action": action.id,
    }


async def record_placeholder(
    conn: AsyncConnection, step: Mapping[str, Any], action: Action, *, now: datetime
) -> None:
    """The placeholder for a dispatch about to happen (in the claim's transaction)."""
    new = await resources.record_placeholder(conn, **_keyed(step, action), now=now)
    if new:
        await runlog.resource_placeholder(conn, step, at=now, action=action.id)
        await resources.set_cleanup_status(conn, step["run_id"], "pending")


async def confirm(
    conn: AsyncConnection,
    step: Mapping[str, Any],
    action: Action,
    reported: tuple[Resource, ...],
    *,
    now: datetime,
) -> None:
    """The answer came: its resources are confirmed and the placeholder resolved."""
    entries = await resources.confirm(conn, **_keyed(step, action), resources=reported, now=now)
    if entries:
        await runlog.resource_confirmed(conn, step, at=now, action=action.id, resources=entries)
    await settle(conn, step["run_id"], now=now)


async def leave_in_world(conn: AsyncConnection, run_id: int, *, now: datetime) -> None:
    """``cancel {cleanup: false}``: what the run holds stays in the world. Its rows are
    left as they are (no attempt is spent on them: nothing tried them) and the run is
    ``incomplete`` when it holds anything."""
    counts = await resources.counts_of_run(conn, run_id)
    if sum(counts.get(s, 0) for s in ("pending", "confirmed", "revert_failed")):
        if await resources.set_cleanup_status(conn, run_id, "incomplete"):
            await runlog.resource_cleanup(
                conn, run_id, at=now, to="incomplete", because="cancelled without cleanup"
            )


# ── cleanup ──────────────────────────────────────────────────────────────────


#: How many ended runs one look for a ``cleanup_status`` never settled reads at a time.
UNSETTLED_BATCH = 200

#: The engines whose cleanup stage has settled what a stopped host left (the stage's own
#: state: once per engine, and an engine is one start of its host).
_settled: weakref.WeakSet[Any] = weakref.WeakSet()


async def cleanup(host: CleanupHost, now: datetime) -> None:
    """The tick's cleanup stage: give back what ended runs and expired leases hold.

    Each run is given back by a task of its own beside the tick (``engine.give_back_beside``),
    and a run already being given back is not selected again, so a plugin whose revert
    hangs holds its own runs' cleanup and no stage, tick or other plugin's run. The first
    stage after a start also settles the runs a stopped host left ``pending`` with nothing
    left to try (:func:`settle_unsettled`).
    """
    engine = host.engine
    if engine is None:
        raise RuntimeError("the cleanup stage runs under an engine")
    if engine not in _settled:
        await settle_unsettled(host, now)
        _settled.add(engine)
    down = host.unavailable_owners()
    held: list[tuple[int, dict[str, Any]]] = []
    async with host.db.connect() as conn:
        run_ids = await resources.cleanup_candidates(
            conn,
            now,
            limit=host.settings.runs_per_tick,
            skip_owners=down,
            skip_runs=tuple(engine.cleaning),
        )
        if down:
            held = await to_note(
                conn, down, host.plugin_unavailable, limit=host.settings.runs_per_tick
            )
    if held:
        # What waits for a plugin that is down says so, once (held.py).
        async with host.db.begin() as conn:
            for run_id, waiting in held:
                await note_held(conn, run_id, waiting, now=now)
    for run_id in run_ids:
        engine.give_back_beside(run_id, give_back(host, run_id, now=now))


async def settle_unsettled(host: CleanupHost, now: datetime) -> int:
    """Derive ``cleanup_status`` again for every ended run that still says ``pending`` with
    no row left to try: the host stopped between the last ``resource.reverted`` and the
    status written from it, and the stage, which selects from holding rows, would never
    look at such a run again. Answers how many runs it settled."""
    after, settled = 0, 0
    while True:
        async with host.db.connect() as conn:
            run_ids = await resources.unsettled_ended_runs(conn, after=after, limit=UNSETTLED_BATCH)
        for run_id in run_ids:
            async with host.db.begin() as conn:
                if await settle(conn, run_id, now=now) != "pending":
                    settled += 1
        if len(run_ids) < UNSETTLED_BATCH:
            break
        after = run_ids[-1]
    if settled:
        log.info(
            "settled the cleanup status of %d ended run(s) a stopped host left pending", settled
        )
    return settled


async def give_back(
    host: CleanupHost, run_id: int, *, now: datetime, rescue: bool = False, actor: str | None = None
) -> str:
    """Try to give back what ``run_id`` holds, newest first; answers its cleanup_status.

    The stage tries the rows of an ended run (and a lease past its deadline on a live
    one). ``rescue`` is an admin's "try again": ``revert_failed`` rows are tried as well,
    and a run left as it was by ``cancel {cleanup: false}`` is given back now.
    """
    async with host.db.connect() as conn:
        run = await runs.get_run(conn, run_id)
        rows = await resources.tryable_of_run(conn, run_id, include_failed=rescue)
    if run is None:
        return "not_required"
    ended = run.status in resources.ENDED_RUN_STATUSES
    left_alone = run.cleanup_status == "incomplete" and not rescue
    info = RunInfo(id=run.id, scope=run.scope, definition_id=run.definition_id, slug=run.slug)
    unsure: list[str] = []
    for row in rows:
        due = row.lease_until is not None and row.lease_until <= now
        if not due and (not ended or left_alone):
            continue
        if host.plugin_unavailable(row.owner) is not None:
            continue  # waits for the plugin, spending nothing
        try:
            if (row.payload or {}).get("lease"):
                await _restore(host, row, info, now=now, max_attempts=_max(host, rescue, row))
            else:
                why = await _revert(
                    host, row, info, now=now, max_attempts=_max(host, rescue, row), rescue=rescue
                )
                if why is not None and why not in unsure:
                    unsure.append(why)
        except Exception as exc:
            if is_retryable_conflict(exc):
                raise  # the whole give-back is tried again; every write is a compare-and-set
            log.exception("could not give back resource %s of run %s", row.id, run_id)
    async with host.db.begin() as conn:
        settled_at = host.clock.now()
        status = await settle(
            conn, run_id, now=settled_at, rescue=rescue, because="; ".join(unsure) or None
        )
        if ended and status != "pending":
            await clear_held(conn, run_id, now=settled_at)
        if actor is not None:
            await runlog.control_cleanup(conn, run_id, at=now, result=status, actor=actor)
    return status


def _max(host: CleanupHost, rescue: bool, row: Any) -> int:
    # A rescue's attempt is one more real attempt: a row already past the bound stays
    # revert_failed if it fails again; one still inside it keeps the rest of its tries.
    bound = host.settings.revert_max_attempts
    return max(bound, row.revert_attempts + 1) if rescue else bound


async def _fail(
    host: CleanupHost, row: Any, error: str, *, now: datetime, max_attempts: int
) -> None:
    async with host.db.begin() as conn:
        if await resources.revert_failed(
            conn, row.id, error=error, max_attempts=max_attempts, now=now
        ):
            await runlog.resource_revert_failed(
                conn, row, at=now, attempt=row.revert_attempts + 1, of=max_attempts, error=error
            )


async def _release(host: CleanupHost, row: Any, **kw: Any) -> None:
    async with host.db.begin() as conn:
        await released(conn, row, **kw)


async def _revert(
    host: CleanupHost, row: Any, info: RunInfo, *, now: datetime, max_attempts: int, rescue: bool
) -> str | None:
    """Revert one row; answers why the world cannot be called clean though the revert
    answered ok (a placeholder of a plugin that never promised a revert is final), or
    None."""
    action_id = (row.payload or {}).get("action", "")
    action = host.registry.actions.get(action_id)
    if action is None:
        return None  # its plugin is not loaded: the row waits for it, spending nothing
    if action.revert is None:
        async with host.db.begin() as conn:
            await resources.give_up(conn, row.id, error=f"{action_id} declares no revert", now=now)
        return None
    placeholder = row.kind == resources.PLACEHOLDER
    key = row.ref if placeholder else (row.idempotency_key or row.ref)
    detail = (row.payload or {}).get("detail") or {}
    context = ActionContext(
        params=dict(row.params or {}),
        idempotency_key=key,
        run=info,
        verify=False,
        deadline=now + timedelta(milliseconds=REVERT_BUDGET_MS),
        resources=() if placeholder else (Resource(kind=row.kind, ref=row.ref, detail=detail),),
    )
    async with host.plugin_slots.of(row.owner):
        envelope = await run_with_envelope(action.revert, context, timeout=REVERT_BUDGET_MS / 1000)
    now = host.clock.now()
    if not envelope.ok:
        error = envelope.error or "revert failed without an error message"
        await _fail(host, row, error, now=now, max_attempts=max_attempts)
        return None
    unsure = None if not placeholder or rescue else host.plugins.late_change_warning(row.owner)
    if unsure is not None:
        # What the perform was doing may still land after this ok: out there, as far as
        # anyone can tell, with nothing left to try but a person's look and their cleanup.
        async with host.db.begin() as conn:
            await resources.give_up(conn, row.id, error=unsure, now=now)
        return unsure
    await _release(host, row, to="reverted", now=now, attempted=True)
    return None


def lease_key(row: Any) -> str:
    """The idempotency key of the borrowing a lease row records: the ``core.lease`` step's,
    which its ``apply`` was given (a row whose step is gone keeps one of its own)."""
    return row.idempotency_key or f"lease-{row.id}"


async def _restore(
    host: CleanupHost, row: Any, info: RunInfo, *, now: datetime, max_attempts: int
) -> None:
    payload = dict(row.payload or {})
    lease = host.registry.leases.get(payload["lease"])
    if lease is None:
        return  # its plugin is not loaded: the row waits for it
    async with host.plugin_slots.of(row.owner):
        await _restore_lease(host, row, lease, payload, now=now, max_attempts=max_attempts)


async def _restore_lease(
    host: CleanupHost,
    row: Any,
    lease: Any,
    payload: dict[str, Any],
    *,
    now: datetime,
    max_attempts: int,
) -> None:
    target = payload["target"]
    try:
        # Bounded like a revert: a read or restore that hangs is a failed attempt.
        async with asyncio.timeout(REVERT_BUDGET_MS / 1000):
            current = await lease.read(target)
        if "baseline" not in payload:
            # Reserved, and the answer of its apply never recorded (the host died between).
            if current == payload.get("applied"):
                async with host.db.begin() as conn:
                    await resources.give_up(
                        conn,
                        row.id,
                        error=f"{payload['lease']} for {target} was applied but its baseline "
                        "was never recorded; it is left as it is",
                        now=now,
                    )
            else:
                await _release(host, row, to="reverted", now=now, attempted=False)
            return
        if current != payload.get("applied") and current == payload.get("baseline"):
            # The game put the baseline back itself (it honoured ``until``, or restarted):
            # given back, by the game, with nothing left for the host to call.
            await _release(
                host,
                row,
                to="reverted",
                now=now,
                attempted=False,
                payload={**payload, "found": current, "restored_by": "game"},
                detail={"by": "game"},
            )
            return
        if current != payload.get("applied"):
            await _release(
                host,
                row,
                to="drifted",
                now=now,
                attempted=False,
                payload={**payload, "found": current},
                detail={"found": current, "applied": payload.get("applied")},
            )
            return
        async with asyncio.timeout(REVERT_BUDGET_MS / 1000):
            await lease.restore_keyed(target, payload.get("baseline"), lease_key(row))
    except Exception as exc:
        await _fail(
            host,
            row,
            f"{type(exc).__name__}: {exc}",
            now=host.clock.now(),
            max_attempts=max_attempts,
        )
        return
    await _release(host, row, to="reverted", now=host.clock.now(), attempted=True)
