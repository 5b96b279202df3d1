"""How many SQL statements (and transactions) the engine spends per dispatched step.

Runs one event of N steps, then one of 2N, each in a single tick, counting every statement
the driver executes (a ``before_cursor_execute`` listener) and every commit; the difference
divided by N is the per-step cost, free of the per-run and per-tick overhead.

Then a sequence: one run of 500 no-op steps in five phases of 100 (the ``1x500`` case of
``throughput.py``), ticked until it ends; its statements and commits divided by its steps are
what a step of a sequence costs, its phase entries included: with the default settings (a
dispatch slot is free, so the run's pass goes on past ``steps_per_run_per_tick``), with one
dispatch slot (every slot taken: a pass ends at the bound, and the next tick claims the run
again) and with a bound of 1,000 and one slot.

    python benchmarks/step_statements.py [--mysql mysql+aiomysql://root@127.0.0.1:3306/test]
"""

from __future__ import annotations

import argparse
import asyncio
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from benchdb import scratch_database
from sqlalchemy import event, insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from pageant.db.tables import (
    TERMINAL_RUN_STATUSES,
    event_definitions,
    event_runs,
    event_versions,
)
from pageant.engine import Engine
from pageant.hosting import Host
from pageant.runs.create import start_now
from pageant.support.clock import FakeClock
from pageant.support.settings import Settings
from pageant.switchboard import board

STEPS = {
    "core.wait 0 (no host write)": {"action": "core.wait", "params": {"seconds": 0}},
    "core.announce to core.log": {
        "action": "core.announce",
        "params": {"leg": "core.log", "message": "hello"},
    },
    # A step that pays: one capped dimension (the example plugin, enabled with a cap).
    "wisps.summon, one capped dimension": {
        "action": "wisps.summon",
        "params": {"colour": "north", "count": 1},
    },
}


class Meter:
    """Counts statements by their first word, and commits."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.statements: Counter[str] = Counter()
        self.commits = 0
        event.listen(engine.sync_engine, "before_cursor_execute", self._statement)
        event.listen(engine.sync_engine, "commit", self._commit)

    def _statement(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        self.statements[statement.split(None, 1)[0].upper()] += 1

    def _commit(self, conn: Any) -> None:
        self.commits += 1

    def snapshot(self) -> tuple[Counter[str], int]:
        return Counter(self.statements), self.commits


async def _publish(
    db: AsyncEngine, now: datetime, steps: list[dict], n: int, *, phases: list[dict] | None = None
) -> int:
    if phases is None:
        phases = [{"key": "p", "label": "P", "steps": steps}]
    spec = {"schedule": {"kind": "manual"}, "phases": phases}
    async with db.begin() as conn:
        definition_id = (
            await conn.execute(
                insert(event_definitions).values(
                    title=f"bench {n}",
                    slug=f"bench-{n}",
                    spec=spec,
                    state="ready",
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
                )
            )
        ).inserted_primary_key[0]
        await conn.execute(
            update(event_definitions)
            .where(event_definitions.c.id == definition_id)
            .values(current_version_id=version_id)
        )
    return definition_id


async def measure(mysql_url: str | None, n: int) -> None:
    dialect = "mariadb" if mysql_url else "sqlite"
    async with scratch_database(mysql_url) as db:
        clock = FakeClock(datetime(2027, 3, 1, 12, 0, tzinfo=UTC))
        settings = Settings(steps_per_run_per_tick=10 * n)
        host = Host(settings, clock=clock, db=db)
        async with db.begin() as conn:
            await board.set_action(
                conn,
                host.registry,
                "wisps.summon",
                enabled=True,
                caps={"wisps.wisps": 1_000_000},
                actor="bench",
                now=clock.now(),
            )
        meter = Meter(db)
        async with Engine(host) as engine:
            serial = 0
            for label, step in STEPS.items():
                per_size = {}
                for size in (n, 2 * n):
                    serial += 1
                    definition_id = await _publish(db, clock.now(), [step] * size, serial)
                    await start_now(host, definition_id, scope="", actor="bench")
                    clock.advance(1)
                    before, commits_before = meter.snapshot()
                    await engine.tick()
                    after, commits_after = meter.snapshot()
                    per_size[size] = (after - before, commits_after - commits_before)
                (small, small_tx), (large, large_tx) = per_size[n], per_size[2 * n]
                per_step = {k: (large[k] - small[k]) / n for k in large if large[k] != small[k]}
                total = sum(large.values()) - sum(small.values())
                print(
                    f"[{dialect}] {label}: {total / n:.2f} statements per step "
                    f"({', '.join(f'{k} {v:g}' for k, v in sorted(per_step.items()))}); "
                    f"{(large_tx - small_tx) / n:.2f} commits per step"
                )
                print(
                    f"[{dialect}]   a whole {n}-step run in one tick: "
                    f"{sum(small.values())} statements, {small_tx} commits"
                )


async def sequence(
    mysql_url: str | None, steps: int = 500, per_phase: int = 100, **tuned: int
) -> None:
    """One run of ``steps`` announces in phases of ``per_phase``, ticked until it ends: its
    statements and commits a step. ``tuned``: settings other than the defaults."""
    dialect = "mariadb" if mysql_url else "sqlite"
    announce = STEPS["core.announce to core.log"]
    phases = [
        {"key": f"p{p}", "label": f"P{p}", "steps": [announce] * min(per_phase, steps - start)}
        for p, start in enumerate(range(0, steps, per_phase))
    ]
    async with scratch_database(mysql_url) as db:
        clock = FakeClock(datetime(2027, 3, 1, 12, 0, tzinfo=UTC))
        settings = Settings(**tuned)
        host = Host(settings, clock=clock, db=db)
        definition_id = await _publish(db, clock.now(), [], 0, phases=phases)
        meter = Meter(db)
        async with Engine(host) as engine:
            await start_now(host, definition_id, scope="", actor="bench")
            ticks = 0
            while not await _ended(db):
                ticks += 1
                clock.advance(1)
                await engine.tick()
        statements, commits = meter.snapshot()
        total = sum(statements.values())
        print(
            f"[{dialect}] a sequence of {steps} steps in phases of {per_phase}, "
            f"{settings.steps_per_run_per_tick} a pass, "
            f"{settings.dispatch_concurrency} dispatch slots, {ticks} ticks: "
            f"{total / steps:.2f} statements per step "
            f"({', '.join(f'{k} {v / steps:.2f}' for k, v in sorted(statements.items()))}); "
            f"{commits / steps:.3f} commits per step"
        )


async def _ended(db: AsyncEngine) -> bool:
    async with db.connect() as conn:
        status = (await conn.execute(select(event_runs.c.status))).scalar_one()
    return status in TERMINAL_RUN_STATUSES


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mysql", help="a MariaDB server URL (a scratch database is made)")
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(measure(None, args.steps))
    for url in [None, args.mysql] if args.mysql else [None]:
        if url is not None:
            asyncio.run(measure(url, args.steps))
        asyncio.run(sequence(url))
        asyncio.run(sequence(url, dispatch_concurrency=1))
        asyncio.run(sequence(url, dispatch_concurrency=1, steps_per_run_per_tick=1_000))


if __name__ == "__main__":
    main()
