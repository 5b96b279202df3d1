"""What a database error means to the caller: which ones are a lost race to retry.

The driver-specific codes live here and nowhere else, so the API's error middleware and
anyone else can ask a question ("was this a conflict?") without knowing the server.
"""

from __future__ import annotations

from sqlalchemy.exc import IntegrityError, OperationalError, SQLAlchemyError

__all__ = ["DatabaseError", "IntegrityError", "OperationalError", "is_retryable_conflict"]

#: Any error SQLAlchemy raises: an unreachable server, a missing database, a bad statement.
DatabaseError = SQLAlchemyError

#: A constraint refused a write; a unique index losing a race surfaces as this.
#: (``IntegrityError`` and ``OperationalError`` are SQLAlchemy's, re-exported so that
#: callers name database errors through this module alone.)

#: MariaDB's deadlock (1213) and lock-wait-timeout (1205) errors.
_MYSQL_CONTENTION = frozenset({1205, 1213})


def is_retryable_conflict(exc: BaseException) -> bool:
    """True when the database gave up on a lock (deadlock, lock wait, SQLite busy): the
    transaction was rolled back whole, so the same request may simply be sent again.

    The chain is searched: MariaDB rolls the whole transaction back on a deadlock, so a
    deadlock inside a savepoint surfaces as "savepoint does not exist" from the rollback
    to it, with the deadlock as its context.
    """
    seen: BaseException | None = exc
    while seen is not None:
        orig = getattr(seen, "orig", seen)
        args = getattr(orig, "args", ())
        if args and args[0] in _MYSQL_CONTENTION:
            return True
        if "database is locked" in str(orig):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
