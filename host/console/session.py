"""Signing in: an API token pasted once becomes a signed, expiring session cookie.

The cookie holds the token's sha256 hash (never the token) and a per-session CSRF token,
signed with itsdangerous and stamped with the time it was issued. On every request the
hash is looked up again (:func:`pageant.access.tokens.principal_seen_within`), so the role a
page is rendered for is the token's role *now*, and a revoked token ends its sessions; a run
console's page alone trusts a token read live within ``console_max_age_ms``, as the console
it shows is kept that long.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from aiohttp import web
from itsdangerous import BadSignature, URLSafeTimedSerializer

from pageant.access.tokens import Principal, hash_token, principal_seen_within
from pageant.errors import Unauthenticated

COOKIE = "pageant_session"
#: The hidden field every form post carries (and the header htmx would send).
CSRF_FIELD = "csrf_token"
_SALT = "pageant.console.session"
#: Where the console's middleware keeps a request's session (None: signed out).
SESSION_KEY: Any = (
    web.RequestKey("console_session", object) if hasattr(web, "RequestKey") else "console.session"
)


@dataclass(frozen=True)
class Session:
    """A signed-in browser: who (checked against the tokens table now) and its CSRF token."""

    principal: Principal
    csrf: str


class Sessions:
    """Issues and reads session cookies with one secret and one lifetime."""

    def __init__(self, secret: str, *, max_age_seconds: int) -> None:
        # An empty secret is a random one: sessions then end when the process does.
        self._serializer = URLSafeTimedSerializer(secret or secrets.token_hex(32), salt=_SALT)
        self.max_age = max_age_seconds

    def issue(self, token: str) -> str:
        """The cookie value for a session of ``token`` (checked by the caller)."""
        return self._serializer.dumps({"h": hash_token(token), "c": secrets.token_urlsafe(24)})

    def read(self, value: str | None) -> dict[str, Any] | None:
        """The cookie's payload, or None when it is missing, forged or expired."""
        # A cookie of bytes that are not ASCII (aiohttp keeps them as surrogates) is no
        # cookie pageant signed.
        if not value or not value.isascii():
            return None
        try:
            data = self._serializer.loads(value, max_age=self.max_age)
        except BadSignature:  # SignatureExpired is a BadSignature
            return None
        if not isinstance(data, dict) or not {"h", "c"} <= data.keys():
            return None
        return data

    async def session(
        self,
        engine: Any,
        value: str | None,
        *,
        now: datetime,
        trusted: timedelta = timedelta(0),
    ) -> Session | None:
        """The session a cookie stands for, or None: a bad or expired cookie, or a token that
        was removed, revoked or has expired since. A token read live less than ``trusted`` ago
        is not read again (a run console's reader: see
        :func:`pageant.access.tokens.principal_seen_within`); by default it is read."""
        data = self.read(value)
        if data is None:
            return None
        try:
            principal = await principal_seen_within(engine, str(data["h"]), now=now, within=trusted)
        except Unauthenticated:
            return None
        return None if principal is None else Session(principal, str(data["c"]))


def signed_in(request: web.Request) -> Session | None:
    """The session the console's middleware found for ``request``; None when signed out."""
    found = request.get(SESSION_KEY)
    return found if isinstance(found, Session) else None


def csrf_ok(session: Session, sent: str | None) -> bool:
    """Whether a form's CSRF field matches its session's (compared in constant time)."""
    # compare_digest refuses text that is not ASCII; no CSRF token pageant issues holds any.
    return bool(sent) and str(sent).isascii() and hmac.compare_digest(session.csrf, str(sent))
