"""``pageant contract-check --live-link`` against a real Luanti world: the plugin's contract
check, run as its CLI, with the plugin's game link answered by a real ``minetestserver``
whose ``pageant_bridge`` mod syncs with a real ``pageant serve`` on the same database.

The kit's lease walk reads and writes the world's scratch setting ``contract-check`` (a test
world lends it), and its reverts of nothing and perform-after-revert reach the world's
entities and chests: zero violations means the real world answered as the contract asks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.walks import test_luanti_walk as walks
from tests.walks.test_luanti_walk import PLACES, Stage, until

MANIFEST = Path(__file__).resolve().parents[2] / "example_plugins/luanti/contract-manifest.json"
pytestmark = pytest.mark.timeout(4 * walks.PATIENCE_SECONDS)
# The Luanti walks' own fixtures: a migrated database, and a stage (a serve and a world).
migrated = walks.migrated
stage = walks.stage


def test_contract_check_with_the_live_link_passes_against_a_real_world(stage: Stage) -> None:
    stage.serve()
    world = stage.world
    world.start()
    until("the world up", lambda: stage.link().get("world", {}).get("state") == "up")
    world.ask("set", name="contract-check", value="seeded-42")
    assert world.beacons() == []

    began = time.monotonic()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")},
        "PAGEANT_DATABASE_URL": stage.url,
        "PAGEANT_PLUGIN_LUANTI_PLACES": PLACES,
        "PAGEANT_PLUGIN_LUANTI_SETTINGS": "time_speed,gravity,contract-check",
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pageant.cli",
            "contract-check",
            "--plugin",
            "luanti",
            "--manifest",
            str(MANIFEST),
            "--live-link",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    took = time.monotonic() - began
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    report = json.loads(done.stdout)
    assert report["violations"] == []
    checks = {(c["check"], c["subject"]): c for c in report["checks"]}
    # The lease walk read the value the world holds, and left it there.
    lease = checks[("lease", "luanti.setting")]
    assert lease["outcome"] == "pass"
    assert 'read "seeded-42"' in lease["message"], lease
    assert world.setting("contract-check") == "seeded-42"
    # The reverts of nothing and the performs after a revert went to the world and made
    # nothing there.
    for action in ("luanti.spawn", "luanti.give"):
        assert checks[("revert", action)]["outcome"] == "pass"
        assert checks[("revert_final", action)]["outcome"] == "pass"
    assert world.beacons() == []
    retired = world.ask("retired")["ids"]
    assert any(i.startswith("contract-check:reverted-first:") for i in retired), retired
    assert any(i.startswith("give/contract-check:reverted-first:") for i in retired), retired
    print(f"contract-check against a real world: {took:.1f} s")
