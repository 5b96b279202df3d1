"""``pageant-luanti install-mod``: the mod copied into a world, the config lines printed."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from pageant_luanti.install import main


def test_install_mod_copies_the_bridge_and_prints_the_config_lines(tmp_path: Path) -> None:
    world = tmp_path / "world"
    world.mkdir()
    (world / "world.mt").write_text("gameid = minetest_game\n")
    result = CliRunner().invoke(
        main,
        [
            "install-mod",
            str(world),
            "--url",
            "http://pageant:8080/",
            "--server",
            "world-a",
            "--token",
            "pgt_x",
        ],
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "secure.http_mods = pageant_bridge",
        "pageant_bridge.url = http://pageant:8080",
        "pageant_bridge.server = world-a",
        "pageant_bridge.token = pgt_x",
    ]
    mod = world / "worldmods" / "pageant_bridge"
    assert sorted(p.name for p in mod.iterdir()) == ["init.lua", "mod.conf"]
    assert "request_http_api" in (mod / "init.lua").read_text()


def test_install_mod_refuses_a_folder_that_is_not_a_world(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["install-mod", str(tmp_path), "--url", "http://p", "--server", "a", "--token", "t"]
    )
    assert result.exit_code == 2
    assert "has no world.mt: not a Luanti world" in result.output
    assert not (tmp_path / "worldmods").exists()
    world = tmp_path / "w"
    world.mkdir()
    (world / "world.mt").write_text("")
    result = CliRunner().invoke(
        main, ["install-mod", str(world), "--url", "pageant:8080", "--server", "a", "--token", "t"]
    )
    assert result.exit_code == 2 and "is not an http(s) URL" in result.output
