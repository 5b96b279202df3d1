"""``pageant fire``: fire a trigger, as a game server would."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from pageant.cli.common import actor, as_json_text, json_option, settings_options, with_host
from pageant.support.settings import Settings

if TYPE_CHECKING:
    from pageant.hosting import Host


@click.command()
@click.argument("trigger_id", metavar="TRIGGER")
@click.argument("pairs", metavar="KEY=VALUE...", nargs=-1)
@json_option
@settings_options
def fire(settings: Settings, trigger_id: str, pairs: tuple[str, ...], as_json: bool) -> None:
    """Fire TRIGGER with its variables as KEY=VALUE (each read as its declared type)."""
    from pageant.gates.emit import payload_from_text
    from pageant.gates.firers import check_outside_firing

    async def _go(host: Host) -> dict[str, int]:
        check_outside_firing(trigger_id)
        payload = payload_from_text(host.registry, trigger_id, pairs)
        return await host.emit(trigger_id, payload, actor=actor())

    fired = with_host(settings, _go)
    if as_json:
        click.echo(as_json_text(fired))
        return
    click.echo(
        f"{trigger_id}: counted by {fired['gates_matched']} gate(s), closed {fired['gates_closed']}"
    )
