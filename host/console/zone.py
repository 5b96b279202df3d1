"""The switch between the viewer's zone and each page's own (:mod:`pageant.console.clock`)."""

from __future__ import annotations

from urllib.parse import urlsplit

from aiohttp import web

from pageant.access.roles import STAFF
from pageant.console.clock import COOKIE, MAX_AGE, known_zone
from pageant.console.keys import require, see_other
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
    in each page's own (``want=page``); a 303 back to ``next``."""
    require(request, STAFF)
    form = await request.post()
    target = _back_to(form.get("next"))
    want = form.get("want")
    response = see_other(target)
    if want == "page":
        response.del_cookie(COOKIE, path="/")
        return response
    zone = form.get("zone")
    name = zone.strip() if isinstance(zone, str) else ""
    if want != "mine":
        raise Invalid("want: expected mine or page.")
    if not known_zone(name):
        raise Invalid(
            f"zone: {name[:64]!r} is not a time zone this host knows; the page's script sends "
            "your browser's zone (an IANA name such as America/New_York)."
        )
    response.set_cookie(COOKIE, name, max_age=MAX_AGE, path="/", samesite="Lax", httponly=True)
    return response
