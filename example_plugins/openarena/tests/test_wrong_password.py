"""A wrong rcon password on one of two real servers: found when pageant starts, named with
the server and the ``[[plugins.openarena.servers]]`` entry that gives it, on every surface
(the plugin's record and ``pageant plugins``, the plugins API, ``/healthz``, an event's
``verify``); the other server's steps run."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from arena_server import need_engine
from click.testing import CliRunner
from pageant_openarena.dedicated import Dedicated

from pageant.api.app import make_app
from pageant.cli import main
from pageant.testing import assert_failed, assert_ok, kit_host

ENV = "PAGEANT_PLUGIN_OPENARENA_"


@pytest.fixture
async def servers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Any]:
    need_engine()
    for name in list(os.environ):
        if name.startswith(ENV):
            monkeypatch.delenv(name)
    one, two = Dedicated(tmp_path / "one"), Dedicated(tmp_path / "two")
    await one.start()
    await two.start()
    try:
        yield one, two
    finally:
        await one.stop()
        await two.stop()


def tables(one: Dedicated, two: Dedicated, state: Path) -> dict[str, Any]:
    return {
        "rcon_password": one.password,
        "state_dir": str(state),
        "probe_seconds": 60,
        "servers": [
            {"id": "arena1", "rcon_port": one.port, "log_path": str(one.log_path)},
            {"id": "arena2", "rcon_port": two.port, "rcon_password": "not-the-password"},
        ],
    }


def refused(two: Dedicated) -> str:
    return (
        f"the OpenArena server arena2 (127.0.0.1:{two.port}) refused the rcon password: check "
        'rcon_password in its [[plugins.openarena.servers]] entry (id = "arena2")'
    )


async def test_a_wrong_password_on_one_server_is_found_at_start_and_named(
    servers: Any, tmp_path: Path, aiohttp_client: Any
) -> None:
    one, two = servers
    table = tables(one, two, tmp_path)
    async with kit_host(["pageant-openarena"], plugin_tables={"openarena": table}) as kit:
        (record,) = [r for r in kit.host.plugins.records if r.owner == "openarena"]
        assert record.status == "loaded"
        assert record.problems == [refused(two)]  # only arena2, before any step ran

        client = await aiohttp_client(make_app(kit.host, run_engine=False))
        health = await (await client.get("/healthz?verbose")).json()
        assert health["plugins"] == {record.label: [refused(two)]}
        listed = await (
            await client.get("/api/v1/admin/plugins", headers=kit.headers("admin"))
        ).json()
        (mine,) = [p for p in listed["items"] if p["owner"] == "openarena"]
        assert mine["problems"] == [refused(two)]

        # An event whose step targets arena2 does not verify, naming it; arena1's does.
        for server, passes in (("arena2", False), ("arena1", True)):
            body = {
                "title": f"Bots on {server}",
                "spec": {
                    "schedule": {"kind": "manual"},
                    "phases": [
                        {
                            "key": "muster",
                            "label": "Muster",
                            "steps": [
                                {
                                    "action": "openarena.bots.add",
                                    "params": {"count": 1, "skill": 1, "server": server},
                                }
                            ],
                        }
                    ],
                },
            }
            made = await client.post(
                "/api/v1/admin/events", json=body, headers=kit.headers("admin")
            )
            assert made.status == 201, await made.text()
            event_id = (await made.json())["id"]
            await kit.enable("openarena.bots.add")
            published = await client.post(
                f"/api/v1/admin/events/{event_id}/publish", headers=kit.headers("admin")
            )
            assert published.status == 200, await published.text()
            verified = await client.post(
                f"/api/v1/admin/events/{event_id}/verify", headers=kit.headers("admin")
            )
            answer = await verified.json()
            if passes:
                assert verified.status == 200, answer
            else:
                assert verified.status == 400, answer
                (detail,) = answer["error"]["details"]
                assert detail.endswith(f"failed: {refused(two)}"), detail

        # arena1's steps run: a bot joins it, and the plugin is available throughout.
        added = assert_ok(
            await kit.perform("openarena.bots.add", {"count": 1, "skill": 1, "server": "arena1"})
        )
        assert added.resources[0].ref.startswith("arena1/")
        assert kit.host.unavailable("openarena.bots.add") is None
        assert_failed(
            await kit.perform("openarena.bots.add", {"count": 1, "skill": 1, "server": "arena2"}),
            retry=False,
            error=refused(two),
        )


def test_pageant_plugins_names_the_server_and_exits_1(servers: Any, tmp_path: Path) -> None:
    one, two = servers
    lines = [f'database_url = "sqlite+aiosqlite:///{tmp_path / "p.db"}"', "[plugins.openarena]"]
    table = tables(one, two, tmp_path)
    for key in ("rcon_password", "state_dir", "probe_seconds"):
        lines.append(f"{key} = {table[key]!r}".replace("'", '"'))
    for server in table["servers"]:
        lines.append("[[plugins.openarena.servers]]")
        lines += [f"{k} = {v!r}".replace("'", '"') for k, v in server.items()]
    config = tmp_path / "pageant.toml"
    config.write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(main, ["plugins", "--config", str(config)])
    assert result.exit_code == 1, result.output
    assert f"problem  {refused(two)}" in result.output
    assert "arena1" not in result.output.split("problem", 1)[1]
