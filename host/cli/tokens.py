"""``pageant token``: create, list and revoke API tokens."""

from __future__ import annotations

from typing import Any

import click

from pageant.access.roles import ROLES
from pageant.cli.common import (
    actor,
    as_json_text,
    json_option,
    settings_options,
    table,
    when,
    with_host,
)
from pageant.support.settings import Settings


@click.group()
def token() -> None:
    """API tokens."""


def _expiry(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    from pageant.access.tokens import MAX_EXPIRY, parse_duration

    if value is None:
        return None
    try:
        found = parse_duration(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    if found > MAX_EXPIRY:
        raise click.BadParameter(f"at most {MAX_EXPIRY.days} days")
    return found


@token.command("create")
@click.option("--role", required=True, type=click.Choice(ROLES))
@click.option("--name", required=True, help="Who or what the token is for.")
@click.option(
    "--expires",
    default=None,
    callback=_expiry,
    metavar="DURATION",
    help="Refuse the token after this long: 90m, 12h, 30d, 2w (default: never).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the token's listing shape and the token as JSON (the token shown this once).",
)
@click.option(
    "--server",
    "servers",
    multiple=True,
    metavar="ID",
    help="A game token: a server id it speaks for on the game link (repeatable).",
)
@click.option(
    "--owner",
    "owners",
    multiple=True,
    metavar="OWNER",
    help="A game token: a plugin whose triggers it may fire (repeatable; none: every plugin's).",
)
@settings_options
def token_create(
    settings: Settings,
    role: str,
    name: str,
    expires: Any,
    as_json: bool,
    servers: tuple[str, ...],
    owners: tuple[str, ...],
) -> None:
    """Create a token and print it (only the token; it is shown once and stored hashed).

    A game token is bound with --server to the servers it speaks for on the game link and
    with --owner to the plugins whose triggers it may fire."""
    from pageant.access.tokens import binding_problems, issue_token

    problems = binding_problems(role, servers or None, owners or None)
    if problems:
        raise click.UsageError("; ".join(problems))

    async def _go(host: Any) -> dict[str, Any]:
        return await issue_token(
            host.db,
            role=role,
            name=name,
            now=host.clock.now(),
            actor=actor(),
            expires_in=expires,
            servers=servers or None,
            owners=owners or None,
        )

    issued = with_host(settings, _go)
    click.echo(as_json_text(issued) if as_json else issued["token"])


@token.command("list")
@click.option("--revoked", "include_revoked", is_flag=True, help="Include revoked tokens.")
@json_option
@settings_options
def token_list(settings: Settings, include_revoked: bool, as_json: bool) -> None:
    """List the tokens (never a token or its hash)."""
    from pageant.access.tokens import list_tokens

    async def _go(host: Any) -> list[dict[str, Any]]:
        return await list_tokens(host.db, now=host.clock.now(), include_revoked=include_revoked)

    items = with_host(settings, _go)
    click.echo(as_json_text({"items": items}) if as_json else render_tokens(items))


@token.command("revoke")
@click.argument("ref", metavar="NAME|ID")
@json_option
@settings_options
def token_revoke(settings: Settings, ref: str, as_json: bool) -> None:
    """Revoke a token, by id or by name: its next request is refused."""
    from pageant.access.tokens import find_token, revoke_token

    async def _go(host: Any) -> dict[str, Any]:
        token_id = await find_token(host.db, ref)
        return await revoke_token(host.db, token_id, actor=actor(), now=host.clock.now())

    revoked = with_host(settings, _go)
    if as_json:
        click.echo(as_json_text(revoked))
    else:
        click.echo(f"token {revoked['id']} ({revoked['name']}, {revoked['role']}) revoked")


def render_tokens(items: list[dict[str, Any]]) -> str:
    """The token listing as a table (never a token or its hash: the listing holds neither)."""
    if not items:
        return "no tokens"
    rows = [["id", "name", "role", "bound to", "status", "expires", "last used", "created by"]]
    for item in items:
        rows.append(
            [
                str(item["id"]),
                item["name"],
                item["role"],
                bindings_said(item),
                item["status"],
                when(item["expires_at"]),
                when(item["last_used_at"]),
                item["created_by"] or "-",
            ]
        )
    return table(rows)


def bindings_said(item: dict[str, Any]) -> str:
    """What a token is bound to, in a few words: ``servers world-a; owners openarena``, or
    ``every owner's triggers`` for a game token with no owner binding, ``-`` for staff."""
    if item["role"] != "game":
        return "-"
    parts = []
    if item["servers"] is not None:
        parts.append("servers " + ", ".join(item["servers"]))
    parts.append(
        "every owner's triggers"
        if item["owners"] is None
        else "owners " + ", ".join(item["owners"])
    )
    return "; ".join(parts)
