"""Real ``pageant serve`` processes for the tests whose claim is about processes: a webhook
receiver on 127.0.0.1 that records every delivery, a host started as an operator would
start it, and the database read afterwards.

Every wait is bounded in time; every process is ended by its own id.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import aiohttp

from tests.conftest import MYSQL_ENV  # noqa: F401 - re-exported for the process tests

ENV_PREFIX = "PAGEANT_"


def console_script() -> list[str]:
    script = Path(sys.executable).with_name("pageant")
    return [str(script)] if script.exists() else [sys.executable, "-m", "pageant.cli"]


@dataclass
class Delivery:
    key: str
    run_id: int
    message: str
    at: float


@dataclass
class Receiver:
    """A game server's webhook: answers 200 after ``delay`` seconds, keeps every delivery."""

    delay: float = 0.0
    deliveries: list[Delivery] = field(default_factory=list)

    def __post_init__(self) -> None:
        lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                # Timed as the post arrives, before its body is read: when it began.
                arrived = time.time()
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with lock:
                    receiver.deliveries.append(
                        Delivery(
                            body["idempotency_key"], body["run"]["id"], body["message"], arrived
                        )
                    )
                if receiver.delay:
                    time.sleep(receiver.delay)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def keys_by_step(self) -> dict[tuple[int, str], list[str]]:
        """(run id, message) -> every idempotency key it was delivered under, in order."""
        out: dict[tuple[int, str], list[str]] = {}
        for d in list(self.deliveries):
            out.setdefault((d.run_id, d.message), []).append(d.key)
        return out


class Serve:
    """One ``pageant serve`` process on 127.0.0.1 and a free port."""

    def __init__(self, database_url: str, log: Path, **settings: Any) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
        env[ENV_PREFIX + "DATABASE_URL"] = database_url
        for name, value in {"port": 0, "log_format": "json", **settings}.items():
            env[ENV_PREFIX + name.upper()] = str(value)
        self.log_path = log
        self.log = log.open("w")
        self.process = subprocess.Popen(
            [*console_script(), "serve"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )
        self.port = self._wait_for_port()

    def _wait_for_port(self, timeout: float = 30) -> int:
        result: list[str] = []

        def read() -> None:
            assert self.process.stdout is not None
            result.append(self.process.stdout.readline())

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(timeout)
        line = result[0] if result else ""
        if "serving on" not in line:
            self.kill()
            raise AssertionError(f"serve did not start: {line!r}\n{self.log_path.read_text()}")
        return int(line.split("http://", 1)[1].split()[0].rsplit(":", 1)[1])

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def signal(self, signum: int) -> float:
        sent = time.time()
        self.process.send_signal(signum)
        return sent

    def wait(self, timeout: float) -> int:
        try:
            return self.process.wait(timeout)
        finally:
            self.log.flush()

    def kill(self) -> None:
        """SIGKILL if still running; then close what this object opened (idempotent)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)
        if self.process.stdout is not None:
            self.process.stdout.close()
        self.log.close()

    def log_lines(self) -> list[dict[str, Any]]:
        lines = []
        for text in self.log_path.read_text().splitlines():
            try:
                lines.append(json.loads(text))
            except ValueError:
                continue
        return lines


def command(database_url: str, *args: str, timeout: float = 60) -> str:
    """Run ``pageant ARGS`` against ``database_url`` as an operator would (a process of its
    own); answers what it printed, and fails the test naming its stderr on a non-zero exit."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
    env[ENV_PREFIX + "DATABASE_URL"] = database_url
    done = subprocess.run(
        [*console_script(), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, f"pageant {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


def migrated_admin(database_url: str, name: str = "walk") -> str:
    """``pageant db upgrade``, then an admin token made with ``pageant token create``."""
    command(database_url, "db", "upgrade")
    return command(database_url, "token", "create", "--role", "admin", "--name", name)


def until(condition: Callable[[], bool], *, timeout: float, every: float = 0.2) -> bool:
    """Poll ``condition`` until it holds or ``timeout`` seconds pass; answers whether it held."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(every)
    return condition()


def api_call(base: str, method: str, path: str, token: str, body: Any = None) -> Any:
    """One request to a served host's API as ``token``'s bearer; answers the JSON body and
    fails the test on any status of 300 or more."""

    async def go() -> Any:
        async with (
            aiohttp.ClientSession() as session,
            session.request(
                method, f"{base}{path}", json=body, headers={"Authorization": f"Bearer {token}"}
            ) as response,
        ):
            data = await response.json()
            assert response.status < 300, data
            return data

    return asyncio.run(go())
