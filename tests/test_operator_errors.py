"""When pageant cannot start, the operator reads one line saying what is wrong and how to fix
it, and the exit status is 1 - never a traceback."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from pageant.db.engine import create_engine
from tests.databases import empty_database
from tests.test_cli import pageant_process


def one_line(done: object) -> str:
    """The process failed with exactly one line on standard error, and no traceback."""
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)  # type: ignore[attr-defined]
    lines = [line for line in done.stderr.splitlines() if line.strip()]  # type: ignore[attr-defined]
    assert "Traceback" not in done.stderr, done.stderr  # type: ignore[attr-defined]
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


def test_db_upgrade_on_an_unknown_revision_is_one_line(migrated_url: str) -> None:
    asyncio.run(_execute(migrated_url, "UPDATE alembic_version SET version_num = 'f00d'"))
    line = one_line(pageant_process("db", "upgrade", env={"PAGEANT_DATABASE_URL": migrated_url}))
    assert line == (
        "error: the database's schema is at revision 'f00d', which this pageant does not know "
        "(a newer pageant migrated it); run that newer pageant, or restore the backup taken "
        "before its upgrade"
    )


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
