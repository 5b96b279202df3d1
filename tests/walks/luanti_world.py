"""A private Luanti world for the walks: a ``minetestserver`` (Debian's ``minetest-server``)
on a free UDP port, a flat ``minetest_game`` world with the ``pageant_bridge`` mod installed
by ``pageant-luanti install-mod``, syncing with a pageant host.

The world's test channel (``pageant_bridge.test_commands``, off by default) makes real
happenings on the server side with no graphical client: the test writes JSON lines to
``WORLD/pageant_test.in`` and the mod answers in ``WORLD/pageant_test.out`` (see
:meth:`World.ask`). It is a file, not a link command, so it reaches the game while pageant
is down.

A real player is a real client: Debian's ``minetest`` (the graphical client) under
``xvfb-run``, software GL through mesa, joining the world with ``--go``
(:class:`Player`).
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
CLIENT_INSTALL = "apt-get install --no-install-recommends minetest xvfb xauth"
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


def need_client() -> list[str]:
    """The command that starts a headless client (``xvfb-run -a minetest``). Skip without
    ``minetest`` or ``xvfb-run``; under ``CI``, where they are installed, fail instead."""
    client = shutil.which("minetest") or (
        "/usr/games/minetest" if os.access("/usr/games/minetest", os.X_OK) else None
    )
    xvfb = shutil.which("xvfb-run")
    if client is None or xvfb is None:
        why = f"a headless Luanti client needs minetest and xvfb-run; on Debian: {CLIENT_INSTALL}"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    return [xvfb, "-a", "-s", "-screen 0 320x240x24", client]


def free_port(kind: int = socket.SOCK_DGRAM) -> int:
    with socket.socket(socket.AF_INET, kind) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def read_log(path: Path) -> str:
    """What a process wrote to its log so far ("" before it wrote anything)."""
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""


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
        return read_log(self.log_path)

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


#: The client's minetest.conf: no sound, a tiny window and view, so software GL keeps up.
CLIENT_CONF = """enable_sound = false
viewing_range = 20
screen_w = 320
screen_h = 240
fps_max = 10
fps_max_unfocused = 10
enable_shaders = false
enable_clouds = false
menu_clouds = false
smooth_lighting = false
enable_particles = false
"""


class Player:
    """A real player: the graphical client under a virtual X server, joined to ``world``
    as ``name`` (its account made by its first join). Its process group is its own, so
    :meth:`leave` ends the client and the X server together."""

    def __init__(self, world: World, name: str, password: str = "pw") -> None:
        self.world, self.name, self.password = world, name, password
        self.home = world.root / f"client-{name}"
        self.home.mkdir(parents=True, exist_ok=True)
        self.config = self.home / "minetest.conf"
        self.config.write_text(CLIENT_CONF)
        self.log_path = self.home / "client.log"
        self.process: subprocess.Popen[bytes] | None = None

    def join(self, timeout: float = 60) -> None:
        """Start the client; return once the server lists the player as connected."""
        command = need_client()
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    *command,
                    "--config",
                    str(self.config),
                    "--go",
                    "--address",
                    "127.0.0.1",
                    "--port",
                    str(self.world.port),
                    "--name",
                    self.name,
                    "--password",
                    self.password,
                ],
                env={**os.environ, "HOME": str(self.home), "LIBGL_ALWAYS_SOFTWARE": "1"},
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"the client exited: {self.log()[-2000:]}")
            if self.name in self.world.ask("players")["players"]:
                return
            time.sleep(0.5)
        raise AssertionError(f"{self.name} did not join in {timeout} s: {self.log()[-2000:]}")

    def leave(self) -> None:
        """End the client and its X server (the server sees the player leave)."""
        if self.process is None:
            return
        for signum, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
            try:
                os.killpg(self.process.pid, signum)
            except ProcessLookupError:
                break
            try:
                self.process.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
        try:  # whatever of the group outlived the client (its X server)
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process = None

    def log(self) -> str:
        return read_log(self.log_path)

    def gravity(self) -> float:
        """The gravity of the player's physics, as the server holds it."""
        return float(self.world.ask("physics", player=self.name)["gravity"])
