"""Both MariaDB drivers pageant accepts carry a run end to end: asyncmy (the one to name)
and aiomysql (for URLs written before asyncmy was the default)."""

from __future__ import annotations

import asyncio
import logging
import os

import pytest
from sqlalchemy.engine import make_url

from pageant.db.engine import create_engine, ping_when_rested
from pageant.db.errors import OperationalError
from pageant.db.migrate import upgrade
from pageant.engine import Engine
from pageant.runs.create import start_now
from tests.conftest import MYSQL_ENV
from tests.databases import MARIADB_ONLY, empty_database
from tests.factories import Probe, make_host, phase, probe_step, publish_event, run_row, spec


@MARIADB_ONLY
@pytest.mark.parametrize("driver", ["asyncmy", "aiomysql"])
async def test_a_run_completes_through_either_mariadb_driver(db_url, db, settings, clock, driver):
    url = make_url(db_url).set(drivername=f"mysql+{driver}")
    through = create_engine(url.render_as_string(hide_password=False))
    probe = Probe()
    host = make_host(settings, through, clock, [probe])
    engine = Engine(host)
    try:
        event = await publish_event(through, clock.now(), spec(phase("p", *map(probe_step, "ab"))))
        run_id, _ = await start_now(host, event.id, scope="", actor="admin:test")
        await engine.tick()
        assert probe.names() == ["a", "b"]
        assert (await run_row(db, run_id)).status == "completed"
        assert through.sync_engine.dialect.driver == driver
    finally:
        await engine.stop()
        await host.close()
        await through.dispose()


@pytest.mark.skipif(
    not os.environ.get(MYSQL_ENV), reason=f"needs MariaDB ({MYSQL_ENV}); CI sets it"
)
def test_migrating_through_asyncmy_logs_no_warning_an_operator_cannot_act_on(tmp_path, caplog):
    with empty_database("mariadb", tmp_path) as url:

        async def migrate() -> None:
            engine = create_engine(
                make_url(url).set(drivername="mysql+asyncmy").render_as_string(hide_password=False)
            )
            try:
                await upgrade(engine)
            finally:
                await engine.dispose()

        with caplog.at_level(logging.INFO):
            asyncio.run(migrate())
    # MariaDB notes each named primary key it ignores; asyncmy would log each at WARNING.
    assert [r.getMessage() for r in caplog.records if r.name.startswith("asyncmy")] == []


async def _server_killed(db, connection_id: int) -> None:
    async with db.connect() as other:
        await other.exec_driver_sql(f"KILL CONNECTION {connection_id}")


async def _connection_id(conn) -> int:
    return int((await conn.exec_driver_sql("SELECT CONNECTION_ID()")).scalar())


@MARIADB_ONLY
async def test_a_rested_connection_the_server_closed_is_replaced_before_use(db_url, db):
    # The server ends the pooled connection while it rests (a restart, its wait_timeout):
    # the next checkout pings it, finds it gone, and hands out a new one instead.
    engine = create_engine(db_url, pool_size=1, max_overflow=0)
    ping_when_rested(engine, rest_seconds=0.0)
    try:
        async with engine.connect() as conn:
            first = await _connection_id(conn)
            await conn.rollback()
        await _server_killed(db, first)
        async with engine.connect() as conn:
            second = await _connection_id(conn)
        assert second != first
    finally:
        await engine.dispose()


@MARIADB_ONLY
async def test_a_connection_handed_straight_on_is_not_pinged(db_url, db):
    # Under load a connection goes back and out again within moments: no ping round trip.
    # (The proof is the other half: the closed connection is handed out unchecked and fails.)
    engine = create_engine(db_url, pool_size=1, max_overflow=0)
    try:
        async with engine.connect() as conn:
            first = await _connection_id(conn)
            await conn.rollback()
        await _server_killed(db, first)
        with pytest.raises(OperationalError):
            async with engine.connect() as conn:
                await _connection_id(conn)
    finally:
        await engine.dispose()
