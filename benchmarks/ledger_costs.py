"""What the resource ledger costs: statements per world-changing step, and the cleanup
stage's idle cost beside 100,000 ended runs.

(a) A plugin action that reports one resource, run once as ``notify`` (nothing recorded) and
    once as ``change`` (placeholder, confirm, revert): N steps and then 2N in one run, each
    in one tick, counting every statement by its first word; the difference divided by N
    is the per-step cost, split into what the dispatch adds and what the cleanup spends.
(b) The cleanup stage alone, with nothing to give back, in an empty database and beside
    N ended runs that each gave back one resource (a ``reverted`` row): its time and its
    statements must not grow with the history.

    python benchmarks/ledger_costs.py [--steps 20] [--runs 100000] \\
        [--mysql mysql+aiomysql://root@127.0.0.1:3306/test]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from benchdb import scratch_database
from idle_tick import NOW, seed
from sqlalchemy import event, insert, select
from step_statements import Meter, _publish

from pageant import hookimpl
from pageant.db.tables import event_run_resources, event_runs
from pageant.engine import Engine
from pageant.engine.tick import STAGES
from pageant.hosting import Host
from pageant.ledger.cleanup import cleanup
from pageant.plugins.loader import candidate_for
from pageant.runs.create import start_now
from pageant.support.clock import FakeClock
from pageant.support.settings import Settings
from pageant.switchboard import board

CHUNK = 2_000


class Bench:
    """A plugin whose two actions make one thing each and can take it back."""

    PLUGIN_INFO = {"owner": "bench", "contract": "^1.0"}  # noqa: RUF012 - read by the loader

    def __init__(self) -> None:
        self.made = 0

    async def make(self, ctx: Any) -> Any:
        self.made += 1
        return {"ok": True, "resources": [{"kind": "thing", "ref": f"t{self.made}"}]}

    async def unmake(self, ctx: Any) -> Any:
        return {"ok": True}

    @hookimpl
    def pageant_actions(self) -> list[dict[str, Any]]:
        base = {"budget_ms": 5_000, "params": [], "perform": self.make}
        return [
            {"id": "bench.note", "label": "Note", "risk": "notify", **base},
            {
                "id": "bench.make",
                "label": "Make",
                "risk": "change",
                "reversible": "full",
                "revert": self.unmake,
                **base,
            },
        ]


def _host(db: Any, clock: FakeClock, n: int) -> Host:
    settings = Settings(steps_per_run_per_tick=10 * n)
    plugins = [candidate_for(Bench(), "bench")]
    return Host(settings, plugins=plugins, discover=False, clock=clock, db=db)


async def per_step(mysql_url: str | None, n: int) -> None:
    dialect = "mariadb" if mysql_url else "sqlite"
    async with scratch_database(mysql_url) as db:
        clock = FakeClock(datetime(2027, 3, 1, 12, 0, tzinfo=UTC))
        host = _host(db, clock, n)
        async with db.begin() as conn:
            await board.set_action(
                conn, host.registry, "bench.make", enabled=True, actor="bench", now=clock.now()
            )
        meter = Meter(db)
        serial = 0
        costs: dict[tuple[str, str], dict[int, Counter[str]]] = {}
        before_cleanup = STAGES[: STAGES.index(cleanup)]
        async with Engine(host) as engine:
            for action in ("bench.note", "bench.make"):
                for size in (n, 2 * n):
                    serial += 1
                    steps = [{"action": action, "params": {}}] * size
                    definition_id = await _publish(db, clock.now(), steps, serial)
                    await start_now(host, definition_id, scope="", actor="bench")
                    clock.advance(1)
                    now = clock.now()
                    start, _ = meter.snapshot()
                    for stage in before_cleanup:
                        await stage(host, now)
                    await engine.drain()
                    dispatched, _ = meter.snapshot()
                    await cleanup(host, now)
                    cleaned, _ = meter.snapshot()
                    costs.setdefault((action, "dispatch"), {})[size] = dispatched - start
                    costs.setdefault((action, "cleanup"), {})[size] = cleaned - dispatched
        per = {}
        for (action, part), sizes in costs.items():
            diff = sizes[2 * n] - sizes[n]
            per[action, part] = {k: v / n for k, v in diff.items()}
            print(
                f"[{dialect}] {action} {part}: {sum(diff.values()) / n:.2f} statements per step "
                f"({', '.join(f'{k} {v:g}' for k, v in sorted(per[action, part].items()))})"
            )
        for part in ("dispatch", "cleanup"):
            make, note = per["bench.make", part], per["bench.note", part]
            added = {k: make.get(k, 0) - note.get(k, 0) for k in set(make) | set(note)}
            print(
                f"[{dialect}] the ledger adds {sum(added.values()):.2f} statements per "
                f"world-changing step at {part} "
                f"({', '.join(f'{k} {v:+g}' for k, v in sorted(added.items()) if v)})"
            )


async def seed_reverted(db: Any) -> None:
    """One ``reverted`` resource row for every ended run (what a cleaned-up history holds)."""
    async with db.connect() as conn:
        ids = list((await conn.execute(select(event_runs.c.id))).scalars())
    for start in range(0, len(ids), CHUNK):
        rows = [
            {
                "run_id": run_id,
                "owner": "bench",
                "kind": "thing",
                "ref": f"t{run_id}",
                "status": "reverted",
                "payload": {"action": "bench.make"},
                "revert_attempts": 1,
                "created_at": NOW,
                "updated_at": NOW,
            }
            for run_id in ids[start : start + CHUNK]
        ]
        async with db.begin() as conn:
            await conn.execute(insert(event_run_resources), rows)


async def idle(mysql_url: str | None, runs: int, samples: int) -> None:
    dialect = "mariadb" if mysql_url else "sqlite"
    async with scratch_database(mysql_url) as db:
        if runs:
            await seed(db, runs)
            await seed_reverted(db)
        statements: list[str] = []
        event.listen(
            db.sync_engine, "before_cursor_execute", lambda c, cur, s, *a: statements.append(s)
        )
        host = Host(Settings(), discover=False, clock=FakeClock(NOW), db=db)
        await cleanup(host, NOW)  # warm the pool and the statement cache
        statements.clear()
        times = []
        for _ in range(samples):
            t0 = time.perf_counter()
            await cleanup(host, NOW)
            times.append(time.perf_counter() - t0)
        print(
            f"[{dialect}] cleanup stage, nothing to give back, beside {runs:>7} ended runs: "
            f"{statistics.median(times) * 1000:.2f} ms (median of {samples}), "
            f"{len(statements) / samples:.0f} statement(s)"
        )
        await host.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--mysql", help="a MariaDB server URL (a scratch database is made)")
    args = parser.parse_args()
    for url in [None] + ([args.mysql] if args.mysql else []):
        asyncio.run(per_step(url, args.steps))
        asyncio.run(idle(url, 0, args.samples))
        asyncio.run(idle(url, args.runs, args.samples))


if __name__ == "__main__":
    main()
