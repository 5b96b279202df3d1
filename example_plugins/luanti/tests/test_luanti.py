"""pageant-luanti against ``pageant.testing``: the plugin loaded from its entry point into a
real host, its commands carried over the real sync route to a :class:`FakeAgent` standing in
for the ``pageant_bridge`` mod (the real mod is walked in ``tests/walks/test_luanti_walk.py``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from pageant_luanti import LuantiPlugin
from pageant_luanti.settings import LuantiSettings

from pageant.hookspecs import UNKNOWN, HeldResource
from pageant.testing import FakeAgent, assert_failed, assert_ok

KEY = "run-1-step-2"


@pytest.fixture
def pageant_plugins(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    monkeypatch.setenv("PAGEANT_PLUGIN_LUANTI_SERVERS", "world,world_b")
    monkeypatch.setenv("PAGEANT_PLUGIN_LUANTI_PLACES", "altar=0,9,0;vault=5,-3,7@world_b")
    return ["luanti"]


@pytest.fixture
def plugin(pageant_kit: Any) -> LuantiPlugin:
    (record,) = [r for r in pageant_kit.host.plugins.loaded() if r.owner == "luanti"]
    assert record.distribution == "pageant-luanti"
    found: LuantiPlugin = record.plugin
    found.now = pageant_kit.clock.now  # a lease's deadlines on the host's clock
    return found


@pytest.fixture
async def world(pageant_kit: Any, pageant_client: Any) -> AsyncIterator[FakeAgent]:
    token = await pageant_kit.link_token(["world", "world_b"], owners=["luanti"])
    agent = FakeAgent(
        pageant_client,
        token,
        "world",
        answers={
            "say": {"said": True},
            "spawn": lambda p: {"ids": [f"{KEY}#{i}" for i in range(1, p["count"] + 1)]},
            "despawn": lambda p: {"removed": p["ids"]},
            "give": lambda p: {"given": p["count"]},
            "take": {"taken": 1, "gone": 2},
            "setting_get": {"value": "72"},
            "setting_set": {"baseline": "72"},
            "setting_restore": {"value": "72"},
            "players": {"count": 3},
            "entities": {
                "entities": [{"id": f"{KEY}#1", "kind": "beacon"}],
                "unloaded": [f"{KEY}#2"],
            },
        },
        wait=0.2,
    )
    await agent.start()
    yield agent
    await agent.stop()


def sent(agent: FakeAgent, command: str) -> list[dict[str, Any]]:
    return [c for c in agent.received if c["command"] == command]


async def test_the_settings_read_places_from_the_environment_and_refuse_a_bad_one() -> None:
    settings = LuantiSettings(servers="world,world_b", places="altar=0,9,0;vault=5,-3,7@world_b")
    assert [(p.id, p.server, p.x, p.y, p.z) for p in settings.places] == [
        ("altar", "world", 0, 9, 0),
        ("vault", "world_b", 5, -3, 7),
    ]
    with pytest.raises(ValueError, match="'altar=0,9' is not name=x,y,z"):
        LuantiSettings(places="altar=0,9")
    with pytest.raises(ValueError, match="no server 'world_c'"):
        LuantiSettings(places="altar=0,9,0@world_c")
    with pytest.raises(ValueError, match="not a setting the bridge can lease: fov"):
        LuantiSettings(settings="time_speed,fov")


async def test_spawn_sends_its_place_and_records_one_resource_per_entity(
    pageant_kit: Any, plugin: LuantiPlugin, world: FakeAgent
) -> None:
    params = {"kind": "beacon", "count": 3, "place": "altar"}
    envelope = assert_ok(await pageant_kit.perform("luanti.spawn", params, idempotency_key=KEY))
    (spawn,) = sent(world, "spawn")
    assert (spawn["key"], spawn["payload"]) == (
        KEY,
        {"x": 0, "y": 9, "z": 0, "kind": "beacon", "count": 3},
    )
    assert [(r.kind, r.ref) for r in envelope.resources] == [
        ("luanti.entity", f"world/{KEY}#{i}") for i in (1, 2, 3)
    ]
    # The host reverts once per resource, under the step's key: one despawn of every id.
    for _ in envelope.resources:
        assert_ok(
            await pageant_kit.perform("luanti.spawn", params, idempotency_key=KEY, revert=True)
        )
    assert world.performed[("despawn", KEY)] == 1
    assert sent(world, "despawn")[0]["payload"]["ids"] == [f"{KEY}#{i}" for i in (1, 2, 3)]
    assert pageant_kit.registry.actions["luanti.spawn"].cost(params) == {"luanti.entities": 3}


async def test_a_spawn_the_world_cannot_take_is_refused_and_sends_nothing(
    pageant_kit: Any, plugin: LuantiPlugin, world: FakeAgent
) -> None:
    for params, error in [
        (
            {"kind": "beacon", "count": 3, "place": "moon"},
            "no place 'moon'; the places are altar, vault",
        ),
        ({"kind": "dragon", "count": 1, "place": "altar"}, "no kind 'dragon'"),
        ({"kind": "beacon", "count": 11, "place": "altar"}, "count 11 is outside 1 to 10"),
        ({"kind": "beacon", "count": 0, "place": "altar"}, "count 0 is outside 1 to 10"),
    ]:
        for verify in (True, False):
            envelope = await pageant_kit.perform("luanti.spawn", params, verify=verify)
            assert_failed(envelope, retry=False)
            assert error in (envelope.error or "")
    assert_ok(
        await pageant_kit.perform("luanti.spawn", {"kind": "beacon", "count": 10, "place": "altar"})
    )
    assert [c["payload"]["count"] for c in sent(world, "spawn")] == [10]


async def test_a_place_in_a_second_world_goes_to_that_worlds_agent(
    pageant_kit: Any, pageant_client: Any, plugin: LuantiPlugin, world: FakeAgent
) -> None:
    other = FakeAgent(
        pageant_client, world.token, "world_b", answers={"give": {"given": 2}}, wait=0.2
    )
    await other.start()
    try:
        params = {"item": "default:diamond", "count": 2, "place": "vault"}
        envelope = assert_ok(await pageant_kit.perform("luanti.give", params, idempotency_key=KEY))
    finally:
        await other.stop()
    assert sent(world, "give") == []
    assert [c["payload"] for c in other.received] == [
        {"x": 5, "y": -3, "z": 7, "item": "default:diamond", "count": 2}
    ]
    assert [(r.ref, r.detail) for r in envelope.resources] == [(f"world_b/{KEY}", {"given": 2})]


async def test_give_is_taken_back_as_far_as_it_is_still_in_the_chest(
    pageant_kit: Any, plugin: LuantiPlugin, world: FakeAgent, caplog: pytest.LogCaptureFixture
) -> None:
    params = {"item": "default:diamond", "count": 3, "place": "altar"}
    assert_ok(await pageant_kit.perform("luanti.give", params, idempotency_key=KEY))
    assert_ok(await pageant_kit.perform("luanti.give", params, idempotency_key=KEY, revert=True))
    assert sent(world, "take")[0]["payload"]["count"] == 3
    assert (
        f"luanti.give under {KEY}: 2 of 3 default:diamond were gone from the chest at altar"
        in caplog.text
    )


async def test_the_lease_hands_the_world_its_until(
    pageant_kit: Any, plugin: LuantiPlugin, world: FakeAgent
) -> None:
    lease = pageant_kit.registry.leases["luanti.setting"]
    until = pageant_kit.clock.now() + timedelta(minutes=10)
    assert await lease.read("time_speed") == "72"
    assert await lease.apply_until("time_speed", "720", until) == "72"
    await lease.restore("time_speed", "72")
    (applied,) = sent(world, "setting_set")
    assert applied["payload"] == {
        "name": "time_speed",
        "value": "720",
        "until": "2030-01-04T19:10:00Z",
    }
    assert sent(world, "setting_restore")[0]["payload"] == {"name": "time_speed", "baseline": "72"}
    # A key the host passes (a lease's calls may carry one) names the command.
    await lease.apply("time_speed", "720", until=until, key="lease-7-apply")
    await lease.restore("time_speed", "72", key="lease-7-restore")
    assert [c["key"] for c in world.received[-2:]] == ["lease-7-apply", "lease-7-restore"]
    with pytest.raises(ValueError, match=r"'fov' is not a setting luanti\.setting may lease"):
        await lease.read("fov")
    with pytest.raises(ValueError, match="no server 'world_c'"):
        await lease.read("world_c:time_speed")


async def test_reconcile_keeps_what_the_world_still_has_and_drops_the_rest(
    plugin: LuantiPlugin, world: FakeAgent
) -> None:
    held = [
        HeldResource("luanti", "luanti.entity", f"world/{KEY}#{i}", "confirmed") for i in (1, 2, 3)
    ] + [HeldResource("luanti", "luanti.setting", "time_speed", "confirmed")]
    still = await plugin.pageant_reconcile(held)
    # #1 is loaded, #2 sits in a block not active yet: both stand; #3 is gone.
    assert sorted(still) == ["time_speed", f"world/{KEY}#1", f"world/{KEY}#2"]


async def test_a_world_that_stopped_syncing_is_retried_and_its_own_error_is_final(
    pageant_kit: Any, plugin: LuantiPlugin, world: FakeAgent
) -> None:
    def broken(payload: Any) -> Any:
        raise RuntimeError("no chest at (0,9,0)")

    world.answers["give"] = broken
    params = {"item": "default:diamond", "count": 3, "place": "altar"}
    envelope = assert_failed(await pageant_kit.perform("luanti.give", params), retry=False)
    assert "no chest at (0,9,0)" in (envelope.error or "")

    await world.stop()
    pageant_kit.clock.advance(60)  # past link_offline_seconds: the world is down
    envelope = assert_failed(await pageant_kit.perform("luanti.say", {"message": "hi"}), retry=True)
    assert "world last synced" in (envelope.error or "")


async def test_players_online_is_the_count_the_bridge_answers_and_unknown_without_it(
    pageant_kit: Any, world: FakeAgent
) -> None:
    assert await pageant_kit.read("luanti.players_online", {"server": "world"}) == 3
    assert await pageant_kit.read("luanti.players_online", {}) == 3  # the first world
    assert [c["payload"] for c in sent(world, "players")] == [{}, {}]
    await world.stop()  # the world stops syncing: down, and the read is unknown
    assert await pageant_kit.read("luanti.players_online", {"server": "world_b"}) is UNKNOWN
