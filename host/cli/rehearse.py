"""``pageant rehearse EVENT``: run an event on a virtual clock in a throwaway database and
print what would happen."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from pageant.cli.common import (
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
@click.option("--version", "version_number", type=click.IntRange(min=1), help="Default: published.")
@click.option(
    "--firings",
    type=click.File("r"),
    help='A JSON file: {"firings": [{"after": "5m", "trigger": "...", "payload": {...}}, ...]}'
    " (or the list alone).",
)
@click.option(
    "--from-run",
    "from_run",
    type=click.IntRange(min=1),
    metavar="RUN_ID",
    help="Replay the firings this finished run of EVENT received, at their offsets from its "
    "start, and print where the rehearsal differs from it.",
)
@dry_run_params_option
@json_option
@settings_options
def rehearse(
    settings: Settings,
    event: str,
    version_number: int | None,
    firings: Any,
    from_run: int | None,
    params: tuple[str, ...],
    as_json: bool,
) -> None:
    """Run EVENT on a virtual clock in a throwaway database; print what would happen.

    Nothing reaches a game (every action is its perform(verify=True)) and nothing is
    written to the real database. With --from-run, the gates are fed the firings that
    finished run received, at their offsets from its start (and the run's params, unless
    --param names others), and the differences from the real run are printed.

    Exit 0 when the run completes with nothing refused and no cap overspent; 3 when it
    would not complete (it stalls, pauses or fails); 4 when it completes but a step is
    refused or a worst-case spend is over its cap; 1 on an error (an unknown event, no
    published version) and 2 on a usage error.
    """
    from pageant.engine.rehearsal import rehearse as run_rehearsal
    from pageant.events import definitions
    from pageant.runs.params import values_from_text

    if firings is not None and from_run is not None:
        raise click.UsageError("give --firings or --from-run, not both")
    simulated = read_firings(firings.read()) if firings is not None else []

    async def _go(host: Any) -> dict[str, Any]:
        definition_id = await event_id(host, event)
        async with host.db.connect() as conn:
            if version_number is None:
                version = await definitions.published_version(conn, definition_id)
            else:
                version = await definitions.get_version(conn, definition_id, version_number)
        declared = (version.spec or {}).get("params") if version is not None else None
        return await run_rehearsal(
            host,
            definition_id,
            version_number=version_number,
            firings=simulated,
            params=values_from_text(declared, params),
            from_run=from_run,
        )

    report = with_host(settings, _go, start_plugins=True)
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
    for rung in report["timeline"].get("countdown") or []:
        click.echo(f"{rung['at_seconds']:>9g}s  countdown on {rung['leg']}: {rung['message']}")
    for told in report["story"]:
        by = f" (by {told['actor']})" if told["actor"] else ""
        click.echo(f"{_seconds(told['at_seconds']):>10}  {told['sentence']}{by}")
    outcome = report["outcome"]
    click.echo(f"{_seconds(outcome['ended_seconds']):>10}  run {outcome['status']}")
    replayed = report.get("replayed")
    if replayed is not None:
        click.echo(
            f"replayed  {replayed['firings']} of the {replayed['recorded']} firings run "
            f"{replayed['from_run']} (version {replayed['version']}, {replayed['status']}) "
            "recorded, at their offsets from its start"
        )
        for difference in report["differences"]:
            click.echo(f"differs   {difference['sentence']}")
        if not report["differences"]:
            click.echo("differs   in nothing: the rehearsal follows the real run")
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


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"+{value:g}s"
