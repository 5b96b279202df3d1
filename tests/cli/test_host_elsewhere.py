"""A command run from another folder than the host's, on the default relative SQLite URL,
finds no database there. It names the absolute path it looked at and — when ``pageant serve``
runs (or last ran) in another folder — that folder and the file it uses, instead of advising
``pageant db upgrade``, which would make a second, empty database. With no host known it
keeps that advice, and the state file is a hint: a corrupt one changes nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from pageant.cli import running
from tests.cli.test_cli import console_script
from tests.cli.test_operator_errors import one_line

RELATIVE = "sqlite:///pageant.db"


def _run(folder: Path, state: Path, *args: str, timeout: float = 60) -> Any:
    """``pageant ARGS`` as an operator runs it in ``folder``, on the relative default URL."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PAGEANT_")}
    env = {**clean, "PAGEANT_DATABASE_URL": RELATIVE, "XDG_STATE_HOME": str(state)}
    return subprocess.run(
        [*console_script(), *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _noted(state: Path) -> list[dict[str, Any]]:
    path = state / "pageant" / "hosts.json"
    return json.loads(path.read_text())["hosts"] if path.exists() else []


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The host's folder (its database made there), another folder, and the state folder."""
    srv, home, state = tmp_path / "srv", tmp_path / "home", tmp_path / "state"
    srv.mkdir()
    home.mkdir()
    done = _run(srv, state, "db", "upgrade")
    assert done.returncode == 0, done.stderr
    return srv, home, state


def test_a_command_in_another_folder_names_the_host_and_its_database(folders) -> None:
    srv, home, state = folders
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PAGEANT_")}
    env = {**clean, "PAGEANT_DATABASE_URL": RELATIVE, "XDG_STATE_HOME": str(state)}
    log = open(srv / "serve.log", "w")
    serve = subprocess.Popen(
        [*console_script(), "serve", "--port", "0"],
        cwd=srv,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not any(h["pid"] == serve.pid for h in _noted(state)):
            assert serve.poll() is None, (srv / "serve.log").read_text()
            assert time.monotonic() < deadline, "pageant serve did not note itself"
            time.sleep(0.1)
        [noted] = _noted(state)
        assert noted["folder"] == str(srv) and noted["database"] == str(srv / "pageant.db")
        assert noted["stopped_at"] is None

        for command in (("runs", "list"), ("fire", "wisps.caught")):
            said = one_line(_run(home, state, *command))
            assert said.startswith(
                f"error: no database at {home / 'pageant.db'}; the host you started in {srv} "
                f"uses {srv / 'pageant.db'}? Run this command in {srv}, or give "
                f"--database-url (PAGEANT_DATABASE_URL) sqlite:///{srv / 'pageant.db'}"
            ), said
            assert "db upgrade" not in said
        assert not (home / "pageant.db").exists()
    finally:
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(timeout=30) == 0, (srv / "serve.log").read_text()
        log.close()

    # Stopped cleanly: kept as where that database was last served from.
    [noted] = _noted(state)
    assert noted["stopped_at"] is not None
    said = one_line(_run(home, state, "runs", "list"))
    assert said.startswith(
        f"error: no database at {home / 'pageant.db'}; the host you last ran in {srv} used "
        f"{srv / 'pageant.db'}?"
    ), said


def _todays_advice(said: str, home: Path) -> None:
    assert said.startswith(f"error: there is no database at {str(home / 'pageant.db')!r}")
    assert "`pageant db upgrade` here would create a second, empty database" in said


def test_with_no_host_known_the_advice_stays(folders) -> None:
    _, home, state = folders
    _todays_advice(one_line(_run(home, state, "runs", "list")), home)
    # A state file that is not what pageant writes changes nothing, and says nothing.
    (state / "pageant").mkdir(parents=True)
    for garbage in ("{not json", '{"hosts": [{"pid": "x"}, 7, null]}', "[]", '{"hosts": 3}'):
        (state / "pageant" / "hosts.json").write_text(garbage)
        _todays_advice(one_line(_run(home, state, "runs", "list")), home)


def test_a_host_whose_database_is_gone_or_here_is_not_named(
    folders, monkeypatch: pytest.MonkeyPatch
) -> None:
    srv, home, state = folders
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    monkeypatch.chdir(home)
    # Noted from the folder this command runs in: not "another folder".
    running.note_started(RELATIVE)
    _todays_advice(one_line(_run(home, state, "runs", "list")), home)
    monkeypatch.chdir(srv)
    running.note_started(RELATIVE)
    (srv / "pageant.db").rename(srv / "moved.db")
    _todays_advice(one_line(_run(home, state, "runs", "list")), home)


def test_a_server_url_is_never_noted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert running.note_started("mysql+asyncmy://pageant:s3cret@db.example/pageant") is None
    assert not (tmp_path / "pageant" / "hosts.json").exists()
    noted = running.note_started("sqlite+aiosqlite:///pageant.db")
    assert noted is not None and noted.pid == os.getpid()
    assert "s3cret" not in (tmp_path / "pageant" / "hosts.json").read_text()


def test_db_upgrade_in_another_folder_says_it_made_a_second_database(
    folders, monkeypatch: pytest.MonkeyPatch
) -> None:
    srv, home, state = folders
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    monkeypatch.chdir(srv)
    running.note_started(RELATIVE)  # this process stands for the host serving srv
    made = _run(home, state, "db", "upgrade")
    assert made.returncode == 0, made.stderr
    assert made.stderr.strip() == (
        f"note: {home / 'pageant.db'} is a second, empty database; the host you started in "
        f"{srv} uses {srv / 'pageant.db'}"
    )
    # Made in the host's own folder, or again, it is no second database.
    again = _run(home, state, "db", "upgrade")
    assert again.returncode == 0 and again.stderr == ""
