"""The plugins, and the catalog of what they declared."""

from __future__ import annotations

from typing import Any, Literal

from aiohttp import web
from pydantic import BaseModel, Field

from pageant.access.roles import STAFF
from pageant.api.keys import HOST
from pageant.api.routing import SOME_FIELDS, RouteTable, respond
from pageant.errors import NotFound
from pageant.plugins.loader import plugin_listing
from pageant.plugins.options import resolve_options
from pageant.switchboard import board

routes = RouteTable("plugins")


class DroppedTarget(BaseModel):
    """A lease target the plugin's self-check dropped, and why."""

    model_config = SOME_FIELDS

    lease: str
    target: str
    reason: str


class LinkServer(BaseModel):
    """A game-link server's state: up, down or unknown, and the sentence saying why."""

    state: Literal["up", "down", "unknown"]
    said: str


class PluginOut(BaseModel):
    """A loaded or a refused plugin (a refused one with its reason and traceback)."""

    model_config = SOME_FIELDS

    name: str | None
    distribution: str | None
    version: str | None
    entry_point: str | None
    owner: str | None
    contract: str | None
    status: str | None
    reason: str | None
    traceback: str | None
    settings: dict[str, Any] | None
    dropped: list[DroppedTarget]
    #: What the operator should know of a loaded plugin (it cannot promise that a late
    #: change is refused, say), each one sentence.
    warnings: list[str]
    #: Why the loaded plugin says it cannot take steps now (not configured, its game down).
    unavailable: str | None
    link: dict[str, LinkServer] = Field(
        description="a game-link plugin's servers and their states (docs/link.md)"
    )
    problems: list[str] = Field(
        description="what the plugin's own check (PLUGIN_INFO check, contract 1.3) found wrong "
        "at start, each a sentence naming where to fix it"
    )


class PluginList(BaseModel):
    model_config = SOME_FIELDS

    items: list[PluginOut]


class Catalog(BaseModel):
    """What the plugins declared, by kind."""

    model_config = SOME_FIELDS

    actions: list[dict[str, Any]]
    triggers: list[dict[str, Any]]
    budgets: list[dict[str, Any]]
    leases: list[dict[str, Any]]
    option_sources: list[dict[str, Any]]
    legs: list[dict[str, Any]]
    #: Contract 1.5: the numbers the plugins read from their games (players online).
    readings: list[dict[str, Any]]


class OptionValues(BaseModel):
    """An option source's values, or why there are none."""

    model_config = SOME_FIELDS

    ok: bool
    items: list[dict[str, Any]]
    reason: str


@routes.get(
    "/api/v1/admin/plugins", roles=STAFF, summary="Loaded and refused plugins", response=PluginList
)
async def list_plugins(request: web.Request) -> web.Response:
    host = request.app[HOST]
    return respond(
        {
            "items": host.link.annotate(
                plugin_listing(host.plugins, unavailable=host.plugin_unavailable)
            )
        }
    )


@routes.get(
    "/api/v1/admin/catalog",
    roles=STAFF,
    summary="Everything the plugins declared",
    response=Catalog,
)
async def catalog(request: web.Request) -> web.Response:
    host = request.app[HOST]
    async with host.db.connect() as conn:
        return respond(await board.catalog_with_enablement(conn, host.registry))


@routes.get(
    "/api/v1/admin/catalog/options/{source_id}",
    roles=STAFF,
    summary="One option source's current values",
    response=OptionValues,
)
async def options(request: web.Request) -> web.Response:
    host = request.app[HOST]
    source_id = request.match_info["source_id"]
    source = host.registry.option_sources.get(source_id)
    if source is None:
        raise NotFound(f"no plugin declares the option source {source_id!r}")
    return respond(await resolve_options(source, host.plugins.code_roots()))
