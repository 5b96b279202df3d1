"""A database outage, as the engine reports it: one line when it begins, one when it ends.

The note is the host's (:attr:`pageant.hosting.Host.outage`): it outlives an engine, and
what fires a run's triggers beside the engine reports through it too.

While the database is out of reach every stage of every tick fails the same way; a traceback
for each would bury the one fact an operator needs (and anything that alerts on the log
would page once a stage a tick). So the first failure that is an outage
(:func:`pageant.db.errors.is_unavailable`) is logged once, at WARNING, with the instant it
began ("database unreachable since 12:04:31; runs wait, nothing is lost"), the ones that
follow at DEBUG, and the first tick that reaches the database again logs at INFO how long it
was gone and how many runs go on ("database back after 20 s; 14 runs resumed").

A database that accepts and never answers (a paused server, a black-holed network) raises
nothing until a driver's bound runs out, a minute later; the engine's watch
(:meth:`pageant.engine.Engine.watched`) asks it directly when a tick is overdue, and a
database that does not answer that within :data:`PROBE_SECONDS` is an outage too, from the
instant the overdue tick began.

Nothing is lost meanwhile: every write is a transaction that either committed or did not,
and the tick simply runs again. The outage's length is in the metrics:
``pageant_database_unreachable_seconds`` (the one under way, 0 while the database answers)
and ``pageant_database_outage_seconds`` (each one that ended).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING

from pageant.db.errors import is_unavailable, reason_of

if TYPE_CHECKING:
    from pageant.support.clock import Clock
    from pageant.support.metrics import Metrics

log = logging.getLogger("pageant.engine")

#: A tick that has not finished after this many seconds makes the engine ask the database
#: whether it answers at all.
OVERDUE_SECONDS = 5.0
#: How long that question waits for the answer (as long as ``/healthz`` waits).
PROBE_SECONDS = 2.0


def lasted(seconds: float) -> str:
    """A length of time as the outage lines say it: ``20 s``, ``0.4 s``."""
    return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"


class Outage:
    """Whether the engine last found the database out of reach, and since when (on the
    host's clock, so tests move it)."""

    def __init__(self, clock: Clock, metrics: Metrics) -> None:
        self.clock = clock
        self.metrics = metrics
        #: The instant this outage began; None while the database answers.
        self.since: datetime | None = None
        metrics.database_unreachable_seconds.set_function(self.seconds)

    def seconds(self) -> float:
        """How long the outage under way has lasted (0 with none)."""
        if self.since is None:
            return 0.0
        return max(0.0, (self.clock.now() - self.since).total_seconds())

    def noted(self, exc: BaseException, where: str) -> bool:
        """If ``exc`` means the database is out of reach, note it (the first time: one
        WARNING line) and answer True; otherwise answer False and log nothing."""
        if not is_unavailable(exc):
            return False
        self.began(where, reason_of(exc))
        return True

    def began(self, where: str, reason: str, *, at: datetime | None = None) -> None:
        """The database is out of reach (``reason``, met in ``where``), since ``at`` (by
        default now): the first call of an outage logs it, the others only at DEBUG."""
        if self.since is not None:
            log.debug("%s: the database is still unreachable (%s)", where, reason)
            return
        self.since = at or self.clock.now()
        log.warning(
            "database unreachable since %s; runs wait, nothing is lost",
            self.since.strftime("%H:%M:%S"),
            extra={"since": self.since.isoformat(), "where": where, "reason": reason},
        )

    def ended(self, resumed: int | None) -> None:
        """The database answered a whole tick: end the outage (if one is under way), saying
        how long it lasted and how many runs go on (``resumed``; None: not known)."""
        if self.since is None:
            return
        seconds = self.seconds()
        self.since = None
        self.metrics.database_outage_seconds.observe(seconds)
        runs = "" if resumed is None else f"; {resumed} run{'' if resumed == 1 else 's'} resumed"
        log.info(
            "database back after %s%s",
            lasted(seconds),
            runs,
            extra={"outage_seconds": round(seconds, 1), "runs_resumed": resumed},
        )
