"""``pageant actions``: the switchboard from the command line (an operator at the host)."""

from __future__ import annotations

import json
from typing import Any

import click

from pageant.cli import run, settings_options
from pageant.settings import Settings

#: Who the switchboard's history names for a change made here.
CLI_ACTOR = "cli"


async def _with_host(settings: Settings, work: Any) -> Any:
    from pageant.cli import _require_schema
    from pageant.hosting import Host

    host = Host(settings)
    try:
        await _require_schema(host.db)
        return await work(host)
    finally:
        await host.close()


def _line(item: dict[str, Any]) -> str:
    state = "enabled " if item["enabled"] else "disabled"
    origin = "" if item["configured"] else " (default)"
    caps = ", ".join(f"{d}={'none' if c is None else c}" for d, c in sorted(item["caps"].items()))
    spends = ", ".join(
        d["dimension"] if d["usable"] else f"{d['dimension']} (unusable: {d['reason']})"
        for d in item["dimensions"]
    )
    out = f"{item['id']:<28} {item['risk']:<12} {state}{origin}"
    if spends:
        out += f"\n    spends: {spends}"
    if caps:
        out += f"\n    caps:   {caps}"
    return out


@click.group()
def actions() -> None:
    """The switchboard: which actions may run, and their caps."""


@actions.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@settings_options
def actions_list(settings: Settings, as_json: bool) -> None:
    """Every registered action: risk, enablement, what it spends, its caps."""
    from pageant.switchboard import board

    async def _go(host: Any) -> list[dict[str, Any]]:
        async with host.db.connect() as conn:
            return await board.listing(conn, host.registry)

    items = run(_with_host(settings, _go))
    if as_json:
        from pageant.api.routing import dumps

        click.echo(json.dumps(json.loads(dumps({"items": items})), indent=2))
        return
    for item in items:
        click.echo(_line(item))


def _change(settings: Settings, action_id: str, **change: Any) -> None:
    from pageant.switchboard import board

    async def _go(host: Any) -> dict[str, Any]:
        async with host.db.begin() as conn:
            return await board.set_action(
                conn, host.registry, action_id, actor=CLI_ACTOR, now=host.clock.now(), **change
            )

    click.echo(_line(run(_with_host(settings, _go))))


@actions.command("enable")
@click.argument("action_id", metavar="ACTION")
@settings_options
def actions_enable(settings: Settings, action_id: str) -> None:
    """Turn ACTION on."""
    _change(settings, action_id, enabled=True)


@actions.command("disable")
@click.argument("action_id", metavar="ACTION")
@settings_options
def actions_disable(settings: Settings, action_id: str) -> None:
    """Turn ACTION off: its steps are refused (code disabled) from the next dispatch."""
    _change(settings, action_id, enabled=False)


@actions.command("cap")
@click.argument("action_id", metavar="ACTION")
@click.argument("dimension")
@click.argument("amount", metavar="N|none")
@settings_options
def actions_cap(settings: Settings, action_id: str, dimension: str, amount: str) -> None:
    """Cap what one run may spend of DIMENSION through ACTION (none: metered, unbounded)."""
    if amount == "none":
        cap: int | None = None
    elif amount.isascii() and amount.isdigit():
        cap = int(amount)
    else:
        raise click.UsageError(f"N must be a whole number of at least 0 or none; got {amount!r}")
    _change(settings, action_id, caps={dimension: cap}, merge_caps=True)
