"""Leases in contract 1.2: ``apply`` is told when the lease ends (an ``apply`` written for 1.1
is called as before), and a boot-time self-check drops, loudly, a target whose value does
not take — never offering it to be borrowed and silently ignored."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pageant_shard import ShardPlugin

from pageant import hookimpl
from pageant.api.app import make_app
from pageant.cli.plugins import plugin_lines
from pageant.engine import Engine
from pageant.plugins.loader import plugin_listing
from pageant.runs.create import start_now
from tests.cli.test_cli import pageant
from tests.conftest import bearer
from tests.factories import make_host, phase, publish_event, spec, step, step_rows


class Game:
    """A game with settings of three kinds: live ones, one it reads only at start (a change
    waits for a restart, as OpenArena's latched cvars do), and one whose read fails."""

    PLUGIN_INFO = {"owner": "game", "contract": "^1.2"}  # noqa: RUF012 - read by the loader

    def __init__(self) -> None:
        self.live = {"gravity": "800", "speed": "320", "maxclients": "8", "motd": "hi"}
        self.latched: dict[str, str] = {}
        self.untils: list[tuple[str, datetime]] = []
        self.applied_old: list[str] = []

    async def read(self, target: str) -> str:
        if target == "motd":
            raise ConnectionError("rcon timed out")
        return self.live[target]

    async def apply(self, target: str, value: str, until: datetime) -> str:
        self.untils.append((target, until))
        before = self.live[target]
        if target == "maxclients":
            self.latched[target] = value  # takes effect at the next map
        else:
            self.live[target] = value
        return before

    async def apply_old(self, target: str, value: str) -> str:
        self.applied_old.append(target)
        before, self.live[target] = self.live[target], value
        return before

    async def restore(self, target: str, baseline: str) -> None:
        self.live[target] = baseline

    @hookimpl
    def pageant_leases(self) -> list[dict[str, Any]]:
        calls = {"read": self.read, "restore": self.restore}
        return [
            {
                "id": "game.cvar",
                "label": "A server variable",
                "self_check": {"gravity": "400", "maxclients": "16", "motd": "hello"},
                "apply": self.apply,
                **calls,
            },
            {"id": "game.old", "label": "Written for 1.1", "apply": self.apply_old, **calls},
        ]


@pytest.fixture
def game() -> Game:
    return Game()


@pytest.fixture
async def game_host(settings, db, clock, game):
    h = make_host(settings, db, clock, [game])
    try:
        yield h
    finally:
        await h.close()


def lease(name: str, target: str, value: str, minutes: int = 30) -> dict[str, Any]:
    # skip: a refused lease lets the run go on to the next step, so one run shows them all.
    return step(
        "core.lease", on_failure="skip", lease=name, target=target, value=value, minutes=minutes
    )


async def run_steps(host: Any, *steps: dict[str, Any]) -> int:
    from pageant.switchboard import board

    async with host.db.begin() as conn:
        await board.set_action(
            conn,
            host.registry,
            "core.lease",
            enabled=True,
            caps={},
            actor="admin:t",
            now=host.clock.now(),
        )
    event = await publish_event(host.db, host.clock.now(), spec(phase("p", *steps)))
    run_id, _ = await start_now(host, event.id, scope="", actor="admin:test")
    engine = Engine(host)
    try:
        for _ in range(3):
            await engine.tick()
    finally:
        await engine.stop()
    return run_id


# ── until ─────────────────────────────────────────────────────────────────────


async def test_apply_is_told_when_the_lease_ends_and_a_1_1_apply_is_called_as_before(
    game_host, game, clock
):
    await game_host.start_plugins()
    game.untils.clear()  # the self-check's own probes
    began = clock.now()
    run_id = await run_steps(
        game_host,
        lease("game.cvar", "gravity", "200", minutes=30),
        lease("game.old", "speed", "500"),
    )
    assert [s.status for s in await step_rows(game_host.db, run_id)] == ["done", "done"]
    ((target, until),) = game.untils
    assert target == "gravity"
    assert began + timedelta(minutes=30) <= until <= clock.now() + timedelta(minutes=30)
    assert until.tzinfo is not None
    assert game.applied_old == ["speed"]


async def test_the_shard_puts_a_lease_back_by_itself_only_past_its_deadline() -> None:
    shard = ShardPlugin()
    from pageant_shard.simulation import Simulation

    class Context:
        async def emit(self, trigger_id: str, payload: Any) -> Any:
            return {"gates_matched": 0, "gates_closed": 0}

    shard.simulation = Simulation(shard.world, Context(), shard.settings)  # type: ignore[arg-type]  # a stand-in context with only emit
    now = datetime.now(UTC)
    await shard.apply_config("xp_rate", "2.0", now + timedelta(minutes=5))
    await shard.apply_config("weather", "storm", now - timedelta(seconds=1))
    await shard.simulation.happen()
    # Past its deadline, nobody restored the weather: the shard put it back by itself.
    assert shard.world.config["weather"] == "clear"
    assert shard.world.config["xp_rate"] == "2.0"  # before its deadline: still leased
    await shard.restore_config("xp_rate", "1.0")
    assert shard.world.leased == {}


# ── the self-check ────────────────────────────────────────────────────────────


async def test_a_target_that_does_not_take_is_dropped_loudly_and_refused(
    game_host, game, caplog, aiohttp_client, tokens
):
    caplog.set_level(logging.WARNING, logger="pageant.plugins")
    await game_host.start_plugins()

    # Each target was put back as it was found.
    assert (game.live["gravity"], game.live["maxclients"]) == ("800", "8")
    warned = {r.getMessage() for r in caplog.records if r.levelno == logging.WARNING}
    assert any(
        "game.cvar target 'maxclients' dropped" in m and "read back '8'" in m for m in warned
    )
    assert any("game.cvar target 'motd' dropped" in m and "ConnectionError" in m for m in warned)
    assert not any("'gravity'" in m for m in warned)

    client = await aiohttp_client(make_app(game_host, run_engine=False))
    listed = await (
        await client.get("/api/v1/admin/plugins", headers=bearer(tokens["admin"]))
    ).json()
    (mine,) = [p for p in listed["items"] if p["owner"] == "game"]
    assert [(d["lease"], d["target"]) for d in mine["dropped"]] == [
        ("game.cvar", "maxclients"),
        ("game.cvar", "motd"),
    ]
    assert "does not take while the game runs" in mine["dropped"][0]["reason"]
    catalog = await (
        await client.get("/api/v1/admin/catalog", headers=bearer(tokens["admin"]))
    ).json()
    (cvar,) = [item for item in catalog["leases"] if item["id"] == "game.cvar"]
    assert [d["target"] for d in cvar["dropped"]] == ["maxclients", "motd"]

    # core.lease refuses a dropped target and one the lease does not offer, and lends the rest.
    run_id = await run_steps(
        game_host,
        lease("game.cvar", "maxclients", "16"),
        lease("game.cvar", "speed", "400"),
        lease("game.cvar", "gravity", "200"),
    )
    rows = await step_rows(game_host.db, run_id)
    assert [r.status for r in rows] == ["failed", "failed", "pending"] or [r.status for r in rows][
        :2
    ] == ["failed", "failed"]
    assert "dropped at start" in rows[0].last_error and "maxclients" in rows[0].last_error
    assert "it offers gravity, maxclients, motd" in rows[1].last_error
    assert game.latched == {"maxclients": "16"}  # only the probe ever reached it


class LatchedShard(ShardPlugin):
    """The shard were its lease to offer ``max_players``, which the shard reads only when it
    starts: the example leaves it out, and this is what naming it would do."""

    @hookimpl
    def pageant_leases(self) -> list[dict[str, Any]]:
        (declared,) = super().pageant_leases()
        return [{**declared, "self_check": {**declared["self_check"], "max_players": "64"}}]


async def test_a_latched_shard_setting_named_in_the_self_check_is_dropped_and_listed(
    settings, db, clock, caplog
) -> None:
    host = make_host(settings, db, clock, [LatchedShard()])
    caplog.set_level(logging.WARNING, logger="pageant.plugins")
    try:
        await host.start_plugins()
    finally:
        await host.close()
    why = "applied '64' but read back '32'"
    assert [r.getMessage() for r in caplog.records if why in r.getMessage()] == [
        "lease shard.config target 'max_players' dropped from the catalog (plugin "
        "inline[latchedshard]): applied '64' but read back '32': the value does not take "
        "while the game runs (read only at start, or latched)"
    ]
    (shard,) = [i for i in plugin_listing(host.plugins) if i["name"] == "latchedshard"]
    assert [d["target"] for d in shard["dropped"]] == ["max_players"]
    lines = plugin_lines([shard])
    assert lines[1].strip().startswith(f"dropped  shard.config target 'max_players': {why}")


def test_the_example_shard_offers_no_latched_setting_and_starts_without_a_warning() -> None:
    listed = pageant("plugins", "--json")
    assert listed.exit_code == 0, listed.output
    import json

    items = json.loads(listed.stdout)["items"]
    (shard,) = [item for item in items if item["owner"] == "shard"]
    assert shard["dropped"] == []
    assert "max_players" not in ShardPlugin().pageant_leases()[0]["self_check"]


async def test_a_target_a_run_holds_is_not_probed_when_the_host_starts_again(
    game_host, game, clock
):
    await game_host.start_plugins()
    # A run borrows the gravity and waits on a person: the lease is held.
    cue = step("core.cue", message="hold on")
    run_id = await run_steps(game_host, lease("game.cvar", "gravity", "200"), cue)
    first, _ = await step_rows(game_host.db, run_id)
    assert first.status == "done"
    assert await game_host.held_lease_targets() == {("game.cvar", "gravity")}
    game.untils.clear()

    from pageant.plugins.lease_check import check_leases

    dropped = await check_leases(
        game_host.registry,
        game_host.plugins.records,
        clock.now(),
        await game_host.held_lease_targets(),
    )
    probed = [target for target, _ in game.untils]
    assert "gravity" not in probed and "maxclients" in probed
    assert game.live["gravity"] == "200"  # the run's value, untouched
    assert ("game.cvar", "gravity") not in dropped


async def test_no_database_file_is_made_to_find_the_held_leases(tmp_path) -> None:
    from pageant.hosting import Host
    from pageant.support.settings import Settings

    url = f"sqlite+aiosqlite:///{tmp_path / 'none.db'}"
    host = Host(Settings(database_url=url), plugins=[], discover=False)
    try:
        assert await host.held_lease_targets() == set()
    finally:
        await host.close()
    assert not (tmp_path / "none.db").exists()
