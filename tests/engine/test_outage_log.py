"""A database outage the operator can see in the log: one WARNING when the engine cannot
reach the database ("database unreachable since 12:00:00; runs wait, nothing is lost"), one
INFO when it is back ("database back after 20 s; 1 run resumed"), never a line a tick, and
the outage's length in the metrics - for a database that refuses and for one that accepts and
never answers (a paused server), which raises nothing for a minute.

The database is the real one, made unreachable in-process: every statement either fails as a
refused connection does, or waits until the test lets it go.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.exc import OperationalError
from sqlalchemy.util import await_only

from pageant.engine import loop as engine_loop
from tests.factories import phase, probe_step, spec, start_event
from tests.project.test_observability import sample


class Unreachable:
    """Makes ``db``'s statements fail (``refuse``) or wait (``pause``) until ``open``."""

    def __init__(self, db: Any) -> None:
        self.db = db
        self.mode = "open"
        self.flowing = asyncio.Event()
        self.flowing.set()
        event.listen(db.sync_engine, "before_cursor_execute", self._before)

    def _before(self, *args: Any) -> None:
        if self.mode == "refuse":
            raise OperationalError("", {}, Exception(2003, "Can't connect to MySQL server"))
        if self.mode == "pause":
            await_only(self.flowing.wait())  # in SQLAlchemy's greenlet: the task waits

    def refuse(self) -> None:
        self.mode = "refuse"

    def pause(self) -> None:
        self.mode = "pause"
        self.flowing.clear()

    def open(self) -> None:
        self.mode = "open"
        self.flowing.set()

    def close(self) -> None:
        self.open()
        event.remove(self.db.sync_engine, "before_cursor_execute", self._before)


@pytest.fixture
def database(db: Any) -> Iterator[Unreachable]:
    made = Unreachable(db)
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def quick_watch(monkeypatch: pytest.MonkeyPatch) -> None:
    # The watch's bounds, in real time, shortened: a tick overdue after 0.2 s, asked 0.2 s.
    monkeypatch.setattr(engine_loop, "OVERDUE_SECONDS", 0.2)
    monkeypatch.setattr(engine_loop, "PROBE_SECONDS", 0.2)


def _lines(caplog: Any, level: int) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == level and r.name == "pageant.engine" and "database" in r.getMessage()
    ]


async def _a_run_under_way(host: Any, engine: Any, probe: Any, clock: Any) -> None:
    """A run that is running, its step due again after the retry wait (60 s)."""
    probe.script["a"] = [{"ok": False, "retry": True, "error": "busy"}]
    await start_event(host, spec(phase("main", probe_step("a"))))
    await engine.tick()
    clock.set(clock.now().replace(hour=12, minute=0, second=0))


def _metrics(host: Any) -> str:
    return host.metrics.render().decode()


async def test_a_refusing_database_is_one_warning_and_its_return_one_info(
    probe_host, engine, probe, database, clock, caplog
):
    await _a_run_under_way(probe_host, engine, probe, clock)
    caplog.set_level(logging.DEBUG, logger="pageant.engine")
    database.refuse()
    for _ in range(3):
        await engine.tick()
        clock.advance(10)
    assert _lines(caplog, logging.WARNING) == [
        "database unreachable since 12:00:00; runs wait, nothing is lost"
    ]
    assert sample(_metrics(probe_host), "pageant_database_unreachable_seconds") == 30
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []

    database.open()
    await engine.tick()
    await engine.tick()
    # The run under way before the outage is the one that goes on.
    assert _lines(caplog, logging.INFO) == ["database back after 30 s; 1 run resumed"]
    assert len(_lines(caplog, logging.WARNING)) == 1
    text = _metrics(probe_host)
    assert sample(text, "pageant_database_unreachable_seconds") == 0
    assert sample(text, "pageant_database_outage_seconds_count") == 1
    assert sample(text, "pageant_database_outage_seconds_sum") == 30


async def test_a_database_that_never_answers_is_one_warning_from_the_tick_it_held(
    probe_host, engine, probe, database, clock, caplog, quick_watch
):
    await _a_run_under_way(probe_host, engine, probe, clock)
    caplog.set_level(logging.INFO, logger="pageant.engine")
    database.pause()
    ticking = asyncio.create_task(engine.watched(engine.tick(drain=False), "a tick"))
    await asyncio.sleep(0.05)
    clock.advance(4)  # the warning says when the held tick began, not when it was noticed
    for _ in range(50):
        if _lines(caplog, logging.WARNING):
            break
        await asyncio.sleep(0.05)
    assert _lines(caplog, logging.WARNING) == [
        "database unreachable since 12:00:00; runs wait, nothing is lost"
    ]
    [record] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert record.reason == "no answer within 0.2 s" and record.where == "a tick"
    await asyncio.sleep(0.5)  # still held: asked again, and still one line
    assert not ticking.done() and len(_lines(caplog, logging.WARNING)) == 1

    clock.advance(16)
    database.open()
    await asyncio.wait_for(ticking, 10)
    await engine.drain()
    assert _lines(caplog, logging.INFO)[-1] == "database back after 20 s; 1 run resumed"
    assert len(_lines(caplog, logging.WARNING)) == 1
    assert sample(_metrics(probe_host), "pageant_database_outage_seconds_sum") == 20


async def test_a_slow_tick_on_a_database_that_answers_is_no_outage(
    probe_host, engine, database, caplog, quick_watch
):
    # The other side of the watch: overdue work, but the database answers when asked.
    caplog.set_level(logging.INFO, logger="pageant.engine")

    async def slow() -> str:
        await asyncio.sleep(0.7)
        return "done"

    assert await engine.watched(slow(), "a tick") == "done"
    assert _lines(caplog, logging.WARNING) == []
    assert engine.outage.since is None
