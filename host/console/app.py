"""Mounting the web console on the app: templates, static files, the session and its checks.

:func:`mount` is called by :func:`pageant.api.app.make_app`. Everything outside ``/api/``
that is not a static file goes through :func:`pages`, the console's middleware: it reads the
session, turns away a form post without its CSRF token (403), and renders every refusal as
an HTML page with the server's own sentence, never a traceback and never a 500 page.
"""

from __future__ import annotations

import importlib
import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiohttp_jinja2
import jinja2
from aiohttp import web

from pageant.console import filters
from pageant.console.keys import (
    API_PATHS,
    HOST,
    SESSIONS,
    GameTokenSignedIn,
    render,
    render_error,
)
from pageant.console.session import COOKIE, CSRF_FIELD, SESSION_KEY, Sessions, csrf_ok
from pageant.db.errors import OperationalError, is_retryable_conflict
from pageant.errors import PageantError
from pageant.hosting import Host
from pageant.support.recent import reads_console

log = logging.getLogger("pageant.console")

STATIC = Path(__file__).parent / "static"
#: The console's page modules, each exposing ``routes`` (an aiohttp RouteTableDef).
PAGE_MODULES = (
    "signin",
    "now",
    "history",
    "runs",
    "events",
    "announcement",
    "calendar",
    "blackouts",
    "switchboard",
    "plugins",
    "tokens",
    "zone",
)
#: Everything a page may load comes from the host itself (the test walk proves it too).
CSP = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; "
    # htmx evaluates its trigger filters (``every 3s [pageantIdle()]``) with Function().
    "script-src 'self' 'unsafe-eval'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)


def _is_api(request: web.Request) -> bool:
    """Whether a request is the API's (answered in its JSON envelope, untouched here):
    anything under /api/, and the few API routes outside it (``/healthz``)."""
    return request.path.startswith("/api/") or request.path in request.app[API_PATHS]


def mount(app: web.Application, host: Host) -> None:
    """Add the console's pages and static files to ``app`` (the API's app)."""
    env = aiohttp_jinja2.setup(
        app,
        loader=jinja2.PackageLoader("pageant.console", "templates"),
        autoescape=jinja2.select_autoescape(default=True),
        # A missing key renders as nothing rather than failing the page (a 500).
        undefined=jinja2.ChainableUndefined,
    )
    filters.install(env)
    # The API's routes are added before the console mounts: what is outside /api/ among
    # them (``/healthz``) stays the API's, errors included.
    app[API_PATHS] = frozenset(
        r.canonical for r in app.router.resources() if not r.canonical.startswith("/api/")
    )
    app[HOST] = host
    hours = host.settings.console_session_hours
    app[SESSIONS] = Sessions(host.settings.console_secret, max_age_seconds=int(hours * 3600))
    app.router.add_static("/static/", STATIC, name="static", append_version=True)
    app.router.add_get("/favicon.ico", favicon)
    for name in PAGE_MODULES:
        module = importlib.import_module(f"pageant.console.{name}")
        app.router.add_routes(module.routes)


async def favicon(request: web.Request) -> web.Response:
    """Where a browser that asks for ``/favicon.ico`` finds the console's icon (the pages
    also name it in a ``<link rel="icon">``)."""
    return web.Response(status=301, headers={"Location": "/static/favicon.svg"})


@web.middleware
async def pages(request: web.Request, handler: Any) -> web.StreamResponse:
    """The console's middleware: a no-op for the API, the session and CSRF for pages."""
    if _is_api(request) or request.path.startswith("/static/"):
        return await handler(request)
    try:
        sessions: Sessions = request.app[SESSIONS]
        host: Host = request.app[HOST]
        session = await sessions.session(
            host.db,
            request.cookies.get(COOKIE),
            now=host.clock.now(),
            # A run console's reader is trusted as the console is kept; any other page
            # reads its token.
            trusted=(
                host.console_max_age
                if reads_console(request.method, request.path)
                else timedelta(0)
            ),
        )
        request[SESSION_KEY] = session
        if request.method == "POST":
            try:
                form = await request.post()  # kept: the page's handler reads the same form
            except UnicodeDecodeError:
                # Anyone can send bytes that are not UTF-8; aiohttp cannot decode them into
                # a form, and no page's form holds them.
                return render_error(
                    request, 400, "This form was refused: it holds bytes that are not UTF-8 text."
                )
        if request.method == "POST" and request.path != "/sign-in":
            sent = form.get(CSRF_FIELD)
            if session is None or not csrf_ok(session, sent if isinstance(sent, str) else None):
                return render_error(
                    request,
                    403,
                    "This form was refused: its security token is missing or out of date. "
                    "Reload the page and try again.",
                )
        response = await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        if exc.status == 404:
            return render_error(request, 404, f"There is no page at {request.path}.")
        if exc.status == 405:
            return render_error(request, 405, f"{request.method} is not allowed here.")
        return render_error(request, exc.status, exc.text or exc.reason)
    except GameTokenSignedIn:
        response = render(request, "game_token.html", status=403)
    except PageantError as exc:
        return render_error(request, exc.status, exc.message, exc.details)
    except OperationalError as exc:
        if is_retryable_conflict(exc):
            # A lost race (a deadlock; on a Galera cluster a certification conflict), rolled
            # back whole: the person sends it again. The API answers it 409 as well, unlogged.
            log.debug("a database conflict on %s %s", request.method, request.path)
            return render_error(
                request,
                409,
                "Another change collided with this one and it was rolled back; nothing was "
                "written. Try again.",
            )
        log.exception("database error on %s %s", request.method, request.path)
        return render_error(request, 503, "The database did not answer; try again.")
    except Exception:
        log.exception("unhandled error on %s %s", request.method, request.path)
        return render_error(request, 500, "Something went wrong; the server log has the details.")
    response.headers.setdefault("Content-Security-Policy", CSP)
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Referrer-Policy", "same-origin")
    response.headers.setdefault("Cache-Control", "no-store")
    return response
