"""The ``pageant`` command line.

One module a command group (or a lone command), each exposing its click group or command;
:data:`COMMANDS` adds them all to :func:`main`. What they share (the settings flags, a host
on the configured database, ``--json`` output) is in :mod:`pageant.cli.common`.

Every setting ``x_y`` is accepted by every command as ``--x-y`` (over ``PAGEANT_X_Y``, over
the TOML key ``x_y`` in the ``--config`` file, over the default).
"""

from __future__ import annotations

import click

from pageant.cli import (
    db,
    demo,
    events,
    fire,
    plugins,
    rehearse,
    runs,
    serving,
    steps,
    switchboard,
    tokens,
    verify,
)
from pageant.cli.common import CONFIG_KEY, group_settings_options, settings_help


@click.group(epilog=settings_help())
@click.version_option(package_name="pageant")
@click.option(
    "--config",
    type=click.Path(dir_okay=False),
    default=None,
    help="A TOML settings file, for any command (also accepted after the command).",
)
@group_settings_options
@click.pass_context
def main(ctx: click.Context, config: str | None) -> None:
    """pageant: scheduled, multi-phase world events for game servers."""
    ctx.meta[CONFIG_KEY] = config


#: Every command of ``pageant`` (``--help`` lists them by name).
COMMANDS: list[click.Command] = [
    db.db,
    plugins.plugins,
    plugins.contract_check,
    plugins.new_plugin,
    tokens.token,
    demo.demo,
    serving.serve,
    events.events,
    runs.runs,
    steps.steps,
    fire.fire,
    switchboard.actions,
    verify.verify,
    rehearse.rehearse,
]
for command in COMMANDS:
    main.add_command(command)


if __name__ == "__main__":  # pragma: no cover
    main()
