"""Both MariaDB drivers pageant accepts carry a run end to end: asyncmy (the one to name)
and aiomysql (for URLs written before asyncmy was the default)."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import make_url

from pageant.db.engine import create_engine
from pageant.engine import Engine
from pageant.runs.create import start_now
from tests.databases import MARIADB_ONLY
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
