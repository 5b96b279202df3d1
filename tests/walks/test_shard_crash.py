"""The crash walk on the simulated shard: a real ``pageant serve`` loading the shard plugin
from its entry point is killed with SIGKILL mid-phase, while a spawn's answer is on its
way, and started again. The restarted host resumes the run; counted in the shard's own
world (kept in a SQLite file of its own, so it outlives the process), nothing was done
twice: one broadcast, one spawn per step, and everything given back."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pageant_shard.world import World

from tests.databases import empty_database
from tests.processes import Serve, api_call, migrated_admin, until

#: How long any one wait of this walk may take before the test fails (real seconds).
PATIENCE_SECONDS = 60
HERALD = "The muster begins at the Shrine of the Oak"


@pytest.fixture
def database(dialect: str, tmp_path: Path) -> Iterator[str]:
    with empty_database(dialect, tmp_path) as url:
        yield url


def call(serve: Serve, method: str, path: str, token: str, body: Any = None) -> Any:
    return api_call(serve.base, method, path, token, body)


def serve(url: str, tmp_path: Path, name: str, world: Path, **shard: Any) -> Serve:
    plugin = {f"plugin_shard_{key}": value for key, value in {"world_path": world, **shard}.items()}
    return Serve(
        url,
        tmp_path / f"{name}.log",
        poll_seconds=0.2,
        step_lease_margin_seconds=1,
        run_lease_seconds=2,
        **plugin,
    )


def test_a_host_killed_mid_phase_resumes_and_the_world_saw_everything_once(
    database: str, tmp_path: Path
) -> None:
    world_path = tmp_path / "shard-world.db"

    def world() -> World:
        return World.open(world_path)

    token = migrated_admin(database, "crash")
    migrated = database
    # The first host's spawn makes its creatures and then hangs before answering.
    first = serve(migrated, tmp_path, "first", world_path, fault_hang_seconds=600)
    second: Serve | None = None
    try:
        call(first, "PUT", "/api/v1/admin/actions/shard.spawn", token, {"enabled": True})
        spawn = {"action": "shard.spawn", "params": {"region": "yew", "count": 3}}
        event = call(
            first,
            "POST",
            "/api/v1/admin/events",
            token,
            {
                "title": "Muster under fire",
                "spec": {
                    "schedule": {"kind": "manual"},
                    "phases": [
                        {
                            "key": "muster",
                            "label": "Muster",
                            "steps": [
                                {"action": "shard.broadcast", "params": {"message": HERALD}},
                                {**spawn, "params": {**spawn["params"], "creature": "guardian"}},
                                {**spawn, "params": {**spawn["params"], "creature": "wolf"}},
                            ],
                        }
                    ],
                },
            },
        )
        call(first, "POST", f"/api/v1/admin/events/{event['id']}/publish", token)
        run_id = call(first, "POST", f"/api/v1/admin/events/{event['id']}/runs", token)["id"]

        # Mid-phase: the broadcast went, the guardians are out, the answer has not come.
        assert until(lambda: len(world().creatures) == 3, timeout=PATIENCE_SECONDS)
        first.signal(signal.SIGKILL)
        first.wait(10)
        assert world().broadcasts == [HERALD]
        assert len(world().spawned) == 1

        second = serve(migrated, tmp_path, "second", world_path)

        def finished() -> bool:
            found = call(second, "GET", f"/api/v1/admin/runs/{run_id}", token)  # type: ignore[arg-type]  # second: narrowed outside this closure
            return found["run"]["cleanup_status"] == "complete"

        assert until(finished, timeout=PATIENCE_SECONDS)
        view = call(second, "GET", f"/api/v1/admin/runs/{run_id}", token)
    finally:
        first.kill()
        if second is not None:
            second.kill()

    assert view["run"]["status"] == "completed"
    herald, guardians, wolves = view["steps"]
    # The killed spawn was dispatched again under its own key, and the shard made nothing new.
    assert (herald["attempts"], guardians["attempts"], wolves["attempts"]) == (1, 2, 1)
    after = world()
    assert after.broadcasts == [HERALD]  # the broadcast was not sent again
    assert sorted(len(serials) for serials in after.spawned.values()) == [3, 3]
    assert after.next_serial == 7  # six creatures were ever made: three guardians, three wolves
    assert after.creatures == {}  # and all of them were given back
    assert {r["status"] for r in view["resources"]} == {"reverted"}
    assert len(view["resources"]) == 6
