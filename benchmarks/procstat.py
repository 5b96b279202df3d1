"""What Linux's /proc says of a process, read only: its CPU time, its resident memory, and
the process of a server found by its name (the database server beside the benchmark)."""

from __future__ import annotations

import os
from pathlib import Path

#: The names the MariaDB server runs under (``comm`` in /proc): MariaDB 10.5+, then older.
DATABASE_SERVERS = ("mariadbd", "mysqld")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (utime + stime of /proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    """The resident memory of process ``pid`` in MiB (VmRSS of /proc/<pid>/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"/proc/{pid}/status has no VmRSS line")


def find_process(names: tuple[str, ...] = DATABASE_SERVERS) -> int | None:
    """The id of the first running process whose name is one of ``names``; None if none is
    (the database is on another machine, or /proc is not Linux's)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "comm").read_text().strip() in names:
                return int(entry.name)
        except OSError:
            continue  # ended while we looked, or not ours to read
    return None


class ServerCpu:
    """The database server's CPU time over a stretch: ``start()``, then ``seconds()``; both
    are None-safe when no server process is found on this machine."""

    def __init__(self, local: bool) -> None:
        self.pid = find_process() if local else None
        self.began: float | None = None

    def start(self) -> None:
        self.began = cpu_seconds(self.pid) if self.pid else None

    def seconds(self) -> float | None:
        if self.pid is None or self.began is None:
            return None
        return cpu_seconds(self.pid) - self.began
