"""docs/openarena.md's commands, run as an operator would against private servers: every
``sh`` block's command is either run here (its ports, homes and paths put on this machine's)
or named below with why it is not; every ``curl`` sends JSON as JSON."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from arena_server import need_engine
from pageant_openarena.dedicated import Dedicated, free_port
from pageant_openarena.rcon import NoAnswer, Rcon

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "openarena.md"
BLOCK = re.compile(r"```(?P<lang>\w*)\n(?P<body>.*?)```\n", re.S)
PAGEANT = str(Path(sys.executable).with_name("pageant"))
ON_SERVER = ROOT / "example_plugins" / "openarena" / "events" / "frenzy-on-server.json"
ON_SERVER_TITLE = json.loads(ON_SERVER.read_text())["title"]
#: Commands the test does not run, each with why.
NOT_RUN = {
    "apt-get install": "installs a system package (the tests need it installed already)",
    ".venv/bin/pip install": "installs the plugin (the tests run from the installed plugin)",
    ".venv/bin/pageant demo": "the demo has a test of its own (tests/cli)",
    "# or: pageant runs start": "a comment",
    'curl -s -H "Authorization: Bearer $TOKEN" -H "Content-Type: application/json" '
    "localhost:8080/api/v1/admin/events/$ID/runs": (
        "starts a run on each of two servers: tests/walks/test_openarena_walk.py starts such "
        "runs of frenzy-on-server.json against two private servers; its header is checked below"
    ),
}
pytestmark = pytest.mark.timeout(180)


def blocks(lang: str) -> list[str]:
    return [m["body"] for m in BLOCK.finditer(DOC.read_text()) if m["lang"] == lang]


def commands() -> list[str]:
    """Every command of every ``sh`` block, its continuation lines joined."""
    found = []
    for body in blocks("sh"):
        found += [c.strip() for c in body.replace("\\\n", " ").splitlines() if c.strip()]
    return found


def server_commands() -> list[str]:
    return [c for c in commands() if "openarena-server +set" in c]


def test_every_command_is_run_here_or_says_why_not() -> None:
    ran = [c for c in commands() if "openarena-server +set" in c or "pageant serve" in c]
    ran += [
        c for c in commands() if (c.startswith("curl") and "/actions/" in c) or c.endswith(".json")
    ]
    skipped = [c for c in commands() if any(c.startswith(p) for p in NOT_RUN)]
    assert sorted(ran + skipped) == sorted(commands())
    assert len(server_commands()) == 3


def test_every_curl_sends_its_body_as_json() -> None:
    curls = [c for c in commands() if c.startswith("curl")]
    assert len(curls) == 6
    for curl in curls:
        assert '-H "Content-Type: application/json"' in curl, curl


async def shell(command: str, **kw: Any) -> asyncio.subprocess.Process:
    """``command`` run by a shell in a process group of its own, so that :func:`stop` ends
    what the shell started (a game server, ``pageant serve``) and not only the shell."""
    return await asyncio.create_subprocess_shell(command, start_new_session=True, **kw)


async def stop(process: asyncio.subprocess.Process) -> None:
    """SIGTERM to ``process``'s whole group, SIGKILL to what is left after 10 s, and wait
    until none of it is alive."""
    group = process.pid
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGTERM)
    for tick in range(200):
        if tick == 100:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
        if process.returncode is None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(process.wait(), 0.1)
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return
        await asyncio.sleep(0.1)
    pytest.fail(f"process group {group} outlived SIGKILL")


async def run(*args: Any, **kw: Any) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run`` off the event loop."""
    return await asyncio.to_thread(subprocess.run, *args, **kw)


def answers(host: str, port: int, password: str) -> bool:
    """Whether rcon at ``host:port`` answers ``status`` (within a second)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.settimeout(1.0)
        probe.sendto(f"\xff\xff\xff\xffrcon {password} status".encode("latin-1"), (host, port))
        try:
            return b"map:" in probe.recv(4096)
        except TimeoutError:
            return False


@pytest.fixture
async def started(tmp_path: Path) -> AsyncIterator[list[asyncio.subprocess.Process]]:
    need_engine()
    if shutil.which("openarena-server", path="/usr/games") is None:
        pytest.skip("Debian's /usr/games/openarena-server is not installed")
    processes: list[asyncio.subprocess.Process] = []
    yield processes
    for process in processes:
        await stop(process)  # the shell may be gone while the server it started is not


async def test_the_server_commands_listen_where_they_say_and_keep_a_log_each(
    tmp_path: Path, started: list[asyncio.subprocess.Process]
) -> None:
    (config,) = [b for b in blocks("") if "set rconpassword" in b]
    password = re.search(r'set rconpassword "([^"]+)"', config)[1]  # type: ignore[index]  # the doc sets one
    ports = {"27960": free_port(), "27961": free_port()}
    homes: list[tuple[Path, int]] = []
    for n, command in enumerate(server_commands()):
        home = tmp_path / f"home{n}"
        if command.startswith("HOME="):
            home = tmp_path / command.split()[0].removeprefix("HOME=/")
            command = command.split(" ", 1)[1]
        for doc_port, port in ports.items():
            command = command.replace(f"net_port {doc_port}", f"net_port {port}")
        port = int(re.search(r"net_port (\d+)", command)[1])  # type: ignore[index]  # always there
        (home / ".openarena" / "baseoa").mkdir(parents=True, exist_ok=True)
        (home / ".openarena" / "baseoa" / "server.cfg").write_text(config)
        started.append(
            await shell(
                command,
                env={**os.environ, "HOME": str(home)},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        homes.append((home, port))
        if len(homes) == 1:
            # The single server uses the doc's port, as do the first of the two: one at a time.
            await wait_answering(port, password)
            assert not answers("127.0.0.2", port, password)  # net_ip: on 127.0.0.1 only
            single = started.pop()
            await stop(single)
    for _, port in homes[1:]:
        await wait_answering(port, password)
    logs = [home / ".openarena" / "baseoa" / "games.log" for home, _ in homes[1:]]
    for log in logs:
        assert "InitGame:" in log.read_text()  # each server its own log, in its own HOME
    assert logs[0] != logs[1]


async def wait_answering(port: int, password: str) -> None:
    rcon = Rcon("127.0.0.1", port, password, timeout=1.0, retries=0)
    for _ in range(40):
        try:
            if "map:" in await rcon.command("status", idempotent=True):
                return
        except NoAnswer:
            pass
        await asyncio.sleep(0.5)
    pytest.fail(f"no server answered on 127.0.0.1:{port}")


async def test_serve_and_the_frenzys_curls_run_against_a_private_server(tmp_path: Path) -> None:
    need_engine()
    server = Dedicated(tmp_path / "arena", password="a-long-secret")
    await server.start()
    port = free_port_tcp()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAGEANT_", "PAGEANT_PLUGIN_"))}
    env |= {"PAGEANT_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'pageant.db'}"}
    env |= {"PAGEANT_PORT": str(port), "PAGEANT_PLUGIN_OPENARENA_RCON_PORT": str(server.port)}
    serving = None
    try:
        await run([PAGEANT, "db", "upgrade"], env=env, check=True, capture_output=True)
        made = await run(
            [PAGEANT, "token", "create", "--role", "admin", "--name", "me"],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        token = made.stdout.strip()
        (serve,) = [c for c in commands() if "pageant serve" in c]
        serve = serve.replace("/home/oa/.openarena/baseoa/games.log", str(server.log_path))
        serve = serve.replace(".venv/bin/pageant", PAGEANT)
        serving = await shell(
            serve, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        for _ in range(100):
            if (await run(["curl", "-sf", f"localhost:{port}/healthz"])).returncode == 0:
                break
            await asyncio.sleep(0.2)
        else:
            pytest.fail("pageant serve did not answer /healthz")
        frenzy = [
            c
            for c in commands()
            if c.startswith("curl") and ("/actions/" in c or c.endswith(".json"))
        ]
        assert len(frenzy) == 4  # frenzy-on-server.json, two actions enabled, frenzy.json
        for curl in frenzy:
            done = await run(
                curl.replace("localhost:8080", f"localhost:{port}"),
                shell=True,
                cwd=ROOT,
                env={**env, "TOKEN": token},
                capture_output=True,
                text=True,
            )
            answer = json.loads(done.stdout)
            assert "error" not in answer, (curl, answer)
        listed = await run(
            [
                "curl",
                "-s",
                "-H",
                f"Authorization: Bearer {token}",
                f"localhost:{port}/api/v1/admin/events",
            ],
            capture_output=True,
            text=True,
        )
        titles = [e["title"] for e in json.loads(listed.stdout)["items"]]
        # Both shipped files are taken by the API as they are.
        assert sorted(titles) == ["Low-Gravity Frenzy", ON_SERVER_TITLE]
    finally:
        if serving is not None:
            await stop(serving)
        await server.stop()


def free_port_tcp() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
