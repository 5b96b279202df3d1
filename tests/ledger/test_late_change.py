"""A late change after a cleanup: a perform cut off by its budget that the game applies after
the host gave the step back. A plugin on contract 1.2 refuses it (a revert is final for its
key) and the run's cleanup is ``complete``; a plugin on ``^1.1`` never promised that, so the
host says ``incomplete`` with the reason instead of "everything given back" — on the run,
in its log, and on every surface that lists the plugin. Real plugins through entry points,
the real engine, both databases."""

from __future__ import annotations

import asyncio
import html
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from pageant.api.app import make_app
from pageant.cli.plugins import plugin_lines
from pageant.db import resources
from pageant.engine import Engine
from pageant.hosting import Host
from pageant.plugins.loader import plugin_listing
from pageant.runs import controls
from pageant.switchboard import board
from tests.conftest import bearer
from tests.console.test_console import sign_in
from tests.factories import log_lines, phase, run_row, spec, start_event, step
from tests.fixture_plugins import fake_site, source

OLD_WARNING = (
    "pageant-oldmint is on contract 1.1 and cannot promise that a late change is refused; "
    "check the world"
)


@pytest.fixture
async def mint_host(settings, db, clock, tmp_path, monkeypatch) -> AsyncIterator[Host]:
    with fake_site(tmp_path / "site", monkeypatch) as site:
        site.install("pageant-oldmint", {"oldmint": "mint:OldMint"}, {"mint": source("mint")})
        site.install("pageant-mint", {"mint": "mint:Mint"}, {})
        import mint

        mint.GAME.__init__()  # type: ignore[misc]  # a fresh world for each test
        host = Host(settings, clock=clock, db=db)
        async with host.db.begin() as conn:
            for action_id in ("oldmint.coins.drop", "mint.coins.drop"):
                await board.set_action(
                    conn,
                    host.registry,
                    action_id,
                    enabled=True,
                    actor="admin:test",
                    now=clock.now(),
                )
        try:
            yield host
        finally:
            for command in list(mint.IN_FLIGHT):
                command.cancel()
            await host.close()


async def _cut_off_cancelled_and_cleaned(host: Host, owner: str) -> tuple[int, Any]:
    """A run whose drop of 2 coins is cut off by its budget, cancelled, and given back;
    then the game applies the command it was holding. Answers the run id and the game."""
    import mint

    engine = Engine(host)
    try:
        run_id = await start_event(host, spec(phase("p", step(f"{owner}.coins.drop", count=2))))
        await engine.tick()  # the perform is cut off after 300 ms; the step waits to retry
        assert mint.GAME.coins == {} and len(mint.IN_FLIGHT) == 1
        await controls.cancel(host, run_id, actor="admin:test", reason="called off")
        await engine.tick()  # the cleanup stage reverts the key, with no resources
        assert mint.GAME.release is not None
        mint.GAME.release.set()  # the game gets to the command at last
        await asyncio.gather(*mint.IN_FLIGHT)
    finally:
        await engine.stop()
    return run_id, mint.GAME


async def test_a_late_change_on_a_contract_1_1_plugin_leaves_the_cleanup_incomplete(mint_host):
    run_id, game = await _cut_off_cancelled_and_cleaned(mint_host, "oldmint")
    assert len(game.coins) == 2  # what the host could not know: the coins landed late
    run = await run_row(mint_host.db, run_id)
    assert (run.status, run.cleanup_status) == ("cancelled", "incomplete")
    async with mint_host.db.connect() as conn:
        (row,) = await resources.resources_of_run(conn, run_id)
    assert (row.kind, row.status, row.last_error) == ("@step", "revert_failed", OLD_WARNING)
    cleanup = [line.detail for line in await log_lines(mint_host.db, run_id, "resource.cleanup")]
    assert cleanup[-1] == {"to": "incomplete", "because": OLD_WARNING}


async def test_a_late_change_on_a_contract_1_2_plugin_is_refused_and_the_cleanup_complete(
    mint_host,
):
    run_id, game = await _cut_off_cancelled_and_cleaned(mint_host, "mint")
    assert game.coins == {}  # the revert was final for the key: the late command made nothing
    run = await run_row(mint_host.db, run_id)
    assert (run.status, run.cleanup_status) == ("cancelled", "complete")
    async with mint_host.db.connect() as conn:
        (row,) = await resources.resources_of_run(conn, run_id)
    assert (row.kind, row.status) == ("@step", "reverted")


async def test_an_admins_cleanup_after_checking_the_world_gives_it_back_again(mint_host):
    import mint

    run_id, game = await _cut_off_cancelled_and_cleaned(mint_host, "oldmint")
    assert len(game.coins) == 2
    assert await controls.cleanup(mint_host, run_id, actor="admin:test") == "complete"
    assert mint.GAME.coins == {}  # the key's revert, asked again, took the late coins back


async def test_every_surface_shows_the_warning_for_a_plugin_on_contract_1_1_only(
    mint_host, aiohttp_client, tokens
):
    items = {item["name"]: item for item in plugin_listing(mint_host.plugins)}
    assert items["oldmint"]["warnings"] == [OLD_WARNING]
    assert items["mint"]["warnings"] == []
    # The built-ins and the examples keep a revert final for its key.
    assert [name for name, item in items.items() if item["warnings"]] == ["oldmint"]
    assert f"           warning: {OLD_WARNING}" in plugin_lines(list(items.values()))

    client = await aiohttp_client(make_app(mint_host, run_engine=False))
    answer = await client.get("/api/v1/admin/plugins", headers=bearer(tokens["moderator"]))
    by_name = {item["name"]: item for item in (await answer.json())["items"]}
    assert (by_name["oldmint"]["warnings"], by_name["mint"]["warnings"]) == ([OLD_WARNING], [])
    await sign_in(client, tokens["moderator"])
    page = await (await client.get("/plugins")).text()
    assert page.count("cannot promise that a late change is refused") == 1
    assert f"warning: {OLD_WARNING}" in html.unescape(page)


async def test_the_host_warns_once_at_start_of_a_plugin_on_contract_1_1(mint_host, caplog):
    with caplog.at_level(logging.INFO):
        await mint_host.start_plugins()
    late = [r for r in caplog.records if "late change" in r.getMessage()]
    assert [(r.levelname, r.getMessage()) for r in late] == [
        ("WARNING", f"plugin pageant-oldmint[oldmint]: {OLD_WARNING}")
    ]
