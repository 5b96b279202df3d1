"""What the statement layer costs a statement: SQLAlchemy Core against the driver itself.

The engine reaches both databases through SQLAlchemy's async engine: a statement is compiled
(once, then cached), its parameters are processed by each column's type, it crosses into a
greenlet and back, and its rows are processed on the way out. This measures that layer's
share of one statement's CPU, on the connection the engine itself uses, for the two kinds a
step of a sequence is made of: a compare-and-set ``UPDATE`` (a claim or a finish) and a read
of one row by its key (a run's cursor). Each is run ``--count`` times in one transaction,
once through ``AsyncConnection.execute`` and once through the driver's own connection
(pageant's one-turn SQLite cursor; asyncmy's cursor), in rounds that alternate; the figure is
the process's CPU (its own threads included: SQLite's runs beside the loop) a statement,
the median of ``--rounds``.

    python benchmarks/statement_layer.py [--mysql mysql+asyncmy://root@127.0.0.1:3306/test]

What it is for: the ceiling a driver-direct hot path could reach. A step of a sequence
spends about four statements; the layer's share of each, times four, is what such a path
would take off a step's CPU (docs/performance.md, "What is left of issue 32").
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from benchdb import scratch_database
from sqlalchemy import Column, Integer, MetaData, String, Table, bindparam, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db.types import BigId, UTCDateTime

_probe = Table(
    "statement_layer_probe",
    MetaData(),
    Column("id", BigId, primary_key=True),
    Column("status", String(16), nullable=False),
    Column("claimed_by", String(64)),
    Column("lease_until", UTCDateTime()),
    Column("attempts", Integer, nullable=False),
)

_CLAIM = (
    update(_probe)
    .where(_probe.c.id == bindparam("key"), _probe.c.status == bindparam("was"))
    .values(
        status=bindparam("to"),
        claimed_by=bindparam("by"),
        lease_until=bindparam("until"),
        attempts=_probe.c.attempts + 1,
    )
)
_READ = select(
    _probe.c.id, _probe.c.status, _probe.c.claimed_by, _probe.c.lease_until, _probe.c.attempts
).where(_probe.c.id == bindparam("key"))

_CLAIM_SQL = (
    "UPDATE statement_layer_probe SET status={p}, claimed_by={p}, lease_until={p}, "
    "attempts=attempts + 1 WHERE id={p} AND status={p}"
)
_READ_SQL = (
    "SELECT id, status, claimed_by, lease_until, attempts FROM statement_layer_probe WHERE id={p}"
)

#: One way of running ``count`` statements of a kind on a connection.
Way = Callable[[AsyncConnection, int], Awaitable[None]]


def _flip(i: int) -> tuple[str, str]:
    """The status a claim moves from and to on its ``i``-th turn (so each one changes a row)."""
    return ("ready", "running") if i % 2 == 0 else ("running", "ready")


async def _claims_sqlalchemy(conn: AsyncConnection, count: int) -> None:
    until = datetime.now(UTC) + timedelta(seconds=30)
    for i in range(count):
        was, to = _flip(i)
        params = {"key": 1, "was": was, "to": to, "by": "bench", "until": until}
        if (await conn.execute(_CLAIM, params)).rowcount != 1:
            raise RuntimeError("a claim changed no row")


async def _reads_sqlalchemy(conn: AsyncConnection, count: int) -> None:
    for _ in range(count):
        if (await conn.execute(_READ, {"key": 1})).first() is None:
            raise RuntimeError("the row is gone")


def _driver(conn: AsyncConnection) -> tuple[Any, str]:
    """The driver's own connection under ``conn``, and its parameter marker."""
    driver = conn.sync_connection.connection.driver_connection  # type: ignore[union-attr]  # a connection in use has its DB-API connection
    return driver, "?" if conn.dialect.name == "sqlite" else "%s"


async def _claims_driver(conn: AsyncConnection, count: int) -> None:
    driver, p = _driver(conn)
    sql = _CLAIM_SQL.format(p=p)
    # What the column's type does to an instant on the way in: UTC, without its zone.
    until = (datetime.now(UTC) + timedelta(seconds=30)).replace(tzinfo=None)
    for i in range(count):
        was, to = _flip(i)
        cursor = driver.cursor()
        await cursor.execute(sql, (to, "bench", until, 1, was))
        if cursor.rowcount != 1:
            raise RuntimeError("a claim changed no row")


async def _reads_driver(conn: AsyncConnection, count: int) -> None:
    driver, p = _driver(conn)
    sql = _READ_SQL.format(p=p)
    for _ in range(count):
        cursor = driver.cursor()
        await cursor.execute(sql, (1,))
        rows = await cursor.fetchall()
        if not rows:
            raise RuntimeError("the row is gone")
        lease = rows[0][3]
        # What the column's type does on the way out: text to an instant (SQLite), aware.
        if isinstance(lease, str):
            lease = datetime.fromisoformat(lease)
        if lease is not None:
            lease.replace(tzinfo=UTC)


WAYS: dict[str, dict[str, Way]] = {
    "claim (UPDATE)": {"sqlalchemy": _claims_sqlalchemy, "driver": _claims_driver},
    "read (SELECT by key)": {"sqlalchemy": _reads_sqlalchemy, "driver": _reads_driver},
}


async def measure(mysql_url: str | None, count: int, rounds: int) -> None:
    name = "mariadb" if mysql_url else "sqlite"
    async with scratch_database(mysql_url) as db:
        async with db.begin() as conn:
            await conn.run_sync(_probe.metadata.create_all)
            await conn.execute(_probe.insert().values(id=1, status="ready", attempts=0))
        for kind, ways in WAYS.items():
            per_statement: dict[str, list[float]] = {way: [] for way in ways}
            for _ in range(rounds):
                for way, run in ways.items():
                    async with db.begin() as conn:
                        # The transaction's BEGIN runs with its first statement: not counted.
                        await conn.execute(_READ, {"key": 1})
                        cpu0 = time.process_time()
                        await run(conn, count)
                        per_statement[way].append((time.process_time() - cpu0) / count * 1e6)
            ours, bare = (statistics.median(per_statement[w]) for w in ("sqlalchemy", "driver"))
            print(
                f"[{name}] {kind}: {ours:.0f} us of CPU a statement through SQLAlchemy, "
                f"{bare:.0f} us through the driver; the layer {ours - bare:.0f} us "
                f"({(ours - bare) / ours:.0%}); medians of {rounds} rounds of {count}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mysql", help="a MariaDB server URL (a scratch database is made)")
    parser.add_argument("--count", type=int, default=2000, help="statements a round")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    asyncio.run(measure(None, args.count, args.rounds))
    if args.mysql:
        asyncio.run(measure(args.mysql, args.count, args.rounds))


if __name__ == "__main__":
    main()
