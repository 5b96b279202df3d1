"""A database outage, as the engine reports it: one line when it begins, one when it ends.

While the database is out of reach every stage of every tick fails the same way; a traceback
for each would bury the one fact an operator needs (and anything that alerts on the log
would page once a stage a tick). So the first failure that is an outage
(:func:`pageant.db.errors.is_unavailable`) is logged at ERROR with its reason, the ones that
follow at DEBUG, and the first tick that reaches the database again logs how long it was
gone. Nothing is lost meanwhile: every write is a transaction that either committed or did
not, and the tick simply runs again.
"""

from __future__ import annotations

import logging
import time

from pageant.db.errors import is_unavailable, reason_of

log = logging.getLogger("pageant.engine")


class Outage:
    """Whether the engine last found the database out of reach, and since when."""

    def __init__(self) -> None:
        #: ``time.monotonic()`` of the first failure of this outage; None while it answers.
        self.since: float | None = None

    def noted(self, exc: BaseException, where: str) -> bool:
        """If ``exc`` means the database is out of reach, note it (the first time: one
        ERROR line) and answer True; otherwise answer False and log nothing."""
        if not is_unavailable(exc):
            return False
        if self.since is None:
            self.since = time.monotonic()
            log.error(
                "the database is unreachable (%s, in %s); the engine tries again every tick",
                reason_of(exc),
                where,
                extra={"where": where},
            )
        else:
            log.debug("%s: the database is still unreachable (%s)", where, reason_of(exc))
        return True

    def answered(self) -> None:
        """The database answered a whole tick: end an outage, saying how long it lasted."""
        if self.since is None:
            return
        lasted = time.monotonic() - self.since
        self.since = None
        log.warning(
            "the database is back after %.1f s; the engine goes on",
            lasted,
            extra={"outage_seconds": round(lasted, 1)},
        )
