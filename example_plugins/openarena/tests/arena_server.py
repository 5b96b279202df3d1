"""A private ``ioq3ded`` per test, and the plugin's settings pointing at it. Without the
engine a test is skipped, and fails under ``CI`` (where it is installed)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pageant_openarena.dedicated import INSTALL, Dedicated, find_engine

ENV = "PAGEANT_PLUGIN_OPENARENA_"


def need_engine() -> None:
    if find_engine() is None:
        why = f"ioq3ded (OpenArena's server) is not installed; on Debian: {INSTALL}"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)


def point_at(
    monkeypatch: pytest.MonkeyPatch, server: Dedicated, state: Path, **more: object
) -> None:
    """The plugin's settings, in the environment, for ``server`` (none leak in)."""
    for name in list(os.environ):
        if name.startswith(ENV):
            monkeypatch.delenv(name)
    values = {
        "rcon_port": server.port,
        "rcon_password": server.password,
        "log_path": server.log_path,
        "state_dir": state,
        "rcon_timeout_seconds": 2.0,
        "probe_seconds": 1.5,
        "log_poll_seconds": 0.2,
        **more,
    }
    for name, value in values.items():
        monkeypatch.setenv(ENV + name.upper(), str(value))


@pytest.fixture
async def arena(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Dedicated]:
    """A started server, and the plugin's settings pointing at it."""
    need_engine()
    server = Dedicated(tmp_path / "arena")
    state = tmp_path / "state"
    state.mkdir()
    await server.start()
    point_at(monkeypatch, server, state)
    try:
        yield server
    finally:
        await server.stop()
