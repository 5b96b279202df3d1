"""Middlewares: admission, the bearer token, fresh consoles after a write, and every error
in one envelope.

``{"error": {"code": str, "message": str, "details": [str, ...]}}`` - for pageant's own
errors, malformed JSON, unknown routes, wrong methods and anything unexpected alike.
"""

from __future__ import annotations

import asyncio
import logging
import re

from aiohttp import web
from aiohttp.typedefs import Middleware

from pageant.access.tokens import principal_checked_later, principal_for
from pageant.api.keys import HOST
from pageant.api.routing import AUTH_PROBLEM_KEY, PRINCIPAL_KEY, Handler, respond
from pageant.db.errors import OperationalError, is_retryable_conflict, is_unavailable
from pageant.errors import PageantError, Unauthenticated

log = logging.getLogger("pageant.api")

#: What a caller is told to wait before trying again while the database is out of reach.
RETRY_AFTER_SECONDS = 5

#: Paths that answer at once however many requests wait: an operator's probes, and files.
UNQUEUED_PATHS = ("/healthz", "/metrics")
UNQUEUED_PREFIXES = ("/static/",)
#: The routes that check their token again where they record their work (the firings').
FIRING_PATHS = "/api/v1/triggers/"
#: The run consoles: the API's, and the web console's run page and its polled part.
CONSOLE_READS = re.compile(r"(/api/v1/admin)?/runs/[0-9]+(/live)?")


def admission(limit: int, readers: int) -> Middleware:
    """A middleware that lets at most ``limit`` requests be handled at once, and apart from
    them at most ``readers`` run consoles read (:data:`CONSOLE_READS`); the rest wait their
    turn in arrival order (an asyncio semaphore's queue).

    The engine shares the host's event loop and its database pool with every request: fifty
    clients reading run consoles as fast as they are answered would otherwise hold every
    pooled connection and every turn of the loop, and runs would stall behind them. A console
    answered from what is kept for its readers is cheap, but not free (the token is checked,
    the answer sent), so readers are held to their own few slots whatever their answers cost,
    and never take a slot from another request. Waiting here costs a queued future, not a
    connection. A client that gives up while it waits leaves the queue (its task is
    cancelled). ``/healthz``, ``/metrics`` and static files never wait.
    """
    slots = asyncio.Semaphore(limit)
    reading = asyncio.Semaphore(readers)

    @web.middleware
    async def admit(request: web.Request, handler: Handler) -> web.StreamResponse:
        path = request.path
        if path in UNQUEUED_PATHS or path.startswith(UNQUEUED_PREFIXES):
            return await handler(request)
        turn = reading if request.method == "GET" and CONSOLE_READS.fullmatch(path) else slots
        async with turn:
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
        # The firing routes read the token again in the transaction that records the
        # firings, so a token seen live before is taken from memory for the request.
        lookup = principal_checked_later if request.path.startswith(FIRING_PATHS) else principal_for
        try:
            found = await lookup(host.db, token.strip(), now=host.clock.now())
        except Unauthenticated as exc:  # revoked or expired: the message says which
            request[AUTH_PROBLEM_KEY] = exc.message
            return await handler(request)
        if found is None:
            request[AUTH_PROBLEM_KEY] = "the bearer token is not valid"
        else:
            request[PRINCIPAL_KEY] = found
    return await handler(request)
