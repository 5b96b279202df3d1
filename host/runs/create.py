"""Creating runs: start-now, and the functions the schedule expansion shares with it.

A run pins a published version and has its first phase's steps materialised when it is
created, with its countdown's rungs (:mod:`pageant.runs.countdown`). Both inserts are
idempotent through unique keys — the occurrence key (definition, scope, scheduled_for) for
the run and (run, phase, seq) for each step — so two writers can never make two runs of one
occurrence or two rows of one step.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db import budgets, definitions, runlog, runs, steps
from pageant.db.shared import Batch
from pageant.db.steps import new_idempotency_keys
from pageant.errors import Conflict, Invalid, NotFound, PageantError
from pageant.runs import countdown, waiting
from pageant.runs import params as run_params
from pageant.runs.options import check_run_values, takes_option_values
from pageant.states import Overlap
from pageant.switchboard.board import pin_run_budget

if TYPE_CHECKING:
    from pageant.hosting import Host
    from pageant.plugins.registry import Registry

#: For an action nobody registers any more: stop and let a person look.
ON_FAILURE_UNKNOWN = "pause"


def step_rows(
    run_id: int,
    phase: Mapping[str, Any],
    registry: Registry | None,
    values: Mapping[str, Any] | None = None,
) -> list[dict]:
    """The rows a phase's authored steps become (defaults filled from the registry), each
    ``{"param": name}`` in their params written out from the run's ``values``."""
    rows = []
    authored = phase.get("steps") or []
    keys = new_idempotency_keys(len(authored))
    for seq, step in enumerate(authored):
        action_id = step["action"]
        declared = registry.actions.get(action_id) if registry is not None else None
        on_failure = step.get("on_failure") or (
            declared.default_on_failure if declared is not None else ON_FAILURE_UNKNOWN
        )
        rows.append(
            {
                "run_id": run_id,
                "phase": phase["key"],
                "seq": seq,
                "label": str(step.get("label") or (declared.label if declared else action_id))[
                    :200
                ],
                "action": action_id,
                "action_version": step.get("action_version")
                or (declared.version if declared is not None else 1),
                "params": run_params.resolve(dict(step.get("params") or {}), values or {}),
                "on_failure": on_failure,
                "status": "pending",
                "attempts": 0,
                "idempotency_key": keys[seq],
            }
        )
    return rows


async def materialise_phase(
    conn: AsyncConnection,
    *,
    run_id: int,
    phase: Mapping[str, Any],
    registry: Registry | None = None,
    values: Mapping[str, Any] | None = None,
    batch: Batch | None = None,
) -> int:
    """Create the step rows of ``phase`` for a run; rows that exist are kept as they are
    (with their idempotency keys). ``values`` are the run's params (and ``scope``), which
    ``{"param": name}`` references read. Given ``batch`` (a group commit's, in ``conn``),
    the rows are kept for its one insert of every run's new steps. Answers how many steps
    the phase has."""
    rows = step_rows(run_id, phase, registry, values)
    await steps.insert_steps(conn, rows, batch=batch)
    return len(rows)


#: What a concurrency key may say in braces: the run's scope, or any param (``{server}``).
SCOPE_PLACEHOLDER = "{scope}"
_KEY_LENGTH = 100


#: The overlaps under which a start now is refused while its key is held: the person is
#: told at once rather than left a run that could only wait, or be skipped. Under
#: ``replace`` and ``allow`` the start is made and the engine does what the overlap says.
REFUSED_WHEN_HELD = (Overlap.HOLD, Overlap.SKIP)


def run_key(
    template: str | None, scope: str, params: Mapping[str, Any] | None = None
) -> str | None:
    """The concurrency key a run holds: the event's key with ``{scope}`` and each
    ``{param}`` written out, so two servers of one event run side by side while one server
    never runs it twice. A key that grows past the column's 100 characters keeps its head
    and ends in a hash of the whole, so two long keys stay apart."""
    if not template:
        return None
    key = run_params.write_key(template, run_params.with_scope(params, scope))
    if len(key) > _KEY_LENGTH:
        digest = hashlib.sha256(key.encode()).hexdigest()[:16]
        key = f"{key[: _KEY_LENGTH - 17]}~{digest}"
    return key


async def create_run(
    conn: AsyncConnection,
    *,
    definition_id: int,
    version_id: int,
    spec: Mapping[str, Any],
    scheduled_for: datetime,
    now: datetime,
    source: str,
    scope: str = "",
    params: Mapping[str, Any] | None = None,
    concurrency_key: str | None = None,
    occurrence_local: str | None = None,
    dst_adjusted: dict[str, Any] | None = None,
    actor: str | None = None,
    registry: Registry | None = None,
    batch: Batch | None = None,
) -> tuple[int, bool]:
    """Create the run of one occurrence, idempotently; answers ``(run id, created)``.

    A new run is ``scheduled`` with the version pinned and its first phase's steps made; it
    logs ``run.created`` (with any DST adjustment) and, when its instant is ahead,
    ``run.waiting`` (not_due). An occurrence that already has a run is left untouched.
    ``params`` are the run's checked values (:func:`pageant.runs.params.values_for`).
    Given ``batch`` (a group commit's, in ``conn``), the steps and log lines are kept for
    its set-wise inserts, which the same transaction makes before it commits.
    """
    values = dict(params or {})
    run_id, created = await runs.insert_run(
        conn,
        {
            "definition_id": definition_id,
            "version_id": version_id,
            "scope": scope,
            "scheduled_for": scheduled_for,
            "occurrence_local": occurrence_local,
            "source": source,
            "status": "scheduled",
            "concurrency_key": run_key(concurrency_key, scope, values),
            "params": values or None,
            "dst_adjusted": dst_adjusted,
            "created_at": now,
        },
    )
    if not created:
        return run_id, False
    await _first_phase(conn, run_id, spec, registry, values, scope, batch=batch)
    await countdown.materialise_rungs(
        conn, run_id=run_id, spec=spec, start=scheduled_for, now=now, registry=registry
    )
    await runlog.run_created(
        conn,
        run_id,
        at=now,
        source=source,
        scope=scope,
        scheduled_for=scheduled_for,
        version_id=version_id,
        params=values,
        dst_adjusted=dst_adjusted,
        actor=actor,
        batch=batch,
    )
    ahead = waiting.describe(
        {"status": "scheduled", "scheduled_for": scheduled_for}, [], now=now, max_attempts=0
    )
    if ahead is not None:
        await waiting.note(conn, run_id, ahead, now=now, batch=batch)
    return run_id, True


async def _first_phase(
    conn: AsyncConnection,
    run_id: int,
    spec: Mapping[str, Any],
    registry: Registry | None,
    values: Mapping[str, Any] | None,
    scope: str,
    *,
    batch: Batch | None = None,
) -> None:
    """Make the steps of the run's first phase (with its params and scope; kept for
    ``batch`` when given) and pin the budget of ``spec``."""
    phases = spec.get("phases") or []
    if phases:
        values = run_params.with_scope(values, scope)
        await materialise_phase(
            conn, run_id=run_id, phase=phases[0], registry=registry, values=values, batch=batch
        )
    await pin_run_budget(conn, run_id, spec, registry)


async def rematerialise_first_phase(
    conn: AsyncConnection,
    *,
    run_id: int,
    version_id: int,
    spec: Mapping[str, Any],
    now: datetime,
    registry: Registry | None = None,
    actor: str | None = None,
) -> bool:
    """Re-pin a run that has not started to ``version_id`` and remake its first phase's
    steps from ``spec``. False (and nothing changed) when the run has started or is
    already on that version. Logs ``run.repinned``."""
    if not await runs.repin(conn, run_id, version_id):
        return False
    await steps.delete_unstarted_steps(conn, run_id)
    await budgets.unpin_budget(conn, run_id)
    scope, values = await runs.param_values(conn, run_id)
    await _first_phase(conn, run_id, spec, registry, values, scope)
    run = await runs.get_run(conn, run_id)
    if run is not None:
        await countdown.materialise_rungs(
            conn, run_id=run_id, spec=spec, start=run.scheduled_for, now=now, registry=registry
        )
    await runlog.run_repinned(conn, run_id, at=now, version_id=version_id, actor=actor)
    return True


async def start_now(
    host: Host,
    definition_id: int,
    *,
    scope: str = "",
    params: Mapping[str, Any] | None = None,
    actor: str,
) -> tuple[int, bool]:
    """A person's start: a run of the published version, due at once, with ``params``
    (its spec's declared params; ``scope`` is the param of that name).

    Raises NotFound for an unknown event, Invalid naming each param that does not fit the
    published version's declarations or is not a value its option source offers now
    (:func:`pageant.runs.options.check_run_values`), and Conflict when it has no published
    version, is archived, or its concurrency key is held by a live run or will be by a run
    due now that has not started yet (naming that run). Answers ``(run id, created)``; an identical
    start at the same instant answers the same run.

    Starts arriving together are created together: the start is one write of the engine's
    group commit (:attr:`pageant.hosting.Host.outcomes`), so a burst of them
    costs one transaction, their steps one insert and their log lines another. A refusal is
    found before its start writes anything and is answered to that start alone; the run and
    its first phase's steps commit together, and the answer comes once they have.
    """
    now = host.clock.now()
    # The version whose values were checked against their option sources, once a plan found
    # values to check: the sources are asked between two passes of the group commit, never
    # inside its transaction, and only for a start that has such values (any other start is
    # one pass, as before).
    checked: list[int] = []

    async def start(
        conn: AsyncConnection, batch: Batch | None
    ) -> tuple[int, bool] | _Refusal | _Unchecked:
        try:
            planned = await plan_start(conn, definition_id, scope, params, now, batch)
        except PageantError as refusal:
            # Nothing of this start is written yet: the transaction it shares goes on.
            return _Refusal(refusal)
        values = run_params.with_scope(planned.values, planned.scope)
        if planned.version_id not in checked and takes_option_values(
            planned.spec, values, host.registry
        ):
            return _Unchecked(planned.version_id, planned.spec, values)
        return await create_planned(
            conn, host, definition_id, planned, now=now, actor=actor, batch=batch
        )

    # Bounded: a version published between the check and the second pass is checked again,
    # once; a third is not waited for.
    for _ in range(3):
        answer = await host.outcomes.run(start)
        if not isinstance(answer, _Unchecked):
            break
        problems, _ = await check_run_values(answer.spec, answer.values, host.registry)
        if problems:
            raise Invalid("the run was not started", details=problems)
        checked.append(answer.version_id)
    if isinstance(answer, _Unchecked):
        raise Conflict(f"event {definition_id} was published again while it was being started")
    if isinstance(answer, _Refusal):
        raise answer.error
    host.wake(advance_only=True)  # a run due now: advance's to start
    return answer


@dataclass(frozen=True)
class _Unchecked:
    """A start whose values are to be checked against their option sources before it makes
    its run (nothing of it written yet)."""

    version_id: int
    spec: dict[str, Any]
    values: dict[str, Any]


@dataclass(frozen=True)
class _Refusal:
    """A start refused before it wrote anything, answered to its caller alone."""

    error: PageantError


@dataclass(frozen=True)
class PlannedStart:
    version_id: int
    spec: dict[str, Any]
    scope: str
    values: dict[str, Any]
    concurrency_key: str | None


async def create_planned(
    conn: AsyncConnection,
    host: Host,
    definition_id: int,
    planned: PlannedStart,
    *,
    now: datetime,
    actor: str | None,
    batch: Batch | None,
) -> tuple[int, bool]:
    """Make the run a person's start planned (:func:`plan_start`), due ``now``: a single
    start's and each of a batch's (:mod:`pageant.runs.batch`)."""
    return await create_run(
        conn,
        definition_id=definition_id,
        version_id=planned.version_id,
        spec=planned.spec,
        scheduled_for=now,
        now=now,
        source="manual",
        scope=planned.scope,
        params=planned.values,
        concurrency_key=planned.concurrency_key,
        actor=actor,
        registry=host.registry,
        batch=batch,
    )


async def plan_start(
    conn: AsyncConnection,
    definition_id: int,
    scope: str,
    params: Mapping[str, Any] | None,
    now: datetime,
    batch: Batch | None,
) -> PlannedStart:
    """What a start of ``definition_id`` now makes, or the refusal it raises (reads only;
    the event's rows read once for ``batch``, whose starts all commit at one instant)."""
    definition, version = await start_facts(conn, definition_id, batch)
    if definition is None:
        raise NotFound(f"no such event: {definition_id}")
    if definition.current_version_id is None:
        raise Conflict(
            f"event {definition_id} has no published version; publish it before starting"
        )
    if definition.state == "archived":
        raise Conflict(f"event {definition_id} is archived; it cannot be started")
    # current_version_id is a foreign key: the row is there.
    assert version is not None
    spec = version.spec if isinstance(version.spec, dict) else {}
    given = dict(params or {})
    if scope:
        given[run_params.SCOPE] = scope
    values = run_params.values_for(spec.get("params"), given)
    scope = run_params.scope_of(values)
    key = run_key(definition.concurrency_key, scope, values)
    if key and Overlap(definition.overlap) in REFUSED_WHEN_HELD:
        # A run due now that has not started will hold the key in a moment: two starts of
        # one key sent together (one transaction, or two just apart) make one run, not a
        # second that could only wait for the first.
        holder = await runs.concurrency_holder(conn, key, 0) or await runs.due_claimant(
            conn, key, now=now, definition_id=definition_id, scope=scope
        )
        if holder is not None:
            raise Conflict(
                f'the concurrency key "{key}" is held by run {holder.id} ({holder.status})',
                details=[f"holder_run_id: {holder.id}"],
            )
    return PlannedStart(version.id, spec, scope, values, definition.concurrency_key)


async def start_facts(
    conn: AsyncConnection, definition_id: int, batch: Batch | None
) -> tuple[Any, Any]:
    """An event's definition row and its current version's (None for what is not there)."""
    if batch is not None and definition_id in batch.start_facts:
        return batch.start_facts[definition_id]
    definition = await definitions.start_facts(conn, definition_id)
    version = None
    if definition is not None and definition.current_version_id is not None:
        version = await definitions.pinned_version(conn, definition.current_version_id)
    if batch is not None:
        batch.start_facts[definition_id] = (definition, version)
    return definition, version
