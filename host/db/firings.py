"""SQL over ``trigger_firing_keys`` and ``trigger_last_firings``: what a firing leaves
behind besides the gates it counted for.

A keyed firing's row holds the answer it was given, so the same key sent again (a retry
after a timeout) answers that and counts nothing; rows older than the keep are pruned. Each
trigger's last firing is one row, written once a transaction, which a held gate's
diagnosis reads instead of a write to every gate a firing missed.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, delete, select, update
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db.engine import defer_with_next
from pageant.db.idempotent import insert_keeping_existing, inserted_id
from pageant.db.tables import trigger_firing_keys, trigger_last_firings
from pageant.db.types import UTCDateTime

k = trigger_firing_keys.c
_l = trigger_last_firings.c

_ANSWERS = select(k.key, k.answer).where(
    k.issuer == bindparam("issuer"), k.key.in_(bindparam("keys", expanding=True))
)
_SET_ANSWERS = (
    update(trigger_firing_keys)
    .where(k.id == bindparam("key_id"))
    .values(answer=bindparam("kept", type_=k.answer.type))
)
_PRUNE = delete(trigger_firing_keys).where(k.created_at < bindparam("before", type_=UTCDateTime))


async def answers(conn: AsyncConnection, issuer: str, keys: Sequence[str]) -> dict[str, Any]:
    """The answers already given to ``issuer``'s firings under ``keys``, by key (a key
    whose firing is still being written by another transaction answers None)."""
    if not keys:
        return {}
    rows = await conn.execute(_ANSWERS, {"issuer": issuer, "keys": list(keys)})
    return {row.key: row.answer for row in rows}


async def claim_key(
    conn: AsyncConnection,
    *,
    issuer: str,
    key: str,
    trigger_id: str,
    fired_at: datetime,
    now: datetime,
) -> int | None:
    """Record that ``issuer`` fired under ``key``; the row's id, or None when the key was
    already there (the unique key decides, so two concurrent senders cannot both count)."""
    stmt = insert_keeping_existing(trigger_firing_keys, (k.issuer, k.key), conn.dialect).values(
        issuer=issuer, key=key, trigger_id=trigger_id, fired_at=fired_at, created_at=now
    )
    return inserted_id(await conn.execute(stmt), conn.dialect)


async def keep_answers(conn: AsyncConnection, kept: Sequence[tuple[int, dict[str, Any]]]) -> None:
    """Store the answers keyed firings were given, ``(key row id, answer)``, for their
    replays; one statement for all."""
    if kept:
        await conn.execute(_SET_ANSWERS, [{"key_id": i, "kept": answer} for i, answer in kept])


async def prune_keys(conn: AsyncConnection, before: datetime) -> int:
    """Forget the keys recorded before ``before``; answers how many."""
    return (await conn.execute(_PRUNE, {"before": before})).rowcount


# The upsert of a trigger's last firing, built once a dialect (its values are the execute's
# parameters): the first firing inserts the row, every later one replaces it. MariaDB's
# ``ON DUPLICATE KEY UPDATE`` and SQLite's ``ON CONFLICT DO UPDATE`` say the same thing.
_maria = mysql.insert(trigger_last_firings)
_NOTE_MARIA = _maria.on_duplicate_key_update(
    last_at=_maria.inserted.last_at, payload=_maria.inserted.payload
)
_lite = sqlite.insert(trigger_last_firings)
_NOTE_LITE = _lite.on_conflict_do_update(
    index_elements=[_l.trigger_id],
    set_={"last_at": _lite.excluded.last_at, "payload": _lite.excluded.payload},
)


async def note_last_firing(
    conn: AsyncConnection, trigger_id: str, at: datetime, payload: dict[str, Any]
) -> None:
    """Make ``(at, payload)`` the trigger's last firing, one row a trigger. On SQLite it
    rides with the transaction's next statement (:func:`pageant.db.engine.defer_with_next`):
    nothing reads its answer."""
    defer_with_next(conn)
    stmt = _NOTE_MARIA if conn.dialect.name in ("mysql", "mariadb") else _NOTE_LITE
    await conn.execute(stmt, {"trigger_id": trigger_id, "last_at": at, "payload": payload})
