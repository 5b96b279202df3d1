"""Lock contention inside the engine: retried with jitter, counted, and quiet.

Two hosts on one MariaDB database deadlock now and then in normal operation (two reclaims,
a claim beside an advance), and two hosts on two nodes of a Galera cluster lose
certification conflicts, which Galera answers as the same deadlock error at COMMIT: the
database rolls one transaction back whole, and doing the same work again is correct,
because every write is a compare-and-set. Such a collision is
logged at DEBUG and counted (``pageant_deadlocks_retried``); only the same work colliding
:data:`BOUND` times in a row is a WARNING - by then something holds its locks too long.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from pageant.db.errors import is_retryable_conflict

if TYPE_CHECKING:
    from pageant.hosting import Host

log = logging.getLogger("pageant.engine")

T = TypeVar("T")

#: Collisions in a row before the same work is reported (and left to the next tick).
BOUND = 5
#: The first retry waits up to this long (seconds); each further one up to twice as long.
FIRST_JITTER = 0.05


class ContentionPersisted(Exception):
    """The same work met lock contention :data:`BOUND` times in a row (already logged)."""


def jitter(attempt: int) -> float:
    """A random wait before retry ``attempt`` (1-based): two writers that collided once
    must not collide again in lockstep."""
    return random.uniform(0, FIRST_JITTER * 2 ** (attempt - 1))


def kind_of(where: str) -> str:
    """``where`` without the ids in it ("advancing run 12" -> "advancing run"): the metric's
    label. On a Galera cluster collisions are routine, and a label a run would be a new
    time series for every run that ever met one."""
    return " ".join(word for word in where.split() if not any(c.isdigit() for c in word))


def noted(host: Host, where: str, exc: BaseException, attempt: int = 1) -> bool:
    """If ``exc`` is lock contention, count it under :func:`kind_of` ``where`` and log it
    (DEBUG, or WARNING at the bound), naming ``where``, and answer True; otherwise answer
    False and log nothing."""
    if not is_retryable_conflict(exc):
        return False
    host.metrics.deadlocks_retried.labels(where=kind_of(where)).inc()
    if attempt >= BOUND:
        log.warning(
            "%s met lock contention %d times in a row; left to the next tick",
            where,
            attempt,
            extra={"where": where, "attempts": attempt},
        )
    else:
        log.debug(
            "%s met lock contention (%s); retrying",
            where,
            type(exc).__name__,
            extra={"where": where, "attempt": attempt},
        )
    return True


async def again(host: Host, where: str, exc: Exception, attempt: int) -> None:
    """The one rule of a retry, after try ``attempt`` (1-based) of the work at ``where``
    raised ``exc``: lock contention under the bound is counted and logged (:func:`noted`)
    and waited out with jitter, and the caller tries again; anything else raises ``exc``
    itself, and contention at the bound :class:`ContentionPersisted`. A caller whose work
    is a step's hot path loops on it in its own frame (a step's answer, in
    :func:`pageant.engine.dispatch.dispatch_step`); the others use :func:`retrying`."""
    if not noted(host, where, exc, attempt):
        raise exc
    if attempt >= BOUND:
        raise ContentionPersisted(where) from exc
    await asyncio.sleep(jitter(attempt))


async def retrying(host: Host, where: str, work: Callable[[], Awaitable[T]]) -> T:
    """Run ``work`` (which opens its own transactions), again after a jittered wait each
    time the database gives up on a lock; :class:`ContentionPersisted` at the bound."""
    attempt = 1
    while True:
        try:
            return await work()
        except Exception as exc:
            await again(host, where, exc, attempt)
        attempt += 1
