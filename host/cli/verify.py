"""``pageant verify EVENT``: dry-run an event's published version and record it verified."""

from __future__ import annotations

from typing import Any

import click

from pageant.cli.common import (
    actor,
    as_json_text,
    dry_run_params_option,
    event_id,
    json_option,
    settings_options,
    with_host,
)
from pageant.support.settings import Settings


@click.command()
@click.argument("event", metavar="EVENT")
@dry_run_params_option
@json_option
@settings_options
def verify(settings: Settings, event: str, params: tuple[str, ...], as_json: bool) -> None:
    """Dry-run EVENT's published version (an id or a slug); record it verified if it passes.

    Exit 0 verified, 1 with every problem listed.
    """
    from pageant.events import definitions
    from pageant.events.verify import verify_event
    from pageant.runs.params import values_from_text

    async def _go(host: Any) -> dict[str, Any]:
        definition_id = await event_id(host, event)
        async with host.db.connect() as conn:
            published = await definitions.published_version(conn, definition_id)
        declared = (published.spec or {}).get("params") if published is not None else None
        given = values_from_text(declared, params)
        return await verify_event(host, definition_id, actor=actor(), params=given)

    result = with_host(settings, _go, start_plugins=True)
    if as_json:
        click.echo(as_json_text(result))
        return
    version = result["version"]["number"]
    click.echo(f"event {result['event_id']} version {version}: verified")
    for item in result["spend"]:
        cap = "uncapped" if item["cap"] is None else f"cap {item['cap']}"
        click.echo(f"  spends {item['total']} {item['unit']} of {item['dimension']} ({cap})")
    for warning in result["warnings"]:
        click.echo(f"  warning: {warning}")
