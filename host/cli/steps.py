"""``pageant steps``: confirm a parked step, skip one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from pageant.cli.common import actor, as_json_text, json_option, settings_options, with_host
from pageant.errors import NotFound
from pageant.support.settings import Settings

if TYPE_CHECKING:
    from pageant.hosting import Host


@click.group()
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
