"""A real player in a real Luanti world: Debian's graphical client under a virtual X server
(:class:`tests.walks.luanti_world.Player`) joins a private ``minetestserver`` whose
``pageant_bridge`` mod syncs with a real ``pageant serve``.

Its join reaches the host as ``luanti.player.joined`` naming it; the ``luanti.setting``
lease on gravity changes its physics, again when it joins during the lease, and gives the
baseline back at the run's end; its death (hp set to 0 on the server, which runs the game's
death callbacks) reaches the host as ``luanti.player.died``. Without the client or
``xvfb-run`` the walk is skipped, and under ``CI`` it fails.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.walks import test_luanti_walk as walks
from tests.walks.luanti_world import Player, need_client
from tests.walks.test_luanti_walk import Stage, ended, gate, held, until

pytestmark = pytest.mark.timeout(4 * walks.PATIENCE_SECONDS)
# The Luanti walks' own fixtures: a migrated database, and a stage (a serve and a world).
migrated = walks.migrated
stage = walks.stage

#: The gravity the lease lends every player.
LOW = 0.25


def low_gravity_until_alice_dies() -> dict[str, Any]:
    lease = {"lease": "luanti.setting", "target": "gravity", "value": str(LOW), "minutes": 10}
    return {
        "title": "Low gravity",
        "spec": {
            "schedule": {"kind": "manual"},
            "phases": [
                {
                    "key": "arrive",
                    "label": "Arrive",
                    "steps": [],
                    "advance": gate("luanti.player.joined", "player", "alice"),
                },
                {
                    "key": "float",
                    "label": "Float",
                    "steps": [{"action": "core.lease", "params": lease}],
                    "advance": gate("luanti.player.died", "player", "alice"),
                },
            ],
        },
    }


def test_a_real_player_joins_floats_under_the_leased_gravity_dies_and_gets_it_back(
    stage: Stage,
) -> None:
    need_client()
    stage.serve()
    world = stage.world
    world.start()
    began = time.monotonic()
    run_id = stage.start(low_gravity_until_alice_dies())
    until("the arrive phase", lambda: stage.run(run_id)["run"]["current_phase"] == "arrive")
    alice = Player(world, "alice")
    try:
        alice.join()
        # The gate reads the happening's payload: only a join naming alice opens it.
        until("the float phase", lambda: stage.run(run_id)["run"]["current_phase"] == "float")
        until("alice under the leased gravity", lambda: alice.gravity() == pytest.approx(LOW))

        # A player who joins while the lease holds gets the leased gravity too.
        alice.leave()
        until("alice gone", lambda: "alice" not in world.ask("players")["players"])
        alice.join()
        until("alice back under the leased gravity", lambda: alice.gravity() == pytest.approx(LOW))

        assert world.ask("hurt", player="alice", hp=0)["hp"] == 0
        view = ended(stage, run_id)
        assert view["run"]["status"] == "completed"
        assert held(view) == [("luanti.setting", "reverted")]
        assert alice.gravity() == pytest.approx(1.0)
        assert world.setting("gravity") == "1"
    finally:
        alice.leave()
    print(f"A real player's walk: {time.monotonic() - began:.1f} s")
