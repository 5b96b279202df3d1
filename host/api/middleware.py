"""Middlewares: admission, the bearer token, fresh consoles after a write, and every error
in one envelope.

``{"error": {"code": str, "message": str, "details": [str, ...]}}`` - for pageant's own
errors, malformed JSON, unknown routes, wrong methods and anything unexpected alike.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import timedelta

from aiohttp import web
from aiohttp.typedefs import Middleware

from pageant.access.tokens import (
    hash_token,
    principal_checked_later,
    principal_for,
    principal_seen_within,
)
from pageant.api.keys import HOST
from pageant.api.routing import AUTH_PROBLEM_KEY, PRINCIPAL_KEY, Handler, respond
from pageant.db.errors import OperationalError, is_retryable_conflict, is_unavailable
from pageant.errors import PageantError, Unauthenticated
from pageant.support.pacing import Pace
from pageant.support.recent import reads_console

log = logging.getLogger("pageant.api")

#: What a caller is told to wait before trying again while the database is out of reach.
RETRY_AFTER_SECONDS = 5

#: Paths that answer at once however many requests wait: an operator's probes, and files.
UNQUEUED_PATHS = ("/healthz", "/metrics")
UNQUEUED_PREFIXES = ("/static/",)
#: The game link's routes: a sync is held open, so it takes no admission slot.
LINK_PATHS = "/api/v1/link/"
#: The routes that check their token again where they record their work (the firings').
FIRING_PATHS = "/api/v1/triggers/"
#: How long a game-link agent's token, read live, is trusted from memory: a token revoked
#: through another host stops its agent's syncs within this.
LINK_TOKEN_RECHECK = timedelta(seconds=5)


def readers_pace(per_second: int) -> Pace:
    """The console readers' pace: ``per_second`` on average, a quarter second's at once."""
    return Pace(per_second, burst=max(1, per_second // 4))


def admission(limit: int, pace: Pace | None = None, *, read_ahead: float = 0.0) -> Middleware:
    """A middleware that lets at most ``limit`` requests be handled at once, the rest waiting
    their turn in arrival order (an asyncio semaphore's queue), and run console reads
    (:func:`pageant.support.recent.reads_console`) apart from them, each answered at its turn of
    ``pace``.

    The engine shares the host's event loop and its database pool with every request: fifty
    clients reading run consoles as fast as they are answered would otherwise hold every
    pooled connection and every turn of the loop, and runs would stall behind them. A
    console is read from the database within the readers' own budget
    (:attr:`pageant.hosting.Host.console_reads`), and once read it answers its other readers
    for a moment (:attr:`pageant.hosting.Host.recent_consoles`) at a tenth of a millisecond
    each; readers asking again the moment they are answered would then ask thousands of times
    a second and take the loop from the engine whatever each answer costs. So their requests
    are answered at a pace instead, never taking a slot from another request, and an answer
    already kept never waits behind a console being read.

    A console reader's request is handled up to ``read_ahead`` seconds before its turn and
    its answer held until the turn, so a console that has to be read afresh is read while
    its reader waits for its turn, not after it: an answer reflects the moment its request
    was handled, and is sent at most ``read_ahead`` later. Waiting here costs a queued
    future or a timer, not a connection; a held answer costs its bytes. A client that gives
    up while it waits leaves the queue (its task is cancelled). ``/healthz``, ``/metrics``
    and static files never wait.
    """
    slots = asyncio.Semaphore(limit)
    pace = pace or Pace(0)

    @web.middleware
    async def admit(request: web.Request, handler: Handler) -> web.StreamResponse:
        path = request.path
        if path in UNQUEUED_PATHS or path.startswith(UNQUEUED_PREFIXES):
            return await handler(request)
        if path.startswith(LINK_PATHS):
            # An agent's sync is held open up to link_wait_seconds: a thousand of them
            # must not hold every slot (each costs a future while it waits).
            return await handler(request)
        if reads_console(request.method, path):
            wait = pace.reserve()
            turn = time.monotonic() + wait
            if wait > read_ahead:
                await asyncio.sleep(wait - read_ahead)
            response = await handler(request)
            held = turn - time.monotonic()
            if held > 0:
                await asyncio.sleep(held)
            return response
        async with slots:
            return await handler(request)

    return admit


#: The methods that never write: every other request makes the consoles kept for their
#: readers (:attr:`pageant.hosting.Host.recent_consoles`) be read afresh once it is done.
READ_ONLY_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


@web.middleware
async def fresh_after_writes(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Whoever writes through this host (a control, a firing, a form) and then reads a run
    console sees the write: nothing read before the request ended is answered after it."""
    if request.method in READ_ONLY_METHODS:
        return await handler(request)
    try:
        return await handler(request)
    finally:
        request.app[HOST].recent_consoles.forget()


def error_response(
    status: int, code: str, message: str, details: list[str] | None = None
) -> web.Response:
    return respond({"error": {"code": code, "message": message, "details": details or []}}, status)


def unavailable(request: web.Request) -> web.Response:
    """503 with ``Retry-After``: the database is out of reach. An outage, not a fault of
    this request, so it is logged at DEBUG: a line a request would flood the log, and the
    engine reports the outage once."""
    log.debug("the database is unreachable on %s %s", request.method, request.path)
    response = error_response(
        503,
        "database_unavailable",
        f"the database is not answering; try again in {RETRY_AFTER_SECONDS} s",
    )
    response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


@web.middleware
async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except PageantError as exc:
        return error_response(exc.status, exc.code, exc.message, exc.details)
    except OperationalError as exc:
        if is_unavailable(exc):
            return unavailable(request)
        if not is_retryable_conflict(exc):
            log.exception("database error on %s %s", request.method, request.path)
            return error_response(500, "internal", "internal error; the server log has the details")
        # The transaction was rolled back whole, so nothing was written: the caller can
        # simply send the request again.
        return error_response(
            409,
            "conflict",
            "a concurrent change collided with this one and it was rolled back; "
            "nothing was written, try again",
        )
    except web.HTTPMethodNotAllowed as exc:
        allowed = ", ".join(sorted(exc.allowed_methods))
        response = error_response(
            405,
            "method_not_allowed",
            f"{request.method} is not allowed on {request.path}; allowed: {allowed}",
        )
        # RFC 9110: a 405 names the methods the resource does allow.
        response.headers["Allow"] = allowed
        return response
    except web.HTTPNotFound:
        return error_response(404, "not_found", f"no route for {request.method} {request.path}")
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_response(
            exc.status, exc.reason.lower().replace(" ", "_"), exc.text or exc.reason
        )
    except Exception as exc:
        if is_unavailable(exc):
            return unavailable(request)
        log.exception("unhandled error on %s %s", request.method, request.path)
        return error_response(500, "internal", "internal error; the server log has the details")


@web.middleware
async def bearer(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Who is calling. A header that names nobody is kept as a problem, not raised: a route
    that needs a token answers 401 with it (see ``guarded``), and a route that needs none
    serves the caller as anonymous - a stale token in a game's config must not take the
    public calendar or ``/healthz`` away from it."""
    header = request.headers.get("Authorization")
    if header:
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            request[AUTH_PROBLEM_KEY] = "malformed Authorization header; expected: Bearer <token>"
            return await handler(request)
        if not token.isascii():
            # aiohttp keeps a header's undecodable bytes as surrogates; no token pageant
            # issues holds one, and one cannot even be hashed. Anyone can send such bytes,
            # so they cost a DEBUG line, never a traceback.
            log.debug("a bearer token with bytes that are not ASCII on %s", request.path)
            request[AUTH_PROBLEM_KEY] = "the bearer token is not valid"
            return await handler(request)
        host = request.app[HOST]
        now = host.clock.now()
        try:
            if request.path.startswith(FIRING_PATHS):
                # The firing routes read the token again in the transaction that records
                # the firings, so a token seen live before is taken from memory here.
                found = await principal_checked_later(host.db, token.strip(), now=now)
            elif request.path.startswith(LINK_PATHS):
                # An agent syncs back to back: its token, read live in the last
                # LINK_TOKEN_RECHECK, is taken from memory (a revoke through this host is
                # seen at once, one through another within that).
                found = await principal_seen_within(
                    host.db, hash_token(token.strip()), now=now, within=LINK_TOKEN_RECHECK
                )
            elif reads_console(request.method, request.path):
                # A console's reader is trusted as the console is kept: a token read live
                # less than console_max_age_ms ago is not read again.
                found = await principal_seen_within(
                    host.db, hash_token(token.strip()), now=now, within=host.console_max_age
                )
            else:
                found = await principal_for(host.db, token.strip(), now=now)
        except Unauthenticated as exc:  # revoked or expired: the message says which
            request[AUTH_PROBLEM_KEY] = exc.message
            return await handler(request)
        if found is None:
            request[AUTH_PROBLEM_KEY] = "the bearer token is not valid"
        else:
            request[PRINCIPAL_KEY] = found
    return await handler(request)
