"""The game link: an agent in a game that can only call out syncs here (``docs/link.md``).

One call carries the agent's answers to commands and what happened in the game, says the
server is alive, and answers the commands waiting for it: at once when there are any, else
when one is queued or the agent's ``wait`` runs out. A sync held open costs a future, not a
thread or a database connection. Only a game token bound to the server may sync for it: a
token for another server is a 403, a bad or revoked one a 401, each counted.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import aiohttp
from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pageant.access.roles import GAME
from pageant.api.keys import HOST
from pageant.api.routes.triggers import BatchEntry, owner_bound
from pageant.api.routing import AUTH_PROBLEM_KEY, RouteTable, principal, read_body, respond
from pageant.errors import Forbidden, Invalid, Unauthenticated
from pageant.gates.emit import MAX_BATCH
from pageant.link.service import SERVER

routes = RouteTable("link")


class Result(BaseModel):
    """The agent's answer to one command, named by its command and key."""

    model_config = ConfigDict(extra="forbid")

    command: str = Field(min_length=1, max_length=100)
    key: str = Field(min_length=1, max_length=200)
    answer: Any = Field(default=None, description="what the command did (any JSON)")
    error: str | None = Field(
        default=None, max_length=2000, description="why the command failed, if it did"
    )


class Sync(BaseModel):
    """One sync: answers, happenings, and how long to wait for commands."""

    model_config = ConfigDict(extra="forbid")

    results: list[Result] = Field(default_factory=list, max_length=1000)
    happenings: list[Any] = Field(
        default_factory=list,
        max_length=MAX_BATCH,
        description="firings as POST /api/v1/triggers/fire takes them: "
        '{"trigger", "payload", "id"?, "at"?}; an "id" makes a re-sent one count once',
    )
    wait: float | None = Field(
        default=None,
        ge=0,
        description="seconds to hold the sync open for commands (at most link_wait_seconds, "
        "its default)",
    )


class Command(BaseModel):
    """A command for the agent: do it once per key, answer it in a later sync's results."""

    command: str
    key: str
    payload: Any
    deadline: str = Field(description="after this instant an answer is not acted on")


class SyncAnswer(BaseModel):
    commands: list[Command]
    happenings: list[BatchEntry] = Field(description="one entry per happening, in order")


def agent_of(request: web.Request) -> tuple[str, Any]:
    """The server a link request names in its path, and the principal it is made as: a game
    token bound to that server. Raises 400 for a path that names no server, and 401 and 403
    as the routes do, counting both."""
    server = request.match_info["server"]
    if SERVER.match(server) is None:
        raise Invalid(
            "not a server id", details=["path.server: expected 1 to 100 of A-Z a-z 0-9 . _ -"]
        )
    host = request.app[HOST]
    who = principal(request)
    if who is None:
        host.metrics.tokens_refused.labels(reason="unauthenticated").inc()
        problem = request.get(AUTH_PROBLEM_KEY)
        raise Unauthenticated(
            problem or "a bearer token is required (Authorization: Bearer <token>)"
        )
    if who.role not in GAME:
        raise Forbidden("requires role game")
    if not who.speaks_for(server):
        host.metrics.tokens_refused.labels(reason="server").inc()
        bound = ", ".join(who.servers or ()) or "no server"
        raise Forbidden(f"this token speaks for {bound}, not {server}")
    return server, who


async def _received(
    request: web.Request, server: str, who: Any, body: Sync
) -> list[dict[str, Any]]:
    """What a sync brings, over HTTP or the socket alike: the server noted as synced, its
    answers recorded, its happenings fired (as the agent's token, only its owners'
    triggers). Answers one entry per happening."""
    host = request.app[HOST]
    link = host.link
    # The heartbeat first: its write (once a second) is then not between the answers waking
    # their calls and the wait for the next command, which a call made at once finds held
    # (and hands its command to, without a read).
    await link.synced(server, who.owners or ())
    if body.results:
        await link.record_results(server, [r.model_dump() for r in body.results])
    fired: list[dict[str, Any]] = []
    if body.happenings:
        fired = await host.emit_batch(
            body.happenings,
            actor=who.actor,
            issuer=f"token:{who.token_id}",
            check=lambda trigger_id: owner_bound(request, trigger_id),
            token_id=who.token_id,
        )
    return fired


def _open(request: web.Request) -> bool:
    """Whether the agent's connection is still open (an answer can still reach it)."""
    transport = request.transport
    return transport is not None and not transport.is_closing()


@routes.post(
    "/api/v1/link/{server}/sync",
    roles=None,
    summary=(
        "A game-link agent's sync (a game token bound to the server): brings answers and "
        "happenings, answers the commands waiting, at once or when its wait runs out"
    ),
    body=Sync,
    body_optional=True,
    response=SyncAnswer,
    tag="link",
)
async def sync(request: web.Request) -> web.Response:
    host = request.app[HOST]
    server, who = agent_of(request)
    body = await read_body(request, Sync, optional=True)
    limit = host.settings.link_wait_seconds
    if body.wait is not None and body.wait > limit:
        raise Invalid(
            "the wait is too long",
            details=[f"body.wait: at most {limit:g} seconds (link_wait_seconds)"],
        )
    wait = limit if body.wait is None else body.wait
    link = host.link
    fired = await _received(request, server, who, body)
    host.metrics.link_syncs_held.inc()
    try:
        commands = await link.take(server, wait, lambda: _open(request))
    finally:
        host.metrics.link_syncs_held.dec()
    return respond({"commands": commands, "happenings": fired})


@routes.get(
    "/api/v1/link/{server}/ws",
    roles=None,
    summary=(
        "The game link over a WebSocket (a game token bound to the server): the agent sends "
        "the sync's results and happenings as messages, the host sends commands the moment "
        "they are queued; an open socket is the heartbeat"
    ),
    status=101,
    tag="link",
)
async def socket(request: web.Request) -> web.StreamResponse:
    host = request.app[HOST]
    server, who = agent_of(request)
    ws = web.WebSocketResponse(heartbeat=host.settings.link_offline_seconds / 3)
    if not ws.can_prepare(request).ok:
        raise Invalid("not a WebSocket request", details=["headers.Upgrade: expected websocket"])
    await ws.prepare(request)
    link = host.link
    await link.synced(server, who.owners or ())

    async def deliver() -> None:
        # The socket is the heartbeat: each turn notes a sync, at least every third of
        # link_offline_seconds, and sends what was queued.
        every = host.settings.link_offline_seconds / 3
        while not ws.closed:
            commands = await link.take(server, every, lambda: not ws.closed)
            await link.synced(server, who.owners or ())
            if commands and not ws.closed:
                await ws.send_json({"commands": commands, "happenings": []})

    sender = asyncio.get_running_loop().create_task(deliver())
    host.metrics.link_syncs_held.inc()
    try:
        async for message in ws:
            if message.type != aiohttp.WSMsgType.TEXT:
                continue
            try:
                body = Sync.model_validate_json(message.data)
            except ValidationError as exc:
                problems = [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]
                await ws.send_json({"error": {"code": "invalid", "details": problems}})
                continue
            fired = await _received(request, server, who, body)
            await ws.send_json({"commands": [], "happenings": fired})
    finally:
        host.metrics.link_syncs_held.dec()
        sender.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sender
    return ws
