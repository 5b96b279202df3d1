"""What a database error means to the caller: which ones are a lost race to retry.

The driver-specific codes live here and nowhere else, so the API's error middleware and
anyone else can ask a question ("was this a conflict?") without knowing the server.
"""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeout

__all__ = [
    "DatabaseError",
    "IntegrityError",
    "OperationalError",
    "is_retryable_conflict",
    "is_unavailable",
    "reason_of",
]

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

    A Galera cluster answers a certification conflict (two nodes committed writes to the same
    rows at once, and this one lost) with the same deadlock error (1213), at COMMIT: it is a
    lost race like any other, and retried the same way.

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


#: MariaDB client errors that mean the server is out of reach: cannot connect (2002, 2003),
#: gone away (2006), lost the connection (2013, 2055); and a Galera node that answers but may
#: not be used (1047, "WSREP has not yet prepared node for application use": it is still
#: joining, or it lost the cluster's quorum), which its host waits out like an outage.
_MYSQL_UNREACHABLE = frozenset({1047, 2002, 2003, 2006, 2013, 2055})


def is_unavailable(exc: BaseException) -> bool:
    """True when the database could not be reached at all (refused, gone away, no answer in
    time, no pooled connection to be had): an outage to wait out, not a fault of the work
    that met it. The chain is searched, as the drivers wrap the socket's error."""
    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and len(chain) < 20:
        chain.append(seen)
        orig = getattr(seen, "orig", None)
        if isinstance(orig, BaseException) and orig is not seen and orig not in chain:
            chain.append(orig)
        seen = seen.__cause__ or seen.__context__
    # A socket's error counts only under the database's: a client hanging up is no outage.
    if not any(isinstance(e, SQLAlchemyError) for e in chain):
        return False
    for seen in chain:
        if isinstance(seen, DBAPIError) and seen.connection_invalidated:
            return True
        if isinstance(seen, (OSError, TimeoutError, PoolTimeout)):
            return True
        orig = getattr(seen, "orig", seen)
        args = getattr(orig, "args", ())
        if args and args[0] in _MYSQL_UNREACHABLE:
            return True
    return False


def reason_of(exc: BaseException) -> str:
    """The innermost cause's first line: what a log line or a problem says about an outage."""
    seen = exc
    while (
        inner := getattr(seen, "orig", None) or seen.__cause__
    ) is not None and inner is not seen:
        seen = inner
    text = str(seen).strip()
    return (text.splitlines()[0] if text else type(seen).__name__)[:200]
