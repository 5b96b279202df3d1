"""Where this user's hosts run: the folder each ``pageant serve`` was started in and the SQLite
file it uses, so a command run elsewhere can say where the database is.

A relative SQLite URL (the default, ``sqlite:///pageant.db``) opens a file in the folder a
command runs in. Run from another folder than the host's, a command finds no database there;
it is told which folder the host was started in and the file it uses, rather than advised to
create a second, empty one with ``pageant db upgrade``.

``pageant serve`` notes itself, once its database is checked, in a small file of this user's
state: ``$XDG_STATE_HOME/pageant/hosts.json`` (``~/.local/state/pageant/hosts.json`` when
``XDG_STATE_HOME`` is not set). Each entry is a process id, the folder it was started in, the
absolute path of its SQLite file, when it started and — after a clean stop — when it stopped.
Only SQLite hosts are noted (a server's URL may hold a password, and is the same from any
folder), and the file never holds a URL. The file is a hint, not a record: a missing, stale or
unreadable one is ignored and a write that fails is skipped, silently; two hosts starting in
the same instant may keep only one of their entries.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pageant.db.engine import sqlite_file

#: How many hosts the file remembers: the newest.
KEEP = 20


@dataclass(frozen=True)
class KnownHost:
    """A ``pageant serve`` of this user: where it was started, the file it uses, and
    whether it is still running (its process is alive and it did not stop cleanly)."""

    pid: int
    folder: str
    database: str
    started_at: str
    stopped_at: str | None = None

    @property
    def running(self) -> bool:
        return self.stopped_at is None and _alive(self.pid)


def state_file() -> Path:
    """Where this user's hosts are noted (``XDG_STATE_HOME``, else ``~/.local/state``)."""
    base = os.environ.get("XDG_STATE_HOME") or ""
    root = Path(base) if os.path.isabs(base) else Path.home() / ".local" / "state"
    return root / "pageant" / "hosts.json"


def known_hosts() -> list[KnownHost]:
    """The hosts noted, oldest first; none when the file is missing or unreadable."""
    try:
        data = json.loads(state_file().read_text(encoding="utf-8"))
        entries = data["hosts"] if isinstance(data, dict) else []
    except (OSError, ValueError, KeyError):
        return []
    found = []
    for entry in entries if isinstance(entries, list) else []:
        try:
            host = KnownHost(
                pid=int(entry["pid"]),
                folder=str(entry["folder"]),
                database=str(entry["database"]),
                started_at=str(entry["started_at"]),
                stopped_at=None if entry.get("stopped_at") is None else str(entry["stopped_at"]),
            )
        except (TypeError, ValueError, KeyError, AttributeError):
            continue
        found.append(host)
    return found


def note_started(url: str) -> KnownHost | None:
    """Note a host of this process on ``url``, started in the current folder; None (and
    nothing noted) for a database that is not a SQLite file."""
    path = sqlite_file(url)
    if path is None:
        return None
    host = KnownHost(
        pid=os.getpid(),
        folder=str(Path.cwd()),
        database=str(Path(path).expanduser().absolute()),
        started_at=_now(),
    )
    # This process's earlier entry, and another for the same folder and file, are replaced.
    others = [
        h
        for h in known_hosts()
        if h.pid != host.pid and (h.folder, h.database) != (host.folder, host.database)
    ]
    _write([*others, host][-KEEP:])
    return host


def note_stopped(host: KnownHost | None) -> None:
    """Mark ``host`` (what :func:`note_started` answered) as stopped cleanly: it stays
    known as where that database was last served from."""
    if host is None:
        return
    stopped = _now()
    _write(
        [
            KnownHost(h.pid, h.folder, h.database, h.started_at, stopped) if h == host else h
            for h in known_hosts()
        ]
    )


def host_elsewhere(missing: Path) -> KnownHost | None:
    """The host a command that found no database at ``missing`` most likely means: one
    started in another folder whose file still exists — a running one first, else the one
    started last. None when no such host is known."""
    here = Path.cwd()
    candidates = [
        h
        for h in known_hosts()
        if Path(h.folder) != here and Path(h.database) != missing and Path(h.database).is_file()
    ]
    running = [h for h in candidates if h.running]
    chosen = running or candidates
    return chosen[-1] if chosen else None


def _write(hosts: list[KnownHost]) -> None:
    path = state_file()
    entries: list[dict[str, Any]] = [
        {
            "pid": h.pid,
            "folder": h.folder,
            "database": h.database,
            "started_at": h.started_at,
            "stopped_at": h.stopped_at,
        }
        for h in hosts
    ]
    aside = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Written aside and renamed: a reader never sees half a file.
        with tempfile.NamedTemporaryFile(
            "w", encoding="utf-8", dir=path.parent, prefix=".hosts.", delete=False
        ) as out:
            aside = out.name
            json.dump({"hosts": entries}, out, indent=2)
        os.replace(aside, path)
    except OSError:
        # A read-only home, a full disk: the file is only a hint for a later message.
        if aside is not None:
            Path(aside).unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # alive, but another user's (PermissionError)
        return True
    return True


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
