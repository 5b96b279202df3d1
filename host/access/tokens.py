"""API tokens: created once, shown once, stored as a sha256 hash."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncEngine

from pageant.access.roles import ROLES, STAFF  # noqa: F401 (STAFF: importable from here)
from pageant.db import tokens as rows
from pageant.errors import Invalid

TOKEN_PREFIX = "pgt_"


@dataclass(frozen=True)
class Principal:
    """Who is asking: the token's role and name."""

    token_id: int
    role: str
    name: str

    @property
    def actor(self) -> str:
        return f"{self.role}:{self.name}"


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


async def create_token(engine: AsyncEngine, *, role: str, name: str, now: datetime) -> str:
    """Store a new token's hash and answer the token itself (the only time it exists)."""
    problems = []
    if role not in ROLES:
        problems.append(f"role: {role!r} is not a role; expected one of {', '.join(ROLES)}")
    if not name or not name.strip() or len(name) > 100:
        problems.append("name: expected 1 to 100 characters")
    if problems:
        raise Invalid("invalid token request", details=problems)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    await rows.insert_token(
        engine, name=name.strip(), role=role, token_hash=hash_token(token), now=now
    )
    return token


async def principal_for(engine: AsyncEngine, token: str) -> Principal | None:
    """The principal a bearer token stands for, or None."""
    row = await rows.live_token(engine, hash_token(token))
    return None if row is None else Principal(row.id, row.role, row.name)
