"""Triggers: a game server tells pageant that something happened in the game.

The ``game`` role exists for these routes and can do nothing else; an admin may fire too
(to try a gate by hand). Core's lifecycle triggers are the host's alone: no token fires them
(:mod:`pageant.gates.firers`); a game token bound to owners (``--owner openarena``) fires only
their triggers, and a firing outside the binding is a 403, counted. One firing's body is the
payload: the trigger's declared variables, checked before anything is written; a batch's
body is a list of firings, each checked on its own. A firing may carry an idempotency key
(the ``Idempotency-Key`` header, or ``id`` in a batch), kept per token: the same key again
answers the first answer and counts nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, RootModel

from pageant.access.roles import FIRERS
from pageant.access.tokens import live_or_refused
from pageant.api.keys import HOST
from pageant.api.routing import INSTANT, Query, RouteTable, principal, read_json, respond
from pageant.errors import Forbidden, Invalid, NotFound, PageantError, Unauthenticated
from pageant.gates.emit import MAX_BATCH, MAX_KEY, key_problem
from pageant.gates.firers import check_token_firing
from pageant.plugins.registry import Registry

routes = RouteTable("triggers")


class Fired(BaseModel):
    """What one firing did."""

    gates_matched: int = Field(description="open gates this firing matched and counted for")
    gates_closed: int = Field(description="of those, the gates this firing satisfied")


#: The header that carries one firing's idempotency key.
KEY_HEADER = "Idempotency-Key"


class BatchEntry(BaseModel):
    """One firing's answer in a batch: what it did, or its own refusal."""

    model_config = ConfigDict(json_schema_extra={"required": ["status"]})

    status: int = Field(description="200, or the firing's own 400 or 404")
    gates_matched: int = Field(description="open gates this firing matched and counted for")
    gates_closed: int = Field(description="of those, the gates this firing satisfied")
    error: dict[str, Any] = Field(description="a refused firing's error, as any route's")


class BatchAnswer(RootModel[list[BatchEntry]]):
    """One entry a firing, in the order they were sent."""


def batch_schema(registry: Registry) -> dict[str, Any]:
    """A batch: a list of 1 to 500 firings. Each item is checked on its own and a bad one is
    answered in its own entry (``400``/``404``) while the others are recorded, so the items
    are documented in words: a schema on them would promise a whole-request refusal that
    the route, by design, does not give."""
    triggers = ", ".join(sorted(registry.triggers)) or "none installed"
    return {
        "type": "array",
        "minItems": 1,
        "maxItems": MAX_BATCH,
        "items": {
            "description": (
                '{"trigger": a trigger id, "payload": its variables, "id"?: an idempotency '
                f'key of 1 to {MAX_KEY} printable characters, "at"?: an instant with an offset}}; '
                f"triggers: {triggers}"
            ),
        },
    }


def issuer_of(request: web.Request) -> str:
    """Whose keys a request's firings are kept among: its token's."""
    return f"token:{principal(request).token_id}"


async def refuse_a_dead_token(request: web.Request) -> None:
    """Raise the 401 of a token revoked or expired since it was last read: a request that
    records nothing (refused before, or every firing of its batch refused) reads it here,
    so its answer is the token's refusal, as any route's would be."""
    host = request.app[HOST]
    token_id = principal(request).token_id
    async with host.db.connect() as conn:
        refused = await live_or_refused(conn, [token_id], host.clock.now())
    if refused:
        raise refused[token_id]


@asynccontextmanager
async def dead_token_first(request: web.Request) -> AsyncIterator[None]:
    """A refusal raised in the block is answered as the token's 401 instead when the token
    was revoked or expired since it was last read (:func:`refuse_a_dead_token`)."""
    try:
        yield
    except Unauthenticated:
        raise
    except PageantError:
        await refuse_a_dead_token(request)
        raise


def owner_bound(request: web.Request, trigger_id: str) -> None:
    """Refuse (403) a firing its token may not make: core's triggers, and a trigger outside
    a game token's owner binding, which is counted (``pageant_game_tokens_refused``)."""
    try:
        check_token_firing(trigger_id, principal(request).owners)
    except Forbidden:
        if principal(request).may_fire(trigger_id):
            raise
        request.app[HOST].metrics.tokens_refused.labels(reason="owner").inc()
        raise


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
        f"variables (each of its declared type). An {KEY_HEADER} header makes a retry safe"
    ),
    body=payload_schema,
    response=Fired,
    query={"at": Query("when it happened in the game, an instant with an offset", INSTANT)},
)
async def fire(request: web.Request) -> web.Response:
    async with dead_token_first(request):
        return await _fire(request)


async def _fire(request: web.Request) -> web.Response:
    host = request.app[HOST]
    trigger_id = request.match_info["trigger_id"]
    # The trigger before the body: an unknown trigger is a 404 whatever was sent with it.
    if trigger_id not in host.registry.triggers:
        raise NotFound(f"no such trigger: {trigger_id!r} (no installed plugin registers it)")
    owner_bound(request, trigger_id)
    payload = await read_json(request)
    key = request.headers.get(KEY_HEADER)
    problem = None if key is None else key_problem(key)
    if problem:
        raise Invalid(
            "the idempotency key does not fit", details=[f"headers.{KEY_HEADER}: {problem}"]
        )
    answer = await host.emit(
        trigger_id,
        payload,
        actor=principal(request).actor,
        key=key,
        at=request.query.get("at"),
        issuer=issuer_of(request),
        token_id=principal(request).token_id,
    )
    return respond(answer)


@routes.post(
    "/api/v1/triggers/fire",
    roles=FIRERS,
    summary=(
        f"Fire a batch of up to {MAX_BATCH} firings in one transaction; answers one entry per "
        "firing in order, a refused firing with its own 400, 403 or 404"
    ),
    body=batch_schema,
    response=BatchAnswer,
)
async def fire_batch(request: web.Request) -> web.Response:
    host = request.app[HOST]
    who = principal(request)
    async with dead_token_first(request):
        items = await read_json(request)
        answers = await host.emit_batch(
            items,
            actor=who.actor,
            issuer=issuer_of(request),
            check=lambda trigger_id: owner_bound(request, trigger_id),
            token_id=who.token_id,
        )
    if all(answer["status"] != 200 for answer in answers):
        await refuse_a_dead_token(request)
    return respond(answers)
