"""The staff's daily commands: events, runs, steps and firing a trigger.

Each command calls the domain function the admin API calls (nothing here decides a rule),
acts as ``cli:<user>`` (the login of whoever runs it), and prints either text or, with
``--json``, what the matching API route answers.
"""

from __future__ import annotations

import asyncio
import getpass
import json
import sys
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import click

from pageant.db.states import RUN_ENDED
from pageant.errors import NotFound
from pageant.settings import Settings
from pageant.timefmt import iso

if TYPE_CHECKING:
    from pageant.hosting import Host

T = TypeVar("T")

#: How often ``runs show --follow`` looks at its run (seconds).
FOLLOW_INTERVAL = 1.0
_ENDED = RUN_ENDED


def actor() -> str:
    """Who the command acts as: ``cli:<login>``."""
    try:
        user = getpass.getuser()
    except Exception:  # no login name at all (a container with no passwd entry)
        user = "unknown"
    return f"cli:{user}"


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return iso(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def as_json_text(data: Any) -> str:
    """``data`` as the API would send it (instants in ISO 8601 with ``Z``)."""
    return json.dumps(data, default=_default, indent=2, ensure_ascii=False)


def with_host(settings: Settings, work: Callable[[Host], Awaitable[T]]) -> T:
    """Run ``work`` over a host on the configured database (checked to be at the schema
    head), closing it afterwards; a pageant error is one line and exit 1."""
    from pageant.cli import _require_schema, run
    from pageant.cli.operator import check_sqlite_exists
    from pageant.hosting import Host

    async def _go() -> T:
        check_sqlite_exists(settings.database_url)
        host = Host(settings)
        try:
            await _require_schema(host.db, settings.database_url)
            return await work(host)
        finally:
            await host.close()

    return run(_go())


def json_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")(fn)


def _when(value: Any) -> str:
    return "-" if value is None else (iso(value) or "-")


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def render_tokens(items: list[dict[str, Any]]) -> str:
    """The token listing as a table (never a token or its hash: the listing holds neither)."""
    if not items:
        return "no tokens"
    rows = [["id", "name", "role", "status", "expires", "last used", "created by"]]
    for item in items:
        rows.append(
            [
                str(item["id"]),
                item["name"],
                item["role"],
                item["status"],
                _when(item["expires_at"]),
                _when(item["last_used_at"]),
                item["created_by"] or "-",
            ]
        )
    return _table(rows)


def register(main: click.Group, settings_options: Callable[..., Any]) -> None:
    """Add the daily commands to ``main``."""

    # ── events ───────────────────────────────────────────────────────────────

    @main.group()
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
                    _when(item["next_occurrence"]),
                    str(item["runs_waiting"]),
                    item["title"],
                ]
            )
        click.echo(_table(rows) if items else "no events")

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
        click.echo(f"  next:      {_when(item['next_occurrence'])}")
        click.echo(f"  waiting:   {item['runs_waiting']} run(s) waiting on a person")
        for phase in (item["spec"] or {}).get("phases") or []:
            steps = ", ".join(st.get("action", "?") for st in phase.get("steps") or [])
            click.echo(f"  phase {phase.get('key')}: {steps or 'no steps'}")

    # ── runs ─────────────────────────────────────────────────────────────────

    @main.group()
    def runs() -> None:
        """Runs: what is running now, one run's console, and the run controls."""

    @runs.command("list")
    @click.option("--status", multiple=True, help="Only runs in this status (repeatable).")
    @click.option("--health", multiple=True, help="Only runs of this health (repeatable).")
    @click.option(
        "--waiting", multiple=True, help="Only runs waiting for this reason, e.g. parked."
    )
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
        click.echo(_table(rows))
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

        async def _go(host: Host) -> dict[str, Any]:
            seen = 0
            while True:
                view = await console(host, run_id)
                if not follow:
                    return view
                for line in view["log"][seen:]:
                    click.echo(as_json_line(line) if as_json else render_log_line(line))
                seen = len(view["log"])
                if view["run"]["status"] in _ENDED:
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
            help="Why (kept on the control's log line)"
            + (", required." if reason_required else "."),
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
    _control(
        "cancel", "Cancel RUN; its pending and parked steps are cancelled.", reason_required=True
    )

    # ── steps ────────────────────────────────────────────────────────────────

    @main.group()
    def steps() -> None:
        """Steps: confirm a parked one, skip one."""

    def _step_control(name: str, help_text: str, extra: str) -> None:
        @steps.command(name, help=help_text)
        @click.argument("step_id", metavar="STEP", type=click.IntRange(min=1))
        @click.option(f"--{extra}", "text", default=None, help=f"A {extra}, kept in the log.")
        @json_option
        @settings_options
        def command(settings: Settings, step_id: int, text: str | None, as_json: bool) -> None:
            from pageant.db import steps as step_rows
            from pageant.runs import controls
            from pageant.runs.console import step_json

            act = getattr(controls, name)

            async def _go(host: Host) -> dict[str, Any]:
                run_id = await controls.run_of_step(host, step_id)
                await act(host, run_id, step_id, actor=actor(), **{extra: text})
                async with host.db.connect() as conn:
                    row = await step_rows.get_step(conn, step_id)
                if row is None:  # gone since the control acted on it
                    raise NotFound(f"no such step: {step_id}")
                return step_json(row._mapping)

            step = with_host(settings, _go)
            if as_json:
                click.echo(as_json_text(step))
                return
            click.echo(f"step {step['id']} ({step['label']}) is {step['status']}")

    _step_control("confirm", "Confirm parked STEP (a person did what it asked).", "note")
    _step_control("skip", "Skip pending or parked STEP.", "reason")

    # ── fire ─────────────────────────────────────────────────────────────────

    @main.command()
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
            f"{trigger_id}: counted by {fired['gates_matched']} gate(s), "
            f"closed {fired['gates_closed']}"
        )


def as_json_line(data: Any) -> str:
    return json.dumps(data, default=_default, ensure_ascii=False)
