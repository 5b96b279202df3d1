"""A private Luanti world for the walks: a ``minetestserver`` (Debian's ``minetest-server``)
on a free UDP port, a flat ``minetest_game`` world with the ``pageant_bridge`` mod installed
by ``pageant-luanti install-mod``, syncing with a pageant host.

The world's test channel (``pageant_bridge.test_commands``, off by default) makes real
happenings on the server side with no graphical client: the test writes JSON lines to
``WORLD/pageant_test.in`` and the mod answers in ``WORLD/pageant_test.out`` (see
:meth:`World.ask`). It is a file, not a link command, so it reaches the game while pageant
is down.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from pageant_luanti.install import install

INSTALL = "apt-get install --no-install-recommends minetest-server"
#: Where a flat world's ground is (mgflat_ground_level): y 9 is the first block of air.
GROUND = 8


def find_server() -> str | None:
    return shutil.which("minetestserver") or (
        "/usr/games/minetestserver" if os.access("/usr/games/minetestserver", os.X_OK) else None
    )


def need_server() -> str:
    """Skip without ``minetestserver``; under ``CI``, where it is installed, fail instead."""
    found = find_server()
    if found is None:
        why = f"minetestserver (Luanti's server) is not installed; on Debian: {INSTALL}"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    return found


def free_port(kind: int = socket.SOCK_DGRAM) -> int:
    with socket.socket(socket.AF_INET, kind) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class World:
    """One world and its server process (started by :meth:`start`, again after a stop)."""

    def __init__(self, root: Path, url: str, server: str, token: str) -> None:
        self.root = root
        self.path = root / "world"
        self.path.mkdir(parents=True, exist_ok=True)
        (self.path / "world.mt").write_text(
            "gameid = minetest_game\nbackend = sqlite3\nmod_storage_backend = sqlite3\n"
            "auth_backend = sqlite3\nplayer_backend = sqlite3\n"
        )
        lines = install(self.path, url, server, token)
        self.port = free_port()
        self.config = root / "minetest.conf"
        self.config.write_text(
            "\n".join(
                [
                    *lines,
                    "pageant_bridge.test_commands = true",
                    "pageant_bridge.wait = 5",
                    "mg_name = flat",
                    "time_speed = 72",
                    "server_announce = false",
                    "enable_rollback_recording = false",
                    "",
                ]
            )
        )
        self.log_path = root / "server.log"
        self.process: subprocess.Popen[bytes] | None = None
        self._asked = 0

    def start(self, timeout: float = 60) -> None:
        binary = need_server()
        self.process = subprocess.Popen(
            [
                binary,
                "--world",
                str(self.path),
                "--gameid",
                "minetest_game",
                "--port",
                str(self.port),
                "--config",
                str(self.config),
                "--logfile",
                str(self.log_path),
            ],
            env={**os.environ, "HOME": str(self.root)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"minetestserver exited: {self.log()[-2000:]}")
            if f"listening on 0.0.0.0:{self.port}" in self.log():
                return
            time.sleep(0.1)
        raise AssertionError(f"minetestserver did not start in {timeout} s: {self.log()[-2000:]}")

    def stop(self, signum: int = signal.SIGTERM) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signum)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.process = None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def ask(self, command: str, timeout: float = 30, **payload: Any) -> Any:
        """Run a test command in the world; its answer (raises on the mod's error)."""
        self._asked += 1
        ident = f"{uuid.uuid4().hex[:8]}-{self._asked}"
        line = json.dumps({"id": ident, "command": command, "payload": payload}) + "\n"
        inbox = self.path / "pageant_test.in"
        deadline = time.monotonic() + timeout
        while inbox.exists() and time.monotonic() < deadline:  # the last one not yet taken
            time.sleep(0.05)
        staged = self.path / "pageant_test.staged"
        staged.write_text(line)
        staged.rename(inbox)
        out = self.path / "pageant_test.out"
        while time.monotonic() < deadline:
            if out.exists():
                for text in out.read_text().splitlines():
                    said = json.loads(text)
                    if said["id"] == ident:
                        if "error" in said:
                            raise AssertionError(f"{command}: {said['error']}")
                        return said.get("answer")
            time.sleep(0.05)
        raise AssertionError(f"the world did not answer {command} within {timeout} s")

    def beacons(self) -> list[str]:
        """The beacons loaded in the world now, walked from its entities."""
        found = self.ask("entities")["entities"]
        return sorted(e["id"] for e in found if e["kind"] == "beacon")

    def setting(self, name: str) -> str:
        return str(self.ask("get", name=name)["value"])
