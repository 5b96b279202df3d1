"""What an idle tick costs, in an empty database and beside 100,000 finished runs.

An idle tick (nothing due) must cost the same however much history the database holds:
every stage reads live rows through an index on status, never a scan of what has ended.
Seeds N finished runs (each with two steps and four log lines), then times the tick and
the "how long may I sleep" query, and counts their statements.

    python benchmarks/idle_tick.py [--runs 100000] [--mysql mysql+aiomysql://root@127.0.0.1:3306/test]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from benchdb import scratch_database
from sqlalchemy import event, insert
from sqlalchemy.ext.asyncio import AsyncEngine

from pageant.db.tables import (
    event_definitions,
    event_run_log,
    event_run_steps,
    event_runs,
    event_versions,
)
from pageant.engine import Engine
from pageant.hosting import Host
from pageant.support.clock import FakeClock
from pageant.support.settings import Settings

NOW = datetime(2027, 3, 1, 12, 0, tzinfo=UTC)
DEFINITIONS = 100
CHUNK = 2_000
SPEC = {
    "schedule": {"kind": "manual"},
    "phases": [{"key": "p", "label": "P", "steps": [{"action": "core.wait", "params": {}}]}],
}


async def seed(db: AsyncEngine, runs: int) -> None:
    """``runs`` completed runs spread over 100 definitions, oldest first."""
    async with db.begin() as conn:
        for d in range(1, DEFINITIONS + 1):
            await conn.execute(
                insert(event_definitions).values(
                    id=d,
                    title=f"d{d}",
                    slug=f"d{d}",
                    spec=SPEC,
                    state="ready",
                    current_version_id=d,
                    created_at=NOW,
                    updated_at=NOW,
                )
            )
            await conn.execute(
                insert(event_versions).values(
                    id=d, definition_id=d, number=1, spec=SPEC, timezone="UTC", published_at=NOW
                )
            )
    run_id = step_id = 0
    for start in range(0, runs, CHUNK):
        run_rows, step_rows, log_rows = [], [], []
        for i in range(start, min(start + CHUNK, runs)):
            run_id += 1
            when = NOW - timedelta(days=30) + timedelta(seconds=20 * i)
            ended = when + timedelta(minutes=5)
            run_rows.append(
                {
                    "id": run_id,
                    "definition_id": i % DEFINITIONS + 1,
                    "version_id": i % DEFINITIONS + 1,
                    "scope": "",
                    "scheduled_for": when,
                    "source": "schedule",
                    "status": "completed",
                    "current_phase": "p",
                    "created_at": when,
                    "started_at": when,
                    "ended_at": ended,
                }
            )
            for seq in range(2):
                step_id += 1
                step_rows.append(
                    {
                        "id": step_id,
                        "run_id": run_id,
                        "phase": "p",
                        "seq": seq,
                        "label": "Wait",
                        "action": "core.wait",
                        "action_version": 1,
                        "params": {"seconds": 0},
                        "on_failure": "skip",
                        "status": "done",
                        "attempts": 1,
                        "claimed_by": "bench",
                        "idempotency_key": uuid.uuid4().hex,
                        "started_at": when,
                        "finished_at": when,
                    }
                )
            for kind in ("run.created", "run.status", "step.status", "run.status"):
                log_rows.append({"run_id": run_id, "kind": kind, "detail": {}, "at": when})
        async with db.begin() as conn:
            await conn.execute(insert(event_runs), run_rows)
            await conn.execute(insert(event_run_steps), step_rows)
            await conn.execute(insert(event_run_log), log_rows)


async def measure(mysql_url: str | None, runs: int, ticks: int) -> dict[str, Any]:
    dialect = "mariadb" if mysql_url else "sqlite"
    async with scratch_database(mysql_url) as db:
        began = time.perf_counter()
        if runs:
            await seed(db, runs)
        seeded = time.perf_counter() - began
        statements = []
        event.listen(db.sync_engine, "before_cursor_execute", lambda *a: statements.append(1))
        host = Host(Settings(), discover=False, clock=FakeClock(NOW), db=db)
        async with Engine(host) as engine:
            t0 = time.perf_counter()
            await engine.tick()  # the first tick also runs the (six-hourly) log prune
            first = time.perf_counter() - t0
            tick_times, sleep_times = [], []
            statements.clear()
            for _ in range(ticks):
                t0 = time.perf_counter()
                await engine.tick()
                tick_times.append(time.perf_counter() - t0)
            per_tick = len(statements) / ticks
            for _ in range(ticks):
                t0 = time.perf_counter()
                await engine.next_sleep()
                sleep_times.append(time.perf_counter() - t0)
    result = {
        "dialect": dialect,
        "runs": runs,
        "seed_s": seeded,
        "first_tick_ms": first * 1000,
        "tick_ms": statistics.median(tick_times) * 1000,
        "next_sleep_ms": statistics.median(sleep_times) * 1000,
        "statements": per_tick,
    }
    print(
        f"[{dialect}] {runs:>7} finished runs: idle tick {result['tick_ms']:.2f} ms "
        f"(median of {ticks}, {per_tick:.0f} statements), next_sleep "
        f"{result['next_sleep_ms']:.2f} ms, first tick with the log prune "
        f"{result['first_tick_ms']:.1f} ms (seeded in {seeded:.0f} s)"
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--ticks", type=int, default=50)
    parser.add_argument("--mysql", help="a MariaDB server URL (a scratch database is made)")
    args = parser.parse_args()
    for url in [None] + ([args.mysql] if args.mysql else []):
        asyncio.run(measure(url, 0, args.ticks))
        asyncio.run(measure(url, args.runs, args.ticks))


if __name__ == "__main__":
    main()
