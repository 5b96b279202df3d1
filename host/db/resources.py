"""SQL over ``event_run_resources``: the ledger of what runs changed in the world.

A row *holds* its target (``owner, kind, ref``) while its status is ``pending``,
``confirmed`` or ``revert_failed`` and releases it as ``reverted``, ``drifted`` or
``orphaned``; the unique index over the generated ``holding`` column is what makes two
holders impossible. Every status change is a compare-and-set naming the statuses it acts
from.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import and_, case, delete, func, or_, select, text, update
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db.idempotent import inserted_id
from pageant.db.tables import (
    HOLDING_RESOURCE_STATUSES,
    HOLDING_SQL,
    TERMINAL_RUN_STATUSES,
    by_primary_key,
    changed_one,
    event_run_resources,
    event_run_steps,
    event_runs,
)
from pageant.states import CleanupStatus

x = event_run_resources.c

#: The kind of the placeholder written before a dispatch; its ref is the idempotency key.
PLACEHOLDER = "@step"
#: The run statuses after which what a run holds is given back.
ENDED_RUN_STATUSES = TERMINAL_RUN_STATUSES
#: Holding rows something can still be tried on (``revert_failed`` has nothing left).
TRYABLE = ("pending", "confirmed")

RESOURCE_COLUMNS = (
    x.id,
    x.run_id,
    x.step_id,
    x.owner,
    x.kind,
    x.ref,
    x.status,
    x.payload,
    x.lease_until,
    x.revert_attempts,
    x.last_error,
    x.created_at,
    x.updated_at,
)


def _insert_holding(conn: AsyncConnection) -> Any:
    # Keeps the row already holding the key, and raises on any other error (see
    # pageant.db.idempotent): SQLite must name the partial index's WHERE to match it.
    if conn.dialect.name in ("mysql", "mariadb"):
        return mysql.insert(event_run_resources).on_duplicate_key_update(id=x.id)
    return sqlite.insert(event_run_resources).on_conflict_do_nothing(
        index_elements=[x.owner, x.kind, x.ref, x.holding], index_where=text(HOLDING_SQL)
    )


async def hold(
    conn: AsyncConnection,
    *,
    run_id: int,
    step_id: int | None,
    owner: str,
    kind: str,
    ref: str,
    status: str,
    payload: dict[str, Any] | None,
    now: datetime,
    lease_until: datetime | None = None,
) -> int | None:
    """Insert a holding row; None when another row already holds ``(owner, kind, ref)``."""
    result = await conn.execute(
        _insert_holding(conn).values(
            run_id=run_id,
            step_id=step_id,
            owner=owner,
            kind=kind,
            ref=ref,
            status=status,
            payload=payload,
            lease_until=lease_until,
            revert_attempts=0,
            created_at=now,
            updated_at=now,
        )
    )
    return inserted_id(result, conn.dialect)


async def holder(conn: AsyncConnection, owner: str, kind: str, ref: str) -> Row | None:
    """The row holding ``(owner, kind, ref)``, if any."""
    query = select(*RESOURCE_COLUMNS).where(
        x.owner == owner, x.kind == kind, x.ref == ref, x.holding == 1
    )
    return (await conn.execute(query)).first()


async def record_placeholder(
    conn: AsyncConnection,
    *,
    run_id: int,
    step_id: int,
    owner: str,
    key: str,
    action: str,
    now: datetime,
) -> bool:
    """Write the ``@step`` placeholder for a dispatch; False when this step's own
    placeholder is already there (a retry or a re-dispatch reuses it)."""
    new = await hold(
        conn,
        run_id=run_id,
        step_id=step_id,
        owner=owner,
        kind=PLACEHOLDER,
        ref=key,
        status="pending",
        payload={"action": action},
        now=now,
    )
    return new is not None


async def confirm(
    conn: AsyncConnection,
    *,
    run_id: int,
    step_id: int,
    owner: str,
    key: str,
    action: str,
    resources: Sequence[Any],
    now: datetime,
) -> list[dict[str, Any]]:
    """Record the resources an answer reported as ``confirmed`` and resolve the step's
    placeholder (deleted: what it stood for is now named). Answers what was recorded; a
    resource another row already holds is answered with ``held_by``."""
    recorded: list[dict[str, Any]] = []
    for res in resources:
        new = await hold(
            conn,
            run_id=run_id,
            step_id=step_id,
            owner=owner,
            kind=res.kind,
            ref=res.ref,
            status="confirmed",
            payload={"action": action, "detail": dict(res.detail)},
            now=now,
        )
        entry: dict[str, Any] = {"kind": res.kind, "ref": res.ref}
        if new is None:
            other = await holder(conn, owner, res.kind, res.ref)
            entry["held_by"] = None if other is None else other.run_id
        else:
            entry["id"] = new
        recorded.append(entry)
    await conn.execute(
        delete(event_run_resources).where(
            x.owner == owner, x.kind == PLACEHOLDER, x.ref == key, x.status == "pending"
        )
    )
    return recorded


async def resources_of_run(conn: AsyncConnection, run_id: int) -> list[Row]:
    """Every ledger row of ``run_id``, in the order they were recorded."""
    query = select(*RESOURCE_COLUMNS).where(x.run_id == run_id).order_by(x.id)
    return list((await conn.execute(query)).all())


async def tryable_of_run(
    conn: AsyncConnection, run_id: int, *, include_failed: bool = False
) -> list[Row]:
    """The run's holding rows something can still be tried on, newest first (reverse order
    of recording), with the step's action params when the step still exists."""
    statuses = HOLDING_RESOURCE_STATUSES if include_failed else TRYABLE
    s = event_run_steps.c
    query = (
        select(*RESOURCE_COLUMNS, s.params, s.idempotency_key)
        .select_from(event_run_resources.outerjoin(event_run_steps, s.id == x.step_id))
        .where(x.run_id == run_id, x.holding == 1, x.status.in_(statuses))
        .order_by(x.id.desc())
    )
    return list((await conn.execute(query)).all())


async def cleanup_candidates(
    conn: AsyncConnection,
    now: datetime,
    *,
    limit: int,
    skip_owners: Sequence[str] = (),
    skip_runs: Sequence[int] = (),
) -> list[int]:
    """Runs with something to give back now, **selected from the rows**: a holding row that
    can still be tried, of a run that has ended (unless an admin left its world as it is)
    or of a lease whose deadline has passed. Rows of ``skip_owners`` (plugins that are
    down) are left out, so what waits for them never crowds out what can go now; so are
    ``skip_runs`` (being given back already, perhaps waiting on a slow plugin)."""
    u = event_runs.c
    owners = [x.owner.notin_(list(skip_owners))] if skip_owners else []
    if skip_runs:
        owners.append(x.run_id.notin_(list(skip_runs)))
    query = (
        select(x.run_id)
        .select_from(event_run_resources.join(event_runs, u.id == x.run_id))
        .where(
            x.holding == 1,
            x.status.in_(TRYABLE),
            *owners,
            or_(
                and_(
                    u.status.in_(TERMINAL_RUN_STATUSES),
                    u.cleanup_status != CleanupStatus.INCOMPLETE,
                ),
                x.lease_until <= now,
            ),
        )
        .group_by(x.run_id)
        .order_by(x.run_id)
        .limit(limit)
    )
    return list((await conn.execute(query)).scalars())


async def held_for_owners(conn: AsyncConnection, owners: Sequence[str], *, limit: int) -> list[Row]:
    """What ended runs still hold of ``owners`` (plugins that are down), to be given back:
    ``(run_id, owner, held, health, waiting_reason)`` per run and owner, by run id, for at
    most ``limit`` runs' worth of rows. A run an admin left as it was is not among them."""
    if not owners:
        return []
    u = event_runs.c
    query = (
        select(x.run_id, x.owner, func.count().label("held"), u.health, u.waiting_reason)
        .select_from(event_run_resources.join(event_runs, u.id == x.run_id))
        .where(
            x.holding == 1,
            x.status.in_(TRYABLE),
            x.owner.in_(list(owners)),
            u.status.in_(TERMINAL_RUN_STATUSES),
            u.cleanup_status != CleanupStatus.INCOMPLETE,
        )
        .group_by(x.run_id, x.owner, u.health, u.waiting_reason)
        .order_by(x.run_id, x.owner)
        .limit(limit)
    )
    return list((await conn.execute(query)).all())


async def tryable_owners(
    conn: AsyncConnection, run_ids: Sequence[int]
) -> dict[int, dict[str, int]]:
    """``{run_id: {owner: rows}}``: whose plugins the holding rows still to try belong to."""
    if not run_ids:
        return {}
    query = (
        select(x.run_id, x.owner, func.count())
        .where(x.run_id.in_(list(run_ids)), x.holding == 1, x.status.in_(TRYABLE))
        .group_by(x.run_id, x.owner)
    )
    out: dict[int, dict[str, int]] = {}
    for run_id, owner, held in (await conn.execute(query)).all():
        out.setdefault(run_id, {})[owner] = held
    return out


async def unsettled_ended_runs(conn: AsyncConnection, *, after: int, limit: int) -> list[int]:
    """Ended runs (id above ``after``) whose ``cleanup_status`` still says ``pending`` though
    no row of theirs is left to try: the host stopped between a run's last release and the
    status derived from it. Read by the cleanup stage after a start, in id order."""
    u = event_runs.c
    tryable = select(x.id).where(x.run_id == u.id, x.holding == 1, x.status.in_(TRYABLE)).exists()
    query = (
        select(u.id)
        .where(
            u.status.in_(TERMINAL_RUN_STATUSES),
            u.cleanup_status == CleanupStatus.PENDING,
            u.id > after,
            ~tryable,
        )
        .order_by(u.id)
        .limit(limit)
    )
    return list((await conn.execute(query)).scalars())


async def release(
    conn: AsyncConnection,
    resource_id: int,
    *,
    to: str,
    now: datetime,
    attempted: bool,
    error: str | None = None,
    payload: dict[str, Any] | None = None,
) -> bool:
    """CAS a holding row to a released status (``reverted``, ``drifted``, ``orphaned``);
    ``attempted`` counts the revert that did it."""
    values: dict[str, Any] = {"status": to, "updated_at": now, "last_error": error}
    if attempted:
        values["revert_attempts"] = x.revert_attempts + 1
    if payload is not None:
        values["payload"] = payload
    return await changed_one(
        conn,
        update(event_run_resources)
        .where(x.id == resource_id, x.status.in_(HOLDING_RESOURCE_STATUSES))
        .values(values),
    )


async def revert_failed(
    conn: AsyncConnection, resource_id: int, *, error: str, max_attempts: int, now: datetime
) -> bool:
    """Count one failed revert; the row becomes ``revert_failed`` (still holding, nothing
    left to try) once it has had ``max_attempts``.

    ``status`` is assigned before ``revert_attempts`` and both read the old count: MariaDB
    evaluates a SET list left to right and SQLite against the old row, so in this order the
    two agree.
    """
    return await changed_one(
        conn,
        update(event_run_resources)
        .where(x.id == resource_id, x.status.in_(HOLDING_RESOURCE_STATUSES))
        .ordered_values(
            (
                x.status,
                case((x.revert_attempts + 1 >= max_attempts, "revert_failed"), else_=x.status),
            ),
            (x.revert_attempts, x.revert_attempts + 1),
            (x.last_error, error),
            (x.updated_at, now),
        ),
    )


async def set_lease_payload(
    conn: AsyncConnection, resource_id: int, payload: dict[str, Any], now: datetime
) -> None:
    await conn.execute(
        update(event_run_resources)
        .where(x.id == resource_id)
        .values(payload=payload, status="confirmed", updated_at=now)
    )


async def counts_of_run(conn: AsyncConnection, run_id: int) -> dict[str, int]:
    """``{status: rows}`` for ``run_id``: what ``cleanup_status`` is derived from."""
    query = select(x.status, func.count()).where(x.run_id == run_id).group_by(x.status)
    return {status: n for status, n in (await conn.execute(query)).all()}


async def holding_of_owner(conn: AsyncConnection, owner: str) -> list[Row]:
    """Every row holding a target for ``owner`` (what its reconcile is asked about)."""
    query = (
        select(*RESOURCE_COLUMNS)
        .where(x.owner == owner, x.holding == 1, x.kind != PLACEHOLDER)
        .order_by(x.id)
    )
    return list((await conn.execute(query)).all())


async def set_cleanup_status(conn: AsyncConnection, run_id: int, value: str) -> bool:
    """Write the run's derived ``cleanup_status``; True when it changed."""
    u = event_runs.c
    return await changed_one(
        conn,
        by_primary_key(
            update(event_runs)
            .where(u.id == run_id, u.cleanup_status != value)
            .values(cleanup_status=value)
        ),
    )


async def give_up(conn: AsyncConnection, resource_id: int, *, error: str, now: datetime) -> bool:
    """A row nothing can revert (its action declares no revert): ``revert_failed`` with its
    attempts untouched, since nothing was tried."""
    return await changed_one(
        conn,
        update(event_run_resources)
        .where(x.id == resource_id, x.status.in_(TRYABLE))
        .values(status="revert_failed", last_error=error, updated_at=now),
    )
