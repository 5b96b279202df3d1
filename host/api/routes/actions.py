"""The switchboard: every action's enablement and caps, changed by an admin, audited."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from pageant.access.roles import ADMIN, STAFF
from pageant.api.bodies import no_defaults
from pageant.api.keys import HOST
from pageant.api.routing import RouteTable, principal, read_body, respond
from pageant.states import Risk
from pageant.switchboard import board
from pageant.switchboard.pricing import MAX_AMOUNT

routes = RouteTable("actions")

Cap = Annotated[int, Field(ge=0, le=MAX_AMOUNT, strict=True)]


class ActionChange(BaseModel):
    """What to change: ``enabled``, ``caps`` (replacing the action's whole map), or both."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=no_defaults)

    # Defaults are not validated: an absent field stays None, a null actually sent is refused.
    # The annotations say what a sent value must be; the None default contradicts them on
    # purpose, hence the ignores (for caps the pydantic plugin checks the None default as
    # Field's argument, so mypy names it there).
    enabled: bool = Field(None, strict=True)  # type: ignore[assignment]  # None: absent, see above
    caps: dict[str, Cap | None] = Field(
        None,  # type: ignore[arg-type]  # None: absent, see above
        description="dimension -> a whole number of at least 0, or null (metered, unbounded)",
    )


class Dimension(BaseModel):
    dimension: str | None
    usable: bool
    label: str | None = None
    unit: str | None = None
    reason: str | None = None


class ActionOut(BaseModel):
    """One action on the switchboard."""

    id: str
    label: str
    owner: str
    plugin: str | None
    risk: Risk
    reversible: Literal["full", "partial", "none"]
    enabled: bool
    configured: bool
    caps: dict[str, int | None]
    dimensions: list[Dimension]
    updated_by: str | None
    updated_at: datetime | None


class ActionList(BaseModel):
    items: list[ActionOut]
    next_cursor: str | None


class HistoryLine(BaseModel):
    id: int
    action_id: str
    enabled: bool
    caps: dict[str, int | None]
    before: dict | None
    actor: str | None
    at: datetime


class HistoryList(BaseModel):
    items: list[HistoryLine]
    next_cursor: str | None


@routes.get(
    "/api/v1/admin/actions",
    roles=STAFF,
    summary="The switchboard: every registered action, its enablement and caps",
    response=ActionList,
)
async def list_actions(request: web.Request) -> web.Response:
    host = request.app[HOST]
    async with host.db.connect() as conn:
        items = await board.listing(conn, host.registry)
    return respond({"items": items, "next_cursor": None})


@routes.put(
    "/api/v1/admin/actions/{action_id}",
    roles=ADMIN,
    summary="Enable or disable an action and set its caps",
    body=ActionChange,
    response=ActionOut,
)
async def change_action(request: web.Request) -> web.Response:
    host = request.app[HOST]
    action_id = request.match_info["action_id"]
    board.require_action(host.registry, action_id)
    body = await read_body(request, ActionChange)
    async with host.db.begin() as conn:
        item = await board.set_action(
            conn,
            host.registry,
            action_id,
            enabled=body.enabled,
            caps=body.caps,
            actor=principal(request).actor,
            now=host.clock.now(),
        )
    host.wake()  # a run waiting on a refused step may be retried now
    return respond(item)


@routes.get(
    "/api/v1/admin/actions/{action_id}/history",
    roles=STAFF,
    summary="Every change to one action's switchboard row, oldest first",
    response=HistoryList,
)
async def action_history(request: web.Request) -> web.Response:
    host = request.app[HOST]
    async with host.db.connect() as conn:
        items = await board.history(conn, host.registry, request.match_info["action_id"])
    return respond({"items": items, "next_cursor": None})
