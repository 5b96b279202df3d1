"""A host killed (SIGKILL) while a link command is out with the game, and started again: the
agent's answer, sent again to the restarted host, is recorded once; the step's retry finds
the command by its key, so the game does it once; the run ends and gives everything back."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from pageant.access.tokens import create_token
from pageant.db.engine import create_engine
from pageant.db.tables import event_run_steps, event_runs, link_commands
from pageant.support.clock import SystemClock
from pageant.testing import FakeAgent
from tests.cli.test_cli import pageant
from tests.databases import empty_database
from tests.fixture_plugins import fake_site, source
from tests.ledger.test_ledger_crash import Server, _query, _wait_for

EVENT = {
    "title": "Link crash walk",
    "spec": {
        "schedule": {"kind": "manual"},
        "phases": [
            {
                "key": "light",
                "label": "Light",
                "steps": [
                    {"action": "lighthouse.light", "params": {"server": "world-a", "colour": "red"}}
                ],
            }
        ],
    },
}


@pytest.fixture
def migrated(dialect: str, tmp_path: Path) -> Iterator[str]:
    with empty_database(dialect, tmp_path) as url:
        result = pageant("db", "upgrade", "--database-url", url)
        assert result.exit_code == 0, result.output
        yield url


async def _tokens(url: str) -> tuple[str, str]:
    engine = create_engine(url)
    now = SystemClock().now()
    try:
        admin = await create_token(engine, role="admin", name="crash", now=now)
        game = await create_token(
            engine, role="game", name="world-a", now=now, servers=["world-a"], owners=["lighthouse"]
        )
        return admin, game
    finally:
        await engine.dispose()


async def test_a_host_killed_mid_command_has_it_done_once_by_key_after_its_restart(
    migrated: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with fake_site(tmp_path / "site", monkeypatch) as site:
        site.install(
            "pageant-lighthouse",
            {"lighthouse": "lighthouse:Lighthouse"},
            {"lighthouse": source("lighthouse")},
        )
        admin, game = await _tokens(migrated)
        first = Server(migrated, site.root, tmp_path / "unused.json")
        second = Server(migrated, site.root, tmp_path / "unused.json")
        second.port = first.port  # the agent's host comes back where it was
        base = f"http://127.0.0.1:{first.port}"
        # The agent takes its time over a light: the host dies while the game does it.
        agent = FakeAgent(base, game, "world-a", answers={"light": {"id": 5}}, wait=0.5)
        agent.delay = 2.0

        def call(method: str, path: str, body: Any = None) -> Any:
            return first.call(method, path, admin, body)

        try:
            await asyncio.to_thread(first.start)
            await agent.start()
            await asyncio.to_thread(
                call, "PUT", "/api/v1/admin/actions/lighthouse.light", {"enabled": True}
            )
            event = await asyncio.to_thread(call, "POST", "/api/v1/admin/events", EVENT)
            await asyncio.to_thread(call, "POST", f"/api/v1/admin/events/{event['id']}/publish")
            run = await asyncio.to_thread(call, "POST", f"/api/v1/admin/events/{event['id']}/runs")

            for _ in range(400):
                if agent.performed:
                    break
                await asyncio.sleep(0.05)
            assert agent.performed, "the command never reached the agent"
            await asyncio.to_thread(first.kill)  # mid-command: the game is doing it
            agent.delay = 0.0

            await asyncio.to_thread(second.start)

            def finished() -> Any:
                (row,) = _query(migrated, select(event_runs).where(event_runs.c.id == run["id"]))
                return row if row.cleanup_status == "complete" else None

            ended = await asyncio.to_thread(_wait_for, "the run to be cleaned up", finished)
        finally:
            await agent.stop()
            first.stop()
            second.stop()

    assert ended.status == "completed"
    steps = select(event_run_steps).where(event_run_steps.c.run_id == run["id"])
    (step,) = await asyncio.to_thread(_query, migrated, steps)
    key = step.idempotency_key
    # Done once by the game under the step's key, whatever was delivered twice.
    assert agent.performed == {("light", key): 1, ("snuff", key): 1}
    rows = await asyncio.to_thread(
        _query, migrated, select(link_commands).order_by(link_commands.c.id)
    )
    assert [(r.command, r.key, r.status, r.answer) for r in rows] == [
        ("light", key, "answered", {"answer": {"id": 5}}),
        ("snuff", key, "answered", {"answer": {"ok": True}}),
    ]
