"""The switch between the viewer's zone and each page's own (:mod:`pageant.console.clock`),
kept with the signed-in person's token."""

from __future__ import annotations

from urllib.parse import urlsplit

from aiohttp import web

from pageant.access.roles import STAFF
from pageant.access.tokens import choose_zone
from pageant.console.clock import LEGACY_COOKIE, known_zone
from pageant.console.keys import host_of, require, see_other
from pageant.errors import Invalid

routes = web.RouteTableDef()


def _back_to(raw: object) -> str:
    """Where the switch returns: a path on this host, else the Now page."""
    if not isinstance(raw, str) or not raw.startswith("/") or raw.startswith("//"):
        return "/now"
    parts = urlsplit(raw)
    if parts.scheme or parts.netloc:
        return "/now"
    return raw[:2000]


@routes.post("/zone")
async def set_zone(request: web.Request) -> web.Response:
    """Show times in the viewer's zone (``want=mine`` with the browser's ``zone``) or back
    in each page's own (``want=page``), for the signed-in person in every browser; a 303
    back to ``next``. A form that is not one of the two is refused (400) before anything
    is kept."""
    session = require(request, STAFF)
    form = await request.post()
    target = _back_to(form.get("next"))
    want = form.get("want")
    if want == "page":
        name = None
    elif want == "mine":
        zone = form.get("zone")
        name = zone.strip() if isinstance(zone, str) else ""
        if not known_zone(name):
            raise Invalid(
                f"zone: {name[:64]!r} is not a time zone this host knows; the page's script "
                "sends your browser's zone (an IANA name such as America/New_York)."
            )
    else:
        raise Invalid("want: expected mine or page.")
    await choose_zone(host_of(request).db, session.principal.token_id, name)
    response = see_other(target)
    # A choice kept in a browser's cookie before it was kept with the token is not read;
    # the switch clears it so that browser holds nothing stale.
    if LEGACY_COOKIE in request.cookies:
        response.del_cookie(LEGACY_COOKIE, path="/")
    return response
