"""What ``GET /api/v1/admin/runs`` costs beside 100,000 finished runs.

Seeds N finished runs (as ``idle_tick.py`` does) and 200 live ones (each at a parked step),
then times the route through the real app — the first page unfiltered, and filtered by
``waiting``, ``status``, ``health`` and ``definition`` — and reports the median of each.

    python benchmarks/admin_runs.py [--runs 100000] [--mysql mysql+aiomysql://root@127.0.0.1:3306/test]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from benchdb import scratch_database
from idle_tick import DEFINITIONS, NOW, seed
from sqlalchemy import func, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from pageant.access.tokens import create_token
from pageant.api.app import make_app
from pageant.db.tables import event_run_steps, event_runs
from pageant.hosting import Host
from pageant.support.clock import FakeClock
from pageant.support.settings import Settings

LIVE = 200
QUERIES = (
    "",
    "?waiting=parked",
    "?status=running",
    "?health=stalled",
    "?definition=7",
    "?status=completed&definition=7",
)


async def seed_live(db: AsyncEngine) -> None:
    """``LIVE`` running runs, each waiting for a person at a parked step."""
    async with db.connect() as conn:
        top = (await conn.execute(select(func.max(event_runs.c.id)))).scalar() or 0
        top_step = (await conn.execute(select(func.max(event_run_steps.c.id)))).scalar() or 0
    runs, steps = [], []
    for i in range(LIVE):
        run_id, step_id = top + i + 1, top_step + i + 1
        runs.append(
            {
                "id": run_id,
                "definition_id": i % DEFINITIONS + 1,
                "version_id": i % DEFINITIONS + 1,
                "scope": f"live{i}",
                "scheduled_for": NOW,
                "source": "manual",
                "status": "running",
                "current_phase": "p",
                "waiting_reason": "parked",
                "waiting_since": NOW,
                "created_at": NOW,
                "started_at": NOW,
            }
        )
        steps.append(
            {
                "id": step_id,
                "run_id": run_id,
                "phase": "p",
                "seq": 0,
                "label": "Cue",
                "action": "core.cue",
                "action_version": 1,
                "params": {"message": "go"},
                "on_failure": "pause",
                "status": "running",
                "attempts": 1,
                "claimed_by": "bench",
                "idempotency_key": uuid.uuid4().hex,
                "started_at": NOW,
            }
        )
    async with db.begin() as conn:
        await conn.execute(insert(event_runs), runs)
        await conn.execute(insert(event_run_steps), steps)


async def measure(mysql_url: str | None, runs: int, repeats: int) -> dict[str, Any]:
    dialect = "mariadb" if mysql_url else "sqlite"
    async with scratch_database(mysql_url) as db:
        if runs:
            await seed(db, runs)
        await seed_live(db)
        token = await create_token(db, role="moderator", name="bench", now=NOW)
        host = Host(Settings(), discover=False, clock=FakeClock(NOW), db=db)
        client = TestClient(TestServer(make_app(host, run_engine=False)))
        await client.start_server()
        found: dict[str, float] = {}
        try:
            headers = {"Authorization": f"Bearer {token}"}
            for query in QUERIES:
                times = []
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    response = await client.get(f"/api/v1/admin/runs{query}", headers=headers)
                    body = await response.json()
                    times.append(time.perf_counter() - t0)
                    assert response.status == 200, body
                found[query or "(no filter)"] = statistics.median(times) * 1000
                print(
                    f"[{dialect}] {runs:>7} finished + {LIVE} live runs: "
                    f"GET /admin/runs{query or ''} p50 {found[query or '(no filter)']:.1f} ms "
                    f"({len(body['items'])} items, median of {repeats})"
                )
        finally:
            await client.close()
    return {"dialect": dialect, "runs": runs, "p50_ms": found}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--mysql", help="a MariaDB server URL (a scratch database is made)")
    args = parser.parse_args()
    for url in [None] + ([args.mysql] if args.mysql else []):
        asyncio.run(measure(url, args.runs, args.repeats))


if __name__ == "__main__":
    main()
