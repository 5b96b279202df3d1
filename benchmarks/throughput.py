"""Throughput and precision of the engine beside APScheduler 4, in one run, against the goals.

Measures, on SQLite and (with ``--mysql``) MariaDB, each case on a fresh scratch database:

- ``20x100``, ``200x10``, ``1x500``: R runs of S no-op steps (``core.announce`` to the
  ``core.log`` leg: one line in the run log), all started at once; end-to-end steps per
  second from the first start to the last run's ``ended_at``.
- ``wait``: 100 runs of ``core.wait 2`` then one announce; how late the step after the wait
  began against its due instant (p50/p99/max), and how long each run took from its creation
  to ``started_at`` (``start p99``).
- ``console``: ``20x100`` through ``pageant serve`` while 50 run consoles are open: 50
  clients each GET a run's console (``/api/v1/admin/runs/{id}``) every 2 s, as the web
  console's run page refreshes itself, for at most 60 s; the GET latency p50/p99 and the
  GETs refused (any answer but 200 or 304).
- ``flood``: the same, but each of the 50 clients sends its next GET the moment the last one
  answers (no pause): what the host does when readers ask as fast as it answers. Its goal
  (issue 32, "Readers"): the engine keeps >= 70% of the ``20x100`` serve rate of the same
  database and run, and the GET p99 stays <= 200 ms.
  In both cases each client behaves as a browser does: it keeps the console's ``ETag`` and
  sends it back as ``If-None-Match``; a 304 (unchanged) is an answer like a 200. The notes
  count the 304s and give the p50/p99 of the other answers (``200s'``) apart.
- ``raw``: the database's own limit: one connection of the bare driver (aiosqlite; asyncmy
  or aiomysql, as the URL names)
  claiming, finishing and logging one step per transaction over the rows of a 20x100 start.
- ``2hosts`` (MariaDB): ``20x100`` through two ``pageant serve`` processes on one database,
  runs started alternately through each; plus double dispatches (a step announced twice)
  and ERROR lines in either host's log.
- ``takeover`` (MariaDB): ``20x100`` through two ``pageant serve`` processes, the first killed
  (SIGKILL) once a quarter of the steps are done; how long after the kill the survivor
  claimed each step the dead host held (p50/p99/max, against the claim lease), runs not
  completed, double dispatches.
- ``fanout``: one event published through the admin API whose ``once`` schedule fans out over
  1,000 param sets (a run on each of 1,000 servers at one instant; ``--quick`` 100), each run
  five no-op steps, no stagger, run by one ``pageant serve``; how late each run's first step
  began against the occurrence's instant (p50/p99), and how long after the instant the last
  run ended. The host takes up to 1,000 sets a schedule; a larger ``--servers`` count is
  authored with that bound lifted, in its own process, through the real admin app (see
  ``fanout``).
- ``idle``: the idle tick in an empty database and beside N finished runs (``idle_tick.py``).
- ``memory``: ``pageant serve``'s resident memory (VmRSS): idle, with 1,000 runs waiting on
  gates (a phase that advances on ``wisps.caught``, which never comes), and as N more runs of
  one announce each finish (100,000; ``--quick`` 2,000), read after each tenth of them.

Each workload case runs as up to three modes: ``inproc`` (pageant's engine in this process
over the real database, runs started with the same function the API calls), ``serve`` (a
real ``pageant serve`` process, runs started with ``POST /api/v1/admin/events/{id}/runs``)
``aps`` (APScheduler 4 on the same kind of database, in its own virtualenv, running
``apscheduler_peer.py``: each run a chain of jobs, each job one log line that adds the next)
``aps-jobs`` (APScheduler 4 given the same number of jobs, R x S, all added at once and
independent: no order to keep) and ``aps-best`` (the peer at its best: the same R x S
independent jobs queued before the scheduler starts, only the draining timed, 100 jobs at once
and no limit on the task's running jobs).
CPU per step is the engine process's CPU time (user + system) over the case, divided by its
steps: for ``inproc`` this whole process, for ``serve`` the server process, for the ``aps``
modes the peer process. On MariaDB, when its server runs on this machine, ``DB ms/step``
is the server process's CPU time (``mariadbd``, utime + stime from /proc) over the same case,
divided by the same steps: the share of the database a step costs (every other client of that
server in the meantime counts too).

APScheduler lives in its own virtualenv, never a dependency of pageant; ``--setup`` makes it:

    python benchmarks/throughput.py --setup
    python benchmarks/throughput.py [--mysql mysql+aiomysql://root@127.0.0.1:3306/test]
    python benchmarks/throughput.py --quick         # smaller: about three minutes on SQLite
    python benchmarks/throughput.py --cases 20x100 --modes inproc,aps --only sqlite
    python benchmarks/throughput.py --repeat 3 --json out.json   # medians of three runs
    python benchmarks/throughput.py --report out.json            # the table again, from the file

Where the figures and the machine they came from are kept: docs/performance.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp.test_utils import TestClient, TestServer
from benchdb import scratch_database
from procstat import ServerCpu, cpu_seconds, rss_mib
from sqlalchemy import func, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from pageant.access.tokens import create_token
from pageant.api.app import make_app
from pageant.db.engine import create_engine
from pageant.db.tables import (
    TERMINAL_RUN_STATUSES,
    event_run_log,
    event_run_phase_gates,
    event_run_steps,
    event_runs,
)
from pageant.engine import Engine
from pageant.events.authoring import params as authoring_params
from pageant.hosting import Host
from pageant.runs.create import start_now
from pageant.support.settings import Settings

HERE = Path(__file__).resolve().parent
PEER = HERE / "apscheduler_peer.py"
PEER_VENV = HERE / ".venv-apscheduler"
PEER_PYTHON = PEER_VENV / "bin" / "python"
PEER_PACKAGES = ("apscheduler[sqlalchemy]>=4.0.0a1", "aiosqlite", "asyncmy", "sniffio")
#: Runs held waiting on a gate while ``memory`` reads the server's resident memory.
GATED_RUNS = 1000
#: ``memory``: resident memory after N finished runs may exceed that after the first tenth
#: by at most this fraction, or by MEMORY_SLACK_MIB when that is larger (see the goal).
MEMORY_GROWTH = 0.10
MEMORY_SLACK_MIB = 8.0
#: 200 x 10's rate against 20 x 100's, at least (issue 54; issue 32 asked for 90%).
MANY_SHORT_SHARE = 0.75
API = "/api/v1/admin"
CONSOLE_CLIENTS = 50
CONSOLE_SECONDS = 60
#: How often an open run page asks for its console (``_run_live.html``: ``every 2s``).
CONSOLE_REFRESH_SECONDS = 2.0
WAIT_SECONDS = 2
#: ``fanout``: the servers one occurrence fans out to (``--quick``: FANOUT_SERVERS_QUICK),
#: the no-op steps of each run, and the goals (on SQLite).
FANOUT_SERVERS = 1000
FANOUT_SERVERS_QUICK = 100
FANOUT_STEPS = 5
FANOUT_FIRST_STEP_S = 2.0
FANOUT_DONE_S = 10.0
#: The least time between publishing the fan-out and its occurrence: the server starts and
#: expands the schedule in it. A ``once`` schedule is to the minute, so it is 20 to 80 s.
FANOUT_LEAD_S = 20

# ── the goals of issue 14, as data ──────────────────────────────────────────────────────────

#: (goal, how it is read from the results). A goal whose figures were not measured in this
#: run is "not measured", never met.
GOALS: list[tuple[str, Callable[[Results], bool | None]]] = []


def goal(text: str) -> Callable[[Callable[[Results], bool | None]], Callable[..., Any]]:
    def add(check: Callable[[Results], bool | None]) -> Callable[..., Any]:
        GOALS.append((text, check))
        return check

    return add


# ── workloads ───────────────────────────────────────────────────────────────────────────────


def announce(i: int) -> dict[str, Any]:
    return {"action": "core.announce", "params": {"leg": "core.log", "message": f"step {i}"}}


@dataclass(frozen=True)
class Workload:
    name: str
    runs: int
    steps: int
    wait: float = 0.0

    def spec(self) -> dict[str, Any]:
        """The event: ``steps`` announces in phases of at most 100 (the spec's bound), or a
        wait and an announce."""
        if self.wait:
            steps = [{"action": "core.wait", "params": {"seconds": int(self.wait)}}, announce(1)]
            phases = [{"key": "p0", "label": "P0", "steps": steps}]
        else:
            phases = [
                {
                    "key": f"p{p}",
                    "label": f"P{p}",
                    "steps": [announce(i) for i in range(p * 100, min(self.steps, p * 100 + 100))],
                }
                for p in range(math.ceil(self.steps / 100))
            ]
        return {"schedule": {"kind": "manual"}, "phases": phases}


def workloads(quick: bool) -> dict[str, Workload]:
    if quick:
        return {
            "20x100": Workload("20x100", 20, 25),
            "200x10": Workload("200x10", 50, 10),
            "1x500": Workload("1x500", 1, 125),
            "wait": Workload("wait", 25, 2, wait=WAIT_SECONDS),
        }
    return {
        "20x100": Workload("20x100", 20, 100),
        "200x10": Workload("200x10", 200, 10),
        "1x500": Workload("1x500", 1, 500),
        "wait": Workload("wait", 100, 2, wait=WAIT_SECONDS),
    }


# ── figures ─────────────────────────────────────────────────────────────────────────────────


def pct(values: list[float], p: float) -> float | None:
    """The nearest-rank percentile ``p`` (0..100) of ``values``; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


class Results:
    """(database, case, mode) -> a list of figure dicts, one per repeat."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str, str], list[dict[str, Any]]] = {}

    def add(self, db: str, case: str, mode: str, figures: dict[str, Any]) -> None:
        self.rows.setdefault((db, case, mode), []).append(figures)

    def get(self, db: str, case: str, mode: str, key: str) -> float | None:
        """The median of ``key`` over the repeats, None if never measured."""
        found = [f[key] for f in self.rows.get((db, case, mode), []) if f.get(key) is not None]
        return statistics.median(found) if found else None

    def ratio(self, db: str, case: str, mode: str, peer: str = "aps") -> float | None:
        ours, theirs = self.get(db, case, mode, "rate"), self.get(db, case, peer, "rate")
        return ours / theirs if ours and theirs else None

    def best_mode(self, db: str, case: str) -> str:
        """The mode the goals read: through ``pageant serve`` when measured, else in process."""
        return "serve" if (db, case, "serve") in self.rows else "inproc"


def at_least(value: float | None, bound: float) -> bool | None:
    return None if value is None else value >= bound


def at_most(value: float | None, bound: float) -> bool | None:
    return None if value is None else value <= bound


def all_of(*answers: bool | None) -> bool | None:
    if any(a is None for a in answers):
        return None
    return all(answers)


for _db in ("sqlite", "mariadb"):

    def _vs_peer(r: Results, db: str = _db) -> bool | None:
        return at_least(r.ratio(db, "20x100", r.best_mode(db, "20x100")), 4)

    def _vs_raw(r: Results, db: str = _db) -> bool | None:
        ours = r.get(db, "20x100", r.best_mode(db, "20x100"), "rate")
        raw = r.get(db, "raw", "raw", "rate")
        return None if ours is None or raw is None else ours >= 0.4 * raw

    def _sequential(r: Results, db: str = _db) -> bool | None:
        return at_least(r.ratio(db, "1x500", r.best_mode(db, "1x500")), 2.5)

    goal(f"20 x 100 end to end: >= 4x APScheduler 4 on {_db}")(_vs_peer)
    goal(f"20 x 100 end to end: >= 40% of the raw-driver limit on {_db}")(_vs_raw)
    goal(f"one run of 500 sequential steps: >= 2.5x APScheduler 4's rate on {_db}")(_sequential)

    def _sequence_vs_raw(r: Results, db: str = _db) -> bool | None:
        ours = r.get(db, "1x500", r.best_mode(db, "1x500"), "rate")
        raw = r.get(db, "raw", "raw", "rate")
        return None if ours is None or raw is None else ours >= 0.5 * raw

    goal(f"one run of 500 sequential steps: >= 50% of the raw-driver limit on {_db}")(
        _sequence_vs_raw
    )

    def _vs_jobs(r: Results, db: str = _db) -> bool | None:
        return at_least(r.ratio(db, "20x100", "serve", "aps-jobs"), 5)

    goal(
        f"20 x 100 through serve: >= 5x APScheduler 4 running as many independent jobs "
        f"(aps-jobs) on {_db}"
    )(_vs_jobs)

    def _memory(r: Results, db: str = _db) -> bool | None:
        early, late = (
            r.get(db, "memory", "serve", "rss_early_mib"),
            r.get(db, "memory", "serve", "rss_finished_mib"),
        )
        if early is None or late is None:
            return None
        return late <= early + max(MEMORY_GROWTH * early, MEMORY_SLACK_MIB)

    goal(
        f"serve's resident memory does not grow with finished runs: after N finished <= after "
        f"N/10 + max(10%, {MEMORY_SLACK_MIB:.0f} MiB) on {_db}"
    )(_memory)

    def _many_short(r: Results, db: str = _db) -> bool | None:
        mode = r.best_mode(db, "200x10")
        many, few = r.get(db, "200x10", mode, "rate"), r.get(db, "20x100", mode, "rate")
        return None if many is None or few is None else many >= MANY_SHORT_SHARE * few

    def _first_step(r: Results, db: str = _db) -> bool | None:
        return at_most(r.get(db, "200x10", r.best_mode(db, "200x10"), "first_step_p99_ms"), 250)

    goal(f"200 x 10 end to end: >= {MANY_SHORT_SHARE:.0%} of 20 x 100's rate (same mode) on {_db}")(
        _many_short
    )
    goal(f"200 runs started at once reach their first step: p99 <= 250 ms (200 x 10) on {_db}")(
        _first_step
    )


@goal("lateness of the step after a 2 s wait, 100 runs at once: p99 <= 50 ms on sqlite")
def _lateness(r: Results) -> bool | None:
    return at_most(r.get("sqlite", "wait", r.best_mode("sqlite", "wait"), "late_p99_ms"), 50)


@goal(
    "run-console GET under 50 concurrent clients (open consoles, a GET every 2 s each) "
    "during 20 x 100: p99 <= 50 ms on sqlite"
)
def _console(r: Results) -> bool | None:
    # A GET refused (a 409 when the database stays locked) is no answer: not met either.
    refused = r.get("sqlite", "console", "serve", "get_refusals")
    return all_of(
        at_most(r.get("sqlite", "console", "serve", "get_p99_ms"), 50),
        None if refused is None else refused == 0,
    )


for _db in ("sqlite", "mariadb"):

    def _readers_rate(r: Results, db: str = _db) -> bool | None:
        flood, alone = r.get(db, "flood", "serve", "rate"), r.get(db, "20x100", "serve", "rate")
        return None if flood is None or alone is None else flood >= 0.7 * alone

    def _readers_p99(r: Results, db: str = _db) -> bool | None:
        refused = r.get(db, "flood", "serve", "get_refusals")
        return all_of(
            at_most(r.get(db, "flood", "serve", "get_p99_ms"), 200),
            None if refused is None else refused == 0,
        )

    goal(
        f"readers (issue 32): 20 x 100 under 50 clients reading consoles back to back (flood) "
        f"keeps >= 70% of the 20 x 100 serve rate on {_db}"
    )(_readers_rate)
    goal(f"readers (issue 32): the flood's run-console GET p99 <= 200 ms on {_db}")(_readers_p99)


@goal(
    f"a fan-out to {FANOUT_SERVERS:,} servers at one instant: each run's first step p99 <= "
    f"{FANOUT_FIRST_STEP_S:.0f} s after the instant, all done within {FANOUT_DONE_S:.0f} s "
    f"on sqlite"
)
def _fanout(r: Results) -> bool | None:
    if r.get("sqlite", "fanout", "serve", "runs") != FANOUT_SERVERS:
        return None  # --quick fans out to fewer: not the goal's workload
    return all_of(
        at_most(
            r.get("sqlite", "fanout", "serve", "first_step_p99_ms"), FANOUT_FIRST_STEP_S * 1000
        ),
        at_most(r.get("sqlite", "fanout", "serve", "all_done_s"), FANOUT_DONE_S),
    )


@goal("two hosts on one MariaDB: >= 1.5x one host's throughput")
def _two_hosts(r: Results) -> bool | None:
    two, one = (
        r.get("mariadb", "2hosts", "serve", "rate"),
        r.get("mariadb", "20x100", "serve", "rate"),
    )
    return None if two is None or one is None else two >= 1.5 * one


@goal("two hosts on one MariaDB: zero double dispatch, zero deadlocks surfacing as errors")
def _two_hosts_clean(r: Results) -> bool | None:
    doubles = r.get("mariadb", "2hosts", "serve", "double_dispatch")
    errors = r.get("mariadb", "2hosts", "serve", "error_lines")
    return None if doubles is None or errors is None else doubles == 0 and errors == 0


@goal(
    "two hosts on one MariaDB, one killed (SIGKILL) mid 20 x 100: the survivor takes over "
    "every step the dead host held within the claim lease + 2 s (p99, from the kill), "
    "completes every run, zero double dispatch"
)
def _takeover(r: Results) -> bool | None:
    g = partial(r.get, "mariadb", "takeover", "serve")
    p99, lease = g("takeover_p99_s"), g("lease_s")
    return all_of(
        None if p99 is None or lease is None else p99 <= lease + TAKEOVER_SLACK_S,
        None if g("not_taken") is None else g("not_taken") == 0,
        None if g("not_completed") is None else g("not_completed") == 0,
        None if g("double_dispatch") is None else g("double_dispatch") == 0,
    )


@goal("CPU per dispatched no-op step <= 1.5 ms (20 x 100, the engine process)")
def _cpu(r: Results) -> bool | None:
    answers = [
        at_most(r.get(db, "20x100", r.best_mode(db, "20x100"), "cpu_ms_per_step"), 1.5)
        for db in ("sqlite", "mariadb")
        if (db, "20x100", r.best_mode(db, "20x100")) in r.rows
    ]
    return all_of(*answers) if answers else None


@goal(
    "the idle tick stays flat: beside N finished runs <= 2x the empty database's "
    "(and <= 5 ms on sqlite, where issue 14 measured ~4 ms)"
)
def _idle(r: Results) -> bool | None:
    answers = []
    for db in ("sqlite", "mariadb"):
        empty, full = r.get(db, "idle", "empty", "tick_ms"), r.get(db, "idle", "full", "tick_ms")
        if empty is not None and full is not None:
            # MariaDB's tick is round trips over a socket: flat is the claim there, not 5 ms.
            bound = 5.0 if db == "sqlite" else float("inf")
            answers.append(full <= bound and full <= 2 * max(empty, 0.5))
    return all_of(*answers) if answers else None


# ── pageant: authoring and starting ─────────────────────────────────────────────────────────

Request = Callable[[str, str, Any], Awaitable[tuple[int, Any]]]


async def author(request: Request, workload: Workload) -> int:
    """Create and publish the workload's event through the admin API; answer its id."""
    return await publish(request, f"bench {workload.name}", workload.spec())


async def publish(request: Request, title: str, spec: dict[str, Any]) -> int:
    """Create and publish an event of ``spec`` (in UTC) through the admin API; answer its id."""
    status, body = await request(
        "POST", f"{API}/events", {"title": title, "timezone": "UTC", "spec": spec}
    )
    if status != 201:
        raise RuntimeError(f"creating the event answered {status}: {body}")
    status, body2 = await request("POST", f"{API}/events/{body['id']}/publish", None)
    if status != 200:
        raise RuntimeError(f"publishing the event answered {status}: {body2}")
    return int(body["id"])


def client_request(client: Any, token: str, base: str = "") -> Request:
    headers = {"Authorization": f"Bearer {token}"}

    async def request(method: str, path: str, body: Any) -> tuple[int, Any]:
        async with client.request(method, base + path, json=body, headers=headers) as response:
            return response.status, await response.json()

    return request


async def authored_in_process(db: Any, workload: Workload) -> tuple[Host, int]:
    """A host over ``db`` and the workload's event, authored and published through the real
    admin app (served in this process, no engine); answers both."""
    host = Host(Settings(), db=db)
    token = await create_token(db, role="admin", name="bench", now=datetime.now(UTC))
    client = TestClient(TestServer(make_app(host, run_engine=False)))
    await client.start_server()
    try:
        definition = await author(client_request(client, token), workload)
    finally:
        await client.close()
    return host, definition


@asynccontextmanager
async def reader(db: AsyncEngine) -> AsyncIterator[AsyncEngine]:
    """A plain engine on ``db``'s database for the benchmark's own reads: on SQLite its
    transactions are deferred, so the poll never takes the write lock from the engine."""
    plain = create_async_engine(url_of(db))
    try:
        yield plain
    finally:
        await plain.dispose()


async def wait_done(db: AsyncEngine, runs: int, timeout: float) -> bool:
    """Poll until ``runs`` runs have ended; answer False on timeout."""
    deadline = time.monotonic() + timeout
    query = select(func.count()).where(event_runs.c.status.in_(TERMINAL_RUN_STATUSES))
    async with reader(db) as plain:
        while time.monotonic() < deadline:
            try:
                async with plain.connect() as conn:
                    if (await conn.execute(query)).scalar_one() >= runs:
                        return True
            except OperationalError:
                pass  # busy: look again at the next poll
            await asyncio.sleep(0.05)
    return False


async def tally(conn: Any) -> tuple[dict[str, int], datetime | None, int]:
    """The runs by status, the last run's end, and how many steps are done."""
    statuses = dict(
        (
            await conn.execute(
                select(event_runs.c.status, func.count()).group_by(event_runs.c.status)
            )
        ).all()
    )
    last_end = (await conn.execute(select(func.max(event_runs.c.ended_at)))).scalar()
    steps_done = (
        await conn.execute(select(func.count()).where(event_run_steps.c.status == "done"))
    ).scalar_one()
    return statuses, last_end, steps_done


async def outcome(db: AsyncEngine, workload: Workload, began: datetime, done: bool) -> dict:
    """What the database says happened: rate, statuses, lateness, start delay, doubles."""
    async with reader(db) as plain, plain.connect() as conn:
        statuses, last_end, steps_done = await tally(conn)
        starts = (
            await conn.execute(select(event_runs.c.created_at, event_runs.c.started_at))
        ).all()
        first_steps = (
            await conn.execute(
                select(event_runs.c.created_at, func.min(event_run_steps.c.started_at))
                .join(event_run_steps, event_run_steps.c.run_id == event_runs.c.id)
                .group_by(event_runs.c.id, event_runs.c.created_at)
            )
        ).all()
        doubles = (
            await conn.execute(
                select(func.count()).select_from(
                    select(event_run_log.c.step_id)
                    .where(event_run_log.c.kind == "announce")
                    .group_by(event_run_log.c.step_id)
                    .having(func.count() > 1)
                    .subquery()
                )
            )
        ).scalar_one()
        late = []
        if workload.wait:
            rows = await conn.execute(
                select(event_run_steps.c.started_at, event_run_steps.c.due_at).where(
                    event_run_steps.c.seq == 1, event_run_steps.c.due_at.is_not(None)
                )
            )
            late = [(s - d).total_seconds() * 1000 for s, d in rows if s is not None]
    steps = workload.runs * workload.steps
    wall = (last_end - began).total_seconds() if done and last_end else None
    start_delays = [(s - c).total_seconds() * 1000 for c, s in starts if s is not None]
    first_step_delays = [(s - c).total_seconds() * 1000 for c, s in first_steps if s is not None]
    figures: dict[str, Any] = {
        "steps": steps,
        "steps_done": steps_done,
        "statuses": statuses,
        "timed_out": not done,
        "wall_s": wall,
        "rate": steps / wall if wall else None,
        "double_dispatch": doubles,
        "start_p99_ms": pct(start_delays, 99),
        # From a run's creation to its first step's start: what a person who started it waits.
        "first_step_p99_ms": pct(first_step_delays, 99),
    }
    if workload.wait:
        figures.update(lateness(late))
    return figures


def lateness(late: list[float]) -> dict[str, float | None]:
    """The ``wait`` case's figures: how late the step after the wait began, in ms."""
    return {
        "late_p50_ms": pct(late, 50),
        "late_p99_ms": pct(late, 99),
        "late_max_ms": max(late, default=None),
    }


def per_step(cpu: float, figures: dict[str, Any]) -> float | None:
    """Milliseconds of CPU per step done (a workload cut short counts only what it did)."""
    return cpu * 1000 / figures["steps_done"] if figures["steps_done"] else None


# ── pageant in process ──────────────────────────────────────────────────────────────────────


async def pageant_inproc(mysql: str | None, workload: Workload, timeout: float) -> dict:
    async with scratch_database(mysql) as db:
        host, definition = await authored_in_process(db, workload)
        engine = Engine(host)
        await engine.start()
        server_cpu = ServerCpu(local_database(mysql))
        try:
            server_cpu.start()
            began, cpu0 = datetime.now(UTC), time.process_time()
            # All at once, as serve's clients send them.
            await asyncio.gather(
                *(
                    start_now(host, definition, scope=f"r{i}", actor="bench")
                    for i in range(workload.runs)
                )
            )
            done = await wait_done(db, workload.runs, timeout)
            cpu = time.process_time() - cpu0
            db_cpu = server_cpu.seconds()
        finally:
            await engine.stop()
        figures = await outcome(db, workload, began, done)
    figures["cpu_ms_per_step"] = per_step(cpu, figures)
    figures["db_cpu_ms_per_step"] = None if db_cpu is None else per_step(db_cpu, figures)
    figures["deadlocks_retried"] = deadlocks_retried(host.metrics.render().decode())
    return figures


# ── pageant serve ───────────────────────────────────────────────────────────────────────────


def console_script() -> list[str]:
    script = Path(sys.executable).with_name("pageant")
    return [str(script)] if script.exists() else [sys.executable, "-m", "pageant.cli"]


class Serve:
    """One ``pageant serve`` process on 127.0.0.1 and a free port, its log in ``log``."""

    def __init__(self, database_url: str, log: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PAGEANT_")}
        env.update(PAGEANT_DATABASE_URL=database_url, PAGEANT_PORT="0", PAGEANT_LOG_FORMAT="json")
        self.log_path = log
        self._log = log.open("w")
        self.process = subprocess.Popen(
            [*console_script(), "serve"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )
        line: list[str] = []
        reader = threading.Thread(
            target=lambda: line.append(self.process.stdout.readline()),  # type: ignore[union-attr]  # the process was started with stdout=PIPE
            daemon=True,
        )
        reader.start()
        reader.join(60)
        if not line or "serving on" not in line[0]:
            self.stop()
            raise RuntimeError(f"pageant serve did not start: {line}\n{log.read_text()[-2000:]}")
        self.base = line[0].split("serving on ", 1)[1].split()[0]

    def cpu_seconds(self) -> float:
        """User + system CPU time of the process so far (Linux /proc)."""
        return cpu_seconds(self.process.pid)

    def rss_mib(self) -> float:
        """The process's resident memory now, in MiB (Linux /proc)."""
        return rss_mib(self.process.pid)

    def error_lines(self) -> int:
        count = 0
        for line in self.log_path.read_text().splitlines():
            try:
                count += json.loads(line).get("level") in ("ERROR", "CRITICAL")
            except ValueError:
                count += "Traceback" in line
        return count

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._log.close()


def deadlocks_retried(exposition: str) -> float:
    """The sum of ``pageant_deadlocks_retried`` over its labels, from /metrics text."""
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in exposition.splitlines()
        if line.startswith("pageant_deadlocks_retried_total")
    )


async def scrape(session: aiohttp.ClientSession, base: str, token: str) -> str:
    """The /metrics text of the host at ``base``."""
    headers = {"Authorization": f"Bearer {token}"}
    async with session.get(f"{base}/metrics", headers=headers) as response:
        return await response.text()


def url_of(db: AsyncEngine) -> str:
    return db.url.render_as_string(hide_password=False)


def local_database(mysql: str | None) -> bool:
    """Whether ``mysql`` names a MariaDB server on this machine (whose process /proc shows)."""
    return mysql is not None and make_url(mysql).host in ("127.0.0.1", "localhost", "::1")


async def pageant_serve(
    mysql: str | None,
    workload: Workload,
    timeout: float,
    *,
    hosts: int = 1,
    console: float | None = None,
) -> dict:
    """``workload`` through ``hosts`` serve processes; with ``console`` (seconds between one
    client's GETs, 0 for none), 50 clients GET the run console of the live runs for as long
    as the workload runs."""
    async with scratch_database(mysql) as db, temp_folder() as folder:
        token = await create_token(db, role="admin", name="bench", now=datetime.now(UTC))
        servers = [Serve(url_of(db), folder / f"serve{i}.log") for i in range(hosts)]
        try:
            async with aiohttp.ClientSession() as session:
                requests = [client_request(session, token, s.base) for s in servers]
                definition = await author(requests[0], workload)
                server_cpu = ServerCpu(local_database(mysql))
                server_cpu.start()
                cpu0 = [s.cpu_seconds() for s in servers]
                began = datetime.now(UTC)

                async def start(i: int) -> int:
                    status, body = await requests[i % hosts](
                        "POST", f"{API}/events/{definition}/runs", {"scope": f"r{i}"}
                    )
                    if status != 201:
                        raise RuntimeError(f"starting run {i} answered {status}: {body}")
                    return int(body["id"])

                run_ids = await asyncio.gather(*(start(i) for i in range(workload.runs)))
                latencies: list[float] = []
                refusals: list[str] = []
                unchanged: list[float] = []
                stop = asyncio.Event()
                readers = []
                if console is not None:
                    readers = [
                        asyncio.create_task(
                            read_console(
                                console_get(session, token, servers[0].base),
                                run_ids,
                                n,
                                console,
                                stop,
                                latencies,
                                refusals,
                                unchanged,
                            )
                        )
                        for n in range(CONSOLE_CLIENTS)
                    ]
                # The console is read while the runs run; past its window (``timeout``) the
                # GETs have told what they can, and the rest of the workload is not waited for.
                done = await wait_done(db, workload.runs, timeout)
                stop.set()
                await asyncio.gather(*readers)
                cpu = sum(s.cpu_seconds() - c for s, c in zip(servers, cpu0, strict=True))
                db_cpu = server_cpu.seconds()
                retried = 0.0
                for server in servers:
                    retried += deadlocks_retried(await scrape(session, server.base, token))
        finally:
            for s in servers:
                s.stop()
        figures = await outcome(db, workload, began, done)
        figures["cpu_ms_per_step"] = per_step(cpu, figures)
        figures["db_cpu_ms_per_step"] = None if db_cpu is None else per_step(db_cpu, figures)
        figures["error_lines"] = sum(s.error_lines() for s in servers)
        figures["deadlocks_retried"] = retried
        if console is not None:
            changed = answered_with_body(latencies, unchanged)
            figures.update(
                get_p50_ms=pct(latencies, 50),
                get_p99_ms=pct(latencies, 99),
                gets=len(latencies),
                get_refusals=len(refusals),
                get_refusal=refusals[0] if refusals else None,
                get_unchanged=len(unchanged),
                # The answers with a body (200s): a console read afresh, or kept and new
                # to its reader; where the p99 comes from when the 304s are quick.
                get_changed_p50_ms=pct(changed, 50),
                get_changed_p99_ms=pct(changed, 99),
            )
    return figures


def answered_with_body(latencies: list[float], unchanged: list[float]) -> list[float]:
    """The latencies of ``latencies`` that are not 304s (``unchanged``, a sub-multiset)."""
    left = Counter(unchanged)
    out = []
    for took in latencies:
        if left[took]:
            left[took] -= 1
        else:
            out.append(took)
    return out


#: One console GET: ``(path, the ETag last answered or None)`` -> ``(status, body, ETag)``.
ConsoleGet = Callable[[str, str | None], Awaitable[tuple[int, Any, str | None]]]


def console_get(session: aiohttp.ClientSession, token: str, base: str) -> ConsoleGet:
    """A GET as a browser sends it: with ``If-None-Match`` when it holds the answer's ETag."""

    async def get(path: str, etag: str | None) -> tuple[int, Any, str | None]:
        headers = {"Authorization": f"Bearer {token}"}
        if etag is not None:
            headers["If-None-Match"] = etag
        async with session.get(base + path, headers=headers) as response:
            body = None if response.status == 304 else await response.json()
            return response.status, body, response.headers.get("ETag")

    return get


async def read_console(
    get: ConsoleGet,
    run_ids: list[int],
    n: int,
    every: float,
    stop: asyncio.Event,
    out: list[float],
    refusals: list[str],
    unchanged: list[float],
) -> None:
    """Client ``n``: the console of run ``n`` (of ``run_ids``, in turn) until ``stop``, a GET
    every ``every`` seconds (the clients' first GETs spread over the first ``every``), or
    with ``every`` 0 the next GET as soon as the last answers. Like a browser, the client
    keeps the last answer's ETag and sends it as ``If-None-Match``: a 304 says its copy is
    current. Every answer's latency goes to ``out``, a 304's also to ``unchanged``, and each
    answer other than 200 or 304 (status and message) to ``refusals``."""
    run_id = run_ids[n % len(run_ids)]
    etag: str | None = None
    if every:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every * n / CONSOLE_CLIENTS)
    while not stop.is_set():
        t0 = time.perf_counter()
        status, body, tag = await get(f"{API}/runs/{run_id}", etag)
        took = time.perf_counter() - t0
        out.append(took * 1000)
        if status in (200, 304):
            etag = tag
            if status == 304:
                unchanged.append(took * 1000)
        else:
            message = body.get("error", {}).get("message") if isinstance(body, dict) else body
            refusals.append(f"{status}: {message}")
        if every:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), max(0.0, every - took))


@asynccontextmanager
async def temp_folder() -> AsyncIterator[Path]:
    with tempfile.TemporaryDirectory() as folder:
        yield Path(folder)


# ── memory ──────────────────────────────────────────────────────────────────────────────────

GATED_SPEC = {
    "schedule": {"kind": "manual"},
    "phases": [
        {
            "key": "hunt",
            "label": "Hunt",
            "steps": [],
            "advance": {"on": "wisps.caught", "where": None, "count": 1000, "dormant": False},
        }
    ],
}


async def start_many(request: Request, definition: int, scopes: range, prefix: str) -> None:
    """Start one run of ``definition`` per scope through the admin API, 20 requests at once."""
    gate = asyncio.Semaphore(20)

    async def start(i: int) -> None:
        async with gate:
            status, body = await request(
                "POST", f"{API}/events/{definition}/runs", {"scope": f"{prefix}{i}"}
            )
        if status != 201:
            raise RuntimeError(f"starting run {prefix}{i} answered {status}: {body}")

    await asyncio.gather(*(start(i) for i in scopes))


async def gates_open(db: AsyncEngine, gates: int, timeout: float) -> bool:
    """Poll until ``gates`` gates are open and no run has ended; answer False on timeout."""
    deadline = time.monotonic() + timeout
    opened = select(func.count()).select_from(event_run_phase_gates)
    ended = select(func.count()).where(event_runs.c.status.in_(TERMINAL_RUN_STATUSES))
    async with reader(db) as plain:
        while time.monotonic() < deadline:
            with contextlib.suppress(OperationalError):  # busy: look again at the next poll
                async with plain.connect() as conn:
                    if (await conn.execute(ended)).scalar_one():
                        return False
                    if (await conn.execute(opened)).scalar_one() >= gates:
                        return True
            await asyncio.sleep(0.1)
    return False


async def memory(mysql: str | None, finished: int, timeout: float) -> dict:
    """``pageant serve``'s resident memory: idle; with GATED_RUNS runs waiting on a gate; and
    after each tenth of ``finished`` one-step runs has ended (the gated runs still waiting)."""
    async with scratch_database(mysql) as db, temp_folder() as folder:
        token = await create_token(db, role="admin", name="bench", now=datetime.now(UTC))
        server = Serve(url_of(db), folder / "serve.log")
        figures: dict[str, Any] = {"gated_runs": GATED_RUNS, "finished_runs": finished}
        try:
            async with aiohttp.ClientSession() as session:
                request = client_request(session, token, server.base)
                await asyncio.sleep(2)
                figures["rss_idle_mib"] = server.rss_mib()
                status, body = await request(
                    "POST", f"{API}/events", {"title": "bench gated", "spec": GATED_SPEC}
                )
                if status != 201:
                    raise RuntimeError(f"creating the gated event answered {status}: {body}")
                gated = int(body["id"])
                status, body = await request("POST", f"{API}/events/{gated}/publish", None)
                if status != 200:
                    raise RuntimeError(f"publishing the gated event answered {status}: {body}")
                await start_many(request, gated, range(GATED_RUNS), "g")
                if not await gates_open(db, GATED_RUNS, timeout):
                    raise RuntimeError(f"{GATED_RUNS} runs did not reach their gate in {timeout} s")
                await asyncio.sleep(2)
                figures["rss_gated_mib"] = server.rss_mib()
                one = await author(request, Workload("memory", 1, 1))
                tenth = max(1, finished // 10)
                curve = []
                for done_so_far in range(tenth, finished + 1, tenth):
                    await start_many(request, one, range(done_so_far - tenth, done_so_far), "f")
                    # A tenth of 100,000 runs is 10,000 starts through the API: at least a
                    # second per 20 of them, however short --timeout is.
                    waited = max(timeout, tenth / 20)
                    if not await wait_done(db, done_so_far, waited):
                        raise RuntimeError(f"{done_so_far} runs did not finish in {waited} s")
                    curve.append((done_so_far, server.rss_mib()))
                figures["rss_early_mib"] = curve[0][1]
                figures["rss_finished_mib"] = curve[-1][1]
                figures["rss_curve"] = curve
        finally:
            server.stop()
        figures["error_lines"] = server.error_lines()
    return figures


# ── the raw driver's limit ──────────────────────────────────────────────────────────────────

RAW_STEPS = 2000


async def raw_limit(mysql: str | None) -> dict:
    """One connection of the bare driver: per step one transaction that claims it (a
    compare-and-set on its status), finishes it and inserts its log line."""
    workload = Workload("raw", 20, RAW_STEPS // 20)
    async with scratch_database(mysql) as db:
        host, definition = await authored_in_process(db, workload)
        for i in range(workload.runs):
            await start_now(host, definition, scope=f"r{i}", actor="bench")
        async with db.connect() as conn:
            rows = (
                await conn.execute(select(event_run_steps.c.id, event_run_steps.c.run_id))
            ).all()
        url = make_url(url_of(db))
        now = datetime.now(UTC).replace(tzinfo=None).isoformat(sep=" ")
        claim = (
            "UPDATE event_run_steps SET status='running', claimed_by='raw', "
            "attempts=attempts+1, started_at={p} WHERE id={p} AND status='pending'"
        )
        finish = (
            "UPDATE event_run_steps SET status='done', finished_at={p} "
            "WHERE id={p} AND claimed_by='raw' AND status='running'"
        )
        line = (
            "INSERT INTO event_run_log (run_id, step_id, kind, phase, detail, at) "
            "VALUES ({p}, {p}, 'announce', 'p0', '{{\"leg\": \"core.log\"}}', {p})"
        )
        if mysql is None:
            import aiosqlite

            async with aiosqlite.connect(url.database, isolation_level=None) as raw:
                await raw.execute("PRAGMA synchronous=NORMAL")
                t0 = time.perf_counter()
                for step_id, run_id in rows:
                    await raw.execute("BEGIN IMMEDIATE")
                    await raw.execute(claim.format(p="?"), (now, step_id))
                    await raw.execute(finish.format(p="?"), (now, step_id))
                    await raw.execute(line.format(p="?"), (run_id, step_id, now))
                    await raw.execute("COMMIT")
                wall = time.perf_counter() - t0
        else:
            # The bare driver the URL names: asyncmy (pageant's default) or aiomysql.
            server: dict[str, Any] = {
                "host": url.host,
                "port": url.port or 3306,
                "user": url.username,
                "password": url.password or "",
                "autocommit": False,
            }
            if url.get_driver_name() == "asyncmy":
                import asyncmy

                raw = await asyncmy.connect(database=url.database, **server)
            else:
                import aiomysql

                raw = await aiomysql.connect(db=url.database, **server)
            try:
                async with raw.cursor() as cur:
                    await cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
                    t0 = time.perf_counter()
                    for step_id, run_id in rows:
                        await cur.execute(claim.format(p="%s"), (now, step_id))
                        await cur.execute(finish.format(p="%s"), (now, step_id))
                        await cur.execute(line.format(p="%s"), (run_id, step_id, now))
                        await raw.commit()
                    wall = time.perf_counter() - t0
            finally:
                raw.close()
    return {"steps": len(rows), "wall_s": wall, "rate": len(rows) / wall}


# ── APScheduler 4 ───────────────────────────────────────────────────────────────────────────


def setup_peer() -> None:
    """Make the APScheduler virtualenv beside this script (idempotent)."""
    if not PEER_PYTHON.exists():
        subprocess.run([sys.executable, "-m", "venv", str(PEER_VENV)], check=True)
    subprocess.run([str(PEER_PYTHON), "-m", "pip", "install", "-q", *PEER_PACKAGES], check=True)


@asynccontextmanager
async def empty_database(mysql: str | None) -> AsyncIterator[str]:
    """An empty database for APScheduler (it makes its own tables): a SQLite file in WAL
    mode, or a MariaDB database beside the one ``mysql`` names, dropped afterwards; answers
    its URL with the driver APScheduler is tested with (aiosqlite, asyncmy)."""
    if mysql is None:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "aps.db"
            with sqlite3.connect(path) as conn:
                conn.execute("PRAGMA journal_mode=WAL")
            yield f"sqlite+aiosqlite:///{path}"
        return
    server = make_url(mysql)
    name = f"aps_bench_{os.getpid()}_{int(time.time() * 1000) % 10**8}"
    admin = create_engine(server.render_as_string(hide_password=False))
    try:
        async with admin.begin() as conn:
            await conn.execute(text(f"CREATE DATABASE `{name}`"))
        try:
            yield server.set(drivername="mysql+asyncmy", database=name).render_as_string(
                hide_password=False
            )
        finally:
            async with admin.begin() as conn:
                await conn.execute(text(f"DROP DATABASE IF EXISTS `{name}`"))
    finally:
        await admin.dispose()


async def apscheduler(
    mysql: str | None,
    workload: Workload,
    timeout: float,
    *,
    independent: bool = False,
    best: bool = False,
) -> dict:
    """The workload run by ``apscheduler_peer.py``: chains of jobs, or with ``independent``
    as many jobs added at once with no order between them, or with ``best`` as many jobs
    queued before the scheduler starts, only their draining timed."""
    if not PEER_PYTHON.exists():
        raise RuntimeError("no APScheduler virtualenv: run this script with --setup first")
    async with empty_database(mysql) as url:
        server_cpu = ServerCpu(local_database(mysql))
        server_cpu.start()
        process = await asyncio.create_subprocess_exec(
            str(PEER_PYTHON),
            str(PEER),
            "--url",
            url,
            "--runs",
            str(workload.runs),
            "--steps",
            str(workload.steps),
            "--wait",
            str(workload.wait),
            "--timeout",
            str(timeout),
            *(["--independent"] if independent else []),
            *(["--best"] if best else []),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await process.communicate()
        db_cpu = server_cpu.seconds()
    if process.returncode != 0:
        lines = [line.strip(" |") for line in err.decode().splitlines() if "Error" in line]
        raise RuntimeError(f"the APScheduler peer failed: {(lines or ['(no message)'])[-1]}")
    found = json.loads(out.decode().strip().splitlines()[-1])
    late = found.pop("lateness_ms")
    figures = {
        "steps": found["jobs"],
        "wall_s": found["wall_s"],
        "rate": found["rate"],
        "timed_out": found["timed_out"],
        "cpu_ms_per_step": found["cpu_ms_per_job"],
        # The peer's setup and teardown fall inside this window too: an upper bound.
        "db_cpu_ms_per_step": None if db_cpu is None else db_cpu * 1000 / found["jobs"],
        # aps-best: how long queueing the jobs took, before the timed drain.
        "queue_s": found.get("queue_s"),
    }
    if workload.wait:
        figures.update(lateness(late))
    return figures


# ── takeover ────────────────────────────────────────────────────────────────────────────────

#: ``takeover``: the share of the workload's steps done when one of the two hosts is killed.
TAKEOVER_AFTER = 0.25
#: How often the dead host's held steps are looked at after the kill, in seconds.
TAKEOVER_POLL = 0.1
#: The goal's slack past the claim lease.
TAKEOVER_SLACK_S = 2.0


def announce_lease_s() -> float:
    """The claim lease of a ``core.announce`` step with the default settings: the action's
    own time limit plus ``step_lease_margin_seconds``."""
    from pageant.builtin_plugins.core import CorePlugin

    action = next(a for a in CorePlugin().pageant_actions() if a.id == "core.announce")
    return action.budget_ms / 1000 + Settings().step_lease_margin_seconds


async def steps_done(db: AsyncEngine, count: int, timeout: float) -> bool:
    """Poll until ``count`` steps are ``done``; answer False on timeout."""
    deadline = time.monotonic() + timeout
    query = select(func.count()).where(event_run_steps.c.status == "done")
    async with reader(db) as plain:
        while time.monotonic() < deadline:
            async with plain.connect() as conn:
                if (await conn.execute(query)).scalar_one() >= count:
                    return True
            await asyncio.sleep(0.05)
    return False


async def taken_over(
    db: AsyncEngine, pid: int, killed: datetime, timeout: float
) -> tuple[dict[int, datetime], dict[int, float], int]:
    """The steps the dead host (process ``pid``) held at the kill, each with the end of its
    claim lease; how many seconds after ``killed`` another host had claimed each (seen by a
    poll every TAKEOVER_POLL s, or its ``finished_at`` when that came first: never early);
    and how many runs the dead host held claimed."""
    s = event_run_steps.c
    # A claim's owner is "host:pid:random" (pageant.hosting.make_identity).
    marker = f":{pid}:"
    dead = f"%{marker}%"
    async with reader(db) as plain:
        async with plain.connect() as conn:
            held = dict(
                (
                    await conn.execute(
                        select(s.id, s.lease_until).where(
                            s.status == "running", s.claimed_by.like(dead)
                        )
                    )
                ).all()
            )
            runs_held = (
                await conn.execute(select(func.count()).where(event_runs.c.claimed_by.like(dead)))
            ).scalar_one()
        taken: dict[int, float] = {}
        deadline = time.monotonic() + timeout
        while len(taken) < len(held) and time.monotonic() < deadline:
            async with plain.connect() as conn:
                rows = await conn.execute(
                    select(s.id, s.claimed_by, s.finished_at).where(
                        s.id.in_([i for i in held if i not in taken])
                    )
                )
                seen = datetime.now(UTC)  # after the read: a claim it shows came before
                for step_id, owner, finished in rows:
                    if owner is None or marker in owner:
                        continue
                    at = min(seen, finished) if finished is not None else seen
                    taken[step_id] = (at - killed).total_seconds()
            await asyncio.sleep(TAKEOVER_POLL)
    return held, taken, runs_held


async def takeover(mysql: str, workload: Workload, timeout: float) -> dict:
    """``workload`` through two serve processes on one MariaDB database (runs started
    alternately through each); once TAKEOVER_AFTER of its steps are done one host is
    killed (SIGKILL), and the survivor's takeover of each step the dead host held is timed
    from the kill. Every setting is the default."""
    lease = announce_lease_s()
    async with scratch_database(mysql) as db, temp_folder() as folder:
        token = await create_token(db, role="admin", name="bench", now=datetime.now(UTC))
        servers = [Serve(url_of(db), folder / f"serve{i}.log") for i in range(2)]
        try:
            async with aiohttp.ClientSession() as session:
                requests = [client_request(session, token, s.base) for s in servers]
                definition = await author(requests[0], workload)
                began = datetime.now(UTC)
                for i in range(workload.runs):
                    status, body = await requests[i % 2](
                        "POST", f"{API}/events/{definition}/runs", {"scope": f"r{i}"}
                    )
                    if status != 201:
                        raise RuntimeError(f"starting run {i} answered {status}: {body}")
                steps = workload.runs * workload.steps
                if not await steps_done(db, int(steps * TAKEOVER_AFTER), timeout):
                    raise RuntimeError("the workload did not get going before the kill")
                dead, survivor = servers
                dead.process.kill()
                dead.process.wait(10)
                killed = datetime.now(UTC)
                held, taken, runs_held = await taken_over(
                    db, dead.process.pid, killed, lease + timeout
                )
                done = await wait_done(db, workload.runs, timeout)
        finally:
            for s in servers:
                s.stop()
        figures = await outcome(db, workload, began, done)
        figures["error_lines"] = survivor.error_lines()
    after = list(taken.values())
    # How long after its own claim lease ran out each held step was claimed again.
    past = [
        (killed - held[step_id]).total_seconds() + seconds for step_id, seconds in taken.items()
    ]
    figures.update(
        lease_s=lease,
        held_steps=len(held),
        held_runs=runs_held,
        not_taken=len(held) - len(taken),
        takeover_p50_s=pct(after, 50),
        takeover_p99_s=pct(after, 99),
        takeover_max_s=max(after, default=None),
        past_lease_max_s=max(past, default=None),
        not_completed=workload.runs - figures["statuses"].get("completed", 0),
    )
    return figures


# ── a fan-out at one instant ───────────────────────────────────────────────────────────────


def fanout_spec(at: datetime, servers: int) -> dict[str, Any]:
    """One occurrence at ``at`` (UTC, to the minute) on ``servers`` servers, FANOUT_STEPS
    no-op steps a run."""
    return {
        "params": [{"name": "server", "type": "string", "label": "Server", "required": True}],
        "schedule": {
            "kind": "once",
            "at": at.strftime("%Y-%m-%dT%H:%M"),
            "params": [{"server": f"s{i:04d}"} for i in range(servers)],
        },
        "phases": [
            {"key": "p0", "label": "P0", "steps": [announce(i) for i in range(FANOUT_STEPS)]}
        ],
    }


@contextlib.contextmanager
def param_sets_up_to(count: int) -> Any:
    """Lift the bound on a schedule's param sets (1,000) to ``count`` in this process only."""
    kept = authoring_params.MAX_PARAM_SETS
    authoring_params.MAX_PARAM_SETS = max(kept, count)
    try:
        yield
    finally:
        authoring_params.MAX_PARAM_SETS = kept


async def fanout(mysql: str | None, servers: int, timeout: float) -> dict:
    """One ``once`` event fanned out over ``servers`` param sets, published through the real
    admin app in this process (the bound on sets lifted here only), then run by a ``pageant
    serve`` started before the instant. Per run: its first step's start against the
    occurrence's instant; and the last run's end against it."""
    async with scratch_database(mysql) as db, temp_folder() as folder:
        token = await create_token(db, role="admin", name="bench", now=datetime.now(UTC))
        lead = datetime.now(UTC) + timedelta(seconds=FANOUT_LEAD_S)
        instant = lead.replace(second=0, microsecond=0) + timedelta(minutes=1)
        host = Host(Settings(), db=db)
        client = TestClient(TestServer(make_app(host, run_engine=False)))
        await client.start_server()
        try:
            request = client_request(client, token)
            with param_sets_up_to(servers):
                definition = await publish(
                    request, f"bench fanout {servers}", fanout_spec(instant, servers)
                )
                # A scheduled occurrence of an unverified version is held until it is
                # verified (a dry run with one server's params: the sets differ in nothing
                # else; verify checks the spec again, the bound too).
                status, body = await request(
                    "POST", f"{API}/events/{definition}/verify", {"params": {"server": "s0000"}}
                )
            if status != 200:
                raise RuntimeError(f"verifying the event answered {status}: {body}")
        finally:
            await client.close()
        server = Serve(url_of(db), folder / "serve.log")
        try:
            cpu0 = server.cpu_seconds()
            await asyncio.sleep(max(0.0, (instant - datetime.now(UTC)).total_seconds()))
            done = await wait_done(db, servers, timeout)
            cpu = server.cpu_seconds() - cpu0
        finally:
            server.stop()
        async with reader(db) as plain, plain.connect() as conn:
            statuses, last_end, steps_done = await tally(conn)
            firsts = (
                await conn.execute(
                    select(func.min(event_run_steps.c.started_at)).group_by(
                        event_run_steps.c.run_id
                    )
                )
            ).scalars()
            first_after = [(f - instant).total_seconds() * 1000 for f in firsts if f is not None]
        steps = servers * FANOUT_STEPS
        all_done = (last_end - instant).total_seconds() if done and last_end else None
        figures: dict[str, Any] = {
            "runs": servers,
            "steps": steps,
            "steps_done": steps_done,
            "statuses": statuses,
            "timed_out": not done,
            "wall_s": all_done,
            "rate": steps / all_done if all_done else None,
            "all_done_s": all_done,
            "first_step_p50_ms": pct(first_after, 50),
            "first_step_p99_ms": pct(first_after, 99),
            "first_step_max_ms": max(first_after, default=None),
            "not_completed": servers - statuses.get("completed", 0),
            "error_lines": server.error_lines(),
        }
        figures["cpu_ms_per_step"] = per_step(cpu, figures)
    return figures


# ── idle tick ───────────────────────────────────────────────────────────────────────────────


async def idle(mysql: str | None, runs: int) -> dict[str, dict]:
    from idle_tick import measure

    empty = await measure(mysql, 0, 30)
    full = await measure(mysql, runs, 30)
    return {"empty": empty, "full": full}


# ── the run ─────────────────────────────────────────────────────────────────────────────────

CASES = (
    "20x100",
    "200x10",
    "1x500",
    "wait",
    "console",
    "flood",
    "raw",
    "2hosts",
    "takeover",
    "fanout",
    "idle",
    "memory",
)
MODES = ("inproc", "serve", "aps", "aps-jobs", "aps-best")


async def measure_case(
    args: argparse.Namespace, mysql: str | None, case: str, mode: str
) -> dict[str, Any]:
    """One case in one mode on one database."""
    loads = workloads(args.quick)
    if case in loads:
        if mode == "inproc":
            return await pageant_inproc(mysql, loads[case], args.timeout)
        if mode == "serve":
            return await pageant_serve(mysql, loads[case], args.timeout)
        return await apscheduler(
            mysql,
            loads[case],
            args.timeout,
            independent=mode == "aps-jobs",
            best=mode == "aps-best",
        )
    if case in ("console", "flood"):
        window = min(args.timeout, CONSOLE_SECONDS / 4 if args.quick else CONSOLE_SECONDS)
        every = CONSOLE_REFRESH_SECONDS if case == "console" else 0.0
        return await pageant_serve(mysql, loads["20x100"], window, console=every)
    if case == "2hosts":
        return await pageant_serve(mysql, loads["20x100"], args.timeout, hosts=2)
    if case == "takeover":
        assert mysql is not None  # plan() gives it MariaDB only
        return await takeover(mysql, loads["20x100"], args.timeout)
    if case == "memory":
        return await memory(mysql, args.memory_runs, args.timeout)
    if case == "fanout":
        servers = FANOUT_SERVERS_QUICK if args.quick else FANOUT_SERVERS
        return await fanout(mysql, servers, args.timeout)
    return await raw_limit(mysql)


def plan(args: argparse.Namespace) -> list[tuple[str, str | None, str, str]]:
    """(database, its MariaDB URL or None, case, mode) in the order they run."""
    databases: list[tuple[str, str | None]] = [("sqlite", None)]
    if args.mysql:
        databases.append(("mariadb", args.mysql))
    if args.only:
        databases = [d for d in databases if d[0] == args.only]
    out = []
    for db, mysql in databases:
        for case in args.cases:
            if case in ("20x100", "200x10", "1x500", "wait"):
                # Independent jobs have no step after a wait to be late: no aps-jobs or
                # aps-best there.
                modes = [
                    m for m in args.modes if not (case == "wait" and m in ("aps-jobs", "aps-best"))
                ]
                out += [(db, mysql, case, mode) for mode in modes]
            elif case in ("console", "flood", "2hosts", "takeover", "memory", "fanout"):
                if case not in ("2hosts", "takeover") or mysql is not None:
                    out.append((db, mysql, case, "serve"))
            else:
                out.append((db, mysql, case, case))
    return out


async def run_all(args: argparse.Namespace, results: Results) -> None:
    for db, mysql, case, mode in plan(args):
        began = time.perf_counter()
        if case == "idle":
            for which, figures in (await idle(mysql, args.idle_runs)).items():
                results.add(db, "idle", which, figures)
            print(f"  [{db}] idle: {time.perf_counter() - began:.0f} s", flush=True)
            continue
        try:
            figures = await measure_case(args, mysql, case, mode)
        except Exception as exc:  # one case failing must not lose the others' figures
            figures = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        results.add(db, case, mode, figures)
        shown = {k: round(v, 2) if isinstance(v, float) else v for k, v in figures.items()}
        print(f"  [{db}] {case} {mode}: {shown} ({time.perf_counter() - began:.0f} s)", flush=True)


def fmt(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def report(results: Results, repeats: int) -> None:
    medians = f" (medians of {repeats})" if repeats > 1 else ""
    print(f"\nThroughput{medians}")
    header = (
        f"{'db':8} {'case':8} {'mode':8} {'steps':>6} {'wall s':>7} {'steps/s':>8} "
        f"{'x APS':>6} {'CPU ms/step':>11} {'DB ms/step':>10}  notes"
    )
    print(header)
    print("-" * len(header))
    for (db, case, mode), found in results.rows.items():
        if case == "idle":
            continue
        g = partial(results.get, db, case, mode)
        errors = [f["error"] for f in found if "error" in f]
        notes = []
        if case == "wait":
            notes.append(
                f"late p50/p99/max {fmt(g('late_p50_ms'))}/{fmt(g('late_p99_ms'))}/"
                f"{fmt(g('late_max_ms'))} ms"
            )
        if case == "fanout":
            notes.append(
                f"{fmt(g('runs'))} runs at one instant: first step after it p50/p99 "
                f"{fmt(g('first_step_p50_ms'))}/{fmt(g('first_step_p99_ms'))} ms, all done "
                f"{fmt(g('all_done_s'), 1)} s after it; runs not completed "
                f"{fmt(g('not_completed'))}"
            )
        elif g("start_p99_ms") is not None and mode != "aps":
            notes.append(f"start p99 {fmt(g('start_p99_ms'))} ms")
        if g("first_step_p99_ms") is not None and mode != "aps" and case != "fanout":
            notes.append(f"first step p99 {fmt(g('first_step_p99_ms'))} ms")
        if mode == "aps-best" and g("queue_s") is not None:
            notes.append(f"queued first in {fmt(g('queue_s'), 1)} s (not timed)")
        if case == "memory":
            notes.append(
                f"RSS MiB idle {fmt(g('rss_idle_mib'), 1)}, {fmt(g('gated_runs'))} gated "
                f"{fmt(g('rss_gated_mib'), 1)}, after {fmt(g('finished_runs') / 10)} finished "
                f"{fmt(g('rss_early_mib'), 1)}, after {fmt(g('finished_runs'))} "
                f"{fmt(g('rss_finished_mib'), 1)}"
                if g("finished_runs")
                else "RSS -"
            )
        if mode in ("inproc", "serve") and case in ("20x100", "200x10", "1x500"):
            for peer in ("aps-jobs", "aps-best"):
                against = results.ratio(db, case, mode, peer)
                if against is not None:
                    notes.append(f"x {peer} {fmt(against, 2)}")
        if case in ("console", "flood"):
            notes.append(f"GET p50/p99 {fmt(g('get_p50_ms'), 1)}/{fmt(g('get_p99_ms'), 1)} ms")
            if g("get_unchanged") is not None:
                notes.append(f"304 {fmt(g('get_unchanged'))} of {fmt(g('gets'))}")
            if g("get_changed_p99_ms") is not None:
                notes.append(
                    f"200s' p50/p99 {fmt(g('get_changed_p50_ms'), 1)}/"
                    f"{fmt(g('get_changed_p99_ms'), 1)} ms"
                )
            if g("get_refusals"):
                refusal = next((f["get_refusal"] for f in found if f.get("get_refusal")), "")
                notes.append(
                    f"GETs refused {fmt(g('get_refusals'))} of {fmt(g('gets'))}: {refusal}"
                )
        if case == "2hosts":
            one_host = results.get(db, "20x100", "serve", "rate")
            notes.append(
                f"x one host {fmt(g('rate') / one_host if g('rate') and one_host else None, 2)}"
            )
            notes.append(f"double dispatch {fmt(g('double_dispatch'))}")
        if case == "takeover":
            notes.append(
                f"held at the kill {fmt(g('held_steps'))} steps ({fmt(g('held_runs'))} runs), "
                f"taken over p50/p99/max {fmt(g('takeover_p50_s'), 1)}/"
                f"{fmt(g('takeover_p99_s'), 1)}/{fmt(g('takeover_max_s'), 1)} s after the kill "
                f"(claim lease {fmt(g('lease_s'))} s; at most "
                f"{fmt(g('past_lease_max_s'), 1)} s past a step's lease), "
                f"not taken {fmt(g('not_taken'))}, "
                f"runs not completed {fmt(g('not_completed'))}, "
                f"double dispatch {fmt(g('double_dispatch'))}"
            )
        if g("error_lines"):
            notes.append(f"ERROR lines {fmt(g('error_lines'))}")
        if g("deadlocks_retried"):
            notes.append(f"deadlocks retried {fmt(g('deadlocks_retried'))}")
        if any(f.get("timed_out") for f in found):
            notes.append("cut short" if case in ("console", "flood") else "TIMED OUT")
        if errors:
            notes.append(f"FAILED: {errors[0][:160]}")
        # The console's server also answers thousands of GETs: its CPU is no per-step figure.
        cpu = None if case in ("console", "flood") else g("cpu_ms_per_step")
        db_cpu = None if case in ("console", "flood") else g("db_cpu_ms_per_step")
        ratio = (
            results.ratio(db, case, mode)
            if mode in ("inproc", "serve") and case != "wait"
            else None
        )
        print(
            f"{db:8} {case:8} {mode:8} {fmt(g('steps')):>6} {fmt(g('wall_s'), 2):>7} "
            f"{fmt(g('rate')):>8} {fmt(ratio, 2):>6} {fmt(cpu, 2):>11} {fmt(db_cpu, 2):>10}  "
            + "; ".join(notes)
        )
    for db in ("sqlite", "mariadb"):
        empty = results.get(db, "idle", "empty", "tick_ms")
        full = results.get(db, "idle", "full", "tick_ms")
        if empty is not None:
            runs = results.rows[(db, "idle", "full")][0]["runs"]
            print(
                f"{db:8} idle tick: {fmt(empty, 2)} ms empty, {fmt(full, 2)} ms beside "
                f"{runs:,} finished runs"
            )
    for db in ("sqlite", "mariadb"):
        against = results.ratio(db, "20x100", "serve", "aps-best")
        if against is not None:
            print(
                f"{db:8} 20 x 100 through serve: {against:.2f} x aps-best (APScheduler 4 at its "
                f"best, {fmt(results.get(db, '20x100', 'aps-best', 'rate'))} jobs/s; "
                f"x aps {fmt(results.ratio(db, '20x100', 'serve'), 2)})"
            )
    print("\nGoals (issues 14 and 32)")
    for text_, check in GOALS:
        answer = check(results)
        mark = {True: "met", False: "NOT MET", None: "not measured"}[answer]
        print(f"  [{mark:^12}] {text_}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[1:]),
    )
    parser.add_argument(
        "--mysql",
        default=os.environ.get("PAGEANT_BENCH_MYSQL_URL"),
        help="a MariaDB server URL, e.g. mysql+aiomysql://root@127.0.0.1:3306/test "
        "(a scratch database is made beside it); default $PAGEANT_BENCH_MYSQL_URL",
    )
    parser.add_argument("--only", choices=("sqlite", "mariadb"), help="one database only")
    parser.add_argument(
        "--cases",
        default=",".join(CASES),
        help=f"comma-separated, of {', '.join(CASES)} (default: all)",
    )
    parser.add_argument(
        "--modes",
        default=",".join(MODES),
        help=f"comma-separated, of {', '.join(MODES)} (default: all)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smaller workloads (20x25, 50x10, 1x125, 25 waits, the console read for 15 s), "
        "10,000 finished runs beside the idle tick, memory over 2,000 finished runs: about three "
        "minutes on SQLite (the memory case is 80 s of it; --cases to leave it out)",
    )
    parser.add_argument("--repeat", type=int, default=1, help="run everything N times; medians")
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds one workload may take (default 180, quick 60)",
    )
    parser.add_argument(
        "--idle-runs",
        type=int,
        default=None,
        help="finished runs beside the idle tick (default 100,000; quick 10,000)",
    )
    parser.add_argument(
        "--memory-runs",
        type=int,
        default=None,
        help="finished runs the memory case reads serve's RSS across (default 100,000; "
        "quick 2,000)",
    )
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    parser.add_argument(
        "--report",
        type=Path,
        metavar="JSON",
        help="measure nothing: print the table and the goals from figures --json wrote",
    )
    parser.add_argument(
        "--setup",
        action="store_true",
        help="make the APScheduler virtualenv (benchmarks/.venv-apscheduler), then exit",
    )
    args = parser.parse_args()
    if args.setup:
        setup_peer()
        return
    if args.report:
        saved, results = json.loads(args.report.read_text()), Results()
        for row in saved:
            for figures in row["figures"]:
                results.add(row["db"], row["case"], row["mode"], figures)
        report(results, max(len(row["figures"]) for row in saved))
        return
    args.cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for name, given, known in (("case", args.cases, CASES), ("mode", args.modes, MODES)):
        unknown = [g for g in given if g not in known]
        if unknown:
            parser.error(
                f"unknown {name} {', '.join(unknown)}; expected some of {', '.join(known)}"
            )
    if args.only == "mariadb" and not args.mysql:
        parser.error("--only mariadb needs --mysql (or PAGEANT_BENCH_MYSQL_URL)")
    if args.timeout is None:
        args.timeout = 60.0 if args.quick else 180.0
    if args.idle_runs is None:
        args.idle_runs = 10_000 if args.quick else 100_000
    if args.memory_runs is None:
        args.memory_runs = 2_000 if args.quick else 100_000
    results = Results()
    began = time.perf_counter()
    for n in range(args.repeat):
        print(f"run {n + 1} of {args.repeat}", flush=True)
        asyncio.run(run_all(args, results))
    report(results, args.repeat)
    print(f"\n(whole benchmark: {time.perf_counter() - began:.0f} s)")
    if args.json:
        rows = [
            {"db": d, "case": c, "mode": m, "figures": f} for (d, c, m), f in results.rows.items()
        ]
        args.json.write_text(json.dumps(rows, indent=1, default=str))


if __name__ == "__main__":
    main()
