"""Which commands start the plugins: the ones that run them (``serve``, ``plugins``,
``verify``, ``rehearse``, ``demo``, ``contract-check``). The staff's and the operator's
bookkeeping (``actions``, ``token``, ``runs``, ``events``, ``db``) loads the catalogue and
never runs a plugin's ``pageant_startup`` or a lease's self-check against the live game:
beside a running ``serve``, a plugin that binds a port at startup would fail, and every
``actions enable`` would probe the game. A real plugin, installed as a distribution with an
entry point, leaves a mark when it is started."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_cli import (  # noqa: F401 - fixtures, used by name
    empty_url,
    migrated_url,
    no_settings_in_the_environment,
    pageant,
)
from tests.fixture_plugins import fake_site, source


@pytest.fixture
def marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The file the installed ``tattler`` plugin marks whenever it is started."""
    with fake_site(tmp_path / "site", monkeypatch) as site:
        site.install("pageant-tattler", {"tattler": "tattler"}, {"tattler": source("tattler")})
        path = tmp_path / "started"
        monkeypatch.setenv("TATTLER_MARKER", str(path))
        yield path


@pytest.mark.parametrize(
    "args",
    [
        ("actions", "list"),
        ("actions", "enable", "tattler.flash"),
        ("actions", "disable", "tattler.flash"),
        ("token", "create", "--role", "admin", "--name", "ops"),
        ("token", "list"),
        ("runs", "list"),
        ("events", "list"),
        ("db", "upgrade"),
    ],
    ids=" ".join,
)
def test_bookkeeping_commands_never_start_a_plugin(
    migrated_url: str,  # noqa: F811 - the fixture
    marker: Path,
    args: tuple[str, ...],
) -> None:
    result = pageant(*args, "--database-url", migrated_url)
    assert result.exit_code == 0, result.output
    assert not marker.exists(), marker.read_text()


def test_actions_still_list_what_the_plugin_declares(
    migrated_url: str,  # noqa: F811 - the fixture
    marker: Path,
) -> None:
    listed = pageant("actions", "list", "--database-url", migrated_url)
    assert "tattler.flash" in listed.stdout
    enabled = pageant("actions", "enable", "tattler.flash", "--database-url", migrated_url)
    assert enabled.stdout.startswith("tattler.flash") and "enabled " in enabled.stdout
    assert not marker.exists()


def test_pageant_plugins_starts_them_as_serve_does(
    migrated_url: str,  # noqa: F811 - the fixture
    marker: Path,
) -> None:
    result = pageant("plugins", "--database-url", migrated_url)
    assert result.exit_code == 0, result.output
    assert marker.read_text().splitlines() == [
        "startup",
        "read north",
        "apply north",
        "read north",
        "restore north",
        "read north",
    ]
