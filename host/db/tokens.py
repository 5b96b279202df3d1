"""SQL over ``api_tokens``: store a token's hash, find who a hash stands for, note its use,
list and revoke. No statement here ever reads the token or its hash out of the table."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, insert, select, update
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db.rows import AnyRow, inserted_id
from pageant.db.tables import api_tokens, changed_one

t = api_tokens.c

#: What a listing shows of a token: everything but its hash.
TOKEN_COLUMNS = (
    t.id,
    t.name,
    t.role,
    t.created_at,
    t.created_by,
    t.expires_at,
    t.last_used_at,
    t.revoked_at,
    t.revoked_by,
    t.servers,
    t.owners,
)

_LOOKUP = select(
    t.id, t.role, t.name, t.revoked_at, t.expires_at, t.last_used_at, t.servers, t.owners, t.zone
).where(t.token_hash == bindparam("token_hash"))

# Compare-and-set on the instant it read: of two requests that both saw an old stamp, one
# writes; the other matches nothing. Reached at most once a minute per token (the caller
# reads the stamp first), so a busy token never costs a write per request.
_TOUCH = (
    update(api_tokens)
    .where(t.id == bindparam("token_id"), t.last_used_at.is_not_distinct_from(bindparam("seen")))
    .values(last_used_at=bindparam("now"))
)

_STATES = select(t.id, t.revoked_at, t.expires_at).where(
    t.id.in_(bindparam("token_ids", expanding=True))
)

_REVOKE = (
    update(api_tokens)
    .where(t.id == bindparam("token_id"), t.revoked_at.is_(None))
    .values(revoked_at=bindparam("now"), revoked_by=bindparam("actor"))
)


async def insert_token(conn: AsyncConnection, values: dict[str, Any]) -> int:
    """Store a token (its hash, never the token); answers its id."""
    return inserted_id(await conn.execute(insert(api_tokens).values(**values)))


async def by_hash(conn: AsyncConnection, token_hash: str) -> Row | None:
    """The token a hash belongs to (id, role, name, revoked_at, expires_at, last_used_at,
    servers, owners, zone)."""
    return (await conn.execute(_LOOKUP, {"token_hash": token_hash})).first()


async def touch(
    conn: AsyncConnection, token_id: int, *, seen: datetime | None, now: datetime
) -> bool:
    """Move ``last_used_at`` from ``seen`` (what the caller read) to ``now``; True if moved."""
    return await changed_one(conn, _TOUCH, {"token_id": token_id, "seen": seen, "now": now})


async def set_zone(conn: AsyncConnection, token_id: int, zone: str | None) -> None:
    """Keep ``zone`` (None: none) as the zone the token's holder reads the console in."""
    await conn.execute(update(api_tokens).where(t.id == token_id).values(zone=zone))


async def list_tokens(conn: AsyncConnection, *, include_revoked: bool) -> list[Row]:
    """Every token (or every one not revoked), oldest first, without its hash."""
    statement = select(*TOKEN_COLUMNS).order_by(t.id)
    if not include_revoked:
        statement = statement.where(t.revoked_at.is_(None))
    return list((await conn.execute(statement)).all())


async def get_token(conn: AsyncConnection, token_id: int) -> Row | None:
    return (await conn.execute(select(*TOKEN_COLUMNS).where(t.id == token_id))).first()


async def read_back(conn: AsyncConnection, token_id: int) -> AnyRow:
    """A token read again inside the transaction that made or changed it (so it exists)."""
    return (await conn.execute(select(*TOKEN_COLUMNS).where(t.id == token_id))).one()


async def tokens_named(conn: AsyncConnection, name: str) -> list[Row]:
    """The tokens called ``name`` that are not revoked."""
    statement = select(*TOKEN_COLUMNS).where(t.name == name, t.revoked_at.is_(None)).order_by(t.id)
    return list((await conn.execute(statement)).all())


async def revoke(conn: AsyncConnection, token_id: int, *, actor: str, now: datetime) -> bool:
    """CAS not revoked -> revoked by ``actor``; True if this call revoked it."""
    return await changed_one(conn, _REVOKE, {"token_id": token_id, "actor": actor, "now": now})


async def states(conn: AsyncConnection, token_ids: Sequence[int]) -> dict[int, Row]:
    """Whether tokens are still live, by id (id, revoked_at, expires_at); a deleted token
    is absent."""
    rows = await conn.execute(_STATES, {"token_ids": list(token_ids)})
    return {row.id: row for row in rows}
