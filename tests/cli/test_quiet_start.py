"""A quiet start: with the README's install (core, wisps, shard and an OpenArena plugin
nobody configured yet), ``serve``, ``plugins``, ``rehearse`` and ``demo`` say nothing at
WARNING a newcomer did nothing to cause. The unconfigured plugin says so once, at INFO, and
the plugin listing shows it unavailable with the reason. Each command runs as an operator
runs it: a process of its own, at the default log level."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from pageant.support.settings import ENV_PREFIX
from tests.cli.test_cli import console_script, free_port, pageant_process
from tests.cli.test_cli_staff import seed
from tests.factories import announce, phase, spec

UNCONFIGURED = "openarena does nothing until configured: rcon_password is not set for main"


def _url(tmp_path: Path) -> str:
    url = f"sqlite+aiosqlite:///{tmp_path / 'pageant.db'}"
    done = pageant_process("db", "upgrade", env={"PAGEANT_DATABASE_URL": url})
    assert done.returncode == 0, done.stderr
    return url


def test_plugins_rehearse_and_demo_write_nothing_to_standard_error(tmp_path: Path) -> None:
    url = _url(tmp_path)
    (event,) = seed(url, ("Gather", spec(phase("p", announce("Gather")))))
    env = {"PAGEANT_DATABASE_URL": url}
    # The demo makes a database of its own when it is given none.
    for args, given in ((("plugins",), env), (("rehearse", event.slug), env), (("demo",), {})):
        done = pageant_process(*args, env=given, timeout=120)
        assert done.returncode == 0, (args, done.stderr)
        assert done.stderr == "", args
    listed = pageant_process("plugins", "--json", env=env)
    (arena,) = [i for i in json.loads(listed.stdout)["items"] if i["owner"] == "openarena"]
    assert arena["unavailable"].startswith("not configured: rcon_password is not set for main")


def test_serve_logs_nothing_above_info_and_the_unconfigured_plugin_once(tmp_path: Path) -> None:
    url = _url(tmp_path)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
    proc = subprocess.Popen(
        [*console_script(), "serve", "--port", str(free_port())],
        env={**clean, "PAGEANT_DATABASE_URL": url},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        started = proc.stdout.readline()
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=60)
    assert started.startswith("pageant serving on "), stderr
    logged = [line for line in stderr.splitlines() if line.startswith("ts=")]
    assert logged and all(" level=INFO " in line for line in logged), stderr
    assert sum(UNCONFIGURED in line for line in logged) == 1
