"""The game link under load, on SQLite and (with ``--mysql URL``) MariaDB.

- ``busy``: ``--busy`` agents (default 100), each long-polling its own server over real
  HTTP from a process of their own (as game servers are), on a host in this process, while
  one caller per server queues a command the moment the last was answered
  (``context.link.call``, as a plugin's perform does). Commands delivered and answered per
  second, and the latency from the call to the agent's receipt (p50/p99), the agent
  already waiting. ``--agents-here`` runs the agents in the host's process instead (the
  first measurements of this benchmark did).
- ``one``: the same agents, and one caller queueing one command at a time for the servers
  in turn: the latency of a command whose agent is already waiting, nothing ahead of it.
- ``idle``: a real ``pageant serve`` holding ``--agents`` syncs (default 1,000) open, each
  re-sent the moment it is answered (``wait`` 20 s); the server's resident memory and open
  file descriptors read every 5 s for ``--idle-seconds`` (first, last, highest).

    python benchmarks/link.py [--mysql mysql+asyncmy://root@127.0.0.1:3306/test]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from benchdb import scratch_database
from procstat import cpu_seconds, rss_mib
from sqlalchemy import event

from pageant.access.tokens import MAX_BINDINGS, create_token
from pageant.api.app import make_app
from pageant.hosting import Host
from pageant.support.settings import Settings


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def _tokens(db: Any, servers: list[str]) -> dict[str, str]:
    """A game token per hundred servers (a token is bound to at most a hundred)."""
    out: dict[str, str] = {}
    for i in range(0, len(servers), MAX_BINDINGS):
        chunk = servers[i : i + MAX_BINDINGS]
        token = await create_token(
            db, role="game", name=f"bench-{i}", now=_now(), servers=chunk, owners=["bench"]
        )
        out.update(dict.fromkeys(chunk, token))
    return out


def _now() -> Any:
    from pageant.support.clock import SystemClock

    return SystemClock().now()


async def _agent(
    session: aiohttp.ClientSession,
    base: str,
    server: str,
    token: str,
    wait: float,
    received: list[float] | None,
    stop: asyncio.Event,
) -> None:
    """An agent: sync, answer what came back on the next sync, again until ``stop``."""
    results: list[dict[str, Any]] = []
    url = f"{base}/api/v1/link/{server}/sync"
    headers = {"Authorization": f"Bearer {token}"}
    while not stop.is_set():
        body = {"results": results, "wait": wait}
        try:
            async with session.post(url, json=body, headers=headers) as response:
                answer = await response.json()
                if response.status != 200:  # refused: said, and tried again shortly
                    print(response.status, answer, file=sys.stderr, flush=True)
                    await asyncio.sleep(0.1)
                    continue
        except (aiohttp.ClientError, TimeoutError):
            await asyncio.sleep(0.1)
            continue
        results = []
        for command in answer.get("commands", []):
            if received is not None:
                received.append(time.monotonic() - command["payload"]["t"])
            results.append({"command": command["command"], "key": command["key"], "answer": 1})


async def agents_process() -> None:
    """The agents of ``busy``, in a process of their own: told the host's address and each
    server's token on stdin (one JSON line), they sync until stdin closes, then print every
    receipt's latency (one JSON line)."""
    told = json.loads(sys.stdin.readline())
    stop = asyncio.Event()
    received: list[float] = []
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
    polling = [
        asyncio.create_task(_agent(session, told["base"], s, token, 20, received, stop))
        for s, token in told["tokens"].items()
    ]
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)
    stop.set()
    for task in polling:
        task.cancel()
    await asyncio.gather(*polling, return_exceptions=True)
    await session.close()
    print(json.dumps(received), flush=True)


async def busy(
    mysql: str | None,
    agents: int,
    seconds: float,
    *,
    here: bool = False,
    one: bool = False,
    profile: str | None = None,
) -> dict[str, Any]:
    """``one``: a single caller, one command at a time, to the servers in turn (the
    latency of a command whose agent is already waiting, nothing queued before it).
    ``profile``: the host's process is profiled (cProfile) while the callers run, and the
    profile written to that file (the figures are then the profiler's, not the host's)."""
    async with scratch_database(mysql) as db:
        statements = 0

        def count(*_: Any) -> None:
            nonlocal statements
            statements += 1

        event.listen(db.sync_engine, "before_cursor_execute", count)
        settings = Settings(database_url=str(db.url), http_concurrency=8)
        host = Host(settings, discover=False, db=db)
        runner = web.AppRunner(make_app(host, run_engine=False))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]  # started: it has a server
        base = f"http://127.0.0.1:{port}"
        servers = [f"s{i}" for i in range(agents)]
        tokens = await _tokens(db, servers)
        stop = asyncio.Event()
        received: list[float] = []
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        polling = []
        process = None
        if here:
            polling = [
                asyncio.create_task(_agent(session, base, s, tokens[s], 20, received, stop))
                for s in servers
            ]
        else:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                __file__,
                "--agents-process",
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
            assert process.stdin is not None
            process.stdin.write(json.dumps({"base": base, "tokens": tokens}).encode() + b"\n")
            await process.stdin.drain()
        for _ in range(600):  # until every agent has synced once (a minute at most)
            if host.link.held >= agents:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(1)
        answered = 0
        until = time.monotonic() + seconds

        async def caller(calls_for: list[str]) -> None:
            """Call the servers ``calls_for`` names in turn, one command at a time."""
            nonlocal answered
            turn = 0
            while time.monotonic() < until:
                await host.link.call(
                    "bench",
                    calls_for[turn % len(calls_for)],
                    "ping",
                    {"t": time.monotonic()},
                    key=uuid.uuid4().hex,
                    deadline=host.clock.now() + timedelta(seconds=30),
                )
                turn += 1
                answered += 1

        profiler = cProfile.Profile() if profile else None
        # Said on stderr, for a sampling profiler to attach to this process now.
        print(f"busy: process {os.getpid()} calls for {seconds:g} s", file=sys.stderr, flush=True)
        began, cpu, loop_cpu = time.monotonic(), time.process_time(), time.thread_time()
        counted, transactions = statements, host.link.writes.transactions
        agents_cpu = cpu_seconds(process.pid) if process is not None else 0.0
        if profiler is not None:
            profiler.enable()
        if one:
            await caller(servers)
        else:
            await asyncio.gather(*(caller([s]) for s in servers))
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(profile)

        took, cpu = time.monotonic() - began, time.process_time() - cpu
        loop_cpu = time.thread_time() - loop_cpu
        if process is not None:
            agents_cpu = cpu_seconds(process.pid) - agents_cpu
        counted, transactions = (
            statements - counted,
            host.link.writes.transactions - transactions,
        )
        stop.set()
        for task in polling:
            task.cancel()
        await asyncio.gather(*polling, return_exceptions=True)
        if process is not None:
            assert process.stdin is not None and process.stdout is not None
            process.stdin.close()
            received = json.loads(await process.stdout.read())
            await process.wait()
        await session.close()
        await runner.cleanup()
        return {
            "agents": agents,
            "agents_in": "the host's process" if here else "a process of their own",
            "callers": 1 if one else agents,
            "commands_per_second": round(answered / took, 1),
            "host_cpu_ms_per_command": round(cpu / max(answered, 1) * 1000, 2),
            "of_it_event_loop_ms": round(loop_cpu / max(answered, 1) * 1000, 2),
            "agents_cpu_ms_per_command": (
                round(agents_cpu / max(answered, 1) * 1000, 2) if process is not None else None
            ),
            "statements_per_command": round(counted / max(answered, 1), 2),
            "write_transactions_per_command": round(transactions / max(answered, 1), 2),
            "p50_ms": round(_pct(received, 0.5) * 1000, 1),
            "p99_ms": round(_pct(received, 0.99) * 1000, 1),
            "commands": answered,
            "median_ms": round(statistics.median(received) * 1000, 1) if received else None,
        }


async def idle(mysql: str | None, agents: int, seconds: float) -> dict[str, Any]:
    async with scratch_database(mysql) as db:
        servers = [f"s{i}" for i in range(agents)]
        tokens = await _tokens(db, servers)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PAGEANT_")}
        env.update(PAGEANT_DATABASE_URL=str(db.url.render_as_string(hide_password=False)))
        env.update(PAGEANT_PORT="0", PAGEANT_LOG_LEVEL="WARNING")
        script = Path(sys.executable).with_name("pageant")
        serve = await asyncio.create_subprocess_exec(
            str(script), "serve", env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        try:
            assert serve.stdout is not None
            line = (await serve.stdout.readline()).decode()
            base = "http://" + line.split("http://", 1)[1].split()[0]
            before = rss_mib(serve.pid)
            stop = asyncio.Event()
            session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0), timeout=aiohttp.ClientTimeout(total=60)
            )
            polling = [
                asyncio.create_task(_agent(session, base, s, tokens[s], 20, None, stop))
                for s in servers
            ]
            await asyncio.sleep(5)
            samples = []
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                fds = len(os.listdir(f"/proc/{serve.pid}/fd"))
                samples.append((round(rss_mib(serve.pid), 1), fds))
                await asyncio.sleep(5)
            stop.set()
            for task in polling:
                task.cancel()
            await asyncio.gather(*polling, return_exceptions=True)
            await session.close()
        finally:
            serve.terminate()
            await asyncio.wait_for(serve.wait(), 30)
        return {
            "agents": agents,
            "rss_mib_before": round(before, 1),
            "rss_mib_first_last_max": (samples[0][0], samples[-1][0], max(s[0] for s in samples)),
            "fds_first_last_max": (samples[0][1], samples[-1][1], max(s[1] for s in samples)),
            # A reading a minute (every twelfth sample), to tell early growth from a leak.
            "rss_mib_each_minute": [s[0] for s in samples[::12]],
        }


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mysql", default=None)
    parser.add_argument("--busy", type=int, default=100)
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--idle-seconds", type=float, default=60)
    parser.add_argument("--agents-here", action="store_true")
    parser.add_argument("--only", choices=("busy", "one", "idle"), default=None)
    parser.add_argument("--profile", default=None, help="cProfile the busy case into this file")
    parser.add_argument("--agents-process", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.agents_process:
        await agents_process()
        return
    here = args.agents_here
    wanted = {args.only} if args.only else {"busy", "one", "idle"}
    if args.seconds > 0 and "busy" in wanted:
        measured = await busy(args.mysql, args.busy, args.seconds, here=here, profile=args.profile)
        print("busy", measured, flush=True)
    if args.seconds > 0 and "one" in wanted:
        print(
            "one", await busy(args.mysql, args.busy, args.seconds, here=here, one=True), flush=True
        )
    if args.idle_seconds > 0 and "idle" in wanted:
        print("idle", await idle(args.mysql, args.agents, args.idle_seconds), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
