"""``pageant demo``: run the Champion Muster (or the Low-Gravity Frenzy) and print its
run console; with ``--serve``, serve its database afterwards."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

import click

from pageant.cli.common import quiet_plugin_log, run, settings_options
from pageant.support.settings import Settings


@click.command()
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the run console as JSON (as GET /api/v1/admin/runs/{run_id} answers it); "
    "the progress lines go to standard error.",
)
@click.option(
    "--faults",
    is_flag=True,
    help="Run the same event with the shard going down mid-phase and its first two "
    "despawns failing: the run degrades, waits and recovers.",
)
@click.option(
    "--serve",
    "and_serve",
    is_flag=True,
    help="Afterwards, serve the API and the web console over the demo's database (with a "
    "printed admin token) until SIGTERM or SIGINT.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=None,
    help="Seconds to wait for the run to complete and give everything back before giving "
    "up (exit 1); default 60, 300 with --game openarena.",
)
@click.option(
    "--game",
    type=click.Choice(["shard", "openarena"]),
    default="shard",
    show_default=True,
    help="shard: the Champion Muster on the simulated shard. openarena: the Low-Gravity "
    "Frenzy on a private OpenArena server, in real time (needs pageant-openarena and "
    "Debian's openarena-server).",
)
@settings_options
def demo(
    settings: Settings,
    as_json: bool,
    faults: bool,
    and_serve: bool,
    timeout: float | None,
    game: str,
) -> None:
    """Run the Champion Muster on the simulated shard and print its run console.

    Needs the pageant-shard example plugin (pip install -e ./example_plugins/shard). Uses
    a SQLite database in a temporary folder unless --database-url names an empty one; the
    host's clock runs 60 times fast. Exit 0 when the run completed and gave back everything
    it held, 1 otherwise. --game openarena runs the Low-Gravity Frenzy on a real OpenArena
    server instead.
    """
    from pageant.cli import showcase

    if game == "openarena" and and_serve:
        raise click.UsageError("--serve runs with --game shard only")
    if and_serve:
        _check_port(settings)
    quiet_plugin_log()  # the demo says what the loader would log (a dropped lease target)
    live = None if as_json or not sys.stdout.isatty() else showcase.DemoLive()
    say: Callable[[str], None] = (
        functools.partial(click.echo, err=as_json) if live is None else live.say
    )
    show = (lambda view: None) if live is None else live.show

    async def serve_after(host: Any, result: Any) -> None:
        if live is not None:
            live.stop()
        _print_demo_end(result, as_json)
        await _serve_demo(host, settings)

    async def go() -> Any:
        try:
            if game == "openarena":
                from pageant.cli import arena

                return await arena.run_openarena_demo(
                    settings, say=say, show=show, timeout=timeout or 300, faults=faults
                )
            return await showcase.run_demo(
                settings,
                say=say,
                show=show,
                timeout=timeout or showcase.TIMEOUT_SECONDS,
                faults=faults,
                serve=serve_after if and_serve else None,
            )
        finally:
            if live is not None:
                live.stop()

    result = run(go())
    if not and_serve:
        _print_demo_end(result, as_json)
    if result.problem is not None:
        click.echo(f"error: {result.problem}", err=True)
        sys.exit(1)


def _check_port(settings: Settings) -> None:
    """Refuse ``--serve`` at once when its address cannot be listened on, rather than after
    the demo has run for minutes: bind it and let it go again."""
    import socket

    from pageant.cli.operator import port_in_use

    try:
        infos = socket.getaddrinfo(settings.host, settings.port, type=socket.SOCK_STREAM)
        family, kind, proto, _, address = infos[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as exc:
        click.echo(f"error: {port_in_use(settings.host, settings.port, exc).message}", err=True)
        sys.exit(1)


def _print_demo_end(result: Any, as_json: bool) -> None:
    from pageant.cli import showcase
    from pageant.cli.demo_text import summary

    if as_json:
        click.echo(showcase.console_json(result.console))
        return
    for line in summary(result.console, result.wall_seconds):
        click.echo(line)
    click.echo("The whole run console, log included: pageant demo --json")


async def _serve_demo(host: Any, settings: Settings) -> None:
    """Serve the demo's host: the API and the console, an admin token printed first."""
    from pageant.access.tokens import create_token
    from pageant.cli.serving import serve_host

    set_factor = getattr(host.clock, "set_factor", None)
    if set_factor is not None:
        set_factor(1.0)  # from here on the clock keeps the wall clock's pace
    token = await create_token(host.db, role="admin", name="demo", now=host.clock.now())
    click.echo()
    click.echo(f"admin token: {token}")
    click.echo("  e.g. curl -H 'Authorization: Bearer <token>' .../api/v1/admin/runs/1")
    await serve_host(host, settings, say=click.echo)
