"""``pageant runs``: what is running now, one run's console, and the run controls."""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING, Any

import click

from pageant.cli.common import (
    actor,
    as_json_line,
    as_json_text,
    json_option,
    settings_options,
    table,
    with_host,
)
from pageant.states import RUN_ENDED
from pageant.support.settings import Settings

if TYPE_CHECKING:
    from pageant.hosting import Host

#: How often ``runs show --follow`` looks at its run (seconds).
FOLLOW_INTERVAL = 1.0


@click.group()
def runs() -> None:
    """Runs: what is running now, one run's console, and the run controls."""


@runs.command("list")
@click.option("--status", multiple=True, help="Only runs in this status (repeatable).")
@click.option("--health", multiple=True, help="Only runs of this health (repeatable).")
@click.option("--waiting", multiple=True, help="Only runs waiting for this reason, e.g. parked.")
@click.option("--event", default=None, help="Only runs of this event (id or slug).")
@click.option("--series", default=None, help="Only runs of this series' events (an id).")
@click.option("--scope", default=None, help="Only runs of this scope.")
@click.option("--from", "start", default=None, help="Scheduled at or after this instant.")
@click.option("--to", "end", default=None, help="Scheduled before this instant.")
@click.option("--limit", type=click.IntRange(1, 200), default=50, show_default=True)
@json_option
@settings_options
def runs_list(settings: Settings, limit: int, as_json: bool, **given: Any) -> None:
    """What is running now: runs across every event, newest first, and a summary."""
    from pageant.events import definitions
    from pageant.runs import listing

    async def _go(host: Host) -> dict[str, Any]:
        values = dict(given)
        if values.get("event") is not None:
            async with host.db.connect() as conn:
                values["definition"] = str(await definitions.find_event(conn, values["event"]))
        names = {"from": "start", "to": "end"}

        def get(name: str) -> list[str]:
            value = values.get(names.get(name, name))
            if value is None:
                return []
            return list(value) if isinstance(value, tuple) else [value]

        where = listing.read_filter(get, label=lambda name: f"--{name}")
        return await listing.list_runs(host, where, before_id=None, limit=limit)

    found = with_host(settings, _go)
    if as_json:
        click.echo(as_json_text({"items": found["items"], "summary": found["summary"]}))
        return
    s = found["summary"]
    click.echo(
        f"{s['running']} running, {s['waiting_on_person']} waiting on a person, "
        f"{s['stalled']} stalled, {s['degraded']} degraded"
    )
    if not found["items"]:
        click.echo("no runs match")
        return
    rows = [["run", "event", "params", "status", "health", "phase", "waiting on"]]
    for item in found["items"]:
        given = item["params"] or ({"scope": item["scope"]} if item["scope"] else {})
        rows.append(
            [
                str(item["id"]),
                item["definition_slug"],
                " ".join(f"{k}={v}" for k, v in given.items()) or "-",
                item["status"],
                item["health"],
                item["current_phase"] or "-",
                (item["waiting_on"] or {}).get("sentence", "-"),
            ]
        )
    click.echo(table(rows))
    if found["next_before"] is not None:
        click.echo(f"(more: showing the newest {limit}; raise --limit or filter)")


@runs.command("show")
@click.argument("run_id", metavar="RUN", type=click.IntRange(min=1))
@click.option("--follow", is_flag=True, help="Watch the run live until it ends.")
@click.option(
    "--interval",
    type=click.FloatRange(min=0.05),
    default=FOLLOW_INTERVAL,
    show_default=True,
    help="Seconds between two looks while following.",
)
@json_option
@settings_options
def runs_show(
    settings: Settings, run_id: int, follow: bool, interval: float, as_json: bool
) -> None:
    """The run console (as pageant demo prints it); --follow watches it to its end.

    Following, exit 0 when the run completed and 1 when it ended otherwise."""
    from pageant.runs.console import console
    from pageant.runs.console_text import render_console, render_log_line
    from pageant.runs.sentences import Context

    async def _go(host: Host) -> dict[str, Any]:
        seen = 0
        while True:
            view = await console(host, run_id)
            if not follow:
                return view
            for line in view["log"][seen:]:
                context = Context.of_console(view)
                click.echo(as_json_line(line) if as_json else render_log_line(line, context))
            seen = len(view["log"])
            if view["run"]["status"] in RUN_ENDED:
                return view
            await asyncio.sleep(interval)

    view = with_host(settings, _go)
    if as_json:
        click.echo(as_json_text(view))
    else:
        if follow:
            click.echo()
        click.echo(render_console(view))
    if follow and view["run"]["status"] != "completed":
        sys.exit(1)


@runs.command("start")
@click.argument("event")
@click.option("--scope", default="", help="Tells apart runs of one event at one instant.")
@click.option(
    "--param",
    "params",
    multiple=True,
    metavar="NAME=VALUE",
    help="A value for one of the event's declared params (repeatable).",
)
@json_option
@settings_options
def runs_start(
    settings: Settings, event: str, scope: str, params: tuple[str, ...], as_json: bool
) -> None:
    """Start a run of EVENT's published version now (by id or slug)."""
    from pageant.events import definitions
    from pageant.runs.console import run_view
    from pageant.runs.create import start_now
    from pageant.runs.params import values_from_text

    async def _go(host: Host) -> tuple[dict[str, Any], bool]:
        async with host.db.connect() as conn:
            definition_id = await definitions.find_event(conn, event)
            published = await definitions.published_version(conn, definition_id)
        spec = published.spec if published is not None else {}
        given = values_from_text((spec or {}).get("params"), params)
        run_id, created = await start_now(
            host, definition_id, scope=scope, params=given, actor=actor()
        )
        return await run_view(host, run_id), created

    view, created = with_host(settings, _go)
    if as_json:
        click.echo(as_json_text(view))
        return
    what = "started" if created else "already started"
    click.echo(f"run {view['id']} of {view['definition_slug']} {what} ({view['status']})")


def _control(name: str, help_text: str, *, reason_required: bool = False) -> None:
    @runs.command(name, help=help_text)
    @click.argument("run_id", metavar="RUN", type=click.IntRange(min=1))
    # No default when required: click 8.3 takes an explicit None as a value given.
    @click.option(
        "--reason",
        required=reason_required,
        help="Why (kept on the control's log line)" + (", required." if reason_required else "."),
        **({} if reason_required else {"default": None}),
    )
    @json_option
    @settings_options
    def command(settings: Settings, run_id: int, reason: str | None, as_json: bool) -> None:
        from pageant.runs import controls
        from pageant.runs.console import run_view

        act = getattr(controls, name)

        async def _go(host: Host) -> dict[str, Any]:
            await controls.require_run(host, run_id)
            await act(host, run_id, actor=actor(), reason=reason)
            return await run_view(host, run_id)

        view = with_host(settings, _go)
        if as_json:
            click.echo(as_json_text(view))
            return
        click.echo(f"run {view['id']} is {view['status']}")


_control("pause", "Pause RUN (between two steps).")
_control("resume", "Resume paused RUN (a failed step it stopped at is stepped over).")
_control("cancel", "Cancel RUN; its pending and parked steps are cancelled.", reason_required=True)
