"""The shard plugin, tested with pageant.testing alone: a real host over a throwaway SQLite
database, the plugin loaded from its installed entry point or handed over as an object (so
a test can look at its world)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pageant_shard import ShardPlugin
from pageant_shard.world import ShardDown, World

from pageant.hookspecs import HeldResource
from pageant.testing import Kit, assert_failed, assert_log_kinds, assert_ok

SPAWN = {"region": "yew", "creature": "guardian", "count": 3}
ENV = "PAGEANT_PLUGIN_SHARD_"


@pytest.fixture
def shard() -> ShardPlugin:
    return ShardPlugin()


@pytest.fixture
def pageant_plugins(shard: ShardPlugin) -> list[Any]:
    return [shard]


def lease_event(*, then_wait: int = 60) -> dict[str, Any]:
    """Lease the XP rate, then hold the run for ``then_wait`` seconds before it ends."""
    lease = {"lease": "shard.config", "target": "xp_rate", "value": "2.0", "minutes": 30}
    return {
        "phases": [
            {
                "key": "boost",
                "label": "Boost",
                "steps": [
                    {"action": "core.lease", "params": lease},
                    {"action": "core.wait", "params": {"seconds": then_wait}},
                ],
            }
        ]
    }


# ── loading ──────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("pageant_plugins", [["pageant-shard"]])
def test_shard_loads_from_its_entry_point(pageant_kit: Kit) -> None:
    assert pageant_kit.refused() == {}
    assert {"shard.spawn", "shard.broadcast", "shard.reward.grant"} <= set(
        pageant_kit.registry.actions
    )
    assert pageant_kit.registry.owner_of("leases", "shard.config") == "pageant-shard[shard]"


async def test_a_bad_setting_refuses_the_plugin_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from pageant.testing import kit_host

    monkeypatch.setenv(ENV + "TICK_SECONDS", "-1")
    async with kit_host([ShardPlugin()]) as kit:
        (reason,) = kit.refused().values()
    assert "tick_seconds" in reason and "PAGEANT_PLUGIN_SHARD_TICK_SECONDS" in reason


# ── spawn ────────────────────────────────────────────────────────────────────


async def test_spawning_twice_under_one_key_spawns_once(
    pageant_kit: Kit, shard: ShardPlugin
) -> None:
    first = assert_ok(await pageant_kit.perform("shard.spawn", SPAWN, idempotency_key="k1"))
    again = assert_ok(await pageant_kit.perform("shard.spawn", SPAWN, idempotency_key="k1"))

    assert [r.ref for r in first.resources] == ["c00001", "c00002", "c00003"]
    assert first.resources == again.resources
    assert len(shard.world.creatures) == 3


async def test_the_revert_despawns_everything_under_the_key_and_repeats_harmlessly(
    pageant_kit: Kit, shard: ShardPlugin
) -> None:
    assert_ok(await pageant_kit.perform("shard.spawn", SPAWN, idempotency_key="k1"))
    shard.world.slay("c00002")  # a player got there first

    assert_ok(await pageant_kit.perform("shard.spawn", SPAWN, idempotency_key="k1", revert=True))
    assert_ok(await pageant_kit.perform("shard.spawn", SPAWN, idempotency_key="k1", revert=True))
    assert shard.world.creatures == {}


async def test_a_spawn_or_a_gate_after_its_revert_makes_nothing(
    pageant_kit: Kit, shard: ShardPlugin
) -> None:
    await pageant_kit.perform_after_revert("shard.spawn", SPAWN, idempotency_key="late")
    gate = {"from": "yew", "to": "vesper", "minutes": 5}
    await pageant_kit.perform_after_revert("shard.gate.open", gate, idempotency_key="late-gate")
    assert (shard.world.spawned, shard.world.creatures, shard.world.gates) == ({}, {}, {})


async def test_a_spawn_outside_the_world_fails_for_good(pageant_kit: Kit) -> None:
    nowhere = await pageant_kit.perform("shard.spawn", {**SPAWN, "region": "atlantis"})
    assert_failed(nowhere, retry=False, error="no such region 'atlantis'")
    too_many = await pageant_kit.perform("shard.spawn", {**SPAWN, "count": 51})
    assert_failed(too_many, retry=False, error="51 is outside 1 to 50")
    assert_ok(await pageant_kit.perform("shard.spawn", {**SPAWN, "count": 50}, verify=True))


async def test_a_despawn_that_is_told_to_fail_fails_that_often_then_succeeds(
    monkeypatch: pytest.MonkeyPatch, shard: ShardPlugin, pageant_plugins: list[Any]
) -> None:
    from pageant.testing import kit_host

    monkeypatch.setenv(ENV + "FAULT_REVERT_FAILURES", "2")
    async with kit_host(pageant_plugins) as kit:
        assert_ok(await kit.perform("shard.spawn", SPAWN, idempotency_key="k1"))
        for n in (1, 2):
            failed = await kit.perform("shard.spawn", SPAWN, idempotency_key="k1", revert=True)
            assert_failed(failed, retry=True, error=f"fault {n} of 2")
        assert len(shard.world.creatures) == 3
        assert_ok(await kit.perform("shard.spawn", SPAWN, idempotency_key="k1", revert=True))
        assert shard.world.creatures == {}


# ── messages, gates, rewards ─────────────────────────────────────────────────


async def test_a_broadcast_is_sent_every_time_and_a_notice_once_per_key(
    pageant_kit: Kit, shard: ShardPlugin
) -> None:
    said = {"message": "Hear ye"}
    for _ in range(2):
        assert_ok(await pageant_kit.perform("shard.broadcast", said, idempotency_key="k"))
        assert_ok(await pageant_kit.perform("shard.towncrier.post", said, idempotency_key="k"))

    assert shard.world.broadcasts == ["Hear ye", "Hear ye"]
    assert shard.world.notices == {"k": "Hear ye"}


async def test_a_broadcast_left_but_unacknowledged_says_do_not_retry(
    monkeypatch: pytest.MonkeyPatch, shard: ShardPlugin, pageant_plugins: list[Any]
) -> None:
    from pageant.testing import kit_host

    monkeypatch.setenv(ENV + "FAULT_BROADCAST_ACKS_LOST", "1")
    monkeypatch.setenv(ENV + "BROADCAST_ACK_SECONDS", "0.05")
    async with kit_host(pageant_plugins) as kit:
        answer = await kit.perform("shard.broadcast", {"message": "Once"})
        assert_failed(answer, retry=False, error="the broadcast left")
        # Only the first acknowledgement was lost: the next broadcast is acknowledged.
        assert_ok(await kit.perform("shard.broadcast", {"message": "Twice"}))
    assert shard.world.broadcasts == ["Once", "Twice"]


async def test_a_gate_opens_once_per_key_with_its_deadline_and_closes(
    pageant_kit: Kit, shard: ShardPlugin
) -> None:
    params = {"from": "vesper", "to": "yew", "minutes": 30}
    opened = assert_ok(await pageant_kit.perform("shard.gate.open", params, idempotency_key="g"))
    assert_ok(await pageant_kit.perform("shard.gate.open", params, idempotency_key="g"))

    (gate,) = opened.resources
    assert gate.kind == "gate"
    assert shard.world.gates[gate.ref]["closes_at"] == gate.detail["closes_at"]
    assert len(shard.world.gates) == 1
    assert_ok(
        await pageant_kit.perform("shard.gate.open", params, idempotency_key="g", revert=True)
    )
    assert shard.world.gates == {}
    loop = await pageant_kit.perform("shard.gate.open", {**params, "to": "vesper"})
    assert_failed(loop, retry=False, error="a gate needs two regions")


async def test_a_reward_is_granted_once_per_key_and_nothing_is_reported(
    pageant_kit: Kit, shard: ShardPlugin
) -> None:
    params = {"item": "champion_sigil", "amount": 2}
    for _ in range(2):
        granted = assert_ok(
            await pageant_kit.perform("shard.reward.grant", params, idempotency_key="r")
        )
        assert granted.resources == ()
    assert shard.world.rewards == {"r": {"item": "champion_sigil", "amount": 2}}
    unknown = await pageant_kit.perform("shard.reward.grant", {**params, "item": "moon"})
    assert_failed(unknown, retry=False, error="no such item 'moon'")


# ── option sources ───────────────────────────────────────────────────────────


async def test_the_option_sources_answer_the_world(pageant_kit: Kit) -> None:
    regions = [item["value"] for item in await pageant_kit.resolve("shard.options.regions")]
    assert regions == ["yew", "vesper", "dustmoor"]
    landmarks = await pageant_kit.resolve("shard.options.landmarks")
    assert {"value": "yew.shrine", "label": "Shrine of the Oak (Yew Woods)"} in landmarks
    creatures = [item["value"] for item in await pageant_kit.resolve("shard.options.creatures")]
    assert "guardian" in creatures and "champion" in creatures
    items = [item["value"] for item in await pageant_kit.resolve("shard.options.items")]
    assert items == ["gold", "champion_sigil", "potion"]
    servers = await pageant_kit.resolve("shard.options.servers")
    assert [(item["value"], item["zone"]) for item in servers] == [
        ("eu-1", "Europe/Berlin"),
        ("sa-1", "America/Santiago"),
        ("ap-1", "Asia/Tokyo"),
    ]
    assert all("zone" not in item for item in landmarks)


# ── the lease ────────────────────────────────────────────────────────────────


async def test_a_leased_value_is_put_back_when_the_run_ends(
    pageant_kit: Kit, shard: ShardPlugin
) -> None:
    await pageant_kit.enable("core.lease")

    console = await pageant_kit.run_to_completion(lease_event())

    assert console["run"]["status"] == "completed"
    (lease,) = console["resources"]
    assert (lease["kind"], lease["ref"], lease["status"]) == ("shard.config", "xp_rate", "reverted")
    assert shard.world.config["xp_rate"] == "1.0"


async def test_a_value_a_game_master_changed_meanwhile_is_left_alone(
    monkeypatch: pytest.MonkeyPatch, shard: ShardPlugin, pageant_plugins: list[Any]
) -> None:
    from pageant.testing import kit_host

    monkeypatch.setenv(ENV + "FAULT_GM_AFTER_SECONDS", "0")
    monkeypatch.setenv(ENV + "FAULT_GM_VALUE", "3.5")
    async with kit_host(pageant_plugins) as kit:
        await kit.enable("core.lease")
        console = await kit.run_to_completion(lease_event())

    assert console["run"]["status"] == "completed"
    (lease,) = console["resources"]
    assert lease["status"] == "drifted"
    assert shard.world.config["xp_rate"] == "3.5"
    assert_log_kinds(console, ["resource.confirmed", "resource.drifted"])


# ── reconcile and availability ───────────────────────────────────────────────


def held(kind: str, ref: str) -> HeldResource:
    return HeldResource(owner="shard", kind=kind, ref=ref, status="confirmed")


async def test_reconcile_answers_what_the_world_still_holds(
    pageant_kit: Kit, shard: ShardPlugin
) -> None:
    assert_ok(await pageant_kit.perform("shard.spawn", SPAWN, idempotency_key="k1"))
    shard.world.slay("c00001")
    records = [held("creature", s) for s in ("c00001", "c00002", "c00003")]
    records += [held("gate", "gate-gone"), held("shard.config", "xp_rate")]

    assert await shard.pageant_reconcile(records) == ["c00002", "c00003", "xp_rate"]

    shard.world.go_down()
    with pytest.raises(ShardDown):  # it cannot tell, so the host must change nothing
        await shard.pageant_reconcile(records)


async def test_an_outage_holds_world_changes_and_ends_with_a_new_boot(
    pageant_kit: Kit, shard: ShardPlugin
) -> None:
    await pageant_kit.enable("shard.spawn")
    assert shard.simulation is not None
    boot = shard.world.boot_id
    shard.simulation.outage(60)
    event = {
        "phases": [
            {
                "key": "spawn",
                "label": "Spawn",
                "steps": [{"action": "shard.spawn", "params": SPAWN}],
            }
        ]
    }

    console = await pageant_kit.run_to_completion(event)

    waiting = console["run"]["waiting_on"]
    assert (console["run"]["status"], waiting["reason"]) == ("running", "unavailable")
    assert f"shard {boot} is restarting" in waiting["sentence"]
    assert console["run"]["health"] == "degraded"
    assert shard.world.creatures == {}  # nothing was tried while it was down
    await shard.stop()  # ends the outage's task; the world stays down
    assert not shard.world.up


# ── the simulation ───────────────────────────────────────────────────────────


async def test_every_happening_fits_its_trigger_and_one_seed_tells_one_story(
    pageant_kit: Kit, shard: ShardPlugin
) -> None:
    assert shard.simulation is not None
    assert_ok(await pageant_kit.perform("shard.spawn", SPAWN, idempotency_key="k1"))
    # Each happening is emitted through the host's real emit path, which raises for a
    # payload that does not fit the trigger's declared variables.
    story = [await shard.simulation.happen() for _ in range(60)]

    assert set(story) == {"boss_spawns", "boss_dies", "player_joins", "creature_slain"}
    assert shard.world.players
    assert len(shard.world.creatures) < 3  # players slew some of the event's guardians

    other = ShardPlugin()
    other.world = World()
    from pageant_shard.simulation import Simulation

    retold = Simulation(other.world, _Silent(), shard.settings)
    other.world.spawn("k1", "guardian", "yew", 3)
    assert [await retold.happen() for _ in range(60)] == story


async def test_the_simulation_lives_on_its_own_clock_and_stops_cleanly(
    monkeypatch: pytest.MonkeyPatch, shard: ShardPlugin, pageant_plugins: list[Any]
) -> None:
    from pageant.testing import kit_host

    monkeypatch.setenv(ENV + "SIMULATE", "true")
    monkeypatch.setenv(ENV + "TICK_SECONDS", "0.001")
    async with kit_host(pageant_plugins) as kit:
        assert kit.refused() == {}
        for _ in range(3000):  # at most 30 s; a tick is a millisecond
            if len(shard.world.players) >= 3:
                break
            await asyncio.sleep(0.01)
        assert len(shard.world.players) >= 3, "the simulation did not live"
        await shard.stop()
        after = shard.world.snapshot()
        for _ in range(20):
            await asyncio.sleep(0.005)
        assert shard.world.snapshot() == after  # nothing happens once stopped


class _Silent:
    """A context that swallows what the simulation says (for a second telling)."""

    async def emit(self, trigger_id: str, payload: dict[str, Any]) -> dict[str, int]:
        return {"gates_matched": 0, "gates_closed": 0}
