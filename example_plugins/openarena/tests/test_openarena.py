"""The plugin against a real OpenArena server (a private ``ioq3ded`` per test), through
pageant.testing: bots added once per key and kicked, a reverted key final, the cvar lease,
a say, a wrong password, reconcile and availability."""

# ruff: noqa: F811 - the tests name the imported arena fixture

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from arena_server import arena  # noqa: F401 - a fixture, used by name
from pageant_openarena import OpenArenaPlugin
from pageant_openarena.dedicated import Dedicated

from pageant.hookspecs import UNKNOWN, ActionContext, HeldResource, Resource
from pageant.testing import Kit, assert_failed, assert_ok

ADD = {"count": 3, "skill": 1}
#: A ``status`` row of a bot: number, score, ping, name, ``bot``, rate.
BOT_ROW = re.compile(r"^\s*\d+\s+-?\d+\s+\d+\s+(\S+)\s+bot\s+\d+\s*$", re.MULTILINE)


@pytest.fixture
async def plugin() -> AsyncIterator[OpenArenaPlugin]:
    made = OpenArenaPlugin()
    yield made
    await made.stop()  # its watcher and the log it follows


@pytest.fixture
def pageant_plugins(plugin: OpenArenaPlugin, arena: Dedicated) -> list[Any]:
    return [plugin]


async def bots_on(server: Dedicated) -> list[str]:
    """The names of the bots on the server, as its ``status`` lists them."""
    answer = await server.rcon().command("status", idempotent=True)
    return sorted(BOT_ROW.findall(answer))


def context(
    key: str, params: dict[str, Any], resources: tuple[Resource, ...] = ()
) -> ActionContext:
    return ActionContext(
        params=params,
        idempotency_key=key,
        run=None,
        verify=False,
        deadline=datetime.now(UTC) + timedelta(seconds=30),
        resources=resources,
    )


async def test_bots_join_once_per_key_and_each_is_kicked_by_its_revert(
    pageant_kit: Kit,
    plugin: OpenArenaPlugin,
    arena: Dedicated,
) -> None:
    added = assert_ok(await pageant_kit.perform("openarena.bots.add", ADD, idempotency_key="k1"))
    names = sorted(r.detail["name"] for r in added.resources)
    assert len(names) == 3 and all(n.startswith(("Sarge-", "Grunt-", "Major-")) for n in names)
    assert await bots_on(arena) == names

    again = assert_ok(await pageant_kit.perform("openarena.bots.add", ADD, idempotency_key="k1"))
    assert sorted(r.ref for r in again.resources) == sorted(r.ref for r in added.resources)
    assert await bots_on(arena) == names  # a retry adds nobody

    first = added.resources[0]
    assert_ok(await plugin.kick_bots(context("k1", ADD, (first,))))
    assert await bots_on(arena) == sorted(set(names) - {first.detail["name"]})
    assert_ok(await plugin.kick_bots(context("k1", ADD, (first,))))  # already gone: fine
    for resource in added.resources[1:]:
        assert_ok(await plugin.kick_bots(context("k1", ADD, (resource,))))
    assert await bots_on(arena) == []


async def test_a_perform_after_its_keys_revert_leaves_nothing(
    pageant_kit: Kit,
    arena: Dedicated,
) -> None:
    assert_ok(await pageant_kit.perform("openarena.bots.add", ADD, idempotency_key="k2"))
    assert_ok(
        await pageant_kit.perform("openarena.bots.add", ADD, idempotency_key="k2", revert=True)
    )
    assert await bots_on(arena) == []

    late = assert_ok(await pageant_kit.perform("openarena.bots.add", ADD, idempotency_key="k2"))
    assert late.resources == ()
    assert await bots_on(arena) == []


async def test_a_perform_still_in_flight_when_its_key_is_reverted_takes_its_bots_back(
    pageant_kit: Kit,
    plugin: OpenArenaPlugin,
    arena: Dedicated,
) -> None:
    server = plugin.servers["main"]
    add_bot = server.add_bot
    calls = 0

    async def revert_lands_after_the_first_bot(character: str, skill: int, name: str) -> Any:
        nonlocal calls
        calls += 1
        refused = await add_bot(character, skill, name)
        if calls == 1:  # the host's revert of this key runs while the perform is under way
            assert_ok(await plugin.kick_bots(context("k3", ADD)))
        return refused

    server.add_bot = revert_lands_after_the_first_bot  # type: ignore[method-assign]  # the test's own failing add
    late = assert_ok(await pageant_kit.perform("openarena.bots.add", ADD, idempotency_key="k3"))
    assert late.resources == ()
    assert calls == 1  # it stopped adding
    assert await bots_on(arena) == []


async def test_the_reverted_keys_outlive_a_restart_of_the_plugin(
    pageant_kit: Kit,
    plugin: OpenArenaPlugin,
    arena: Dedicated,
) -> None:
    assert_ok(
        await pageant_kit.perform("openarena.bots.add", ADD, idempotency_key="k4", revert=True)
    )
    fresh = OpenArenaPlugin()
    fresh.pageant_startup(plugin.context)  # type: ignore[arg-type]  # the kit's context, not the host's
    try:
        assert "k4" in fresh.servers["main"].reverted
    finally:
        await fresh.stop()


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"count": 9, "skill": 3}, "count 9 is outside 1 to 8"),
        ({"count": 0, "skill": 3}, "count 0 is outside 1 to 8"),
        ({"count": 2, "skill": 6}, "skill 6 is outside 1 to 5"),
        ({"count": 2, "skill": 3, "bot": "Zorg"}, "no bot 'Zorg'"),
        ({"count": 2, "skill": 3, "server": "arena9"}, "no server 'arena9'; the servers are main"),
    ],
)
async def test_bad_params_are_refused_and_change_nothing(
    pageant_kit: Kit,
    arena: Dedicated,
    params: dict[str, Any],
    error: str,
) -> None:
    assert_failed(await pageant_kit.perform("openarena.bots.add", params), retry=False, error=error)
    assert await bots_on(arena) == []


async def test_the_bounds_themselves_are_accepted(pageant_kit: Kit, arena: Dedicated) -> None:
    assert_ok(
        await pageant_kit.perform("openarena.bots.add", {"count": 1, "skill": 5, "bot": "Tony"})
    )
    assert [n[:5] for n in await bots_on(arena)] == ["Tony-"]


async def test_a_dry_run_adds_no_bot(pageant_kit: Kit, arena: Dedicated) -> None:
    assert_ok(await pageant_kit.perform("openarena.bots.add", ADD, verify=True))
    assert await bots_on(arena) == []


async def test_say_reaches_the_servers_console_and_an_unsafe_message_is_refused(
    pageant_kit: Kit,
    arena: Dedicated,
) -> None:
    assert_ok(await pageant_kit.perform("openarena.say", {"message": "Low gravity ahead"}))
    await asyncio.sleep(0.3)
    # The server logs the request; its answer (the broadcast it printed) the plugin checks.
    assert (
        "Rcon from 127.0.0.1: say Low gravity ahead" in (arena.folder / "console.txt").read_text()
    )
    assert_failed(
        await pageant_kit.perform("openarena.say", {"message": 'hi"; quit'}),
        retry=False,
        error="may not hold ;",
    )


async def test_the_cvar_lease_reads_a_baseline_sets_and_restores(
    plugin: OpenArenaPlugin,
    pageant_kit: Kit,
    arena: Dedicated,
) -> None:
    assert await plugin.read_cvar("g_gravity") == "800"
    assert await plugin.apply_cvar("g_gravity", "300") == "800"
    assert await plugin.read_cvar("g_gravity") == "300"
    await plugin.restore_cvar("g_gravity", "800")
    assert (
        await arena.rcon().command("g_gravity", idempotent=True)
        == '"g_gravity" is:"800", the default\n'
    )
    with pytest.raises(ValueError, match=r"'rconpassword' is not a cvar openarena\.cvar may lease"):
        await plugin.apply_cvar("rconpassword", "x")
    with pytest.raises(ValueError, match="is not a value a cvar can take"):
        await plugin.apply_cvar("g_gravity", "300;quit")


async def test_reconcile_reports_only_the_bots_still_on_the_server(
    pageant_kit: Kit,
    plugin: OpenArenaPlugin,
    arena: Dedicated,
) -> None:
    added = assert_ok(await pageant_kit.perform("openarena.bots.add", ADD, idempotency_key="k5"))
    gone = added.resources[0]
    await arena.rcon().command(f"kick {gone.detail['name']}", idempotent=True)
    held = [
        HeldResource("openarena", r.kind, r.ref, "confirmed", {"detail": r.detail})
        for r in added.resources
    ] + [HeldResource("openarena", "openarena.cvar", "g_gravity", "confirmed")]
    still = await plugin.pageant_reconcile(held)
    assert sorted(still) == sorted([r.ref for r in added.resources[1:]] + ["g_gravity"])


async def test_a_server_that_stops_answering_makes_the_plugin_unavailable_until_it_is_back(
    pageant_kit: Kit,
    arena: Dedicated,
) -> None:
    host = pageant_kit.host
    assert host.unavailable("openarena.bots.add") is None
    arena.kill()
    async with asyncio.timeout(15):
        while host.unavailable("openarena.bots.add") is None:  # noqa: ASYNC110 - polled
            await asyncio.sleep(0.2)
    reason = host.unavailable("openarena.bots.add")
    assert f"main (127.0.0.1:{arena.port}) does not answer RCON within 2 s" in str(reason)
    await arena.start()
    async with asyncio.timeout(15):
        while host.unavailable("openarena.bots.add") is not None:  # noqa: ASYNC110 - polled
            await asyncio.sleep(0.2)


async def test_a_wrong_password_is_one_clear_error_naming_the_setting(
    pageant_kit: Kit,
    plugin: OpenArenaPlugin,
    arena: Dedicated,
) -> None:
    plugin.servers["main"].rcon.password = "wrong"
    failed = assert_failed(await pageant_kit.perform("openarena.bots.add", ADD), retry=False)
    assert failed.error == (
        f"the OpenArena server main (127.0.0.1:{arena.port}) refused the rcon password: "
        "check PAGEANT_PLUGIN_OPENARENA_RCON_PASSWORD (rcon_password)"
    )
    assert pageant_kit.host.unavailable("openarena.bots.add") is None  # it answers: not down


async def test_players_online_counts_bots_only_when_asked(
    pageant_kit: Kit, arena: Dedicated
) -> None:
    reading = "openarena.players_online"
    assert await pageant_kit.read(reading, {"server": "main"}) == 0
    assert await pageant_kit.read(reading, {"server": "main", "bots": True}) == 0
    assert_ok(await pageant_kit.perform("openarena.bots.add", ADD, idempotency_key="q1"))
    assert len(await bots_on(arena)) == 3
    # The three bots are clients, not players, unless the event says so.
    assert await pageant_kit.read(reading, {"server": "main"}) == 0
    assert await pageant_kit.read(reading, {"server": "main", "bots": False}) == 0
    assert await pageant_kit.read(reading, {"server": "main", "bots": True}) == 3


async def test_players_online_is_unknown_for_a_server_that_does_not_answer(
    pageant_kit: Kit, arena: Dedicated
) -> None:
    reading = "openarena.players_online"
    assert await pageant_kit.read(reading, {"server": "elsewhere"}) is UNKNOWN
    await arena.stop()
    # The plugin answers from a status under a second old (STATUS_WINDOW); after it, the
    # stopped server's silence is unknown, never the last count.
    await asyncio.sleep(1.1)
    assert await pageant_kit.read(reading, {"server": "main"}) is UNKNOWN
