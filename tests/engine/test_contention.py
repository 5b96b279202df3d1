"""A lock the database gave up on is a 409 the caller can retry, never a 500; the engine counts
the collisions it retries by the work that met them."""

from __future__ import annotations

import pymysql
from sqlalchemy.exc import OperationalError

from pageant.db.errors import is_retryable_conflict as is_contention


def _wrapped(code: int, text: str) -> OperationalError:
    return OperationalError("UPDATE ...", {}, pymysql.err.OperationalError(code, text))


def test_deadlock_and_lock_wait_are_contention() -> None:
    assert is_contention(_wrapped(1213, "Deadlock found when trying to get lock"))
    assert is_contention(_wrapped(1205, "Lock wait timeout exceeded"))


def test_a_deadlock_behind_a_lost_savepoint_is_contention() -> None:
    lost = _wrapped(1305, "SAVEPOINT sa_savepoint_1 does not exist")
    lost.__context__ = _wrapped(1213, "Deadlock found when trying to get lock")
    assert is_contention(lost)


def test_other_operational_errors_are_not_contention() -> None:
    assert not is_contention(_wrapped(1305, "SAVEPOINT sa_savepoint_1 does not exist"))
    assert not is_contention(_wrapped(2003, "Can't connect to MySQL server"))


def test_collisions_are_counted_by_the_work_and_logged_with_its_ids(caplog) -> None:
    import logging
    from types import SimpleNamespace

    from pageant.engine.contention import noted
    from pageant.support.metrics import Metrics

    host = SimpleNamespace(metrics=Metrics())
    with caplog.at_level(logging.DEBUG, logger="pageant.engine"):
        for where in ("advancing run 12", "advancing run 13", "marking run 14 missed"):
            assert noted(host, where, _wrapped(1213, "Deadlock found"))  # type: ignore[arg-type]  # noted uses only the metrics
    series = [
        line
        for line in host.metrics.render().decode().splitlines()
        if line.startswith("pageant_deadlocks_retried_total")
    ]
    assert sorted(series) == [
        'pageant_deadlocks_retried_total{where="advancing run"} 2.0',
        'pageant_deadlocks_retried_total{where="marking run missed"} 1.0',
    ]
    assert any("advancing run 13" in r.getMessage() for r in caplog.records)
