"""The plugin commands: ``pageant plugins`` (what is loaded, what is refused),
``pageant contract-check`` (a plugin's CI) and ``pageant new-plugin`` (a scaffold)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import click

from pageant.cli.common import json_option, quiet_plugin_log, run, settings_options
from pageant.support.settings import Settings


@click.command()
@click.option("--all", "show_all", is_flag=True, help="Also list what each loaded plugin declared.")
@json_option
@click.option(
    "--allow-refused",
    is_flag=True,
    help="Exit 0 even when a plugin is refused or reports a problem (by default either exits 1).",
)
@settings_options
def plugins(settings: Settings, show_all: bool, as_json: bool, allow_refused: bool) -> None:
    """List the plugins: loaded ones, and refused ones with their reason.

    The plugins are started as the host starts them, so a lease target its self-check drops
    is shown dropped, with the reason, and what a plugin's own check finds wrong (a wrong
    password for one of its servers) is shown as a problem. Exit 1 when any plugin is
    refused or reports a problem, unless --allow-refused.
    """
    from pageant.hosting import Host
    from pageant.plugins.loader import plugin_listing

    quiet_plugin_log()
    host = Host(settings)

    async def _start() -> None:
        try:
            await host.start_plugins()
        finally:
            await host.close()

    run(_start())
    manager = host.plugins
    items = plugin_listing(manager, unavailable=host.plugin_unavailable)
    if show_all:
        declared = _declared_by(manager)
        for item in items:
            item["declares"] = declared.get(f"{item['distribution']}[{item['name']}]", {})
    if as_json:
        click.echo(json.dumps({"items": items}, indent=2))
    else:
        for line in plugin_lines(items):
            click.echo(line)
    if any(item["status"] == "refused" or item.get("problems") for item in items) and not (
        allow_refused
    ):
        sys.exit(1)


def plugin_lines(items: list[dict[str, Any]]) -> list[str]:
    """The human rendering of the plugin list (``pageant plugins`` and ``serve``'s start)."""
    lines = []
    for item in items:
        head = f"{item['distribution']}[{item['name']}] {item['version']}"
        if item["status"] == "loaded":
            lines.append(f"loaded   {head}  owner={item['owner']} contract={item['contract']}")
            for kind, ids in item.get("declares", {}).items():
                lines.append(f"           {kind}: {', '.join(ids)}")
            for dropped in item.get("dropped") or []:
                lines.append(
                    f"           dropped  {dropped['lease']} target {dropped['target']!r}: "
                    f"{dropped['reason']}"
                )
            if item.get("unavailable"):
                lines.append(f"           unavailable: {item['unavailable']}")
            for warning in item.get("warnings") or []:
                lines.append(f"           warning: {warning}")
            for problem in item.get("problems") or []:
                lines.append(f"           problem  {problem}")
            if "declares" in item and item.get("settings") is not None:
                shown = ", ".join(f"{k}={v}" for k, v in item["settings"].items())
                lines.append(f"           settings: {shown or 'none'}")
        else:
            lines.append(f"refused  {head}")
            lines.append(f"           {item['reason']}")
            for frame in (item.get("traceback") or "").splitlines():
                lines.append(f"           | {frame}")
    return lines


def _declared_by(manager: Any) -> dict[str, dict[str, list[str]]]:
    out: dict[str, dict[str, list[str]]] = {}
    for (kind, ident), owner in sorted(manager.registry.owners.items()):
        out.setdefault(owner, {}).setdefault(kind, []).append(ident)
    return out


@click.command("contract-check")
@click.option(
    "--plugin",
    "names",
    multiple=True,
    metavar="NAME",
    help="A plugin to check, by entry-point or distribution name (repeatable); "
    "default: every installed plugin but the host's own.",
)
@click.option(
    "--manifest",
    type=click.Path(dir_okay=False, path_type=Path),
    default="contract-manifest.json",
    show_default=True,
    help="The committed contract manifest to compare with.",
)
@click.option("--write", is_flag=True, help="Regenerate the manifest instead of comparing.")
@click.option(
    "--live-link",
    is_flag=True,
    help="Lend the plugins the real game link of the host whose database is --database-url: "
    "their commands reach the agents syncing with it (a test world, never a live game). "
    'Default: a stand-in answering every command {"ok": true}.',
)
@json_option
@settings_options
def contract_check(
    settings: Settings,
    names: tuple[str, ...],
    manifest: Path,
    write: bool,
    live_link: bool,
    as_json: bool,
) -> None:
    """Check plugins against the contract: what a plugin's CI runs.

    Loads them as serve does, dry-runs what they declare, and compares their catalog with
    the committed manifest. Exit 0 pass, 1 violations, 2 usage.
    """
    from pageant.kit import check as kit

    try:
        report = asyncio.run(
            kit.contract_check(
                names, manifest=manifest, write=write, settings=settings, live_link=live_link
            )
        )
    except kit.UnknownPlugin as exc:
        raise click.UsageError(str(exc)) from exc
    click.echo(json.dumps(report.as_dict(), indent=2) if as_json else kit.render(report))
    sys.exit(0 if report.ok else 1)


@click.command("new-plugin")
@click.argument("name")
@click.option(
    "--directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=".",
    show_default=True,
    help="Where the new folder NAME is made.",
)
@click.option(
    "--link",
    is_flag=True,
    help="A plugin for a game that can only call out: its actions go through the game link.",
)
def new_plugin(name: str, directory: Path, link: bool) -> None:
    """Scaffold a working plugin distribution in the new folder NAME.

    NAME becomes the plugin's owner (the prefix of every id it declares). The folder holds
    pyproject.toml with the entry point, a module with one action, one trigger and one
    option source, tests written with pageant.testing, the committed contract manifest, a
    README and a CI workflow running `pageant contract-check --plugin NAME`. With --link,
    the action reaches the game through the host's game link, and the tests drive it with
    pageant.testing's FakeAgent.
    """
    from pageant.cli.scaffold import ScaffoldError, scaffold

    try:
        folder = scaffold(name, directory, link=link)
    except ScaffoldError as exc:
        raise click.UsageError(str(exc)) from exc
    click.echo(f"created {folder}")
    click.echo(f"next: cd {folder} && pip install -e '.[test]' && pytest")
    click.echo(f"      pageant contract-check --plugin {name}")
    click.echo("      a running `pageant serve` loads it once restarted")
