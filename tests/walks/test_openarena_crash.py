"""pageant killed mid-muster on a real OpenArena server: a real ``pageant serve`` loading
the openarena plugin from its entry point adds bots, is killed with SIGKILL while the muster
goes on, and is started again. The restarted host still knows the bots from its ledger, adds
none twice, and kicks them all at the run's end."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from pageant_openarena.dedicated import Dedicated

from tests.cli.test_cli import pageant
from tests.databases import empty_database
from tests.processes import Serve, api_call, command, until
from tests.walks.test_openarena_walk import BOT_ROW, need_engine

PATIENCE_SECONDS = 60


@pytest.fixture
def migrated(dialect: str, tmp_path: Path) -> Iterator[str]:
    with empty_database(dialect, tmp_path) as url:
        result = pageant("db", "upgrade", "--database-url", url)
        assert result.exit_code == 0, result.output
        yield url


async def call(*args: object) -> dict:
    """An API call (it runs a loop of its own: off this one's thread)."""
    return await asyncio.to_thread(api_call, *args)


def serve(url: str, tmp_path: Path, name: str, arena: Dedicated) -> Serve:
    plugin = {
        "rcon_port": arena.port,
        "rcon_password": arena.password,
        "log_path": arena.log_path,
        "state_dir": tmp_path,
        "rcon_timeout_seconds": 2.0,
        "probe_seconds": 2.0,
    }
    return Serve(
        url,
        tmp_path / f"{name}.log",
        poll_seconds=0.2,
        step_lease_margin_seconds=1,
        run_lease_seconds=2,
        **{f"plugin_openarena_{key}": value for key, value in plugin.items()},
    )


async def test_a_host_killed_mid_muster_kicks_its_bots_after_its_restart(
    migrated: str, tmp_path: Path
) -> None:
    need_engine()
    arena = Dedicated(tmp_path / "arena")
    await arena.start()
    token = await asyncio.to_thread(
        command, migrated, "token", "create", "--role", "admin", "--name", "crash"
    )
    first = serve(migrated, tmp_path, "first", arena)
    second: Serve | None = None

    async def bots() -> list[str]:
        return sorted(BOT_ROW.findall(await arena.rcon().command("status", idempotent=True)))

    try:
        for action in ("openarena.bots.add", "core.lease"):
            await call(
                first.base, "PUT", f"/api/v1/admin/actions/{action}", token, {"enabled": True}
            )
        lease = {"lease": "openarena.cvar", "target": "g_gravity", "value": "300", "minutes": 10}
        event = await call(
            first.base,
            "POST",
            "/api/v1/admin/events",
            token,
            {
                "title": "Frenzy under fire",
                "spec": {
                    "schedule": {"kind": "manual"},
                    "phases": [
                        {
                            "key": "muster",
                            "label": "Muster",
                            "steps": [
                                {"action": "core.lease", "params": lease},
                                {
                                    "action": "openarena.bots.add",
                                    "params": {"count": 3, "skill": 1},
                                },
                                {"action": "core.wait", "params": {"seconds": 12}},
                            ],
                        }
                    ],
                },
            },
        )
        await call(first.base, "POST", f"/api/v1/admin/events/{event['id']}/publish", token)
        started = await call(first.base, "POST", f"/api/v1/admin/events/{event['id']}/runs", token)
        run_id = started["id"]

        async with asyncio.timeout(PATIENCE_SECONDS):
            while len(await bots()) < 3:  # noqa: ASYNC110 - the game server's state, polled
                await asyncio.sleep(0.5)
        added = await bots()
        first.signal(signal.SIGKILL)  # mid-muster: the bots are out, the wait is running
        first.wait(10)
        assert await bots() == added  # the server does not care that pageant died

        second = serve(migrated, tmp_path, "second", arena)

        def finished() -> bool:
            found = api_call(second.base, "GET", f"/api/v1/admin/runs/{run_id}", token)  # type: ignore[union-attr]  # second: narrowed outside this closure
            return found["run"]["cleanup_status"] == "complete"

        assert await asyncio.to_thread(until, finished, timeout=PATIENCE_SECONDS)
        view = await call(second.base, "GET", f"/api/v1/admin/runs/{run_id}", token)
    finally:
        first.kill()
        if second is not None:
            second.kill()
        left = await bots()
        await arena.stop()

    assert view["run"]["status"] == "completed"
    held = sorted((r["kind"], r["ref"].partition("/")[2], r["status"]) for r in view["resources"])
    assert held == sorted(
        [("openarena.bot", name, "reverted") for name in added]
        + [("openarena.cvar", "", "reverted")]
    )
    assert left == []  # every bot it added was kicked, after the restart
