"""SQL over ``event_action_settings`` (the switchboard) and its audit history.

A row exists only for an action an admin has an opinion about; without one the default by
risk applies (see :mod:`pageant.switchboard.board`). Every write appends one history line in
the same transaction, so the audit cannot miss a change.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import bindparam, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db.rows import AnyRow
from pageant.db.shared import Batch
from pageant.db.tables import event_action_settings, event_action_settings_history
from pageant.errors import Conflict

a = event_action_settings.c
h = event_action_settings_history.c

_ALL = select(a.action_id, a.enabled, a.caps, a.updated_by, a.updated_at).order_by(a.action_id)
_ONE = select(a.action_id, a.enabled, a.caps, a.updated_by, a.updated_at).where(
    a.action_id == bindparam("action_id")
)
_ONE_LOCKED = _ONE.with_for_update()
_ENABLED = select(a.enabled).where(a.action_id == bindparam("action_id"))
_SOME = select(a.action_id, a.enabled, a.caps).where(
    a.action_id.in_(bindparam("ids", expanding=True))
)
_INSERT = insert(event_action_settings)
_UPDATE = (
    update(event_action_settings)
    .where(a.action_id == bindparam("key"))
    .values(
        enabled=bindparam("enabled"),
        caps=bindparam("caps"),
        updated_by=bindparam("updated_by"),
        updated_at=bindparam("updated_at"),
    )
)
_HISTORY_WRITE = insert(event_action_settings_history)
_HISTORY = (
    select(h.id, h.action_id, h.enabled, h.caps, h.before, h.actor, h.at)
    .where(h.action_id == bindparam("action_id"))
    .order_by(h.id)
)


async def all_settings(conn: AsyncConnection) -> dict[str, AnyRow]:
    """Every switchboard row, by action id."""
    return {row.action_id: row for row in await conn.execute(_ALL)}


async def settings_for(conn: AsyncConnection, action_ids: Sequence[str]) -> dict[str, AnyRow]:
    """The rows of ``action_ids`` that exist (one query for all of them)."""
    if not action_ids:
        return {}
    rows = await conn.execute(_SOME, {"ids": sorted(set(action_ids))})
    return {row.action_id: row for row in rows}


async def get_setting(
    conn: AsyncConnection, action_id: str, *, lock: bool = False
) -> AnyRow | None:
    """One action's row, or None when no admin has set it. ``lock`` holds it (MariaDB)."""
    statement = _ONE_LOCKED if lock else _ONE
    return (await conn.execute(statement, {"action_id": action_id})).first()


async def enabled_flag(
    conn: AsyncConnection, action_id: str, *, batch: Batch | None = None
) -> bool | None:
    """The row's ``enabled``, or None when there is no row (the default by risk applies).
    Given ``batch`` (a group commit's, in ``conn``), read once per action in it."""
    if batch is not None and action_id in batch.flags:
        return batch.flags[action_id]
    value = (await conn.execute(_ENABLED, {"action_id": action_id})).scalar_one_or_none()
    flag = None if value is None else bool(value)
    if batch is not None:
        batch.flags[action_id] = flag
    return flag


def know_flag(batch: Batch, action_id: str, enabled: bool | None) -> None:
    """Keep an action's switchboard flag that another statement of ``batch`` read (a run's
    cursor), so :func:`enabled_flag` need not read it again in the batch."""
    batch.flags[action_id] = enabled


async def write_setting(
    conn: AsyncConnection,
    action_id: str,
    *,
    enabled: bool,
    caps: dict[str, int | None],
    before: AnyRow | None,
    actor: str | None,
    now: datetime,
) -> None:
    """Insert or replace one action's row and append its history line. The caller read
    ``before`` under a lock in the same transaction."""
    values = {"enabled": enabled, "caps": caps, "updated_by": actor, "updated_at": now}
    if before is None:
        try:
            async with conn.begin_nested():
                await conn.execute(_INSERT, {"action_id": action_id, **values})
        except IntegrityError:
            # FOR UPDATE locks no row that does not exist yet: two first changes of one
            # action can both get here on MariaDB, and the loser is told, not a 500.
            raise Conflict(
                f"the switchboard row of {action_id} was changed concurrently; read it and "
                "change it again"
            ) from None
    else:
        await conn.execute(_UPDATE, {"key": action_id, **values})
    await conn.execute(
        _HISTORY_WRITE,
        {
            "action_id": action_id,
            "enabled": enabled,
            "caps": caps,
            "before": None
            if before is None
            else {"enabled": bool(before.enabled), "caps": dict(before.caps or {})},
            "actor": actor,
            "at": now,
        },
    )


async def history_of(conn: AsyncConnection, action_id: str) -> list[AnyRow]:
    """Every change to one action's row, oldest first."""
    return list(await conn.execute(_HISTORY, {"action_id": action_id}))
