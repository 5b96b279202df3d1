"""``pageant demo``: a seeded three-phase event runs to completion on the real engine and
its console is printed; a database with anything in it is refused and left as it was.

One test walks the whole demo on the real clock (about ten seconds); the others inject a
``FakeClock``, under which the same run takes a fraction of a second.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import func, inspect, select, text

from pageant.access.tokens import create_token
from pageant.cli import main
from pageant.cli.showcase import NO_WISPS, TIMEOUT_SECONDS, console_json, run_demo, shown_url
from pageant.clock import FakeClock
from pageant.db.engine import create_engine
from pageant.db.tables import event_definitions
from pageant.runs.console_text import render_console
from pageant.settings import ENV_PREFIX, Settings
from tests.conftest import bearer
from tests.databases import empty_database
from tests.test_cli import pageant_process

PHASES = ["muster", "hunt", "wind-down"]


@pytest.fixture(autouse=True)
def no_settings_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command reads PAGEANT_* settings; the caller's own must not leak in."""
    for name in [*Settings.model_fields, "config"]:
        monkeypatch.delenv(ENV_PREFIX + name.upper(), raising=False)


def pageant(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def log_rows(output: str) -> list[tuple[str, str, str]]:
    """The printed log as ``(kind, phase, what)``, in order."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Log ("))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("  "):
            break
        _, kind, phase, *what = re.split(r" {2,}", line.strip(), maxsplit=3)
        rows.append((kind, phase, what[0] if what else ""))
    return rows


def count_rows(url: str, table: Any) -> int | None:
    """Rows in ``table``, or None when the database has no such table."""

    async def go() -> int | None:
        engine = create_engine(url)
        try:
            async with engine.connect() as conn:
                names = await conn.run_sync(lambda sync: inspect(sync).get_table_names())
                if table.name not in names:
                    return None
                return (await conn.execute(select(func.count()).select_from(table))).scalar_one()
        finally:
            await engine.dispose()

    return asyncio.run(go())


# ── the whole demo, on the real clock ─────────────────────────────────────────


def test_the_demo_runs_three_phases_to_completion_on_the_real_clock() -> None:
    began = time.monotonic()
    result = pageant("demo")
    took = time.monotonic() - began

    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "status     completed (health ok)" in out
    rows = log_rows(out)
    assert [phase for kind, phase, _ in rows if kind == "phase.entered"] == PHASES
    evaluated = [what for kind, _, what in rows if kind == "condition.evaluated"]
    assert len(evaluated) == 3, out
    assert evaluated[0].startswith('counted: colour="north"') and "(1 of 2)" in evaluated[0]
    assert evaluated[1].startswith('near miss: colour="south"') and "(still 1 of 2)" in evaluated[1]
    assert evaluated[2].startswith('counted: colour="north"') and "(2 of 2)" in evaluated[2]
    assert all(what.endswith("(by game:demo-shard)") for what in evaluated)
    advanced = [(phase, what) for kind, phase, what in rows if kind == "phase.advanced"]
    assert [(p, w.split(",")[0]) for p, w in advanced] == [
        ("muster", "because tally"),
        ("hunt", "because deadline"),
    ]
    assert rows[-1] == ("run.status", "-", "ending -> completed")
    steps = [line.split() for line in out.split("\nSteps\n")[1].split("\n\n")[0].splitlines()]
    assert [(s[1], s[2], s[3]) for s in steps[1:]] == [
        ("muster", "core.announce", "done"),
        ("muster", "core.wait", "done"),
        ("hunt", "core.announce", "done"),
        ("wind-down", "core.announce", "done"),
    ]

    # Real time passed: the third firing comes 5 s into the muster, the hunt lasts 3 s.
    ran = float(re.search(r"ended .*, ([0-9.]+) s after it started", out).group(1))
    assert 8.0 <= ran < took < TIMEOUT_SECONDS
    # The temporary database is gone with its folder.
    url = re.search(r"^database  sqlite\+aiosqlite:///(\S+) \(temporary", out, re.M)
    assert url is not None, out
    assert not Path(url.group(1)).parent.exists()


def test_a_run_that_does_not_complete_in_time_fails_with_its_console() -> None:
    result = pageant("demo", "--timeout", "1")

    assert result.exit_code == 1
    assert "error: run 1 did not end within 1 s: it is running in phase muster" in result.stderr
    assert "status     running (health ok)" in result.stdout


def test_the_installed_command_runs_the_demo_in_a_process_of_its_own() -> None:
    # In this process the test module has imported the demo's module, which hides a name
    # clash between it and the click command; a fresh process meets the command as an
    # operator does.
    result = pageant_process("demo", "--timeout", "1", env={})

    assert result.returncode == 1, result.stderr
    assert "error: run 1 did not end within 1 s: it is running in phase muster" in result.stderr
    assert "status     running (health ok)" in result.stdout


def test_the_timeout_has_a_floor_of_one_second() -> None:
    result = pageant("demo", "--timeout", "0.9")

    assert result.exit_code == 2
    assert "0.9 is not in the range x>=1" in result.stderr


# ── the same run on a fake clock ──────────────────────────────────────────────


def test_json_prints_the_console_and_keeps_the_progress_on_stderr(
    monkeypatch: pytest.MonkeyPatch, clock: FakeClock
) -> None:
    monkeypatch.setattr("pageant.hosting.SystemClock", lambda: clock)

    result = pageant("demo", "--json")

    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert set(found) == {
        "run",
        "steps",
        "gate",
        "participants",
        "results",
        "budget",
        "resources",
        "cleanup_summary",
        "log",
    }
    assert found["run"]["status"] == "completed"
    assert found["run"]["ended_at"].endswith("Z")
    assert [line["phase"] for line in found["log"] if line["kind"] == "phase.entered"] == PHASES
    assert [
        line["detail"]["matched"] for line in found["log"] if line["kind"] == "condition.evaluated"
    ] == [True, False, True]
    assert result.stderr.count("fired wisps.caught") == 3


async def test_the_json_is_what_the_api_answers_on_an_empty_migrated_database(
    settings: Settings, db: Any, clock: FakeClock, client: Any
) -> None:
    said: list[str] = []
    result = await run_demo(settings, say=said.append, clock=clock)

    assert (result.status, result.problem, result.with_wisps) == ("completed", None, True)
    assert f"database  {shown_url(settings.database_url)}" in said
    # The database was named, so the demo's event and run stay in it.
    token = await create_token(db, role="admin", name="reader", now=clock.now())
    answer = await client.get(f"/api/v1/admin/runs/{result.run_id}", headers=bearer(token))
    assert answer.status == 200
    assert json.loads(console_json(result.console)) == await answer.json()


async def test_without_wisps_the_muster_waits_on_a_deadline_and_says_so(
    clock: FakeClock,
) -> None:
    said: list[str] = []
    result = await run_demo(Settings(), say=said.append, clock=clock, discover=False)

    assert (result.status, result.with_wisps) == ("completed", False)
    assert f"note      {NO_WISPS}" in said
    assert not any("fired" in line for line in said)
    log = result.console["log"]
    entered = [line for line in log if line["kind"] == "phase.entered"]
    assert [line["phase"] for line in entered] == PHASES
    assert entered[0]["detail"]["gate"] == {
        "kind": "after",
        "after": "3s",
        "deadline": entered[0]["detail"]["gate"]["deadline"],
    }
    assert not [line for line in log if line["kind"] == "condition.evaluated"]
    # The terminal view reads the console as built and as the API sends it alike.
    text = render_console(result.console)
    assert text == render_console(json.loads(console_json(result.console)))
    assert "near miss" not in text and "because deadline" in text


# ── refusals ──────────────────────────────────────────────────────────────────


def test_a_database_with_pageant_data_is_refused_and_left_as_it_was(
    dialect: str, tmp_path: Path
) -> None:
    with empty_database(dialect, tmp_path) as url:
        assert pageant("db", "upgrade", "--database-url", url).exit_code == 0
        made = pageant("token", "create", "--role", "admin", "--name", "me", "--database-url", url)
        assert made.exit_code == 0

        result = pageant("demo", "--database-url", url)

        assert result.exit_code == 1
        assert f"error: the database {shown_url(url)} is not empty" in result.stderr
        assert "  api_tokens: 1 row" in result.stderr
        assert "Run " not in result.stdout
        assert count_rows(url, event_definitions) == 0


def test_a_database_with_other_tables_is_refused_and_left_as_it_was(
    dialect: str, tmp_path: Path
) -> None:
    with empty_database(dialect, tmp_path) as url:

        async def make_players() -> None:
            engine = create_engine(url)
            try:
                async with engine.begin() as conn:
                    await conn.execute(text("CREATE TABLE players (id INTEGER PRIMARY KEY)"))
            finally:
                await engine.dispose()

        asyncio.run(make_players())

        result = pageant("demo", "--database-url", url)

        assert result.exit_code == 1
        assert f"error: the database {shown_url(url)} is not empty" in result.stderr
        assert "  tables pageant does not own: players" in result.stderr
        assert count_rows(url, event_definitions) is None  # nothing was migrated into it


def test_a_database_that_cannot_be_opened_is_named(tmp_path: Path) -> None:
    # A file that is not a database: the driver connects, the first statement fails, and
    # the connection is closed. (A path in a missing folder fails inside aiosqlite's
    # connect, whose worker thread may outlive the event loop and error a later test.)
    garbage = tmp_path / "demo.db"
    garbage.write_bytes(b"not a database " * 64)
    url = f"sqlite+aiosqlite:///{garbage}"

    result = pageant("demo", "--database-url", url)

    assert result.exit_code == 1
    assert f"error: cannot open the database {url}" in result.stderr
    assert "file is not a database" in result.stderr
    assert garbage.read_bytes() == b"not a database " * 64  # nothing was written into it
