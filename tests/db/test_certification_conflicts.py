"""A lost race on the database - an InnoDB deadlock on one server, a certification conflict on
a Galera cluster - is retried by the engine up to its bound, counted in
``pageant_deadlocks_retried``, and logged at DEBUG, never at ERROR.

Both are induced for real here, against pageant's own database engine: a deadlock between two
transactions on MariaDB, and two nodes of a private Galera cluster committing the same row at
once (the node that loses answers 1213 at COMMIT: Galera reports a certification conflict as
a deadlock). A Galera node that may not be used yet (1047) is an outage, not a race.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pymysql
import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from pageant.db.engine import create_engine
from pageant.db.errors import is_retryable_conflict, is_unavailable
from pageant.engine.contention import retrying
from pageant.support.metrics import Metrics
from tests.conftest import MYSQL_ENV
from tests.databases import empty_database
from tests.galera import Cluster, require

SCRATCH = "certification_probe"


def counted(host: Any, where: str) -> float:
    return host.metrics.deadlocks_retried.labels(where=where)._value.get()


def test_a_galera_node_not_yet_usable_is_an_outage_not_a_race() -> None:
    not_ready = OperationalError(
        "SELECT 1",
        {},
        pymysql.err.OperationalError(1047, "WSREP has not yet prepared node for application use"),
    )
    assert is_unavailable(not_ready)
    assert not is_retryable_conflict(not_ready)


async def _make_scratch(engine: Any, rows: int) -> None:
    async with engine.begin() as conn:
        await conn.execute(text(f"DROP TABLE IF EXISTS {SCRATCH}"))
        await conn.execute(text(f"CREATE TABLE {SCRATCH} (id INT PRIMARY KEY, v INT NOT NULL)"))
        for i in range(1, rows + 1):
            await conn.execute(text(f"INSERT INTO {SCRATCH} VALUES ({i}, 0)"))


async def _value(engine: Any, row: int) -> int:
    async with engine.connect() as conn:
        found = await conn.execute(text(f"SELECT v FROM {SCRATCH} WHERE id = {row}"))
        return int(found.scalar_one())


def test_a_real_deadlock_on_mariadb_is_retried_counted_and_quiet(tmp_path, caplog) -> None:
    if not os.environ.get(MYSQL_ENV):
        pytest.skip(f"needs MariaDB ({MYSQL_ENV}); CI always sets it")
    host = SimpleNamespace(metrics=Metrics())
    where = "the deadlock probe"

    async def go(url: str) -> tuple[int, list[BaseException]]:
        db = create_engine(url)
        try:
            await _make_scratch(db, rows=20)
            attempts: list[int] = []
            met: list[BaseException] = []
            async with db.connect() as side:
                # The other writer holds rows 2..20: the heavier transaction, so InnoDB
                # makes the probe's the victim when they meet.
                await side.execute(text(f"UPDATE {SCRATCH} SET v = v + 1 WHERE id >= 2"))

                async def side_takes_row_1() -> None:
                    await side.execute(text(f"UPDATE {SCRATCH} SET v = v + 1 WHERE id = 1"))
                    await side.commit()

                waiting: list[asyncio.Task[None]] = []

                async def work() -> str:
                    attempts.append(1)
                    try:
                        async with db.begin() as conn:
                            await conn.execute(
                                text(f"UPDATE {SCRATCH} SET v = v + 10 WHERE id = 1")
                            )
                            if len(attempts) == 1:
                                waiting.append(asyncio.create_task(side_takes_row_1()))
                                await asyncio.sleep(0.3)  # the side now waits on row 1
                                await conn.execute(
                                    text(f"UPDATE {SCRATCH} SET v = v + 10 WHERE id = 2")
                                )
                    except Exception as exc:
                        met.append(exc)
                        raise
                    return "done"

                with caplog.at_level(logging.DEBUG, logger="pageant.engine"):
                    assert await retrying(host, where, work) == "done"  # type: ignore[arg-type]  # retrying uses only the metrics
                await asyncio.gather(*waiting)
            return len(attempts), met
        finally:
            async with db.begin() as conn:
                await conn.execute(text(f"DROP TABLE IF EXISTS {SCRATCH}"))
            await db.dispose()

    with empty_database("mariadb", tmp_path) as url:
        attempts, met = asyncio.run(go(url))
    assert attempts == 2
    assert [getattr(getattr(e, "orig", None), "args", (None,))[0] for e in met] == [1213]
    assert counted(host, where) == 1
    assert {r.levelno for r in caplog.records if r.name == "pageant.engine"} == {logging.DEBUG}


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Cluster]:
    require()
    formed = Cluster(tmp_path / "galera", size=2)
    try:
        formed.start()
        yield formed
    finally:
        formed.close()


def test_a_certification_conflict_is_retried_counted_and_quiet(pair, caplog) -> None:
    host = SimpleNamespace(metrics=Metrics())
    where = "the certification probe"
    made = pair.nodes[0].sql_text(
        "CREATE DATABASE pageant CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
    )
    assert made.returncode == 0, made.stderr

    async def go() -> tuple[int, list[BaseException], int]:
        here = create_engine(pair.nodes[0].url("pageant"))
        there = create_engine(pair.nodes[1].url("pageant"))
        try:
            await _make_scratch(here, rows=1)
            attempts: list[int] = []
            met: list[BaseException] = []
            async with there.connect() as other:
                # A write to the same row on the other node, not yet committed: no lock
                # waits between nodes, so both transactions go ahead until one commits.
                await other.execute(text(f"UPDATE {SCRATCH} SET v = v + 1 WHERE id = 1"))

                async def work() -> str:
                    attempts.append(1)
                    try:
                        async with here.begin() as conn:
                            await conn.execute(
                                text(f"UPDATE {SCRATCH} SET v = v + 10 WHERE id = 1")
                            )
                            if len(attempts) == 1:
                                await other.commit()  # the other node's write wins the race
                    except Exception as exc:
                        met.append(exc)
                        raise
                    return "done"

                with caplog.at_level(logging.DEBUG, logger="pageant.engine"):
                    assert await retrying(host, where, work) == "done"  # type: ignore[arg-type]  # retrying uses only the metrics
            return len(attempts), met, await _value(here, 1)
        finally:
            await here.dispose()
            await there.dispose()

    attempts, met, value = asyncio.run(go())
    assert attempts == 2
    assert len(met) == 1 and is_retryable_conflict(met[0]), met
    assert met[0].orig.args[0] == 1213  # type: ignore[attr-defined]  # a DBAPIError, checked above
    assert value == 11, "the other node's write and the retried one, each once"
    assert counted(host, where) == 1
    assert {r.levelno for r in caplog.records if r.name == "pageant.engine"} == {logging.DEBUG}
