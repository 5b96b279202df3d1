"""What the expand stage costs beside 10,000 ready weekly events.

An event's occurrences are materialised once they enter the horizon; after that the stage must
not look at the event again until its next occurrence does. Seeds N ready weekly definitions
(spread over the week's days and hours, in four zones, never expanded), then measures the
expand stage alone:

(a) the first tick: one batch (``runs_per_tick`` definitions);
    then every batch until nothing is left (the whole first expansion);
(b) an idle tick right after: nothing has entered the horizon;
(c) a tick an hour later: the definitions whose next occurrence entered the horizon in that
    hour (about N / 168 for weekly events), then an idle tick again.

    python benchmarks/idle_expand.py [--definitions 10000] [--batch 50] \\
        [--mysql mysql+aiomysql://root@127.0.0.1:3306/test]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from benchdb import scratch_database
from sqlalchemy import event, func, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from pageant.db.tables import event_definitions, event_runs, event_versions
from pageant.engine.expand import expand
from pageant.hosting import Host
from pageant.support.clock import FakeClock
from pageant.support.settings import Settings

NOW = datetime(2027, 3, 1, 12, 0, tzinfo=UTC)
ZONES = ("Europe/Berlin", "America/New_York", "Asia/Tokyo", "UTC")
DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
CHUNK = 1_000
IDLE_SAMPLES = 20
#: What a pass with nothing to expand sends: the two index reads of the candidates.
IDLE_STATEMENTS = 2


def spec_of(i: int) -> dict[str, Any]:
    # A step of 10,007 minutes (prime to the week's 10,080) spreads the slots evenly.
    day, minute = divmod(i * 10_007 % (7 * 24 * 60), 24 * 60)
    at = f"{minute // 60:02d}:{minute % 60:02d}"
    return {
        "schedule": {"kind": "weekly", "days": [DAYS[day]], "time": at},
        "phases": [
            {
                "key": "main",
                "label": "Main",
                "steps": [
                    {"action": "core.announce", "params": {"leg": "core.log", "message": "hi"}}
                ],
            }
        ],
    }


async def seed(db: AsyncEngine, count: int) -> None:
    """``count`` ready weekly definitions, each with its one published version."""
    for first in range(1, count + 1, CHUNK):
        ids = range(first, min(first + CHUNK, count + 1))
        definitions, versions = [], []
        for i in ids:
            spec, tz = spec_of(i), ZONES[i % len(ZONES)]
            definitions.append(
                {
                    "id": i,
                    "title": f"Event {i}",
                    "slug": f"event-{i}",
                    "timezone": tz,
                    "spec": spec,
                    "state": "ready",
                    "current_version_id": i,
                    "created_at": NOW,
                    "updated_at": NOW,
                }
            )
            versions.append(
                {
                    "id": i,
                    "definition_id": i,
                    "number": 1,
                    "spec": spec,
                    "timezone": tz,
                    "published_at": NOW,
                }
            )
        async with db.begin() as conn:
            await conn.execute(insert(event_definitions), definitions)
            await conn.execute(insert(event_versions), versions)


class Counter:
    """Counts the statements the database is sent (BEGIN/COMMIT excluded)."""

    def __init__(self, db: AsyncEngine) -> None:
        self.count = 0
        event.listen(db.sync_engine, "before_cursor_execute", self._seen)

    def _seen(self, _conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if not statement.lstrip().upper().startswith(("BEGIN", "COMMIT", "ROLLBACK")):
            self.count += 1


async def timed(host: Host, counter: Counter) -> tuple[float, int]:
    counter.count = 0
    began = time.perf_counter()
    await expand(host, host.clock.now())
    return (time.perf_counter() - began) * 1000, counter.count


async def runs_count(db: AsyncEngine) -> int:
    async with db.connect() as conn:
        return (await conn.execute(select(func.count()).select_from(event_runs))).scalar_one()


async def idle(host: Host, counter: Counter) -> tuple[float, float]:
    samples = [await timed(host, counter) for _ in range(IDLE_SAMPLES)]
    return statistics.median(ms for ms, _ in samples), statistics.median(n for _, n in samples)


async def measure(mysql_url: str | None, count: int, batch: int) -> None:
    dialect = "mariadb" if mysql_url else "sqlite"
    async with scratch_database(mysql_url) as db:
        await seed(db, count)
        clock = FakeClock(NOW)
        host = Host(Settings(runs_per_tick=batch), discover=False, clock=clock, db=db)
        counter = Counter(db)

        first_ms, first_n = await timed(host, counter)
        print(
            f"[{dialect}] (a) first tick: {first_ms:.0f} ms, {first_n} statements, "
            f"{await runs_count(db)} runs for {batch} definitions"
        )
        began, batches = time.perf_counter(), 1
        while True:
            ms, n = await timed(host, counter)
            if n <= IDLE_STATEMENTS:  # only the candidate reads: nothing was left
                break
            batches += 1
        whole = time.perf_counter() - began + first_ms / 1000
        print(
            f"[{dialect}]     whole first expansion: {whole:.1f} s in {batches} batches, "
            f"{await runs_count(db)} runs for {count} definitions"
        )

        idle_ms, idle_n = await idle(host, counter)
        print(
            f"[{dialect}] (b) idle tick right after: {idle_ms:.2f} ms, {idle_n:.0f} statement(s) "
            f"(median of {IDLE_SAMPLES})"
        )

        before = await runs_count(db)
        clock.advance(timedelta(hours=1).total_seconds())
        hour_ms, hour_n = await timed(host, counter)
        print(
            f"[{dialect}] (c) a tick an hour later: {hour_ms:.0f} ms, {hour_n} statements, "
            f"{await runs_count(db) - before} new runs"
        )
        rest_ms = rest_n = 0.0
        while True:
            ms, n = await timed(host, counter)
            if n <= IDLE_STATEMENTS:
                break
            rest_ms, rest_n = rest_ms + ms, rest_n + n
        print(
            f"[{dialect}]     the rest of that hour's batches: {rest_ms:.0f} ms, "
            f"{rest_n:.0f} statements; {await runs_count(db) - before} new runs in all"
        )
        idle_ms, idle_n = await idle(host, counter)
        print(f"[{dialect}]     and idle again: {idle_ms:.2f} ms, {idle_n:.0f} statement(s)")
        await host.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--definitions", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=Settings().runs_per_tick)
    parser.add_argument("--mysql", help="a MariaDB server URL (a scratch database is made)")
    args = parser.parse_args()
    for url in [None] + ([args.mysql] if args.mysql else []):
        asyncio.run(measure(url, args.definitions, args.batch))


if __name__ == "__main__":
    main()
