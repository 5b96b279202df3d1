"""When pageant cannot start, the operator reads one line saying what is wrong and how to fix
it, and the exit status is 1 - never a traceback."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from pageant.db.engine import create_engine
from tests.cli.test_cli import pageant, pageant_process
from tests.databases import empty_database


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The process failed with exactly one line on standard error, and no traceback."""
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert "Traceback" not in done.stderr, done.stderr
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: ")
    return lines[0]


@pytest.fixture
def empty_url(dialect: str, tmp_path: Path) -> Iterator[str]:
    with empty_database(dialect, tmp_path) as url:
        yield url


@pytest.fixture
def migrated_url(empty_url: str) -> str:
    done = pageant_process("db", "upgrade", env={"PAGEANT_DATABASE_URL": empty_url})
    assert done.returncode == 0, done.stderr
    return empty_url


def test_a_busy_port_is_one_line_and_the_engine_never_started(migrated_url: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = pageant_process(
            "serve",
            "--port",
            str(port),
            "--log-format",
            "json",
            env={"PAGEANT_DATABASE_URL": migrated_url},
            timeout=30,
        )
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines[-1] == (
        f"error: cannot listen on 127.0.0.1:{port}: the address is already in use (another "
        "pageant, or another program, holds it); stop the other process or choose another "
        "--port (PAGEANT_PORT) or --host (PAGEANT_HOST)"
    )
    # Bound before the engine: the engine never announced itself.
    assert "engine started" not in done.stderr and "Traceback" not in done.stderr


def test_demo_serve_checks_its_port_before_running_the_demo() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        done = pageant_process("demo", "--serve", "--port", str(port), env={}, timeout=60)
        took = time.monotonic() - started
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith(f"error: cannot listen on 127.0.0.1:{port}: the address is")
    # Refused before the demo ran: no event was made, no run started.
    assert "Champion Muster" not in done.stdout and "run " not in done.stdout
    assert took < 20, took


def test_an_unreachable_database_names_the_url_without_its_password(tmp_path: Path) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # nothing listens once the socket closes
    url = f"mysql+aiomysql://pageant:hunter2@127.0.0.1:{port}/pageant"
    for command in (
        ["serve", "--port", "0"],
        ["db", "upgrade"],
        ["token", "create", "--role", "admin", "--name", "x"],
    ):
        done = pageant_process(*command, env={"PAGEANT_DATABASE_URL": url}, timeout=60)
        line = one_line(done)
        assert line.startswith(
            f"error: cannot reach the database at mysql+aiomysql://pageant:***@127.0.0.1:{port}/"
            "pageant: "
        ), line
        assert "hunter2" not in done.stderr + done.stdout
        assert line.endswith(
            "check that the server is running and the URL, user and password "
            "(--database-url, PAGEANT_DATABASE_URL)"
        )


def test_a_missing_sqlite_folder_is_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "not-there"
    url = f"sqlite+aiosqlite:///{folder / 'pageant.db'}"
    for command in (["serve", "--port", "0"], ["db", "upgrade"]):
        line = one_line(pageant_process(*command, env={"PAGEANT_DATABASE_URL": url}))
        assert line == (
            f"error: the folder {str(folder)!r} of the SQLite database does not exist; create "
            "it or point --database-url (PAGEANT_DATABASE_URL) at a file in an existing folder"
        )
    assert not folder.exists()


async def _execute(url: str, statement: str) -> None:
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(text(statement))
    finally:
        await engine.dispose()


NEWER = (
    "error: a newer pageant migrated this database's schema to revision 'f00d', which this "
    "pageant does not know; install that newer pageant, or restore the backup taken before "
    "its upgrade"
)


def test_db_upgrade_on_an_unknown_revision_is_one_line(migrated_url: str) -> None:
    asyncio.run(_execute(migrated_url, "UPDATE alembic_version SET version_num = 'f00d'"))
    line = one_line(pageant_process("db", "upgrade", env={"PAGEANT_DATABASE_URL": migrated_url}))
    assert line == NEWER
    # Every command says the same, never "run pageant db upgrade" (which would refuse).
    done = pageant("runs", "list", env={"PAGEANT_DATABASE_URL": migrated_url})
    assert (done.exit_code, done.stderr.strip()) == (1, NEWER)


def test_db_upgrade_on_an_unstamped_schema_names_db_stamp(migrated_url: str) -> None:
    asyncio.run(_execute(migrated_url, "DROP TABLE alembic_version"))
    env = {"PAGEANT_DATABASE_URL": migrated_url}
    line = one_line(pageant_process("db", "upgrade", env=env))
    assert line.startswith("error: the database has pageant's tables (")
    assert "run `pageant db stamp head`" in line
    # The fix it names works: stamped, the schema is current and serve would accept it.
    done = pageant_process("db", "stamp", "head", env=env)
    assert done.returncode == 0, done.stderr
    done = pageant_process("db", "upgrade", env=env)
    assert done.returncode == 0 and done.stdout.strip().startswith("schema already at")


def test_db_stamp_refuses_an_unknown_revision(migrated_url: str) -> None:
    done = pageant_process("db", "stamp", "f00d", env={"PAGEANT_DATABASE_URL": migrated_url})
    assert done.returncode == 2
    assert "unknown revision 'f00d'" in done.stderr


# ── the database URL ──────────────────────────────────────────────────────────

FORMS = (
    "expected sqlite:///FILE or mysql://USER:PASSWORD@HOST/DATABASE (mariadb:// too; the "
    "drivers sqlite+aiosqlite, mysql+asyncmy and mysql+aiomysql may be named)"
)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("foo://bar", "not a database URL pageant can use (the scheme 'foo')"),
        ("postgresql://pageant:hunter2@db/pageant", "(the scheme 'postgresql')"),
        ("pageant.db", "not a database URL pageant can use (it has no scheme://)"),
        ("mysql://pageant:hunter2@db:port/pageant", "not a database URL pageant can read"),
        ("mariadb://pageant:hunter2@db", "a MariaDB URL needs a host and a database"),
    ],
)
def test_a_bad_database_url_is_one_line_naming_the_setting_and_the_forms(url, why) -> None:
    done = pageant("runs", "list", env={"PAGEANT_DATABASE_URL": url})
    assert done.exit_code == 2
    error = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert len(error) == 1 and "Traceback" not in done.stderr
    assert error[0].startswith(
        "Error: database_url (from environment variable PAGEANT_DATABASE_URL): "
    )
    assert why in error[0] and error[0].endswith(FORMS)
    assert "hunter2" not in done.stderr


def test_a_bad_database_url_is_no_traceback_from_serve(tmp_path: Path) -> None:
    done = pageant_process("serve", "--port", "0", env={"PAGEANT_DATABASE_URL": "foo://bar"})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "database_url (from environment variable PAGEANT_DATABASE_URL)" in done.stderr


def test_the_plain_spellings_choose_the_driver(empty_url: str, dialect: str) -> None:
    """``sqlite:///`` and ``mysql://`` / ``mariadb://`` name no driver: pageant picks its own."""
    plain = empty_url.replace("sqlite+aiosqlite://", "sqlite://").replace(
        "mysql+asyncmy://", "mariadb://" if dialect == "mysql" else "mysql://"
    )
    assert "+" not in plain.partition("://")[0]
    env = {"PAGEANT_DATABASE_URL": plain}
    done = pageant("db", "upgrade", env=env)
    assert done.exit_code == 0, done.stderr
    done = pageant("runs", "list", env=env)
    assert (done.exit_code, done.stderr) == (0, "")


# ── a SQLite file that is not there ─────────────────────────────────────────────


@pytest.mark.parametrize(
    "command",
    [["runs", "list"], ["token", "list"], ["db", "stamp"], ["actions", "list"], ["events", "list"]],
)
def test_only_db_upgrade_creates_a_missing_sqlite_file(tmp_path: Path, command) -> None:
    path = tmp_path / "typo.db"
    env = {"PAGEANT_DATABASE_URL": f"sqlite:///{path}"}
    done = pageant(*command, env=env)
    assert done.exit_code == 1
    assert done.stderr.strip() == (
        f"error: the SQLite database {str(path)!r} does not exist; create it with `pageant db "
        "upgrade`, or point --database-url (PAGEANT_DATABASE_URL) at the existing file"
    )
    assert not path.exists()
    assert pageant("db", "upgrade", env=env).exit_code == 0
    assert path.exists()
    assert pageant(*command, env=env).exit_code == 0


def test_a_relative_sqlite_url_is_shown_at_its_absolute_path_and_a_second_one_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pageant.db.engine import shown_url

    host_folder, other = tmp_path / "srv", tmp_path / "home"
    host_folder.mkdir()
    other.mkdir()
    env = {"PAGEANT_DATABASE_URL": "sqlite+aiosqlite:///pageant.db"}
    monkeypatch.chdir(host_folder)
    made = pageant("db", "upgrade", env=env)
    assert made.exit_code == 0
    assert f"created the SQLite database sqlite+aiosqlite:///{host_folder / 'pageant.db'}" in (
        made.stdout
    )
    assert shown_url("sqlite+aiosqlite:///pageant.db") == (
        f"sqlite+aiosqlite:///{host_folder / 'pageant.db'}"
    )
    monkeypatch.chdir(other)
    done = pageant("runs", "list", env=env)
    assert done.exit_code == 1
    said = done.stderr.strip()
    assert said.startswith(f"error: there is no database at {str(other / 'pageant.db')!r}")
    assert "a host started in another folder uses the file there" in said
    assert "`pageant db upgrade` here would create a second, empty database" in said
    assert not (other / "pageant.db").exists()
    # An absolute URL that names no file keeps its plain advice.
    done = pageant("runs", "list", env={"PAGEANT_DATABASE_URL": f"sqlite:///{other / 'x.db'}"})
    assert "create it with `pageant db upgrade`" in done.stderr


def test_serve_does_not_create_a_missing_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "typo.db"
    done = pageant_process(
        "serve", "--port", "0", env={"PAGEANT_DATABASE_URL": f"sqlite:///{path}"}
    )
    assert one_line(done).startswith(f"error: the SQLite database {str(path)!r} does not exist")
    assert not path.exists()


# ── --config before the command ───────────────────────────────────────────────


def test_config_is_accepted_before_the_command_and_the_commands_own_wins(tmp_path: Path) -> None:
    first, second = tmp_path / "first.toml", tmp_path / "second.toml"
    first.write_text(f'database_url = "sqlite:///{tmp_path / "first.db"}"\n')
    second.write_text(f'database_url = "sqlite:///{tmp_path / "second.db"}"\n')
    done = pageant("--config", str(first), "db", "upgrade", env={})
    assert done.exit_code == 0, done.stderr
    assert sorted(p.name for p in tmp_path.glob("*.db")) == ["first.db"]
    done = pageant("--config", str(first), "db", "upgrade", "--config", str(second), env={})
    assert done.exit_code == 0, done.stderr
    assert sorted(p.name for p in tmp_path.glob("*.db")) == ["first.db", "second.db"]
    done = pageant("--config", str(first), "runs", "list", env={})
    assert (done.exit_code, done.stderr) == (0, "")
    missing = pageant("--config", str(tmp_path / "nope.toml"), "runs", "list", env={})
    assert missing.exit_code == 2 and "nope.toml" in missing.stderr
