"""Now: the runs under way across every event, each with why it waits; those waiting on a
person lead the page in a banner."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from pageant.access.roles import STAFF
from pageant.console.keys import host_of, render, require
from pageant.runs.console import live_run_views

routes = web.RouteTableDef()


async def _now(request: web.Request) -> dict[str, Any]:
    runs = await live_run_views(host_of(request))
    waiting = [r for r in runs if (r["waiting_on"] or {}).get("reason") == "parked"]
    return {"runs": runs, "waiting_on_person": waiting}


@routes.get("/now")
async def now_page(request: web.Request) -> web.Response:
    require(request, STAFF)
    return render(request, "now.html", **await _now(request))


@routes.get("/now/live")
async def now_live(request: web.Request) -> web.Response:
    """The part of the page htmx polls."""
    require(request, STAFF)
    return render(request, "_now_live.html", **await _now(request))
