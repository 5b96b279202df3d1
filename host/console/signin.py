"""Sign in with an API token, and sign out."""

from __future__ import annotations

import re
import secrets
from typing import TypedDict

from aiohttp import web

from pageant.access.tokens import principal_for
from pageant.console.keys import HOME, SESSIONS, host_of, render, see_other, session_of
from pageant.console.session import COOKIE, CSRF_FIELD
from pageant.errors import Unauthenticated

routes = web.RouteTableDef()

#: The sign-in form's own CSRF token lives in a short cookie until a session exists.
SIGNIN_COOKIE = "pageant_signin"


#: A path on this host and its query, in the characters a URL carries unescaped: one ``/``
#: first (never ``//``, a scheme-relative URL), and no tab, CR, LF, VT, FF, backslash, space
#: or anything else a browser drops or turns into ``/`` before it resolves a Location (so
#: ``/\t/evil.example`` cannot become ``//evil.example``), nor anything a header cannot carry.
_SAFE_NEXT = re.compile(r"/(?!/)[A-Za-z0-9\-._~!$&'()*+,;=:@%/?]*")


def safe_next(raw: str | None) -> str:
    """Where to go after signing in: ``raw`` when it is a same-origin path of safe
    characters, the default page otherwise (an open redirect refused)."""
    if raw and _SAFE_NEXT.fullmatch(raw):
        return raw
    return HOME


class CookieFlags(TypedDict):
    """The flags every console cookie is set with."""

    httponly: bool
    samesite: str
    path: str
    secure: bool


def cookie_flags(request: web.Request) -> CookieFlags:
    return {
        "httponly": True,
        "samesite": "Strict",
        "path": "/",
        "secure": request.secure
        or (host_of(request).settings.trusted_proxy and forwarded_https(request)),
    }


def forwarded_https(request: web.Request) -> bool:
    """Whether the nearest proxy says the browser spoke HTTPS to it: the last value of
    ``X-Forwarded-Proto``, or the ``proto`` of the last ``Forwarded`` element, is ``https``.
    The last, because a proxy appends to what the client sent; ask this only when
    ``trusted_proxy`` says a proxy stands in front."""
    proto = request.headers.get("X-Forwarded-Proto", "").rpartition(",")[2].strip()
    if not proto and request.forwarded:
        proto = request.forwarded[-1].get("proto") or ""
    return proto.lower() == "https"


@routes.get("/")
async def root(request: web.Request) -> web.Response:
    return see_other(HOME if session_of(request) else "/sign-in")


def _signin_page(request: web.Request, status: int = 200, error: str = "") -> web.Response:
    nonce = secrets.token_urlsafe(24)
    response = render(
        request,
        "signin.html",
        status=status,
        signin_csrf=nonce,
        next=safe_next(request.query.get("next")),
        error=error,
    )
    response.set_cookie(SIGNIN_COOKIE, nonce, max_age=3600, **cookie_flags(request))
    return response


@routes.get("/sign-in")
async def signin_form(request: web.Request) -> web.Response:
    return _signin_page(request)


@routes.post("/sign-in")
async def signin(request: web.Request) -> web.Response:
    form = await request.post()
    nonce = request.cookies.get(SIGNIN_COOKIE)
    sent = form.get(CSRF_FIELD)
    if (
        not nonce
        or not isinstance(sent, str)
        or not (nonce.isascii() and sent.isascii())  # compare_digest takes only ASCII text
        or not secrets.compare_digest(nonce, sent)
    ):
        return _signin_page(
            request, 403, "The sign-in form was out of date or not from this page; try again."
        )
    token = form.get("token")
    token = token.strip() if isinstance(token, str) else ""
    host = host_of(request)
    try:
        principal = await principal_for(host.db, token, now=host.clock.now()) if token else None
    except Unauthenticated as exc:  # revoked or expired: say which
        return _signin_page(request, 401, f"That token cannot sign in: {exc.message}.")
    if principal is None:
        return _signin_page(request, 401, "That token is not valid.")
    sessions = request.app[SESSIONS]
    nxt = form.get("next")
    response = see_other(safe_next(nxt if isinstance(nxt, str) else None))
    response.set_cookie(
        COOKIE, sessions.issue(token), max_age=sessions.max_age, **cookie_flags(request)
    )
    response.del_cookie(SIGNIN_COOKIE, path="/")
    return response


@routes.post("/sign-out")
async def signout(request: web.Request) -> web.Response:
    response = see_other("/sign-in")
    response.del_cookie(COOKIE, path="/")
    return response
