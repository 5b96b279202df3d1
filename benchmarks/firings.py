"""Game traffic through ``pageant serve``: firings per second and their latency as the open
gates on the trigger grow, against the goals.

For each database (SQLite; MariaDB with ``--mysql``) and each count of open gates (10, 100,
1,000 by default), a fresh scratch database gets one running run per game server
(``s0`` ... ``sN``), each held in a phase whose gate waits on ``wisps.caught`` where
``colour`` equals its own server — so a firing for one server matches one gate in N. Then a
real ``pageant serve`` process takes, from a game token:

- ``single``: 16 clients, each sending its next firing (``POST
  /api/v1/triggers/wisps.caught/fire``, a random server) the moment the last is answered;
  firings per second, and the latency p50/p99;
- ``offered``: firings sent at a steady 200 a second (open loop), the latency p99 (at the
  largest gate count only);
- ``batch``: 16 clients sending batches of 100 (``POST /api/v1/triggers/fire``).

After each case every gate's tally is read back and compared with the firings acknowledged
for its server (``tallies``: ok, or how many were lost or counted twice). Each case also
reports the CPU time (user + system) per acknowledged firing of the server process and of
this one: on two cores shared with the clients, the rate is what that CPU allows. The
clients speak HTTP/1.1 over keep-alive connections themselves (:class:`Client`), each still
waiting for its answer before it sends again: aiohttp's client cost about a fifth as much CPU a
firing as the server's work after it was cut.

The setup writes its rows straight into the database (one definition, N runs, N gate rows),
so the same script measures a host without run params, or without the batch route, as
"before": run it with that host's interpreter (``/path/to/old/.venv/bin/python
benchmarks/firings.py``); a case the host cannot serve is "not available".

    python benchmarks/firings.py                           # SQLite, 10 s a case
    python benchmarks/firings.py --mysql mysql+asyncmy://root@127.0.0.1:3306/test
    python benchmarks/firings.py --seconds 3 --gates 10,1000   # short
    python benchmarks/firings.py --clients 1 --offered-at 0     # a transaction a firing

Where the figures and the machine they came from are kept: docs/performance.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from benchdb import scratch_database
from sqlalchemy import insert, select, update

from pageant.access.tokens import create_token
from pageant.db.tables import event_definitions, event_run_phase_gates, event_runs, event_versions

sys.path.insert(0, str(Path(__file__).resolve().parent))
from throughput import Serve, temp_folder, url_of

FIRE = "/api/v1/triggers/wisps.caught/fire"
BATCH = "/api/v1/triggers/fire"
CLIENTS = 16
BATCH_SIZE = 100
OFFERED_RATE = 200
NEVER = 10**9  # a gate that never closes: the tally is all the benchmark reads


def pct(values: list[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


class Connection:
    """One HTTP/1.1 keep-alive connection: a request written as one buffer, its answer read
    by its Content-Length. The load generator shares the server's cores, so it is kept lean:
    aiohttp's client spent about as much CPU on a firing as the server did."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def post(self, head: bytes, body: Any) -> tuple[int, bytes]:
        data = json.dumps(body, separators=(",", ":")).encode()
        self.writer.write(b"%sContent-Length: %d\r\n\r\n%s" % (head, len(data), data))
        lines = (await self.reader.readuntil(b"\r\n\r\n")).split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            if name.lower() == b"content-length":
                length = int(value)
        return status, await self.reader.readexactly(length)

    def close(self) -> None:
        self.writer.close()


class Client:
    """Keep-alive connections to one server, each used by one request at a time."""

    def __init__(self, base: str, token: str) -> None:
        url = urlsplit(base)
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 80
        self.token = token
        self.idle: list[Connection] = []
        self.opened: list[Connection] = []

    def head(self, path: str) -> bytes:
        return (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Authorization: Bearer {self.token}\r\nContent-Type: application/json\r\n"
        ).encode()

    async def post(self, head: bytes, body: Any) -> tuple[int, bytes]:
        if self.idle:
            conn = self.idle.pop()
        else:
            conn = Connection(*await asyncio.open_connection(self.host, self.port))
            self.opened.append(conn)
        answer = await conn.post(head, body)
        self.idle.append(conn)
        return answer

    def close(self) -> None:
        for conn in self.opened:
            conn.close()


async def seed(db: Any, servers: list[str]) -> dict[str, int]:
    """One definition, one running run per server in phase ``hunt``, each with its gate;
    answers {server: gate id}."""
    now = datetime.now(UTC)
    spec = {
        "schedule": {"kind": "manual"},
        "phases": [
            {
                "key": "hunt",
                "label": "Hunt",
                "steps": [],
                "advance": {"on": "wisps.caught", "where": None, "count": 1000, "dormant": False},
            },
        ],
    }
    keyed = "match_key" in event_run_phase_gates.c
    async with db.begin() as conn:
        definition_id = (
            await conn.execute(
                insert(event_definitions).values(
                    title="Frenzy",
                    slug="frenzy",
                    description="",
                    timezone="UTC",
                    grace_seconds=300,
                    visibility="staff",
                    state="ready",
                    spec=spec,
                    created_at=now,
                    updated_at=now,
                )
            )
        ).inserted_primary_key[0]
        version_id = (
            await conn.execute(
                insert(event_versions).values(
                    definition_id=definition_id,
                    number=1,
                    spec=spec,
                    timezone="UTC",
                    published_at=now,
                    verified_at=now,
                )
            )
        ).inserted_primary_key[0]
        await conn.execute(
            update(event_definitions)
            .where(event_definitions.c.id == definition_id)
            .values(current_version_id=version_id)
        )
        gates = {}
        for server in servers:
            run = {
                "definition_id": definition_id,
                "version_id": version_id,
                "scope": server,
                "scheduled_for": now,
                "source": "manual",
                "status": "running",
                "current_phase": "hunt",
                "created_at": now,
                "started_at": now,
            }
            if "params" in event_runs.c:
                run["params"] = {"colour": server}
            run_id = (await conn.execute(insert(event_runs).values(**run))).inserted_primary_key[0]
            condition = {"var": "colour", "op": "eq", "value": server}
            gate = {
                "run_id": run_id,
                "phase": "hunt",
                "kind": "on",
                "trigger_id": "wisps.caught",
                "condition": condition,
                "needed": NEVER,
                "tally": 0,
                "entered_at": now,
            }
            if keyed:
                from pageant.gates.matching import gate_key

                gate["match_key"] = gate_key(condition)
            gates[server] = (
                await conn.execute(insert(event_run_phase_gates).values(**gate))
            ).inserted_primary_key[0]
    return gates


async def tallies(db: Any, gates: dict[str, int]) -> dict[str, int]:
    g = event_run_phase_gates.c
    async with db.connect() as conn:
        rows = await conn.execute(select(g.id, g.tally))
        by_id = {row.id: row.tally for row in rows}
    return {server: by_id[gate_id] for server, gate_id in gates.items()}


async def closed_loop(
    client: Client, servers: list[str], seconds: float, *, batch: int | None
) -> dict[str, Any]:
    """CLIENTS clients, each on its own connection sending as soon as answered; answers the
    figures and the acknowledged firings per server."""
    latencies: list[float] = []
    acked: Counter[str] = Counter()
    refused = 0
    stop = time.perf_counter() + seconds
    rng = random.Random(7)
    head = client.head(FIRE if batch is None else BATCH)

    async def one_client() -> None:
        nonlocal refused
        while time.perf_counter() < stop:
            body: Any
            if batch is None:
                server = rng.choice(servers)
                body, sent = {"colour": server}, [server]
            else:
                sent = [rng.choice(servers) for _ in range(batch)]
                body = [{"trigger": "wisps.caught", "payload": {"colour": s}} for s in sent]
            began = time.perf_counter()
            status, raw = await client.post(head, body)
            latencies.append(time.perf_counter() - began)
            if status != 200:
                refused += len(sent)
                if status == 404 and batch is not None:
                    raise LookupError("no batch route")
                continue
            if batch is None:
                acked[sent[0]] += 1
            else:
                for server, entry in zip(sent, json.loads(raw), strict=True):
                    if entry.get("status") == 200:
                        acked[server] += 1
                    else:
                        refused += 1

    began = time.perf_counter()
    await asyncio.gather(*(one_client() for _ in range(CLIENTS)))
    took = time.perf_counter() - began
    total = sum(acked.values())
    return {
        "rate": total / took,
        "p50_ms": (pct(latencies, 50) or 0) * 1000,
        "p99_ms": (pct(latencies, 99) or 0) * 1000,
        "refused": refused,
        "acked": acked,
    }


async def open_loop(client: Client, servers: list[str], seconds: float) -> dict[str, Any]:
    """Firings sent at OFFERED_RATE a second whatever the answers (a connection each while
    one is busy); the latency p99."""
    latencies: list[float] = []
    acked: Counter[str] = Counter()
    rng = random.Random(11)
    head = client.head(FIRE)

    async def one(server: str) -> None:
        began = time.perf_counter()
        status, _ = await client.post(head, {"colour": server})
        if status == 200:
            acked[server] += 1
        latencies.append(time.perf_counter() - began)

    tasks = []
    began = time.perf_counter()
    n = int(seconds * OFFERED_RATE)
    for i in range(n):
        delay = began + i / OFFERED_RATE - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(rng.choice(servers))))
    await asyncio.gather(*tasks)
    return {
        "p50_ms": (pct(latencies, 50) or 0) * 1000,
        "p99_ms": (pct(latencies, 99) or 0) * 1000,
        "acked": acked,
        "rate": sum(acked.values()) / max(1e-9, time.perf_counter() - began),
    }


async def measure(mysql: str | None, count: int, seconds: float, offered: bool) -> dict:
    servers = [f"s{i}" for i in range(count)]
    found: dict[str, Any] = {}
    async with scratch_database(mysql) as db, temp_folder() as folder:
        gates = await seed(db, servers)
        token = await create_token(db, role="game", name="bench", now=datetime.now(UTC))
        serve = Serve(url_of(db), folder / "serve.log")
        try:
            sent: Counter[str] = Counter()
            client = Client(serve.base, token)
            try:
                cases = [("single", None)]
                if offered:
                    cases.append(("offered", None))
                cases.append(("batch", BATCH_SIZE))
                for case, batch in cases:
                    server_cpu, client_cpu = serve.cpu_seconds(), time.process_time()
                    try:
                        if case == "offered":
                            figures = await open_loop(client, servers, seconds)
                        else:
                            figures = await closed_loop(client, servers, seconds, batch=batch)
                    except LookupError:
                        found[case] = None
                        continue
                    acked = figures.pop("acked")
                    sent.update(acked)
                    fired = max(1, sum(acked.values()))
                    figures["server_ms"] = (serve.cpu_seconds() - server_cpu) * 1000 / fired
                    figures["client_ms"] = (time.process_time() - client_cpu) * 1000 / fired
                    found[case] = figures
            finally:
                client.close()
            counted = await tallies(db, gates)
            wrong = sum(abs(counted[s] - sent[s]) for s in servers)
            found["tallies"] = "ok" if wrong == 0 else f"{wrong} off"
            found["errors"] = serve.error_lines()
        finally:
            serve.stop()
    return found


GOALS = [
    (
        "1,000 open gates, one matching, one firing a request: >= 1,000 firings/s on sqlite",
        lambda r: _at_least(r, "sqlite", 1000, "single", "rate", 1000),
    ),
    (
        "1,000 open gates, one matching, one firing a request: >= 500 firings/s on mariadb",
        lambda r: _at_least(r, "mariadb", 1000, "single", "rate", 500),
    ),
    (
        "p99 <= 50 ms at an offered 200 firings/s, 1,000 open gates (sqlite)",
        lambda r: _at_most(r, "sqlite", 1000, "offered", "p99_ms", 50),
    ),
    (
        "p99 <= 50 ms at an offered 200 firings/s, 1,000 open gates (mariadb)",
        lambda r: _at_most(r, "mariadb", 1000, "offered", "p99_ms", 50),
    ),
    (
        "batches of 100: >= 5,000 firings/s on sqlite (1,000 open gates)",
        lambda r: _at_least(r, "sqlite", 1000, "batch", "rate", 5000),
    ),
    (
        "the rate at 1,000 open gates within 2x the rate at 10 (sqlite, one a request)",
        lambda r: _within(r, "sqlite"),
    ),
    (
        "the rate at 1,000 open gates within 2x the rate at 10 (mariadb, one a request)",
        lambda r: _within(r, "mariadb"),
    ),
    (
        "every gate's tally equals the firings acknowledged for its server",
        lambda r: None if not r else all(f.get("tallies") == "ok" for f in r.values()),
    ),
]


def _figure(r: dict, db: str, gates: int, case: str, key: str) -> float | None:
    figures = (r.get((db, gates)) or {}).get(case)
    return None if figures is None else figures.get(key)


def _at_least(r: dict, db: str, gates: int, case: str, key: str, bound: float) -> bool | None:
    value = _figure(r, db, gates, case, key)
    return None if value is None else value >= bound


def _at_most(r: dict, db: str, gates: int, case: str, key: str, bound: float) -> bool | None:
    value = _figure(r, db, gates, case, key)
    return None if value is None else value <= bound


def _within(r: dict, db: str) -> bool | None:
    low, high = _figure(r, db, 10, "single", "rate"), _figure(r, db, 1000, "single", "rate")
    return None if low is None or high is None else high * 2 >= low


def report(results: dict) -> None:
    """The table, then the goals. CPU is milliseconds of process time (user + system) per
    acknowledged firing: ``server`` the ``pageant serve`` process, ``client`` this one."""
    print(
        "\n| database | open gates | one a request: firings/s | p50 / p99 | offered 200/s: "
        "p99 | batches of 100: firings/s | server CPU a firing: one a request / batches | "
        "client CPU a firing | tallies |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for (db, gates), f in results.items():
        single, offered, batch = f.get("single"), f.get("offered"), f.get("batch")
        offered_p99 = f"{offered['p99_ms']:.0f} ms" if offered else "-"
        batch_rate = f"{batch['rate']:.0f}" if batch else "not available"
        batch_cpu = f"{batch['server_ms']:.2f} ms" if batch else "-"
        print(
            f"| {db} | {gates} | {single['rate']:.0f} | "
            f"{single['p50_ms']:.0f} ms / {single['p99_ms']:.0f} ms | {offered_p99} | "
            f"{batch_rate} | {single['server_ms']:.2f} ms / {batch_cpu} | "
            f"{single['client_ms']:.2f} ms | {f['tallies']} |"
        )
    print("\nGoals")
    for text, check in GOALS:
        answer = check(results)
        mark = {True: "met", False: "NOT MET", None: "not measured"}[answer]
        print(f"  [{mark:^12}] {text}")


async def main() -> None:
    global CLIENTS  # the closed loops' client count, set once from the command line
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mysql", default=None, help="a MariaDB server URL (mysql+asyncmy://...)")
    parser.add_argument("--only", choices=("sqlite", "mariadb"), default=None)
    parser.add_argument("--gates", default="10,100,1000", help="open gate counts, comma-separated")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long each case runs")
    parser.add_argument(
        "--offered-at",
        type=int,
        default=None,
        help="the gate count the offered-load case runs at (default the largest; 0: none)",
    )
    parser.add_argument(
        "--clients",
        type=int,
        default=CLIENTS,
        help="clients of the closed loops (1: each firing a transaction of its own, so the "
        "server's CPU a firing is a request's and a transaction's)",
    )
    args = parser.parse_args()
    CLIENTS = args.clients
    counts = [int(c) for c in args.gates.split(",")]
    dbs = [("sqlite", None)] if args.only != "mariadb" else []
    if args.mysql and args.only != "sqlite":
        dbs.append(("mariadb", args.mysql))
    results: dict[tuple[str, int], dict] = {}
    for name, url in dbs:
        for count in counts:
            began = time.perf_counter()
            offered_at = max(counts) if args.offered_at is None else args.offered_at
            results[(name, count)] = await measure(url, count, args.seconds, count == offered_at)
            single = results[(name, count)]["single"]
            print(
                f"  [{name}] {count} gates: {single['rate']:.0f}/s one a request "
                f"({time.perf_counter() - began:.0f} s)",
                flush=True,
            )
    report(results)


if __name__ == "__main__":
    asyncio.run(main())
