"""``pageant fire`` from a terminal moves a run waiting on a running host at once: the host
watches the run log for lines another process wrote (``outside_wake_ms``) instead of waiting
for its next poll (``poll_seconds``, a minute here). Real processes: ``pageant serve`` on a
SQLite file and ``pageant fire`` beside it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.console.test_console_walk import _api, _free_port, _pageant

GATED = {
    "schedule": {"kind": "manual"},
    "phases": [
        {
            "key": "hunt",
            "label": "Hunt",
            "steps": [],
            "advance": {"on": "wisps.caught", "count": 1},
        },
        {"key": "after", "label": "After", "steps": []},
    ],
}


def _serve(workdir: Path, wake_ms: int) -> Iterator[dict[str, Any]]:
    port = _free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PAGEANT_")},
        "PAGEANT_DATABASE_URL": f"sqlite+aiosqlite:///{workdir / 'pageant.db'}",
        "PAGEANT_PORT": str(port),
        "PAGEANT_POLL_SECONDS": "60",
        "PAGEANT_OUTSIDE_WAKE_MS": str(wake_ms),
    }
    _pageant("db", "upgrade", env=env)
    admin = _pageant("token", "create", "--role", "admin", "--name", "t", env=env)
    exe = Path(sys.executable).with_name("pageant")
    with (workdir / "serve.log").open("w") as out:
        proc = subprocess.Popen([str(exe), "serve"], env=env, stdout=out, stderr=out)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    _api(base, admin.splitlines()[-1].strip(), "GET", "/runs")
                    break
                except OSError:
                    assert proc.poll() is None and time.monotonic() < deadline, (
                        workdir / "serve.log"
                    ).read_text()
                    time.sleep(0.2)
            yield {"base": base, "admin": admin.splitlines()[-1].strip(), "env": env}
        finally:
            proc.terminate()
            proc.wait(timeout=15)


@pytest.fixture
def watching(tmp_path: Path) -> Iterator[dict[str, Any]]:
    yield from _serve(tmp_path, 500)


@pytest.fixture
def not_watching(tmp_path: Path) -> Iterator[dict[str, Any]]:
    yield from _serve(tmp_path, 0)


def _waiting_run(host: dict[str, Any]) -> int:
    base, admin = host["base"], host["admin"]
    event = _api(base, admin, "POST", "/events", {"title": "Hunt", "spec": GATED})
    _api(base, admin, "POST", f"/events/{event['id']}/publish")
    run = _api(base, admin, "POST", f"/events/{event['id']}/runs")
    deadline = time.monotonic() + 15
    while (_api(base, admin, "GET", f"/runs/{run['id']}")["run"]["waiting_on"] or {}).get(
        "reason"
    ) != "gate":
        assert time.monotonic() < deadline, "the run never waited on its gate"
        time.sleep(0.1)
    return int(run["id"])


def _phase_after(host: dict[str, Any], run_id: int, within: float) -> tuple[str | None, float]:
    """The run's phase once it left the hunt, or None if it did not within ``within`` s."""
    started = time.monotonic()
    while time.monotonic() - started < within:
        run = _api(host["base"], host["admin"], "GET", f"/runs/{run_id}")["run"]
        if run["current_phase"] != "hunt" or run["status"] == "completed":
            return run["current_phase"], time.monotonic() - started
        time.sleep(0.05)
    return None, within


def test_a_firing_from_the_command_line_moves_the_run_within_a_second(watching) -> None:
    run_id = _waiting_run(watching)
    fired = _pageant("fire", "wisps.caught", "colour=north", env=watching["env"])
    assert "closed 1" in fired
    phase, took = _phase_after(watching, run_id, within=3)
    assert phase is not None, "the run was still in the hunt 3 s after the firing"
    assert took < 1.0, f"the run moved {took:.2f} s after the firing"


def test_without_the_watch_the_run_waits_for_the_poll(not_watching) -> None:
    run_id = _waiting_run(not_watching)
    _pageant("fire", "wisps.caught", "colour=north", env=not_watching["env"])
    phase, _took = _phase_after(not_watching, run_id, within=2)
    assert phase is None  # still in the hunt: the next poll is a minute away
