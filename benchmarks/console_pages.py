"""How fast the web console's pages answer with 10,000 runs in the database.

Seeds N finished runs over 100 events (each with two steps and four log lines, as
``idle_tick.py`` does; every 50th failed) plus a few live runs parked on a cue and one
finished run of 500 steps (five phases of 100, each ended by an ``after`` gate, with 1,500
log lines), starts the real app on a real port, signs in with an admin token, and times each
page (p50 and p95 over R requests each).

    python benchmarks/console_pages.py [--runs 10000] [--repeat 50] [--spread-days 0] [--mysql URL]

By default the runs are 20 seconds apart (all 10,000 within three days: the calendar's worst
month); ``--spread-days 365`` spreads them evenly over the year before ``NOW`` instead.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import time
import uuid
from datetime import timedelta
from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from benchdb import scratch_database
from idle_tick import NOW, seed
from sqlalchemy import bindparam, insert, update
from sqlalchemy.ext.asyncio import AsyncEngine

from pageant.access.tokens import create_token
from pageant.api.app import make_app
from pageant.db.tables import (
    event_definitions,
    event_run_log,
    event_run_phase_gates,
    event_run_steps,
    event_runs,
    event_versions,
)
from pageant.hosting import Host
from pageant.support.clock import FakeClock
from pageant.support.settings import Settings

LIVE = 20
#: Every how many seeded runs one is marked failed (what the history's filter finds).
FAILED_EVERY = 50
#: The long run: phases x steps.
PHASES, STEPS = 5, 100


async def seed_failed(db: AsyncEngine, runs: int) -> None:
    """Mark every ``FAILED_EVERY``-th seeded run failed (and degraded)."""
    stmt = (
        update(event_runs)
        .where(event_runs.c.id == bindparam("rid"))
        .values(status="failed", health="degraded")
    )
    async with db.begin() as conn:
        await conn.execute(stmt, [{"rid": i} for i in range(FAILED_EVERY, runs + 1, FAILED_EVERY)])


async def seed_long(db: AsyncEngine, run_id: int) -> int:
    """One finished run of ``PHASES`` x ``STEPS`` announce steps under its own event, each
    phase ended by a one-minute ``after`` gate, with three log lines a step."""
    definition_id = 1000
    phases = [
        {
            "key": f"p{p}",
            "label": f"Phase {p}",
            "steps": [
                {"action": "core.announce", "params": {"leg": "core.log", "message": f"m{s}"}}
                for s in range(STEPS)
            ],
            "advance": {"after": "1m"},
        }
        for p in range(PHASES)
    ]
    spec = {"schedule": {"kind": "manual"}, "phases": phases}
    start = NOW - timedelta(hours=2)
    steps, log, gates = [], [], []
    at = start
    for p in range(PHASES):
        entered = at
        log.append(
            {
                "run_id": run_id,
                "kind": "phase.entered",
                "phase": f"p{p}",
                "at": at,
                "detail": {"steps": STEPS},
            }
        )
        for s in range(STEPS):
            began, at = at, at + timedelta(seconds=2)
            steps.append(
                {
                    "run_id": run_id,
                    "phase": f"p{p}",
                    "seq": s,
                    "label": "Announce",
                    "action": "core.announce",
                    "action_version": 1,
                    "params": {"leg": "core.log", "message": f"m{s}"},
                    "on_failure": "skip",
                    "status": "done",
                    "attempts": 1,
                    "claimed_by": "bench",
                    "idempotency_key": uuid.uuid4().hex,
                    "started_at": began,
                    "finished_at": at,
                }
            )
            for kind, detail in (
                ("step.status", {"action": "core.announce", "to": "running"}),
                ("announce", {"leg": "core.log", "message": f"m{s}"}),
                ("step.status", {"action": "core.announce", "to": "done"}),
            ):
                log.append(
                    {"run_id": run_id, "kind": kind, "phase": f"p{p}", "at": at, "detail": detail}
                )
        at = max(at, entered + timedelta(minutes=1)) + timedelta(seconds=30)
        gates.append(
            {
                "run_id": run_id,
                "phase": f"p{p}",
                "kind": "after",
                "needed": 1,
                "tally": 0,
                "entered_at": entered,
                "deadline": entered + timedelta(minutes=1),
                "satisfied_at": at,
                "satisfied_by": "deadline",
            }
        )
    async with db.begin() as conn:
        await conn.execute(
            insert(event_definitions).values(
                id=definition_id,
                title="Long night",
                slug="long-night",
                spec=spec,
                state="ready",
                current_version_id=definition_id,
                timezone="Europe/Berlin",
                created_at=NOW,
                updated_at=NOW,
            )
        )
        await conn.execute(
            insert(event_versions).values(
                id=definition_id,
                definition_id=definition_id,
                number=1,
                spec=spec,
                timezone="Europe/Berlin",
                published_at=NOW,
            )
        )
        await conn.execute(
            insert(event_runs).values(
                id=run_id,
                definition_id=definition_id,
                version_id=definition_id,
                scope="",
                scheduled_for=start,
                source="manual",
                status="completed",
                current_phase=f"p{PHASES - 1}",
                created_at=start,
                started_at=start,
                ended_at=at,
            )
        )
        await conn.execute(insert(event_run_steps), steps)
        await conn.execute(insert(event_run_log), log)
        await conn.execute(insert(event_run_phase_gates), gates)
    return run_id


async def seed_live(db: AsyncEngine, first_id: int) -> list[int]:
    """``LIVE`` running runs, each parked on a cue (what the Now page's banner lists)."""
    ids = []
    async with db.begin() as conn:
        for n in range(LIVE):
            run_id = first_id + n
            ids.append(run_id)
            await conn.execute(
                insert(event_runs).values(
                    id=run_id,
                    definition_id=n % 100 + 1,
                    version_id=n % 100 + 1,
                    scope=f"live-{n}",
                    scheduled_for=NOW - timedelta(minutes=5),
                    source="manual",
                    status="running",
                    current_phase="p",
                    created_at=NOW,
                    started_at=NOW,
                )
            )
            await conn.execute(
                insert(event_run_steps).values(
                    run_id=run_id,
                    phase="p",
                    seq=0,
                    label="Cue",
                    action="core.cue",
                    action_version=1,
                    params={"message": "go"},
                    on_failure="skip",
                    status="running",
                    attempts=1,
                    idempotency_key=uuid.uuid4().hex,
                    started_at=NOW,
                )
            )
            await conn.execute(
                insert(event_run_log).values(run_id=run_id, kind="run.created", detail={}, at=NOW)
            )
    return ids


async def spread(db: AsyncEngine, runs: int, days: int) -> None:
    """Move the seeded runs so they are evenly spread over ``days`` before ``NOW``."""
    step = timedelta(days=days) / max(runs, 1)
    rows = [{"rid": i, "at": NOW - step * (runs - i + 1)} for i in range(1, runs + 1)]
    stmt = (
        update(event_runs)
        .where(event_runs.c.id == bindparam("rid"))
        .values(scheduled_for=bindparam("at"))
    )
    async with db.begin() as conn:
        await conn.execute(stmt, rows)


async def measure(
    mysql_url: str | None, runs: int, repeat: int, spread_days: int
) -> list[tuple[str, float, float]]:
    async with scratch_database(mysql_url) as db:
        await seed(db, runs)
        if spread_days:
            await spread(db, runs, spread_days)
        await seed_failed(db, runs)
        live = await seed_live(db, runs + 1)
        long_run = await seed_long(db, runs + LIVE + 1)
        token = await create_token(db, role="admin", name="bench", now=NOW)
        host = Host(Settings(), clock=FakeClock(NOW), db=db)
        client = TestClient(TestServer(make_app(host, run_engine=False)))
        await client.start_server()
        try:
            page = await client.get("/sign-in")
            nonce = re.search(r'name="csrf_token" value="([^"]+)"', await page.text()).group(1)
            signed = await client.post(
                "/sign-in", data={"csrf_token": nonce, "token": token}, allow_redirects=False
            )
            assert signed.status == 303, await signed.text()
            month = (NOW - timedelta(days=30 if not spread_days else 45)).strftime("%Y-%m")
            agenda = await (await client.get(f"/calendar?view=agenda&month={month}")).text()
            later = re.search(r'href="([^"]+)" rel="next"', agenda)
            since = (NOW - timedelta(days=60)).strftime("%Y-%m-%dT%H:%M")
            pages = {
                "Runs, first page": "/runs",
                "Runs, failed": "/runs?status=failed",
                "Runs, failed and degraded of one event since a date": (
                    f"/runs?status=failed&health=degraded&definition=50&from={since}"
                ),
                "Runs, an older page": f"/runs?before={runs // 2}",
                f"Run console ({PHASES * STEPS} steps)": f"/runs/{long_run}",
                f"Run console ({PHASES * STEPS} steps, polled part)": f"/runs/{long_run}/live",
                "Now": "/now",
                "Now (polled part)": "/now/live",
                "Events": "/events",
                "Editor": "/events/1",
                "New event": "/events/new",
                "Run console (finished)": "/runs/1",
                "Run console (parked)": f"/runs/{live[0]}",
                "Run console (polled part)": f"/runs/{live[0]}/live",
                f"Calendar month {month}": f"/calendar?month={month}",
                f"Calendar agenda {month}": f"/calendar?view=agenda&month={month}",
                **(
                    {"Calendar agenda, next page": later.group(1).replace("&amp;", "&")}
                    if later
                    else {}
                ),
                "Calendar (this month)": "/calendar",
                "Plugins": "/plugins",
            }
            results = []
            for name, path in pages.items():
                results.append(await _time(client, f"{name} `{path}`", path, repeat))
            # The polled parts as a browser polls them: with the ETag of the last answer,
            # which is a 304 with no body while the HTML is unchanged.
            for name, path in pages.items():
                if path.endswith("/live"):
                    first = await client.get(path)
                    size = len(await first.read())
                    tag = {"If-None-Match": first.headers["ETag"]}
                    label = f"{name}, revalidated (304 instead of {size / 1000:.0f} kB)"
                    results.append(await _time(client, label, path, repeat, tag, 304))
            return results
        finally:
            await client.close()
            await host.close()


async def _time(
    client: TestClient,
    label: str,
    path: str,
    repeat: int,
    headers: dict[str, str] | None = None,
    status: int = 200,
) -> tuple[str, float, float]:
    """``path`` requested ``repeat`` times: ``label`` with the p50 and p95 in ms."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        answer = await client.get(path, headers=headers)
        await answer.read()
        times.append((time.perf_counter() - t0) * 1000)
        assert answer.status == status, (path, answer.status, await answer.text())
    times.sort()
    p95 = times[max(0, int(len(times) * 0.95) - 1)]
    return label, statistics.median(times), p95


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--spread-days", type=int, default=0)
    parser.add_argument("--mysql", default=None)
    args = parser.parse_args()
    results: Any = asyncio.run(measure(args.mysql, args.runs, args.repeat, args.spread_days))
    dialect = "MariaDB" if args.mysql else "SQLite"
    spacing = f"over {args.spread_days} days" if args.spread_days else "20 s apart"
    print(
        f"{dialect}, {args.runs} finished runs ({spacing}) + {LIVE} live, "
        f"{args.repeat} requests each\n"
    )
    print("| page | p50 ms | p95 ms |\n| --- | ---: | ---: |")
    for name, p50, p95 in results:
        print(f"| {name} | {p50:.1f} | {p95:.1f} |")


if __name__ == "__main__":
    main()
