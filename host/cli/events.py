"""``pageant events``: list the events, show one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from pageant.cli.common import as_json_text, json_option, settings_options, table, when, with_host
from pageant.support.settings import Settings

if TYPE_CHECKING:
    from pageant.hosting import Host


@click.group()
def events() -> None:
    """Events: list them, show one."""


@events.command("list")
@click.option("--state", type=click.Choice(["draft", "ready", "archived"]), default=None)
@json_option
@settings_options
def events_list(settings: Settings, state: str | None, as_json: bool) -> None:
    """List the events (as GET /api/v1/admin/events lists them)."""
    from pageant.events import definitions

    async def _go(host: Host) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        after: int | None = None
        async with host.db.connect() as conn:
            while True:
                rows = await definitions.list_definitions(
                    conn, state=state, after_id=after, limit=200
                )
                found += await definitions.render_events(conn, rows, now=host.clock.now())
                if len(rows) < 200:
                    return found
                after = rows[-1].id

    items = with_host(settings, _go)
    if as_json:
        click.echo(as_json_text({"items": items}))
        return
    rows = [["id", "slug", "state", "next", "waiting", "title"]]
    for item in items:
        rows.append(
            [
                str(item["id"]),
                item["slug"],
                item["state"],
                when(item["next_occurrence"]),
                str(item["runs_waiting"]),
                item["title"],
            ]
        )
    click.echo(table(rows) if items else "no events")


@events.command("show")
@click.argument("event")
@json_option
@settings_options
def events_show(settings: Settings, event: str, as_json: bool) -> None:
    """Show one event, by id or slug."""
    from pageant.events import definitions

    async def _go(host: Host) -> dict[str, Any]:
        async with host.db.connect() as conn:
            definition_id = await definitions.find_event(conn, event)
            return await definitions.render_event(conn, definition_id, now=host.clock.now())

    item = with_host(settings, _go)
    if as_json:
        click.echo(as_json_text(item))
        return
    version = item["current_version"]
    click.echo(f"{item['title']} ({item['slug']}, id {item['id']})")
    click.echo(f"  state:     {item['state']}")
    click.echo(f"  version:   {version['number'] if version else 'never published'}")
    click.echo(f"  timezone:  {item['timezone']}")
    click.echo(f"  next:      {when(item['next_occurrence'])}")
    click.echo(f"  waiting:   {item['runs_waiting']} run(s) waiting on a person")
    for phase in (item["spec"] or {}).get("phases") or []:
        steps = ", ".join(st.get("action", "?") for st in phase.get("steps") or [])
        click.echo(f"  phase {phase.get('key')}: {steps or 'no steps'}")
