"""The ``pageant`` command line, against real databases on both dialects."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import select, text

from pageant.access.tokens import hash_token, principal_for
from pageant.cli import main
from pageant.db.engine import create_engine, sqlite_file
from pageant.db.migrate import head_revision
from pageant.db.tables import api_tokens
from pageant.errors import Invalid
from pageant.plugins.loader import load_plugins, plugin_listing
from pageant.support.settings import ENV_PREFIX, Settings, load_settings
from tests.databases import empty_database
from tests.fixture_plugins import Site, fake_site, source

HEAD = head_revision()


@pytest.fixture(autouse=True)
def no_settings_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The commands read PAGEANT_* settings; the caller's own must not leak in."""
    for name in [*Settings.model_fields, "config"]:
        monkeypatch.delenv(ENV_PREFIX + name.upper(), raising=False)


@pytest.fixture
def empty_url(dialect: str, tmp_path: Path) -> Iterator[str]:
    with empty_database(dialect, tmp_path) as url:
        yield url


@pytest.fixture
def migrated_url(empty_url: str) -> str:
    result = pageant("db", "upgrade", "--database-url", empty_url)
    assert result.exit_code == 0, result.output
    return empty_url


def pageant(*args: str, env: dict[str, str] | None = None) -> Result:
    """Run the command line in this process."""
    return CliRunner(env=env).invoke(main, list(args), catch_exceptions=False)


def console_script() -> list[str]:
    """The installed ``pageant`` script beside this interpreter, or the module itself."""
    script = Path(sys.executable).with_name("pageant")
    return [str(script)] if script.exists() else [sys.executable, "-m", "pageant.cli"]


def pageant_process(*args: str, env: dict[str, str], timeout: float = 60) -> Any:
    """Run the command line as an operator would: a process of its own."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
    return subprocess.run(
        [*console_script(), *args],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def query(url: str, statement: Any) -> list[Any]:
    async def go() -> list[Any]:
        engine = create_engine(url)
        try:
            async with engine.connect() as conn:
                rows = (await conn.execute(statement)).all()
                await conn.rollback()
            return rows
        finally:
            await engine.dispose()

    return asyncio.run(go())


# ── db upgrade ────────────────────────────────────────────────────────────────


def test_db_upgrade_migrates_then_says_it_is_already_at_head(empty_url: str) -> None:
    first = pageant("db", "upgrade", "--database-url", empty_url)
    assert (first.exit_code, first.stdout) == (0, f"schema upgraded from empty to {HEAD}\n")
    second = pageant("db", "upgrade", "--database-url", empty_url)
    assert (second.exit_code, second.stdout) == (0, f"schema already at {HEAD}\n")
    assert [
        row[0] for row in query(empty_url, text("SELECT version_num FROM alembic_version"))
    ] == [HEAD]


def test_the_console_script_upgrades_from_the_environment(empty_url: str) -> None:
    done = pageant_process("db", "upgrade", env={"PAGEANT_DATABASE_URL": empty_url})
    assert (done.returncode, done.stdout) == (0, f"schema upgraded from empty to {HEAD}\n")
    again = pageant_process("db", "upgrade", env={"PAGEANT_DATABASE_URL": empty_url})
    assert (again.returncode, again.stdout) == (0, f"schema already at {HEAD}\n")


# ── plugins ───────────────────────────────────────────────────────────────────


def test_plugins_lists_core_and_wisps_loaded() -> None:
    result = pageant("plugins")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert "loaded   pageant[core] " in lines[0]
    assert lines[0].endswith("  owner=core contract=^1.5")
    assert any(
        line.startswith("loaded   pageant-wisps[wisps] 1.0.0  owner=wisps contract=^1.2")
        for line in lines
    )


def test_plugins_json_is_the_one_listing() -> None:
    result = pageant("plugins", "--json")
    assert result.exit_code == 0
    items = json.loads(result.stdout)["items"]
    # The listing of a started host: its leases' self-checks have run (see
    # tests/ledger/test_lease_contract.py), as they have in the API's.
    from pageant.hosting import Host

    host = Host(Settings())

    async def started() -> list[dict[str, Any]]:
        try:
            await host.start_plugins()
            return plugin_listing(host.plugins, unavailable=host.plugin_unavailable)
        finally:
            await host.close()

    assert items == json.loads(json.dumps(asyncio.run(started())))
    # What a started plugin says of itself is the listing's too: unconfigured, OpenArena
    # says it can do nothing.
    (arena,) = [item for item in items if item["owner"] == "openarena"]
    assert arena["unavailable"].startswith("not configured: rcon_password is not set for main")
    assert items != plugin_listing(load_plugins())
    by_label = {f"{i['distribution']}[{i['name']}]": i for i in items}
    assert by_label["pageant[core]"]["status"] == "loaded"
    assert by_label["pageant-wisps[wisps]"] == {
        "name": "wisps",
        "distribution": "pageant-wisps",
        "version": "1.0.0",
        "entry_point": "pageant_wisps",
        "owner": "wisps",
        "contract": "^1.2",
        "status": "loaded",
        "reason": None,
        "traceback": None,
        "dropped": [],
        "problems": [],
        "settings": None,
        "warnings": [],
        "unavailable": None,
    }


def test_plugins_all_lists_what_each_declared() -> None:
    human = pageant("plugins", "--all")
    assert "           actions: wisps.summon" in human.stdout.splitlines()
    items = json.loads(pageant("plugins", "--all", "--json").stdout)["items"]
    wisps = next(i for i in items if i["name"] == "wisps")
    assert wisps["declares"] == {
        "actions": ["wisps.summon"],
        "budgets": ["wisps.wisps"],
        "leases": ["wisps.weather"],
        "option_sources": ["wisps.options.colours"],
        "triggers": ["wisps.caught"],
    }
    core = next(i for i in items if i["name"] == "core")
    assert core["declares"]["actions"] == ["core.announce", "core.cue", "core.lease", "core.wait"]


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    with fake_site(tmp_path / "site", monkeypatch) as s:
        yield s


def test_plugins_shows_a_broken_plugin_refused_with_its_reason(site: Site) -> None:
    site.install("brokenplug", {"brokenplug": "brokenplug"}, {"brokenplug": source("brokenplug")})
    result = pageant("plugins")
    # A refused plugin is a failure an operator's deploy script must see.
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    at = lines.index("refused  brokenplug[brokenplug] 0.1")
    assert lines[at + 1] == (
        "           brokenplug[brokenplug]: cannot be imported (ModuleNotFoundError: No module "
        "named 'pageant_missing_dependency' at brokenplug.py:5 in <module>); expected "
        "'pageant_missing_dependency', which the plugin imports, to be installed (a dependency "
        "missing from brokenplug's requirements?)"
    )
    # The traceback's last frames follow, ending at the plugin's line.
    assert "           |     import pageant_missing_dependency" in "\n".join(lines)
    # The others still load.
    assert any(line.startswith("loaded   pageant-wisps[wisps]") for line in lines)
    listed = pageant("plugins", "--json")
    assert listed.exit_code == 1
    items = json.loads(listed.stdout)["items"]
    broken = next(i for i in items if i["distribution"] == "brokenplug")
    assert broken["status"] == "refused"
    assert broken["reason"].startswith("brokenplug[brokenplug]: cannot be imported")


def test_allow_refused_lists_a_refusal_and_exits_zero(site: Site) -> None:
    site.install("brokenplug", {"brokenplug": "brokenplug"}, {"brokenplug": source("brokenplug")})
    result = pageant("plugins", "--allow-refused")
    assert result.exit_code == 0
    assert "refused  brokenplug[brokenplug] 0.1" in result.stdout.splitlines()


def test_the_console_script_shows_an_installed_broken_plugin(tmp_path: Path) -> None:
    # A process of its own, finding the distribution on PYTHONPATH as an installed one.
    site = Site(tmp_path)
    site.install("brokenplug", {"brokenplug": "brokenplug"}, {"brokenplug": source("brokenplug")})
    done = pageant_process("plugins", "--json", env={"PYTHONPATH": str(tmp_path)})
    assert done.returncode == 1, done.stderr
    # The listing says it all; the loader's log does not repeat it on standard error (where
    # another installed plugin may still say its own piece, an unconfigured game's warning).
    assert "brokenplug" not in done.stderr
    statuses = {i["distribution"]: i["status"] for i in json.loads(done.stdout)["items"]}
    assert statuses["brokenplug"] == "refused"
    assert statuses["pageant"] == statuses["pageant-wisps"] == "loaded"


# ── token create ──────────────────────────────────────────────────────────────


def test_token_create_prints_only_the_token_and_stores_only_its_hash(migrated_url: str) -> None:
    result = pageant(
        "token", "create", "--role", "admin", "--name", "ops-laptop", "--database-url", migrated_url
    )
    assert result.exit_code == 0
    assert result.stderr == ""
    token = result.stdout.removesuffix("\n")
    assert "\n" not in token and " " not in token
    assert token.startswith("pgt_") and len(token) > 40

    rows = query(migrated_url, select(api_tokens))
    assert len(rows) == 1
    row = rows[0]._mapping
    assert (row["name"], row["role"], row["revoked_at"]) == ("ops-laptop", "admin", None)
    assert row["token_hash"] == hash_token(token)
    assert len(row["token_hash"]) == 64
    assert not any(token in str(value) for value in row.values())

    async def who() -> Any:
        engine = create_engine(migrated_url)
        try:
            return await principal_for(engine, token, now=datetime.now(UTC))
        finally:
            await engine.dispose()

    found = asyncio.run(who())
    assert (found.role, found.name) == ("admin", "ops-laptop")


def test_each_token_is_new(migrated_url: str) -> None:
    made = {
        pageant(
            "token", "create", "--role", "game", "--name", "shard", "--database-url", migrated_url
        ).stdout
        for _ in range(2)
    }
    assert len(made) == 2


def test_a_bad_role_is_a_usage_error(migrated_url: str) -> None:
    result = pageant(
        "token", "create", "--role", "root", "--name", "x", "--database-url", migrated_url
    )
    assert result.exit_code == 2
    assert "Invalid value for '--role'" in result.stderr
    assert "'root' is not one of 'admin', 'editor', 'moderator', 'game'" in result.stderr
    assert query(migrated_url, select(api_tokens)) == []


def test_a_blank_name_is_refused_and_nothing_stored(migrated_url: str) -> None:
    result = pageant(
        "token", "create", "--role", "admin", "--name", "  ", "--database-url", migrated_url
    )
    assert result.exit_code != 0
    assert "name: expected 1 to 100 characters" in result.stderr
    assert result.stdout == ""
    assert query(migrated_url, select(api_tokens)) == []


def test_token_create_on_an_unmigrated_database_names_the_upgrade(empty_url: str) -> None:
    if (path := sqlite_file(empty_url)) is not None:
        Path(path).touch()  # an empty SQLite database (a missing one is refused sooner)
    result = pageant(
        "token", "create", "--role", "admin", "--name", "x", "--database-url", empty_url
    )
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "run `pageant db upgrade` first" in result.stderr


# ── serve ─────────────────────────────────────────────────────────────────────


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_refuses_an_empty_database(empty_url: str) -> None:
    if (path := sqlite_file(empty_url)) is not None:
        Path(path).touch()  # an empty SQLite database (a missing one is refused sooner)
    done = pageant_process(
        "serve", "--port", str(free_port()), env={"PAGEANT_DATABASE_URL": empty_url}, timeout=30
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: the database schema is at nothing (empty database), this pageant needs {HEAD}; "
        "run `pageant db upgrade` first"
    )


def test_serve_refuses_an_out_of_date_database(migrated_url: str) -> None:
    async def stamp() -> None:
        engine = create_engine(migrated_url)
        try:
            async with engine.begin() as conn:
                # An older revision this pageant knows (one it does not know is a newer one).
                await conn.execute(text("UPDATE alembic_version SET version_num = '0001'"))
        finally:
            await engine.dispose()

    asyncio.run(stamp())
    done = pageant_process(
        "serve", "--port", str(free_port()), env={"PAGEANT_DATABASE_URL": migrated_url}, timeout=30
    )
    assert done.returncode == 1
    assert (
        f"error: the database schema is at 0001, this pageant needs {HEAD}; "
        "run `pageant db upgrade` first"
    ) in done.stderr


def test_serve_prints_the_loaded_and_refused_plugins_at_start(
    migrated_url: str, tmp_path: Path
) -> None:
    site = Site(tmp_path)
    site.install("brokenplug", {"brokenplug": "brokenplug"}, {"brokenplug": source("brokenplug")})
    clean = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
    env = {**clean, "PAGEANT_DATABASE_URL": migrated_url, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.Popen(
        [*console_script(), "serve", "--port", str(free_port())],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen: list[str] = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            seen.append(line.rstrip("\n"))
            if line.startswith("loaded   pageant-wisps[wisps]"):  # the last one, sorted
                break
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    assert any(line.startswith("loaded   pageant[core] ") for line in seen), seen
    assert any(line.startswith("loaded   pageant-wisps[wisps] ") for line in seen), seen
    assert "refused  brokenplug[brokenplug] 0.1" in seen


# ── settings: flag > environment > TOML > default ─────────────────────────────


def test_a_setting_is_taken_before_the_command_and_the_command_s_own_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    def url(name: str) -> str:
        return f"sqlite+aiosqlite:///{tmp_path / name}"

    result = pageant("--database-url", url("before.db"), "db", "upgrade")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.glob("*.db")) == ["before.db"]
    listed = pageant("--database-url", url("before.db"), "runs", "list")
    assert listed.exit_code == 0, listed.output
    assert "no runs match" in listed.stdout
    both = pageant(
        "--database-url", url("before.db"), "db", "upgrade", "--database-url", url("after.db")
    )
    assert both.exit_code == 0, both.output
    assert sorted(p.name for p in tmp_path.glob("*.db")) == ["after.db", "before.db"]


def test_database_url_follows_the_precedence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    def url(name: str) -> str:
        return f"sqlite+aiosqlite:///{tmp_path / name}"

    config = tmp_path / "pageant.toml"
    config.write_text(f'database_url = "{url("from-toml.db")}"\n')
    env = {"PAGEANT_DATABASE_URL": url("from-env.db")}

    pageant(
        "db", "upgrade", "--config", str(config), "--database-url", url("from-flag.db"), env=env
    )
    assert sorted(p.name for p in tmp_path.glob("*.db")) == ["from-flag.db"]
    pageant("db", "upgrade", "--config", str(config), env=env)
    assert sorted(p.name for p in tmp_path.glob("*.db")) == ["from-env.db", "from-flag.db"]
    pageant("db", "upgrade", env={"PAGEANT_CONFIG": str(config)})
    assert sorted(p.name for p in tmp_path.glob("*.db")) == [
        "from-env.db",
        "from-flag.db",
        "from-toml.db",
    ]
    pageant("db", "upgrade")
    assert (tmp_path / "pageant.db").exists()  # the default, in the working folder


def test_every_setting_follows_the_precedence(tmp_path: Path) -> None:
    config = tmp_path / "pageant.toml"
    config.write_text("port = 7000\nmax_attempts = 7\npoll_seconds = 7.5\n")
    environ = {"PAGEANT_PORT": "8000", "PAGEANT_MAX_ATTEMPTS": "8"}
    flags = {"port": "9000"}

    merged = load_settings(flags, environ, config)
    assert (merged.port, merged.max_attempts, merged.poll_seconds) == (9000, 8, 7.5)
    assert merged.retry_seconds == Settings().retry_seconds == 60

    assert load_settings({}, environ, config).port == 8000
    assert load_settings({}, {}, config).port == 7000
    assert load_settings({}, {}, None).port == 8080
    # A flag left unset (None) does not hide what is beneath it.
    assert load_settings({"port": None}, environ, config).port == 8000


def test_the_config_file_may_come_from_the_environment(tmp_path: Path) -> None:
    config = tmp_path / "pageant.toml"
    config.write_text("horizon_days = 30\n")
    assert load_settings({}, {"PAGEANT_CONFIG": str(config)}).horizon_days == 30


def test_webhook_urls_from_each_source(tmp_path: Path) -> None:
    config = tmp_path / "pageant.toml"
    config.write_text('webhook_urls = ["https://a.example/hook"]\n')
    assert load_settings({}, {}, config).webhook_urls == ("https://a.example/hook",)
    environ = {"PAGEANT_WEBHOOK_URLS": "https://b.example/x, https://c.example/y"}
    assert load_settings({}, environ, config).webhook_urls == (
        "https://b.example/x",
        "https://c.example/y",
    )


@pytest.mark.parametrize(
    ("args", "env", "toml", "expected"),
    [
        (["--port", "abc"], {}, "", "port (from flag --port): Input should be a valid integer"),
        (
            ["--max-attempts", "0"],
            {},
            "",
            "max_attempts (from flag --max-attempts): Input should be greater than or equal to 1",
        ),
        (
            [],
            {"PAGEANT_MAX_ATTEMPTS": "lots"},
            "",
            "max_attempts (from environment variable PAGEANT_MAX_ATTEMPTS): "
            "Input should be a valid integer",
        ),
        (
            [],
            {},
            "poll_seconds = -1\n",
            "poll_seconds (from config file {config}): Input should be greater than 0",
        ),
        (
            [],
            {},
            "pol_seconds = 5\n",
            "pol_seconds (from config file {config}): Extra inputs are not permitted",
        ),
    ],
)
def test_a_bad_setting_is_a_usage_error_naming_its_source(
    tmp_path: Path, args: list[str], env: dict[str, str], toml: str, expected: str
) -> None:
    config = tmp_path / "pageant.toml"
    config.write_text(toml)
    result = pageant("plugins", "--config", str(config), *args, env=env)
    assert result.exit_code == 2
    assert expected.format(config=config) in result.stderr


def test_a_missing_or_broken_config_file_is_a_usage_error(tmp_path: Path) -> None:
    missing = pageant("plugins", "--config", str(tmp_path / "nope.toml"))
    assert missing.exit_code == 2
    assert "does not exist" in missing.stderr
    broken = tmp_path / "broken.toml"
    broken.write_text("port = = 1\n")
    bad = pageant("plugins", "--config", str(broken))
    assert bad.exit_code == 2
    assert "is not valid TOML" in bad.stderr


def test_every_setting_has_a_flag_listed_once_under_pageant_help() -> None:
    help_text = pageant("--help").stdout
    for name in Settings.model_fields:
        assert "--" + name.replace("_", "-") in help_text
        assert ENV_PREFIX + name.upper() in help_text


def test_load_settings_names_every_bad_setting_at_once() -> None:
    with pytest.raises(Invalid) as caught:
        load_settings({"port": "-1"}, {"PAGEANT_RUNS_PER_TICK": "none"})
    assert caught.value.details == [
        "port (from flag --port): Input should be greater than or equal to 0",
        "runs_per_tick (from environment variable PAGEANT_RUNS_PER_TICK): "
        "Input should be a valid integer, unable to parse string as an integer",
    ]
