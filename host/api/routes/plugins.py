"""The plugins, and the catalog of what they declared."""

from __future__ import annotations

from aiohttp import web

from pageant.access.roles import STAFF
from pageant.api.keys import HOST
from pageant.api.routing import RouteTable, respond
from pageant.errors import NotFound
from pageant.plugins.loader import plugin_listing
from pageant.plugins.options import resolve_options
from pageant.switchboard import board

routes = RouteTable("plugins")

PLUGIN_LIST = {
    "type": "object",
    "properties": {
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    k: {"type": ["string", "null"]}
                    for k in (
                        "name",
                        "distribution",
                        "version",
                        "entry_point",
                        "owner",
                        "contract",
                        "status",
                        "reason",
                        "traceback",
                    )
                }
                | {
                    "settings": {"type": ["object", "null"]},
                    "dropped": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                k: {"type": "string"} for k in ("lease", "target", "reason")
                            },
                        },
                    },
                },
            },
        }
    },
}
CATALOG = {
    "type": "object",
    "properties": {
        k: {"type": "array", "items": {"type": "object"}}
        for k in ("actions", "triggers", "budgets", "leases", "option_sources", "legs")
    },
}
OPTIONS = {
    "type": "object",
    "properties": {
        "ok": {"type": "boolean"},
        "items": {"type": "array", "items": {"type": "object"}},
        "reason": {"type": "string"},
    },
}


@routes.get(
    "/api/v1/admin/plugins", roles=STAFF, summary="Loaded and refused plugins", response=PLUGIN_LIST
)
async def list_plugins(request: web.Request) -> web.Response:
    return respond({"items": plugin_listing(request.app[HOST].plugins)})


@routes.get(
    "/api/v1/admin/catalog",
    roles=STAFF,
    summary="Everything the plugins declared",
    response=CATALOG,
)
async def catalog(request: web.Request) -> web.Response:
    host = request.app[HOST]
    async with host.db.connect() as conn:
        return respond(await board.catalog_with_enablement(conn, host.registry))


@routes.get(
    "/api/v1/admin/catalog/options/{source_id}",
    roles=STAFF,
    summary="One option source's current values",
    response=OPTIONS,
)
async def options(request: web.Request) -> web.Response:
    host = request.app[HOST]
    source_id = request.match_info["source_id"]
    source = host.registry.option_sources.get(source_id)
    if source is None:
        raise NotFound(f"no plugin declares the option source {source_id!r}")
    return respond(await resolve_options(source, host.plugins.code_roots()))
