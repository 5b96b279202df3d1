"""SQL over ``api_tokens``: storing a token's hash and finding the live token a hash names."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, insert, select
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncEngine

from pageant.db.tables import api_tokens

_LOOKUP = select(api_tokens.c.id, api_tokens.c.role, api_tokens.c.name).where(
    api_tokens.c.token_hash == bindparam("token_hash"),
    api_tokens.c.revoked_at.is_(None),
)


async def insert_token(
    engine: AsyncEngine, *, name: str, role: str, token_hash: str, now: datetime
) -> None:
    """Store a token's hash, in a transaction of its own."""
    async with engine.begin() as conn:
        await conn.execute(
            insert(api_tokens).values(name=name, role=role, token_hash=token_hash, created_at=now)
        )


async def live_token(engine: AsyncEngine, token_hash: str) -> Row[Any] | None:
    """``(id, role, name)`` of the unrevoked token with this hash, or None."""
    async with engine.connect() as conn:
        row = (await conn.execute(_LOOKUP, {"token_hash": token_hash})).first()
        await conn.rollback()
    return row
