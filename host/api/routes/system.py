"""Liveness and the API's own description."""

from __future__ import annotations

from aiohttp import web

from pageant.api.keys import HOST, ROUTES
from pageant.api.openapi import document
from pageant.api.routing import RouteTable, respond
from pageant.db.migrate import schema_state

routes = RouteTable("system")

HEALTH = {
    "type": "object",
    "required": ["status", "schema"],
    "properties": {
        "status": {"enum": ["ok", "degraded"]},
        "schema": {
            "type": "object",
            "properties": {
                "current": {"type": ["string", "null"]},
                "head": {"type": ["string", "null"]},
                "up_to_date": {"type": "boolean"},
            },
        },
    },
}


@routes.get("/healthz", roles=None, summary="Liveness and schema state", response=HEALTH)
async def healthz(request: web.Request) -> web.Response:
    state = await schema_state(request.app[HOST].db)
    return respond({"status": "ok" if state.up_to_date else "degraded", "schema": state.as_dict()})


@routes.get("/api/v1/openapi.json", roles=None, summary="This API's OpenAPI document")
async def openapi(request: web.Request) -> web.Response:
    from pageant import __version__

    return respond(document(request.app[ROUTES], __version__, request.app[HOST].registry))
