"""Tokens: list them, make one, revoke one (admin). No answer but a creation's ever holds a
token, and none holds its hash."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, field_validator

from pageant.access import tokens
from pageant.access.roles import ADMIN
from pageant.api.keys import HOST
from pageant.api.routing import SOME_FIELDS, RouteTable, int_param, principal, read_body, respond

routes = RouteTable("tokens")


class TokenOut(BaseModel):
    """A token's listing (never the token or its hash)."""

    model_config = SOME_FIELDS

    id: int
    name: str
    role: str = Field(json_schema_extra={"enum": list(tokens.ROLES)})
    servers: list[str] | None = Field(
        description="the server ids a game token speaks for on the game link; null: none"
    )
    owners: list[str] | None = Field(
        description="the owners whose triggers a game token may fire; null: unbound, every "
        "owner's (a token made before bindings, or made without --owner)"
    )
    status: Literal["active", "expired", "revoked"]
    created_at: datetime
    created_by: str | None
    expires_at: datetime | None
    last_used_at: datetime | None
    revoked_at: datetime | None
    revoked_by: str | None


class TokenIssued(TokenOut):
    """A new token's listing, and the token itself."""

    token: str = Field(description="the token itself: shown this once only")


class TokenList(BaseModel):
    model_config = SOME_FIELDS

    items: list[TokenOut]


class TokenCreate(BaseModel):
    """A token for ``name`` with ``role``; ``expires`` (``30d``, ``12h``...) is optional."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100)
    role: str
    expires: str | None = Field(default=None, max_length=20)
    servers: list[str] | None = Field(
        default=None,
        max_length=tokens.MAX_BINDINGS,
        description="a game token: the server ids it speaks for on the game link",
    )
    owners: list[str] | None = Field(
        default=None,
        max_length=tokens.MAX_BINDINGS,
        description="a game token: the owners whose triggers it may fire (absent: every owner)",
    )

    @field_validator("expires")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        if value is not None and tokens.parse_duration(value) > tokens.MAX_EXPIRY:
            raise ValueError(f"at most {tokens.MAX_EXPIRY.days} days")
        return value

    @field_validator("role")
    @classmethod
    def _role(cls, value: str) -> str:
        if value not in tokens.ROLES:
            raise ValueError(f"{value!r} is not a role; expected one of {', '.join(tokens.ROLES)}")
        return value


@routes.get(
    "/api/v1/admin/tokens",
    roles=ADMIN,
    summary="The tokens, oldest first (never a token or its hash)",
    response=TokenList,
    query={"revoked": "true to include revoked tokens"},
)
async def list_tokens(request: web.Request) -> web.Response:
    host = request.app[HOST]
    include = request.query.get("revoked", "false").lower() in ("1", "true", "yes")
    items = await tokens.list_tokens(host.db, now=host.clock.now(), include_revoked=include)
    return respond({"items": items})


@routes.post(
    "/api/v1/admin/tokens",
    roles=ADMIN,
    summary="Make a token; the answer holds it, once",
    body=TokenCreate,
    response=TokenIssued,
    status=201,
)
async def create_token(request: web.Request) -> web.Response:
    host = request.app[HOST]
    body = await read_body(request, TokenCreate)
    expires_in: timedelta | None = None
    if body.expires is not None:
        expires_in = tokens.parse_duration(body.expires)
    issued = await tokens.issue_token(
        host.db,
        role=body.role,
        name=body.name,
        now=host.clock.now(),
        actor=principal(request).actor,
        expires_in=expires_in,
        servers=body.servers,
        owners=body.owners,
    )
    return respond(issued, status=201)


@routes.delete(
    "/api/v1/admin/tokens/{token_id}",
    roles=ADMIN,
    summary="Revoke a token: its next request is refused",
    response=TokenOut,
)
async def revoke_token(request: web.Request) -> web.Response:
    host = request.app[HOST]
    revoked = await tokens.revoke_token(
        host.db,
        int_param(request, "token_id"),
        actor=principal(request).actor,
        now=host.clock.now(),
    )
    return respond(revoked)
