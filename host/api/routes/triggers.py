"""Triggers: a game server tells pageant that something happened in the game.

The ``game`` role exists for this route and can do nothing else; an admin may fire too (to
try a gate by hand). Core's lifecycle triggers are the host's alone: no token fires them
(:mod:`pageant.gates.firers`). The body is the payload: the trigger's declared variables, checked
before anything is written.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from pageant.access.roles import FIRERS
from pageant.api.keys import HOST
from pageant.api.routing import RouteTable, principal, read_json, respond
from pageant.errors import NotFound
from pageant.gates.firers import check_outside_firing
from pageant.plugins.registry import Registry

routes = RouteTable("triggers")


FIRED = {
    "type": "object",
    "required": ["gates_matched", "gates_closed"],
    "properties": {
        "gates_matched": {
            "type": "integer",
            "description": "open gates this firing matched and counted for",
        },
        "gates_closed": {
            "type": "integer",
            "description": "of those, the gates this firing satisfied",
        },
    },
}


def payload_schema(registry: Registry) -> dict[str, Any]:
    """The payload as the document declares it: for each registered trigger, an object of
    exactly its declared variables (any may be left out), each of its declared type."""
    variants = []
    for trigger_id, trigger in sorted(registry.triggers.items()):
        variants.append(
            {
                "type": "object",
                "title": trigger_id,
                "description": f"the payload of {trigger_id}: {trigger.label}",
                "properties": {
                    v.name: {"type": v.type, "description": v.description}
                    for v in trigger.variables
                },
                "additionalProperties": False,
            }
        )
    schema: dict[str, Any] = {
        "type": "object",
        "description": "the payload: only the fired trigger's declared variables, each of its "
        "declared type (GET /api/v1/admin/catalog)",
    }
    if variants:
        schema["anyOf"] = variants
    else:
        schema["maxProperties"] = 0
    return schema


@routes.post(
    "/api/v1/triggers/{trigger_id}/fire",
    roles=FIRERS,
    summary=(
        "Fire a trigger; the JSON body is the payload, holding only the trigger's declared "
        "variables (each of its declared type)"
    ),
    body=payload_schema,
    response=FIRED,
)
async def fire(request: web.Request) -> web.Response:
    host = request.app[HOST]
    trigger_id = request.match_info["trigger_id"]
    # The trigger before the body: an unknown trigger is a 404 whatever was sent with it.
    if trigger_id not in host.registry.triggers:
        raise NotFound(f"no such trigger: {trigger_id!r} (no installed plugin registers it)")
    check_outside_firing(trigger_id)
    payload = await read_json(request)
    return respond(await host.emit(trigger_id, payload, actor=principal(request).actor))
