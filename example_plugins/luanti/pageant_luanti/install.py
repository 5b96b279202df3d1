"""``pageant-luanti install-mod WORLD_DIR --url URL --server ID --token TOKEN``: copy the
bridge mod into a world's ``worldmods/`` and print the ``minetest.conf`` lines it needs."""

from __future__ import annotations

import shutil
import sys
from importlib.resources import as_file, files
from pathlib import Path

import click

MOD = "pageant_bridge"


def conf_lines(url: str, server: str, token: str) -> list[str]:
    """The ``minetest.conf`` lines of one world, one ``name = value`` a line."""
    return [
        f"secure.http_mods = {MOD}",
        f"{MOD}.url = {url.rstrip('/')}",
        f"{MOD}.server = {server}",
        f"{MOD}.token = {token}",
    ]


def install(world: Path, url: str, server: str, token: str) -> list[str]:
    """Copy the mod into ``world/worldmods/`` (replacing an older copy); answer the lines."""
    target = world / "worldmods" / MOD
    with as_file(files("pageant_luanti") / "mod" / MOD) as source:
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(source, target)
    return conf_lines(url, server, token)


@click.group()
def main() -> None:
    """Tools for running pageant's world events on a Luanti server."""


@main.command("install-mod")
@click.argument("world", type=click.Path(file_okay=False, path_type=Path))
@click.option("--url", required=True, help="The pageant host, as the game reaches it.")
@click.option("--server", required=True, help="The world's server id on the game link.")
@click.option("--token", required=True, help="A game token bound to that server.")
def install_mod(world: Path, url: str, server: str, token: str) -> None:
    """Copy the pageant_bridge mod into WORLD and print the minetest.conf lines to add."""
    if not (world / "world.mt").is_file():
        raise click.BadParameter(f"{world} has no world.mt: not a Luanti world", param_hint="WORLD")
    if not url.startswith(("http://", "https://")):
        raise click.BadParameter(f"{url!r} is not an http(s) URL", param_hint="--url")
    for line in install(world, url, server, token):
        click.echo(line)
    click.echo(f"# installed {MOD} into {world / 'worldmods' / MOD}", err=True)


if __name__ == "__main__":
    sys.exit(main())
