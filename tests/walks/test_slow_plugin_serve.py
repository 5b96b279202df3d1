"""One plugin's slowness costs only its own runs, proven with a real ``pageant serve``: the
shard's every despawn hangs (each revert is cut at 10 s), and a one-step canary run of the
host's own plugin, started while the shard's revert hangs, starts on time."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FIGURES
from tests.databases import empty_database
from tests.processes import Serve, api_call, migrated_admin, until

#: How long a canary run may take from its start request to its start, with a plugin
#: hanging beside it (a busy shared machine included). Before cleanup ran beside the pass,
#: it waited for the hanging reverts: 10 s for each of the held run's three creatures.
ON_TIME_SECONDS = 3.0


def call(base: str, token: str, method: str, path: str, body: Any = None) -> Any:
    return api_call(base, method, f"/api/v1/admin{path}", token, body)


@pytest.fixture
def database(dialect: str, tmp_path: Path) -> Iterator[str]:
    with empty_database(dialect, tmp_path) as url:
        yield url


def _event(base: str, token: str, title: str, steps: list[dict[str, Any]]) -> int:
    event = call(
        base,
        token,
        "POST",
        "/events",
        {
            "title": title,
            "spec": {
                "schedule": {"kind": "manual"},
                "phases": [{"key": "main", "label": "Main", "steps": steps}],
            },
        },
    )
    call(base, token, "POST", f"/events/{event['id']}/publish")
    return int(event["id"])


def _run(base: str, token: str, run_id: int) -> dict[str, Any]:
    """The run as its console shows it (``GET /api/v1/admin/runs/{id}``)."""
    return dict(call(base, token, "GET", f"/runs/{run_id}")["run"])


def test_a_canary_starts_on_time_while_another_plugins_revert_hangs(
    database: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    token = migrated_admin(database, "slow")
    serve = Serve(
        database,
        tmp_path / "serve.log",
        poll_seconds=1,
        plugin_shard_fault_revert_hang_seconds=3600,
    )
    try:
        base = serve.base
        call(base, token, "PUT", "/actions/shard.spawn", {"enabled": True})
        spawn = {"region": "yew", "creature": "wolf", "count": 3}
        held_event = _event(base, token, "Held", [{"action": "shard.spawn", "params": spawn}])
        canary_event = _event(
            base,
            token,
            "Canary",
            [{"action": "core.announce", "params": {"leg": "core.log", "message": "chirp"}}],
        )
        held = call(base, token, "POST", f"/events/{held_event}/runs", {})["id"]
        assert until(lambda: _run(base, token, held)["status"] == "completed", timeout=30)
        time.sleep(1.5)  # the shard's first despawn is hanging by now
        asked = time.time()
        canary = call(base, token, "POST", f"/events/{canary_event}/runs", {})["id"]
        assert until(
            lambda: _run(base, token, canary)["status"] == "completed", timeout=60, every=0.05
        )
        run = _run(base, token, canary)
        delay = datetime.fromisoformat(run["started_at"]).timestamp() - asked
        held_row = _run(base, token, held)
    finally:
        serve.kill()
    FIGURES.append(
        f"{request.node.name}: the canary started {delay:.2f} s after its request while the "
        f"shard's reverts hung (cleanup of the held run: {held_row['cleanup_status']})"
    )
    assert delay < ON_TIME_SECONDS
    assert held_row["cleanup_status"] == "pending"
