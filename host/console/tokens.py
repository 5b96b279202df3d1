"""Tokens (admin only): the list, a new token (shown once), and revoking one.

The same functions as ``/api/v1/admin/tokens`` (:mod:`pageant.access.tokens`): a new token
exists only in the page that answers its creation; the list never holds a token or its
hash. Revoking a token ends its console sessions at once, this one included.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from aiohttp import web

from pageant.access import tokens
from pageant.access.roles import ADMIN
from pageant.console.keys import host_of, path_id, render, require, see_other
from pageant.errors import Conflict, Invalid

routes = web.RouteTableDef()


async def _page(
    request: web.Request,
    *,
    status: int = 200,
    issued: dict[str, Any] | None = None,
    errors: dict[str, list[str]] | None = None,
    values: dict[str, str] | None = None,
    notice: str = "",
    problem: str = "",
) -> web.Response:
    host = host_of(request)
    items = await tokens.list_tokens(host.db, now=host.clock.now(), include_revoked=True)
    return render(
        request,
        "tokens.html",
        status=status,
        tokens=items,
        roles=tokens.ROLES,
        issued=issued,
        errors=errors or {},
        values=values or {"role": "moderator"},
        notice=notice,
        problem=problem,
    )


def names_in(text: str) -> list[str] | None:
    """A binding typed in a form: names separated by commas or spaces; None when empty."""
    names = [name for name in text.replace(",", " ").split() if name]
    return names or None


@routes.get("/tokens")
async def tokens_page(request: web.Request) -> web.Response:
    require(request, ADMIN)
    revoked = request.query.get("revoked", "")
    notice = f"Token {revoked} is revoked." if revoked.isdigit() else ""
    return await _page(request, notice=notice)


@routes.post("/tokens")
async def create(request: web.Request) -> web.Response:
    """Make a token: ``name``, ``role`` and an optional ``expires`` (``30d``, ``12h``)."""
    session = require(request, ADMIN)
    host = host_of(request)
    form = await request.post()
    values = {k: v for k, v in form.items() if isinstance(v, str) and k != "csrf_token"}
    errors: dict[str, list[str]] = {}
    expires_in: timedelta | None = None
    raw = values.get("expires", "").strip()
    if raw:
        try:
            expires_in = tokens.parse_duration(raw[:20])
        except ValueError as exc:
            errors["expires"] = [str(exc)]
    if not errors:
        try:
            issued = await tokens.issue_token(
                host.db,
                role=values.get("role", ""),
                name=values.get("name", ""),
                now=host.clock.now(),
                actor=session.principal.actor,
                expires_in=expires_in,
                servers=names_in(values.get("servers", "")),
                owners=names_in(values.get("owners", "")),
            )
        except Invalid as exc:
            for problem in exc.details:
                field, _, message = problem.partition(": ")
                errors.setdefault(field.partition("[")[0], []).append(message or problem)
        else:
            return await _page(request, status=201, issued=issued)
    return await _page(
        request,
        status=400,
        errors=errors,
        values=values,
        notice="No token was made; fix the fields marked below.",
    )


@routes.post("/tokens/{token_id}/revoke")
async def revoke(request: web.Request) -> web.Response:
    session = require(request, ADMIN)
    host = host_of(request)
    token_id = path_id(request, "token_id", "token")
    try:
        await tokens.revoke_token(
            host.db, token_id, actor=session.principal.actor, now=host.clock.now()
        )
    except Conflict as exc:
        return await _page(request, status=exc.status, problem=exc.message)
    return see_other(f"/tokens?revoked={token_id}")
