"""luanti: run pageant world events on a real Luanti server, through the host's game link.

Luanti has no remote console and a mod cannot listen, so the game calls out: the mod
``pageant_bridge`` (shipped in this package, installed with ``pageant-luanti install-mod``)
syncs with the host, runs the commands this plugin queues with ``context.link.call`` and
brings back what happened. The plugin itself opens nothing:

- ``luanti.say`` (a chat line to everyone), ``luanti.spawn`` (beacons and guardians at a
  named place, one resource each, removed when the run ends) and ``luanti.give`` (an item
  stack into a chest at a place, taken back when the run ends if it is still there);
- a lease, ``luanti.setting`` (``time_speed``, and gravity through every player's physics),
  handed its ``until`` so the world puts the value back by itself if pageant is gone;
- five triggers, fired by the mod straight to the host (the plugin never sees them);
- a reading, ``luanti.players_online`` (contract 1.5): the players connected to a world,
  counted by its bridge (the ``players`` command);
- ``pageant_reconcile``, answered from the world's loaded entities. Availability is the
  link's: a world that stops syncing is down, and its return reconciles the plugin.

What any game that calls out needs (the calls, the step's envelope, places, the lease over
three commands, the option sources, the reconcile of listed things) is the host's
:class:`pageant.link.toolkit.LinkPlugin`; this module holds what is Luanti's.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from pageant import hookimpl
from pageant.hookspecs import UNKNOWN, ActionContext, HeldResource, LinkFailure, ReadContext
from pageant.link.toolkit import LinkPlugin

from .catalog import ACTIONS, KINDS, MAX_ENTITIES, MAX_ITEMS, TRIGGERS
from .settings import LuantiSettings

__all__ = ["LuantiPlugin", "LuantiSettings"]

log = logging.getLogger("pageant_luanti")

ENTITY = "luanti.entity"
ITEM = "luanti.item"


class LuantiPlugin(LinkPlugin):
    """The plugin. The host makes one per start (the entry point names this class)."""

    settings_model = LuantiSettings

    def __init__(self) -> None:
        super().__init__()
        self.PLUGIN_INFO = {
            "owner": "luanti",
            "contract": "^1.5",
            "settings": LuantiSettings,
            # The worlds are learned as they sync (tokens bound to owner luanti) or are called:
            # declaring the settings' default here would watch a world nobody installed.
            "link": {"servers": [], "commands": [*sorted(ACTIONS), "players"]},
        }

    def _check(self, ctx: ActionContext) -> None:
        """A param the world cannot take raises ``ValueError`` naming it."""
        params = ctx.params
        if "place" in params:
            self.place(str(params["place"]))
        if params.get("kind", "beacon") not in KINDS:
            raise ValueError(f"no kind {params['kind']!r}; the bridge has {', '.join(KINDS)}")
        high = MAX_ITEMS if "item" in params else MAX_ENTITIES
        if "count" in params and not 1 <= int(params["count"]) <= high:
            raise ValueError(f"count {params['count']} is outside 1 to {high}")

    async def _at(self, ctx: ActionContext, command: str, **payload: Any) -> tuple[str, Any]:
        """``command`` at the step's place, in that place's world: the world and its answer."""
        where = self.where(str(ctx.params["place"]))
        server = where.pop("server")
        return server, await self.step(ctx, server, command, {**where, **payload})

    # ── the actions ──────────────────────────────────────────────────────────

    async def say(self, ctx: ActionContext) -> dict[str, Any]:
        async def do() -> dict[str, Any]:
            server = ctx.params.get("server") or self.settings.servers[0]
            await self.step(ctx, server, "say", {"message": ctx.params["message"]})
            return {"ok": True}

        return await self.guard(ctx, do, self._check)

    async def spawn(self, ctx: ActionContext) -> dict[str, Any]:
        """``count`` entities of ``kind`` at ``place``, one resource for each id the world
        answers: the mod names them ``KEY#1``..., answers a repeat from what it remembers,
        and makes none once the key was reverted (a revert is final for its key)."""

        async def do() -> dict[str, Any]:
            self._check(ctx)
            kind, count = ctx.params["kind"], int(ctx.params["count"])
            server, said = await self._at(ctx, "spawn", kind=kind, count=count)
            return {"ok": True, "resources": self.listed(ENTITY, server, said.get("ids", []))}

        return await self.guard(ctx, do, self._check)

    async def despawn(self, ctx: ActionContext) -> dict[str, Any]:
        """Remove every entity the key's spawn made, in one command: the host reverts once
        per resource under the same key, and the link answers a repeat from its row."""

        async def do() -> dict[str, Any]:
            ids = spawned_ids(ctx.idempotency_key, int(ctx.params["count"]))
            server = self.place(str(ctx.params["place"])).server
            await self.step(ctx, str(server), "despawn", {"ids": ids})
            return {"ok": True}

        return await self.guard(ctx, do, self._check)

    async def give(self, ctx: ActionContext) -> dict[str, Any]:
        async def do() -> dict[str, Any]:
            self._check(ctx)
            item, count = str(ctx.params["item"]), int(ctx.params["count"])
            server, said = await self._at(ctx, "give", item=item, count=count)
            if not (given := int(said.get("given", 0))):  # taken back before it came
                return {"ok": True}
            ref = f"{server}/{ctx.idempotency_key}"
            return {"ok": True, "resources": [{"kind": ITEM, "ref": ref, "given": given}]}

        return await self.guard(ctx, do, self._check)

    async def take(self, ctx: ActionContext) -> dict[str, Any]:
        """Take back what was given, as much of it as is still in the chest; what players
        took already is logged as gone (a WARNING naming the key): the contract gives a
        revert no way to write it on the ledger's row."""

        async def do() -> dict[str, Any]:
            given = [int(r.detail.get("given", 0)) for r in ctx.resources]
            count = sum(given) if given else int(ctx.params["count"])
            item = ctx.params["item"]
            server, said = await self._at(ctx, "take", item=item, count=count)
            if gone := int(said.get("gone", 0)):
                log.warning(
                    "luanti.give under %s: %d of %d %s were gone from the chest at %s in %s "
                    "(taken by players); the rest was taken back",
                    ctx.idempotency_key,
                    gone,
                    count,
                    item,
                    ctx.params["place"],
                    server,
                )
            return {"ok": True}

        return await self.guard(ctx, do, self._check)

    # ── the reading ──────────────────────────────────────────────────────────

    async def players_online(self, params: dict[str, Any], ctx: ReadContext) -> Any:
        """The players connected to the world, as its bridge counts them (``players``);
        unknown when the world does not answer by the read's deadline."""
        server = params.get("server") or self.settings.servers[0]
        try:
            said = await self.call(str(server), "players", {}, deadline=ctx.deadline)
        except LinkFailure:
            return UNKNOWN
        count = said.get("count") if isinstance(said, dict) else None
        return count if isinstance(count, int) and not isinstance(count, bool) else UNKNOWN

    # ── reconcile ────────────────────────────────────────────────────────────

    @hookimpl
    async def pageant_reconcile(self, resources: Sequence[HeldResource]) -> list[str]:
        """Entities still in their world (loaded, or in a block not active yet); leases and
        given items stand (the restore and the take find out the rest). A world that cannot
        answer raises: nothing changes."""

        def ids(said: Any) -> list[str]:
            return [e["id"] for e in said.get("entities", [])] + said.get("unloaded", [])

        return await self.reconcile_listed(resources, ENTITY, "entities", ids)

    # ── declarations ─────────────────────────────────────────────────────────

    @hookimpl
    def pageant_actions(self) -> list[dict[str, Any]]:
        callables = {
            "luanti.say": {"perform": self.say},
            "luanti.spawn": {"perform": self.spawn, "revert": self.despawn},
            "luanti.give": {"perform": self.give, "revert": self.take},
        }
        return [{**action, **callables[action["id"]]} for action in ACTIONS.values()]

    @hookimpl
    def pageant_leases(self) -> list[dict[str, Any]]:
        label = "A live world setting (time_speed, gravity)"
        return [self.setting_lease("luanti.setting", label)]

    @hookimpl
    def pageant_budgets(self) -> list[dict[str, Any]]:
        return [{"dimension": "luanti.entities", "label": "Entities spawned", "unit": "entities"}]

    @hookimpl
    def pageant_option_sources(self) -> list[dict[str, Any]]:
        return [
            {"id": "luanti.options.places", "label": "Places", "resolve": self.place_options},
            {
                "id": "luanti.options.settings",
                "label": "Leasable settings",
                "resolve": self.setting_options,
            },
        ]

    @hookimpl
    def pageant_triggers(self) -> list[dict[str, Any]]:
        return TRIGGERS

    @hookimpl
    def pageant_readings(self) -> list[dict[str, Any]]:
        return [
            {
                "id": "luanti.players_online",
                "label": "Players online",
                "unit": "players online",
                "params": [
                    {
                        "name": "server",
                        "type": "string",
                        "required": False,
                        "description": "Which world (default: the first configured).",
                        "example": "world",
                    }
                ],
                "read": self.players_online,
                "description": "The players connected to the world, counted by its bridge.",
            }
        ]


def spawned_ids(key: str, count: int) -> list[str]:
    """The ids the mod gives the entities a spawn under ``key`` makes."""
    return [f"{key}#{i}" for i in range(1, count + 1)]
