"""A private OpenArena server (Debian's ``openarena-server``, engine ``ioq3ded``) in a
folder of its own: for tests and ``pageant demo --game openarena``, never for production.

It listens on 127.0.0.1 only, keeps everything it writes under ``folder`` (its ``HOME``),
writes its game log line by line (``g_logsync 1``) and runs ``map`` with no frag or time
limit, so bots fight on until they are kicked.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
from pathlib import Path

from .rcon import Rcon, RconError

#: Where Debian installs the engine and the game's data.
ENGINE = "/usr/lib/ioquake3/ioq3ded"
BASEPATH = "/usr/lib/openarena-server"
INSTALL = "apt-get install -y --no-install-recommends openarena-server"


def find_engine() -> str | None:
    """The ``ioq3ded`` binary with the OpenArena data beside it, or None."""
    engine = shutil.which("ioq3ded") or (ENGINE if os.access(ENGINE, os.X_OK) else None)
    return engine if engine and Path(BASEPATH, "baseoa").is_dir() else None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Dedicated:
    """One private server: ``await start()``, ``kill()`` (SIGKILL), ``await stop()``."""

    def __init__(
        self,
        folder: Path,
        *,
        password: str = "pageant",
        port: int | None = None,
        map: str = "oa_dm1",
    ) -> None:
        self.folder, self.password, self.map = folder, password, map
        self.port = port or free_port()
        self.process: asyncio.subprocess.Process | None = None
        self.log_path = folder / ".openarena" / "baseoa" / "games.log"

    def rcon(self, password: str | None = None) -> Rcon:
        """A client of this server's remote console. It shares the server's ration of rcon
        requests from 127.0.0.1 with every other client, so it asks patiently."""
        return Rcon("127.0.0.1", self.port, password or self.password, timeout=1.0, retries=6)

    async def start(self, *, ready_within: float = 20.0) -> None:
        """Start the server and wait until it answers RCON."""
        engine = find_engine()
        if engine is None:
            raise RuntimeError(f"ioq3ded is not installed; on Debian: {INSTALL}")
        self.folder.mkdir(parents=True, exist_ok=True)
        args = [
            *("+set", "com_basegame", "baseoa", "+set", "fs_basepath", BASEPATH),
            *("+set", "com_homepath", ".openarena", "+set", "com_protocol", "71"),
            *("+set", "com_legacyprotocol", "71", "+set", "sv_master1", ""),
            *("+set", "dedicated", "1", "+set", "net_ip", "127.0.0.1"),
            *("+set", "net_port", str(self.port), "+set", "rconpassword", self.password),
            *("+set", "g_log", "games.log", "+set", "g_logsync", "1"),
            *("+set", "fraglimit", "0", "+set", "timelimit", "0", "+map", self.map),
        ]
        with (self.folder / "console.txt").open("ab") as console:
            self.process = await asyncio.create_subprocess_exec(
                engine,
                *args,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=console,
                stderr=asyncio.subprocess.STDOUT,
                env={**os.environ, "HOME": str(self.folder)},
            )
        rcon = self.rcon()
        async with asyncio.timeout(ready_within):
            while True:
                if self.process.returncode is not None:
                    raise RuntimeError(f"ioq3ded exited with {self.process.returncode}")
                try:
                    if "map:" in await rcon.command("status", idempotent=True):
                        return
                except RconError:
                    pass
                await asyncio.sleep(0.2)

    def kill(self) -> None:
        """SIGKILL: the server dies without a word in its log."""
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(signal.SIGKILL)

    async def stop(self) -> None:
        if self.process is None:
            return
        if self.process.returncode is None:
            self.process.terminate()
            try:
                async with asyncio.timeout(5):
                    await self.process.wait()
            except TimeoutError:
                self.process.kill()
                await self.process.wait()
        await self.process.wait()
        self.process = None
