"""``pageant demo``: the Champion Muster runs on the simulated shard to completion, gives
back everything it held, and ends with a summary that fits a screen; ``--faults`` shows an
outage and failing despawns recovered from; ``--serve`` leaves the API serving; a database
with anything in it is refused and left as it was; without the shard plugin the demo says
how to install it.

The runs are real: the engine on a clock running 60 times fast, the shard's simulation on
its own seeded clock. Each takes some seconds; the refusals take none.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from click.testing import CliRunner, Result
from sqlalchemy import func, inspect, select, text

from pageant.access.tokens import create_token
from pageant.cli import main
from pageant.cli.demo_text import hhmm, summary
from pageant.cli.showcase import (
    NEEDS_SHARD,
    SWITCHBOARD,
    TIMEOUT_SECONDS,
    DemoFailed,
    console_json,
    run_demo,
    shown_url,
)
from pageant.db.engine import create_engine
from pageant.db.tables import event_definitions
from pageant.runs.console_text import render_console
from pageant.support.settings import ENV_PREFIX, Settings
from tests.cli.test_cli import free_port, pageant_process
from tests.conftest import bearer
from tests.databases import empty_database
from tests.processes import console_script

PHASES = ["herald", "muster", "champion", "wind-down"]


@pytest.fixture(autouse=True)
def no_settings_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command reads PAGEANT_* settings; the caller's own must not leak in."""
    for name in [*Settings.model_fields, "config"]:
        monkeypatch.delenv(ENV_PREFIX + name.upper(), raising=False)
    for name in list(os.environ):
        if name.startswith(ENV_PREFIX + "PLUGIN_"):
            monkeypatch.delenv(name)


def pageant(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def summary_of(output: str) -> list[str]:
    """The summary the demo ends with: the lines between its two rules."""
    lines = output.splitlines()
    rules = [i for i, line in enumerate(lines) if line and set(line) == {"─"}]
    assert len(rules) == 2, output
    return lines[rules[0] + 1 : rules[1]]


def row(summary: list[str], label: str) -> list[str]:
    """The texts of one labelled row of the summary (its continuation lines included)."""
    out: list[str] = []
    for line in summary[1:]:
        head, text = line[2:13].strip(), line[14:]
        if head and out:
            break
        if head == label or (out and not head):
            out.append(text.strip())
    return out


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


# ── the whole demo ────────────────────────────────────────────────────────────


def test_the_demo_runs_the_champion_muster_and_gives_everything_back() -> None:
    result = pageant("demo")

    assert result.exit_code == 0, result.output
    out = result.stdout
    # The switchboard was opened by the demo itself, caps included.
    assert "switch    shard.spawn enabled (shard.creatures at most 12 per run)" in out
    assert all(f"switch    {action} enabled" in out for action in SWITCHBOARD)
    # The cue was confirmed, visibly, by the demo acting as a moderator.
    assert "demo      moderator:demo confirms the cue (step 3)" in out
    assert "herald     “Cue a person” confirmed: in place at the shrine (by moderator:demo)" in out
    # One live view: each log line is printed once, as a sentence, and no log follows.
    entered = re.findall(r"^\d\d:\d\d:\d\d  (\S+) +Phase “[^”]+” began", out, re.M)
    assert entered == PHASES
    assert "Log (" not in out and "resources=[" not in out
    assert re.search(
        r"“Spawn creatures” is done; made 6 creatures \(guardian, yew: c\d+…c\d+\)", out
    )
    counted = re.findall(r"shard.boss.spawned fired .*", out)
    assert counted[-1] == "shard.boss.spawned fired with region “yew” — 2 of 2 (by plugin:shard)"
    # No record leads with its kind code, and none shows its values as key=value.
    assert not re.search(r"^\d\d:\d\d:\d\d  \S+ +[a-z]+\.[a-z_]+ ", out, re.M)
    assert not re.search(r"\w=\w", out.split("run       1")[1].split("────")[0])
    # The summary says what happened, and fits a 120 by 40 screen.
    summary = summary_of(out)
    assert summary[0] == "Run 1: Champion Muster, version 1: completed (health ok)"
    assert len(summary) + 2 <= 40 and max(len(line) for line in summary) <= 120
    assert row(summary, "health") == ["ok throughout"]
    phases = row(summary, "phases")
    assert [p.split()[0] for p in phases] == PHASES
    assert "cue confirmed at" in phases[0] and phases[0].endswith("by moderator:demo")
    assert phases[1].endswith('on shard.boss.spawned where region eq "yew", 2 of 2')
    assert phases[2].endswith("after 2m")
    assert re.fullmatch(r"wind-down \d\d:\d\d, completed at \d\d:\d\d", phases[3])
    assert row(summary, "steps") == ["10 done"]
    # What it spent, against the caps the demo set, and what it gave back.
    assert row(summary, "spent") == [
        "10 of 12 creatures (shard.creatures), 1 of 1 items (shard.rewards)"
    ]
    made = row(summary, "made")
    assert re.fullmatch(r"step 4: 6 creatures \(guardian, yew: c00001…c00006\)", made[0])
    assert re.fullmatch(r"step 5: 4 creatures \(wolf, yew: c00007…c00010\)", made[1])
    assert re.fullmatch(r"step 7: 1 gate \(closes at \d\d:\d\d: gate-\w+\)", made[2])
    assert row(summary, "borrowed") == ["xp_rate (shard.config): 1.0 -> 2.0"]
    (given,) = row(summary, "given back")
    assert given.startswith("12 of 12.") and "has been given back" in given
    (took,) = row(summary, "took")
    wall = float(re.search(r"([0-9.]+) s of wall time", took).group(1))
    assert wall < TIMEOUT_SECONDS
    # The temporary database is gone with its folder.
    url = re.search(r"^database  sqlite\+aiosqlite:///(\S+) \(temporary", out, re.M)
    assert url is not None, out
    assert not Path(url.group(1)).parent.exists()


def test_with_faults_the_run_degrades_waits_and_recovers_and_json_keeps_progress_apart() -> None:
    result = pageant("demo", "--faults", "--json")

    assert result.exit_code == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["run"]["status"] == "completed"
    assert found["run"]["health"] == "degraded"
    assert found["run"]["cleanup_status"] == "complete"
    log = found["log"]
    assert [line["phase"] for line in log if line["kind"] == "phase.entered"] == PHASES
    # The shard went down after the first spawn: the second waited, spending no attempt.
    waits = [line["detail"] for line in log if line["kind"] == "run.waiting" and line["detail"]]
    unavailable = [w for w in waits if w.get("reason") == "unavailable"]
    assert unavailable and "is restarting" in json.dumps(unavailable[0])
    spawns = [s for s in found["steps"] if s["action"] == "shard.spawn"]
    assert [(s["status"], s["attempts"]) for s in spawns] == [("done", 1), ("done", 1)]
    # One despawn failed twice and went through on its third attempt.
    failed = [line["detail"] for line in log if line["kind"] == "resource.revert_failed"]
    assert [(d["ref"], d["attempt"]) for d in failed] == [
        (failed[0]["ref"], 1),
        (failed[0]["ref"], 2),
    ]
    (third,) = [r for r in found["resources"] if r["ref"] == failed[0]["ref"]]
    assert (third["status"], third["revert_attempts"]) == ("reverted", 3)
    assert {r["status"] for r in found["resources"]} == {"reverted"}
    # The progress went to standard error, the console alone to standard output.
    assert "faults    the shard goes down for 4 s after its first world change" in result.stderr
    assert "is unavailable (shard " in result.stderr
    # The summary a terminal shows says when the run degraded and when it went on again:
    # the second spawn, the step the outage held, done.
    (fell,) = [line for line in log if line["kind"] == "run.health"]
    (second,) = [
        line for line in log if line["kind"] == "step.status" and line["step_id"] == spawns[1]["id"]
    ]
    (health,) = row(summary(found, 1.0), "health")
    assert health == (
        f"degraded at {hhmm(fell['at'])} (shard.spawn is unavailable), "
        f"recovered at {hhmm(second['at'])}"
    )
    assert hhmm(fell["at"]) != hhmm(second["at"])  # the outage held it for 4 min


async def test_the_console_is_what_the_api_answers_on_an_empty_migrated_database(
    settings: Settings, db: Any, client: Any
) -> None:
    said: list[str] = []
    result = await run_demo(settings, say=said.append)

    assert (result.status, result.problem) == ("completed", None)
    assert f"database  {shown_url(settings.database_url)}" in said
    # The database was named, so the demo's event and run stay in it.
    token = await create_token(db, role="admin", name="reader", now=datetime.now(UTC))
    answer = await client.get(f"/api/v1/admin/runs/{result.run_id}", headers=bearer(token))
    assert answer.status == 200
    assert json.loads(console_json(result.console)) == await answer.json()
    # The terminal view reads the console as built and as the API sends it alike.
    assert render_console(result.console) == render_console(await answer.json())


def test_serve_leaves_the_api_serving_the_demo_with_a_printed_admin_token(
    tmp_path: Path,
) -> None:
    port = free_port()
    clean = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
    errors = (tmp_path / "stderr").open("w")
    process = subprocess.Popen(
        [*console_script(), "demo", "--serve", "--port", str(port)],
        env=clean,
        stdout=subprocess.PIPE,
        stderr=errors,
        text=True,
    )
    lines: list[str] = []
    serving = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if "serving on" in line:
                serving.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert serving.wait(TIMEOUT_SECONDS), "".join(lines) + (tmp_path / "stderr").read_text()
        (token,) = [
            line.split(": ", 1)[1].strip() for line in lines if line.startswith("admin token:")
        ]

        async def ask() -> tuple[int, Any]:
            async with (
                aiohttp.ClientSession() as session,
                session.get(
                    f"http://127.0.0.1:{port}/api/v1/admin/runs/1", headers=bearer(token)
                ) as response,
            ):
                return response.status, await response.json()

        status, run = asyncio.run(ask())
        assert status == 200
        assert (run["run"]["status"], run["run"]["cleanup_status"]) == ("completed", "complete")
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0, (tmp_path / "stderr").read_text()[-4000:]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
        reader.join(10)
        assert process.stdout is not None
        process.stdout.close()
        errors.close()
    assert any(line.startswith("  given back  12 of 12.") for line in lines)


# ── giving up ─────────────────────────────────────────────────────────────────


def test_a_run_that_does_not_end_in_time_fails_with_its_console() -> None:
    result = pageant("demo", "--timeout", "1")

    assert result.exit_code == 1
    assert "error: run 1 did not end within 1 s: it is " in result.stderr
    assert "Run 1: Champion Muster" in result.stdout


def test_the_installed_command_runs_the_demo_in_a_process_of_its_own() -> None:
    # In this process the test module has imported the demo's module, which hides a name
    # clash between it and the click command; a fresh process meets the command as an
    # operator does.
    result = pageant_process("demo", "--timeout", "1", env={})

    assert result.returncode == 1, result.stderr
    assert "error: run 1 did not end within 1 s: it is " in result.stderr
    assert "Run 1: Champion Muster" in result.stdout


def test_the_timeout_has_a_floor_of_one_second() -> None:
    result = pageant("demo", "--timeout", "0.9")

    assert result.exit_code == 2
    assert "0.9 is not in the range x>=1" in result.stderr


# ── refusals ──────────────────────────────────────────────────────────────────


async def test_without_the_shard_plugin_the_demo_says_how_to_install_it(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'demo.db'}"
    with pytest.raises(DemoFailed) as refused:
        await run_demo(Settings(database_url=url), discover=False)

    assert refused.value.message == NEEDS_SHARD
    assert "pip install -e ./example_plugins/shard" in NEEDS_SHARD
    assert not (tmp_path / "demo.db").exists()  # nothing was written


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
