"""Plugins: what loaded, and what was refused with the reason (``pageant plugins``'s list),
each loaded plugin with what its own start check found (``problems``)."""

from __future__ import annotations

from aiohttp import web

from pageant.access.roles import STAFF
from pageant.console.keys import host_of, render, require
from pageant.plugins.loader import plugin_listing

routes = web.RouteTableDef()


@routes.get("/plugins")
async def plugins_page(request: web.Request) -> web.Response:
    require(request, STAFF)
    host = host_of(request)
    catalog = host.registry.catalog()
    listed = host.link.annotate(plugin_listing(host.plugins, unavailable=host.plugin_unavailable))
    return render(request, "plugins.html", plugins=listed, catalog=catalog)
