"""The switchboard and the dry runs from the command line: ``pageant actions``,
``pageant verify EVENT`` and ``pageant rehearse EVENT`` (an operator at the host)."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from pageant.cli import run, settings_options
from pageant.cli.staff import actor, as_json_text, json_option
from pageant.settings import Settings


async def _with_host(settings: Settings, work: Any) -> Any:
    from pageant.cli import _require_schema
    from pageant.cli.operator import check_sqlite_exists
    from pageant.hosting import Host

    check_sqlite_exists(settings.database_url)
    host = Host(settings)
    try:
        await _require_schema(host.db, settings.database_url)
        await host.start_plugins()  # a plugin's option sources may need its context
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
@json_option
@settings_options
def actions_list(settings: Settings, as_json: bool) -> None:
    """Every registered action: risk, enablement, what it spends, its caps."""
    from pageant.switchboard import board

    async def _go(host: Any) -> list[dict[str, Any]]:
        async with host.db.connect() as conn:
            return await board.listing(conn, host.registry)

    items = run(_with_host(settings, _go))
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

    item = run(_with_host(settings, _go))
    click.echo(as_json_text(item) if as_json else _line(item))


@actions.command("enable")
@click.argument("action_id", metavar="ACTION")
@json_option
@settings_options
def actions_enable(settings: Settings, action_id: str, as_json: bool) -> None:
    """Turn ACTION on."""
    _change(settings, action_id, as_json, enabled=True)


@actions.command("disable")
@click.argument("action_id", metavar="ACTION")
@json_option
@settings_options
def actions_disable(settings: Settings, action_id: str, as_json: bool) -> None:
    """Turn ACTION off: its steps are refused (code disabled) from the next dispatch."""
    _change(settings, action_id, as_json, enabled=False)


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


async def _event_id(host: Any, ref: str) -> int:
    from pageant.events.definitions import find_event

    async with host.db.connect() as conn:
        return await find_event(conn, ref)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"+{value:g}s"


@click.command()
@click.argument("event", metavar="EVENT")
@click.option(
    "--param",
    "params",
    multiple=True,
    metavar="NAME=VALUE",
    help="A value for one of the event's declared params, as a run would have (repeatable).",
)
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
        definition_id = await _event_id(host, event)
        async with host.db.connect() as conn:
            published = await definitions.published_version(conn, definition_id)
        declared = (published.spec or {}).get("params") if published is not None else None
        given = values_from_text(declared, params)
        return await verify_event(host, definition_id, actor=actor(), params=given)

    result = run(_with_host(settings, _go))
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


@click.command()
@click.argument("event", metavar="EVENT")
@click.option("--version", "version_number", type=click.IntRange(min=1), help="Default: published.")
@click.option(
    "--firings",
    type=click.File("r"),
    help='A JSON file: {"firings": [{"after": "5m", "trigger": "...", "payload": {...}}, ...]}'
    " (or the list alone).",
)
@json_option
@settings_options
def rehearse(
    settings: Settings, event: str, version_number: int | None, firings: Any, as_json: bool
) -> None:
    """Run EVENT on a virtual clock in a throwaway database; print what would happen.

    Nothing reaches a game (every action is its perform(verify=True)) and nothing is
    written to the real database.

    Exit 0 when the run completes with nothing refused and no cap overspent; 3 when it
    would not complete (it stalls, pauses or fails); 4 when it completes but a step is
    refused or a worst-case spend is over its cap; 1 on an error (an unknown event, no
    published version) and 2 on a usage error.
    """
    from pageant.engine.rehearsal import rehearse as run_rehearsal

    simulated = read_firings(firings.read()) if firings is not None else []

    async def _go(host: Any) -> dict[str, Any]:
        return await run_rehearsal(
            host,
            await _event_id(host, event),
            version_number=version_number,
            firings=simulated,
        )

    report = run(_with_host(settings, _go))
    if as_json:
        click.echo(as_json_text(report))
    else:
        _print_rehearsal(report)
    sys.exit(rehearsal_exit_code(report))


#: ``pageant rehearse``'s exit codes beyond 0 (as planned), 1 (an error) and 2 (usage).
EXIT_WOULD_NOT_COMPLETE = 3
EXIT_OVER_PLAN = 4


def rehearsal_exit_code(report: dict[str, Any]) -> int:
    """What a CI reads from a rehearsal: 0 when the run completes with nothing refused and
    nothing over a cap, :data:`EXIT_WOULD_NOT_COMPLETE` when it stalls, pauses or fails,
    :data:`EXIT_OVER_PLAN` when it completes past a refusal or a cap."""
    if report["outcome"]["status"] != "completed" or report["stalls"]:
        return EXIT_WOULD_NOT_COMPLETE
    if report["refusals"] or any(item["over_cap"] for item in report["spend"]):
        return EXIT_OVER_PLAN
    return 0


def read_firings(text: str) -> list[dict[str, Any]]:
    """The simulated firings of a ``--firings`` file: ``{"firings": [...]}``, the shape the
    HTTP route takes, or the list alone. A usage error names what is wrong."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise click.UsageError(f"--firings is not JSON: {exc}") from exc
    if isinstance(data, dict):
        if set(data) != {"firings"}:
            unknown = sorted(set(data) - {"firings"}) or ["no firings key"]
            raise click.UsageError(
                '--firings must be {"firings": [...]} or a list; '
                f"found {', '.join(map(str, unknown))}"
            )
        data = data["firings"]
    if not isinstance(data, list) or not all(isinstance(f, dict) for f in data):
        raise click.UsageError(
            '--firings must be {"firings": [...]} or a list, each firing an object'
        )
    return data


def _print_rehearsal(report: dict[str, Any]) -> None:
    click.echo(f"event {report['event_id']} version {report['version']['number']}, rehearsed")
    steps = report["timeline"]["steps"]
    for phase in report["timeline"]["phases"]:
        click.echo(f"{_seconds(phase['entered_seconds']):>10}  phase {phase['key']} entered")
        for step in (s for s in steps if s["phase"] == phase["key"]):
            click.echo(
                f"{_seconds(step['started_seconds']):>10}    {step['action']} {step['status']}"
            )
        if phase["left_seconds"] is not None:
            click.echo(f"{_seconds(phase['left_seconds']):>10}  phase {phase['key']} left")
    outcome = report["outcome"]
    click.echo(f"{_seconds(outcome['ended_seconds']):>10}  run {outcome['status']}")
    for item in report["spend"]:
        cap = "uncapped" if item["cap"] is None else f"cap {item['cap']}"
        over = "  OVER THE CAP" if item["over_cap"] else ""
        click.echo(f"spend     {item['dimension']}: worst case {item['worst_case']} ({cap}){over}")
    for refusal in report["refusals"]:
        click.echo(f"refused   {refusal['action']} ({refusal['code']}): {refusal['error']}")
    for stall in report["stalls"]:
        click.echo(
            f"stalled   phase {stall['phase']} at {_seconds(stall['stalled_seconds'])}: "
            f"its gate on {stall['trigger_id']} never opens"
        )
