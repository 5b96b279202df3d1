"""What every page shares: the app and request keys, who is asking, and rendering."""

from __future__ import annotations

from typing import Any

import aiohttp_jinja2
from aiohttp import web

from pageant.access.roles import ADMIN, AUTHORS, CONTROLLERS, FIRERS, STAFF
from pageant.console.clock import page_clock
from pageant.console.session import CSRF_FIELD, Session, Sessions, signed_in
from pageant.errors import Forbidden, NotFound
from pageant.hosting import Host
from pageant.support.revalidation import tagged

HOST = web.AppKey("console_host", Host)
SESSIONS = web.AppKey("console_sessions", Sessions)
API_PATHS = web.AppKey("console_api_paths", frozenset)
#: Where the console starts once signed in.
HOME = "/now"
#: The pages in the navigation: (path, name, the roles that see the link). A new page module
#: (listed in ``app.PAGE_MODULES``) adds its row here.
NAV: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("/now", "Now", STAFF),
    ("/runs", "Runs", STAFF),
    ("/events", "Events", STAFF),
    ("/calendar", "Calendar", STAFF),
    ("/blackouts", "Blackouts", STAFF),
    ("/switchboard", "Switchboard", STAFF),
    ("/plugins", "Plugins", STAFF),
    ("/tokens", "Tokens", ADMIN),
)


def see_other(location: str) -> web.Response:
    """A 303 to ``location``: where every successful form post lands (post, redirect, get)."""
    return web.Response(status=303, headers={"Location": location})


def path_id(request: web.Request, name: str, what: str) -> int:
    """The id the path names under ``name``: a page answers 404 for anything but a whole
    number of at most 18 digits (it could name nothing), naming ``what`` was looked for."""
    raw = request.match_info[name]
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:
        raise NotFound(f"There is no {what} {raw[:40]!r}.")
    return int(raw)


def host_of(request: web.Request) -> Host:
    return request.app[HOST]


def session_of(request: web.Request) -> Session | None:
    return signed_in(request)


class SignInRequired(web.HTTPSeeOther):
    """A page asked for without a session: off to sign in, and back afterwards."""

    def __init__(self, request: web.Request) -> None:
        target = request.path_qs if request.method == "GET" else HOME
        super().__init__(location=f"/sign-in?next={_quote(target)}")


def _quote(text: str) -> str:
    from urllib.parse import quote

    return quote(text, safe="/")


class GameTokenSignedIn(Forbidden):
    """A ``game`` token signed in: it has no page, and is told what it is for."""


def require(request: web.Request, roles: tuple[str, ...]) -> Session:
    """The session of a signed-in person whose role is among ``roles``; otherwise off to
    sign in (no session) or a 403 page (the role may not)."""
    session = session_of(request)
    if session is None:
        raise SignInRequired(request)
    if session.principal.role == "game" and "game" not in roles:
        raise GameTokenSignedIn("A game token has no console pages.")
    if session.principal.role not in roles:
        raise Forbidden(
            f"This page needs the role {' or '.join(roles)}; you are signed in as "
            f"{session.principal.role}."
        )
    return session


def abilities(role: str | None) -> dict[str, bool]:
    """What the role may do, for deciding which buttons exist (the server checks again)."""
    return {
        "author": role in AUTHORS,
        "publish": role in ADMIN,
        "start": role in ADMIN,
        "control": role in CONTROLLERS,
        "fire": role in FIRERS,
        "switchboard": role in ADMIN,
        "tokens": role in ADMIN,
        "verify": role in AUTHORS,
        "reschedule": role in CONTROLLERS,
        "cleanup": role in ADMIN,
    }


def context(request: web.Request, **values: Any) -> dict[str, Any]:
    session = session_of(request)
    role = session.principal.role if session is not None else None
    return {
        "session": session,
        "principal": session.principal if session is not None else None,
        "can": abilities(role),
        "csrf_field": CSRF_FIELD,
        "csrf": session.csrf if session is not None else "",
        "path": request.path,
        "path_qs": request.path_qs,
        "nav": [(href, name) for href, name, roles in NAV if role in roles],
        "now": host_of(request).clock.now(),
        # A page on an event's clock passes its own; every other page is on UTC, or the
        # signed-in viewer's zone when they chose it.
        "clock": page_clock(request),
        **values,
    }


def render(request: web.Request, template: str, status: int = 200, **values: Any) -> web.Response:
    return aiohttp_jinja2.render_template(
        template, request, context(request, **values), status=status
    )


def render_error(
    request: web.Request, status: int, message: str, details: list[str] | None = None
) -> web.Response:
    return render(
        request,
        "error.html",
        status=status,
        status_code=status,
        message=message,
        details=details or [],
    )


def render_tagged(request: web.Request, template: str, **values: Any) -> web.Response:
    """``template`` rendered as :func:`render` does, revalidated
    (:func:`pageant.support.revalidation.tagged`): an ``ETag`` that is a digest of the HTML sent
    (the CSRF token and the role's buttons in it included, so the tag is exact per
    response), ``Cache-Control: no-cache``, and 304 with no body to an ``If-None-Match``
    that names the tag.

    For the fragments htmx polls. htmx never sends ``If-None-Match`` itself: the browser's
    HTTP cache does, on the poll's XHR, and on a 304 it hands the XHR the 200 it kept (the
    XHR never sees the 304; in Chromium the wire says 304, the XHR 200), which htmx swaps
    in: identical content, so the page is as it was. (Were a script to send the header
    itself, it would see the 304 and its empty body, which htmx 2 swaps by default; nothing
    here does.)"""
    body = aiohttp_jinja2.render_string(template, request, context(request, **values))
    return tagged(request, body.encode("utf-8"), "text/html")
