"""The crash walk: a real ``pageant serve`` killed with SIGKILL in the middle of a
world-changing perform, and started again. The placeholder written before the perform
survives; the restarted host re-dispatches the same idempotency key, reuses its own
placeholder, and the cleanup stage gives everything back."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from sqlalchemy import select

from pageant.access.tokens import create_token
from pageant.db.engine import create_engine
from pageant.db.tables import event_run_log, event_run_resources, event_run_steps, event_runs
from pageant.support.clock import SystemClock
from pageant.support.settings import ENV_PREFIX
from tests.cli.test_cli import console_script, free_port, pageant
from tests.databases import empty_database
from tests.fixture_plugins import fake_site, source
from tests.processes import api_call

#: How long any one wait of this walk may take before the test fails.
PATIENCE_SECONDS = 40


@pytest.fixture
def migrated(dialect: str, tmp_path: Path) -> Iterator[str]:
    with empty_database(dialect, tmp_path) as url:
        result = pageant("db", "upgrade", "--database-url", url)
        assert result.exit_code == 0, result.output
        yield url


def _query(url: str, statement: Any) -> list[Any]:
    async def go() -> list[Any]:
        engine = create_engine(url)
        try:
            async with engine.connect() as conn:
                return list((await conn.execute(statement)).all())
        finally:
            await engine.dispose()

    return asyncio.run(go())


def _wait_for(what: str, check: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + PATIENCE_SECONDS
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"gave up waiting for {what}")


class Server:
    def __init__(self, url: str, site: Path, world: Path) -> None:
        self.port = free_port()
        clean = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
        self.env = {
            **clean,
            "PYTHONPATH": str(site),
            "ANVIL_WORLD": str(world),
            "PAGEANT_DATABASE_URL": url,
            "PAGEANT_POLL_SECONDS": "0.2",
            "PAGEANT_STEP_LEASE_MARGIN_SECONDS": "1",
            "PAGEANT_RUN_LEASE_SECONDS": "2",
        }
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [*console_script(), "serve", "--host", "127.0.0.1", "--port", str(self.port)],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait_for("the server to answer", self._answers)

    def _answers(self) -> bool:
        assert self.process is not None and self.process.poll() is None, "serve exited"

        async def ask() -> bool:
            try:
                async with (
                    aiohttp.ClientSession() as session,
                    session.get(f"http://127.0.0.1:{self.port}/healthz") as response,
                ):
                    return response.status == 200
            except aiohttp.ClientError:
                return False

        return asyncio.run(ask())

    def call(self, method: str, path: str, token: str, body: Any = None) -> Any:
        return api_call(f"http://127.0.0.1:{self.port}", method, path, token, body)

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def test_a_host_killed_mid_perform_gives_everything_back_after_its_restart(
    migrated: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    world_path = tmp_path / "world.json"
    world_path.write_text(json.dumps({"hang": True, "bars": {}, "calls": [], "reverts": []}))

    def world() -> dict[str, Any]:
        return json.loads(world_path.read_text())

    with fake_site(tmp_path / "site", monkeypatch) as site:
        site.install("anvil", {"anvil": "anvil"}, {"anvil": source("anvil")})
        token = asyncio.run(_admin_token(migrated))
        first = Server(migrated, site.root, world_path)
        second = Server(migrated, site.root, world_path)
        try:
            first.start()
            first.call("PUT", "/api/v1/admin/actions/anvil.forge", token, {"enabled": True})
            event = first.call(
                "POST",
                "/api/v1/admin/events",
                token,
                {
                    "title": "Crash walk",
                    "spec": {
                        "schedule": {"kind": "manual"},
                        "phases": [
                            {
                                "key": "forge",
                                "label": "Forge",
                                "steps": [{"action": "anvil.forge", "params": {}}],
                            }
                        ],
                    },
                },
            )
            first.call("POST", f"/api/v1/admin/events/{event['id']}/publish", token)
            run = first.call("POST", f"/api/v1/admin/events/{event['id']}/runs", token)
            run_id = run["id"]

            # The perform is in flight (it has changed the world and hangs): kill the host.
            _wait_for("the perform to start", lambda: world()["calls"])
            first.kill()

            (step,) = _query(
                migrated, select(event_run_steps).where(event_run_steps.c.run_id == run_id)
            )
            (placeholder,) = _query(
                migrated, select(event_run_resources).where(event_run_resources.c.run_id == run_id)
            )
            assert (placeholder.kind, placeholder.ref, placeholder.status) == (
                "@step",
                step.idempotency_key,
                "pending",
            )
            assert (step.status, step.attempts) == ("running", 1)
            assert list(world()["bars"]) == [step.idempotency_key]  # out there, unnamed

            # Restarted: the expired claim is taken back, the same key re-dispatched.
            world_path.write_text(json.dumps({**world(), "hang": False}))
            second.start()

            def finished() -> Any:
                (row,) = _query(migrated, select(event_runs).where(event_runs.c.id == run_id))
                return row if row.cleanup_status == "complete" else None

            ended = _wait_for("the run to be cleaned up", finished)
        finally:
            first.stop()
            second.stop()

    assert ended.status == "completed"
    assert world()["calls"] == [step.idempotency_key, step.idempotency_key]
    assert world()["bars"] == {}
    assert world()["reverts"] == [[step.idempotency_key, [f"bar-{step.idempotency_key[:8]}"]]]
    rows = _query(
        migrated, select(event_run_resources).where(event_run_resources.c.run_id == run_id)
    )
    assert [(r.kind, r.status, r.revert_attempts) for r in rows] == [("bar", "reverted", 1)]
    kinds = [
        line.kind
        for line in _query(migrated, select(event_run_log).where(event_run_log.c.run_id == run_id))
    ]
    assert kinds.count("resource.placeholder") == 1  # the re-dispatch reused its own


async def _admin_token(url: str) -> str:
    engine = create_engine(url)
    try:
        return await create_token(engine, role="admin", name="crash", now=SystemClock().now())
    finally:
        await engine.dispose()
