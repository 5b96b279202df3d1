"""``pageant demo --game openarena``: without the plugin or the game server it refuses in one
line that says how to install what is missing. (The Frenzy itself, on a real server, is
walked in ``test_openarena_walk.py``.)"""

from __future__ import annotations

import sys

import pytest

from tests.cli.test_cli import pageant


def test_without_the_game_server_it_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import pageant_openarena.dedicated

    monkeypatch.setattr(pageant_openarena.dedicated, "find_engine", lambda: None)
    result = pageant("demo", "--game", "openarena")
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        "error: pageant demo --game openarena needs OpenArena's server (ioq3ded); on Debian: "
        "apt-get install -y --no-install-recommends openarena-server"
    ]


def test_without_the_plugin_it_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pageant_openarena", None)  # as if not installed
    monkeypatch.setitem(sys.modules, "pageant_openarena.dedicated", None)
    result = pageant("demo", "--game", "openarena")
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        "error: pageant demo --game openarena needs the pageant-openarena plugin; install it "
        "with: pip install -e ./example_plugins/openarena"
    ]


def test_it_does_not_serve() -> None:
    result = pageant("demo", "--game", "openarena", "--serve")
    assert result.exit_code == 2
    assert "--serve runs with --game shard only" in result.output
