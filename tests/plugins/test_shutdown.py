"""``pageant_shutdown`` (contract 1.3): a plugin closes what ``pageant_startup`` opened, in
the loop it opened it in, when the host stops - under ``serve`` on SIGTERM, at the end of
``contract-check`` (once for each start), at the end of a command - each shutdown bounded by
``stop_grace_seconds``; one that raises or overruns is logged naming the plugin and never
holds the stop past its bound."""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from pageant import hookimpl
from pageant.hosting import Host
from pageant.plugins.loader import candidate_for, load_plugins
from pageant.support.settings import Settings
from tests.engine.test_processes import _prepare, _sync
from tests.fixture_plugins import Site, source
from tests.kit.test_contract_check import pageant_process
from tests.processes import Serve

#: What a loop's end says about a plugin that left something open.
NOISE = ("Task was destroyed", "Event loop is closed", "Unclosed", "Traceback", "never retrieved")


class Closing:
    """Opens a task at startup; its shutdown takes ``takes`` seconds, then closes it."""

    def __init__(self, owner: str, takes: float = 0.0, fails: bool = False) -> None:
        self.PLUGIN_INFO = {"owner": owner, "contract": "^1.3"}
        self.takes, self.fails = takes, fails
        self.closed = False
        self.task: asyncio.Task[None] | None = None

    @hookimpl
    def pageant_startup(self, context: Any) -> None:
        self.task = asyncio.get_running_loop().create_task(asyncio.sleep(3600))

    @hookimpl
    async def pageant_shutdown(self) -> None:
        await asyncio.sleep(self.takes)
        if self.fails:
            raise RuntimeError("the bridge would not close")
        assert self.task is not None
        self.task.cancel()
        self.closed = True


def _host(tmp_path: Path, *plugins: Closing) -> Host:
    candidates = [candidate_for(p, p.PLUGIN_INFO["owner"]) for p in plugins]
    url = f"sqlite+aiosqlite:///{tmp_path / 'host.db'}"
    return Host(Settings(database_url=url), plugins=candidates, discover=False)


async def test_a_shutdown_inside_the_bound_closes_and_one_past_it_is_cut_and_named(
    tmp_path, caplog
):
    inside, past = Closing("inside", takes=0.1), Closing("past", takes=5)
    host = _host(tmp_path, inside, past)
    await host.start_plugins()
    began = time.monotonic()
    with caplog.at_level(logging.WARNING):
        await host.stop_plugins(within=0.5)
    took = time.monotonic() - began
    assert inside.closed and not past.closed
    assert took < 1.5, took  # the bound and the moment a cancelled call gets to unwind
    [warning] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.getMessage() == (
        "plugin inline[past]: pageant_shutdown did not finish within 0.5 s; the host stops "
        "without waiting for it"
    )
    assert warning.plugin == "inline[past]"
    await host.close()
    assert [r for r in caplog.records if r.levelno == logging.WARNING] == [warning]  # once


async def test_a_shutdown_that_raises_is_logged_naming_the_plugin_and_the_others_close(
    tmp_path, caplog
):
    fine, failing = Closing("fine"), Closing("failing", fails=True)
    host = _host(tmp_path, fine, failing)
    await host.start_plugins()
    with caplog.at_level(logging.ERROR):
        await host.close()
    assert fine.closed
    [error] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert error.getMessage() == (
        "plugin inline[failing]: pageant_shutdown raised RuntimeError: the bridge would not close"
    )
    assert error.exc_info is not None


async def test_a_plugin_never_started_is_not_shut_down(tmp_path):
    never = Closing("never")
    host = _host(tmp_path, never)
    await host.close()
    assert not never.closed and never.task is None


def test_a_plain_function_shutdown_is_refused():
    class Plain:
        PLUGIN_INFO = {"owner": "plain", "contract": "^1.3"}  # noqa: RUF012 - read by the loader

        @hookimpl
        def pageant_shutdown(self) -> None:
            pass

    manager = load_plugins([candidate_for(Plain(), "plain")], discover=False)
    [record] = [r for r in manager.records if r.name == "plain"]
    assert record.status == "refused"
    assert "pageant_shutdown is a plain function; expected async def" in (record.reason or "")


# ── real processes ────────────────────────────────────────────────────────────


@pytest.fixture
def beacon_site(tmp_path: Path) -> Path:
    installed = Site(tmp_path / "site")
    installed.root.mkdir()
    installed.install("pageant-beacon", {"beacon": "beacon:Beacon"}, {"beacon": source("beacon")})
    return installed.root


def test_contract_check_closes_each_start_and_ends_without_noise(tmp_path, beacon_site):
    notes = tmp_path / "notes"
    for args in (("--write",), ()):
        finished = pageant_process(
            "contract-check",
            "--plugin",
            "beacon",
            "--manifest",
            str(tmp_path / "manifest.json"),
            *args,
            site=beacon_site,
            cwd=tmp_path,
            env={"BEACON_NOTES": str(notes)},
        )
        assert finished.returncode == 0, finished.stdout + finished.stderr
        assert not [n for n in NOISE if n in finished.stderr], finished.stderr
    # Started twice (the kit performs every example again on a fresh start), closed twice,
    # each run of the command.
    assert notes.read_text().split() == ["started", "started", "closed", "closed"] * 2


def test_serve_awaits_the_shutdown_on_sigterm(tmp_path, beacon_site, monkeypatch):
    url = f"sqlite+aiosqlite:///{tmp_path / 'serve.db'}"
    _sync(_prepare(url))
    notes = tmp_path / "notes"
    monkeypatch.setenv("PYTHONPATH", str(beacon_site))
    monkeypatch.setenv("BEACON_NOTES", str(notes))
    serve = Serve(url, tmp_path / "serve.log", poll_seconds=1)
    try:
        assert notes.read_text().split() == ["started"]
        serve.signal(signal.SIGTERM)
        assert serve.wait(30) == 0
    finally:
        serve.kill()
    assert notes.read_text().split() == ["started", "closed"]
    lines = serve.log_lines()
    assert [line for line in lines if line["level"] in ("ERROR", "CRITICAL")] == []
    assert any(line["msg"] == "stopped cleanly" for line in lines)
