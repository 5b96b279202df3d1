"""``pageant actions``: the switchboard from the command line (an operator at the host):
which actions may run, and their caps."""

from __future__ import annotations

from typing import Any

import click

from pageant.cli.common import actor, as_json_text, json_option, settings_options, with_host
from pageant.support.settings import Settings


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
@json_option
@settings_options
def actions_list(settings: Settings, as_json: bool) -> None:
    """Every registered action: risk, enablement, what it spends, its caps."""
    from pageant.switchboard import board

    async def _go(host: Any) -> list[dict[str, Any]]:
        async with host.db.connect() as conn:
            return await board.listing(conn, host.registry)

    items = with_host(settings, _go)
    if as_json:
        click.echo(as_json_text({"items": items, "next_cursor": None}))
        return
    for item in items:
        click.echo(_line(item))


def _change(settings: Settings, action_id: str, as_json: bool, **change: Any) -> None:
    from pageant.switchboard import board

    async def _go(host: Any) -> dict[str, Any]:
        async with host.db.begin() as conn:
            return await board.set_action(
                conn, host.registry, action_id, actor=actor(), now=host.clock.now(), **change
            )

    item = with_host(settings, _go)
    click.echo(as_json_text(item) if as_json else _line(item))


def _switch(name: str, enabled: bool, help_text: str) -> None:
    @actions.command(name, help=help_text)
    @click.argument("action_id", metavar="ACTION")
    @json_option
    @settings_options
    def command(settings: Settings, action_id: str, as_json: bool) -> None:
        _change(settings, action_id, as_json, enabled=enabled)


_switch("enable", True, "Turn ACTION on.")
_switch(
    "disable",
    False,
    "Turn ACTION off: its steps are refused (code disabled) from the next dispatch.",
)


@actions.command("cap")
@click.argument("action_id", metavar="ACTION")
@click.argument("dimension")
@click.argument("amount", metavar="N|none")
@json_option
@settings_options
def actions_cap(
    settings: Settings, action_id: str, dimension: str, amount: str, as_json: bool
) -> None:
    """Cap what one run may spend of DIMENSION through ACTION (none: metered, unbounded)."""
    if amount == "none":
        cap: int | None = None
    elif amount.isascii() and amount.isdigit():
        cap = int(amount)
    else:
        raise click.UsageError(f"N must be a whole number of at least 0 or none; got {amount!r}")
    _change(settings, action_id, as_json, caps={dimension: cap}, merge_caps=True)
