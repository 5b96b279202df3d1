"""A lock the database gave up on is a 409 the caller can retry, never a 500."""

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
