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
- ``pageant_reconcile``, answered from the world's loaded entities. Availability is the
  link's: a world that stops syncing is down, and its return reconciles the plugin.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from pageant import hookimpl
from pageant.hookspecs import ActionContext, HeldResource, LinkFailure, PluginContext

from .catalog import ACTIONS, KINDS, MAX_ENTITIES, MAX_ITEMS, TRIGGERS
from .settings import LuantiSettings, Place

__all__ = ["LuantiPlugin", "LuantiSettings"]

log = logging.getLogger("pageant_luanti")

ENTITY = "luanti.entity"
ITEM = "luanti.item"


class LuantiPlugin:
    """The plugin. The host makes one per start (the entry point names this class)."""

    def __init__(self) -> None:
        self.settings = LuantiSettings()
        self.context: PluginContext | None = None
        #: The host's clock, for the deadlines of a lease's calls (a step has its own).
        self.now = lambda: datetime.now(UTC)
        self.PLUGIN_INFO = {
            "owner": "luanti",
            "contract": "^1.3",
            "settings": LuantiSettings,
            # The worlds are learned as they sync (tokens bound to owner luanti) or are called:
            # declaring the settings' default here would watch a world nobody installed.
            "link": {"servers": [], "commands": sorted(ACTIONS)},
        }

    @hookimpl
    def pageant_startup(self, context: PluginContext) -> None:
        self.context = context
        self.settings = getattr(context, "settings", None) or LuantiSettings()

    # ── the link ─────────────────────────────────────────────────────────────

    async def call(
        self, server: str, command: str, payload: dict[str, Any], key: str, deadline: datetime
    ) -> Any:
        """``command`` on ``server``'s bridge: its answer, or :class:`LinkFailure`."""
        link = self.context.link if self.context is not None else None
        if link is None:
            raise LinkFailure(server, command, "the host lends this plugin no game link")
        return await link.call(server, command, payload, key=key, deadline=deadline)

    async def _step(self, ctx: ActionContext, command: str, payload: dict[str, Any]) -> Any:
        server = str(payload.pop("server"))
        return await self.call(server, command, payload, ctx.idempotency_key, ctx.deadline)

    def _place(self, name: str) -> Place:
        for place in self.settings.places:
            if place.id == name:
                return place
        known = ", ".join(p.id for p in self.settings.places) or "none configured"
        raise ValueError(f"no place {name!r}; the places are {known}")

    def _where(self, ctx: ActionContext) -> dict[str, Any]:
        place = self._place(str(ctx.params["place"]))
        return {"server": place.server, "x": place.x, "y": place.y, "z": place.z}

    async def _envelope(self, ctx: ActionContext, do: Any) -> dict[str, Any]:
        """Run ``do()`` unless this is a dry run; a bad param is final, a link failure is
        retried (an unanswered one after the revert the host runs under the same key)."""
        try:
            if ctx.verify:
                self._check(ctx)
                return {"ok": True}
            return await do()
        except ValueError as exc:
            return {"ok": False, "retry": False, "error": str(exc)}
        except LinkFailure as exc:
            # The world's own error is final; a command not delivered, or delivered and not
            # answered (the host reverts it first), may be tried again.
            return {"ok": False, "retry": type(exc) is not LinkFailure, "error": exc.message}

    def _check(self, ctx: ActionContext) -> None:
        """A param the world cannot take raises ``ValueError`` naming it."""
        params = ctx.params
        if "place" in params:
            self._place(str(params["place"]))
        if params.get("kind", "beacon") not in KINDS:
            raise ValueError(f"no kind {params['kind']!r}; the bridge has {', '.join(KINDS)}")
        high = MAX_ITEMS if "item" in params else MAX_ENTITIES
        if "count" in params and not 1 <= int(params["count"]) <= high:
            raise ValueError(f"count {params['count']} is outside 1 to {high}")

    # ── the actions ──────────────────────────────────────────────────────────

    async def say(self, ctx: ActionContext) -> dict[str, Any]:
        async def do() -> dict[str, Any]:
            server = ctx.params.get("server") or self.settings.servers[0]
            await self._step(ctx, "say", {"server": server, "message": ctx.params["message"]})
            return {"ok": True}

        return await self._envelope(ctx, do)

    async def spawn(self, ctx: ActionContext) -> dict[str, Any]:
        """``count`` entities of ``kind`` at ``place``, one resource for each id the world
        answers: the mod names them ``KEY#1``..., answers a repeat from what it remembers,
        and makes none once the key was reverted (a revert is final for its key)."""

        async def do() -> dict[str, Any]:
            self._check(ctx)
            where = self._where(ctx)
            kind, count = ctx.params["kind"], int(ctx.params["count"])
            said = await self._step(ctx, "spawn", {**where, "kind": kind, "count": count})
            server = where["server"]
            return {
                "ok": True,
                "resources": [
                    {"kind": ENTITY, "ref": f"{server}/{i}", "server": server, "id": i}
                    for i in said.get("ids", [])
                ],
            }

        return await self._envelope(ctx, do)

    async def despawn(self, ctx: ActionContext) -> dict[str, Any]:
        """Remove every entity the key's spawn made, in one command: the host reverts once
        per resource under the same key, and the link answers a repeat from its row."""

        async def do() -> dict[str, Any]:
            ids = spawned_ids(ctx.idempotency_key, int(ctx.params["count"]))
            await self._step(ctx, "despawn", {"server": self._where(ctx)["server"], "ids": ids})
            return {"ok": True}

        return await self._envelope(ctx, do)

    async def give(self, ctx: ActionContext) -> dict[str, Any]:
        async def do() -> dict[str, Any]:
            self._check(ctx)
            where = self._where(ctx)
            item, count = str(ctx.params["item"]), int(ctx.params["count"])
            said = await self._step(ctx, "give", {**where, "item": item, "count": count})
            if not (given := int(said.get("given", 0))):  # taken back before it came
                return {"ok": True}
            ref = f"{where['server']}/{ctx.idempotency_key}"
            return {"ok": True, "resources": [{"kind": ITEM, "ref": ref, "given": given}]}

        return await self._envelope(ctx, do)

    async def take(self, ctx: ActionContext) -> dict[str, Any]:
        """Take back what was given, as much of it as is still in the chest; what players
        took already is logged as gone (a WARNING naming the key): the contract gives a
        revert no way to write it on the ledger's row."""

        async def do() -> dict[str, Any]:
            where = self._where(ctx)
            given = [int(r.detail.get("given", 0)) for r in ctx.resources]
            count = sum(given) if given else int(ctx.params["count"])
            item = ctx.params["item"]
            said = await self._step(ctx, "take", {**where, "item": item, "count": count})
            if gone := int(said.get("gone", 0)):
                log.warning(
                    "luanti.give under %s: %d of %d %s were gone from the chest at %s in %s "
                    "(taken by players); the rest was taken back",
                    ctx.idempotency_key,
                    gone,
                    count,
                    item,
                    ctx.params["place"],
                    where["server"],
                )
            return {"ok": True}

        return await self._envelope(ctx, do)

    # ── the lease ────────────────────────────────────────────────────────────

    def _setting(self, target: str) -> tuple[str, str]:
        """``time_speed`` on the first world, or ``world_b:time_speed``."""
        server, _, name = target.rpartition(":")
        server = server or self.settings.servers[0]
        if server not in self.settings.servers:
            raise ValueError(f"no server {server!r} for {target!r}")
        if name not in self.settings.settings:
            allowed = ", ".join(self.settings.settings)
            raise ValueError(
                f"{name!r} is not a setting luanti.setting may lease; it may lease {allowed}"
            )
        return server, name

    async def _lease_call(
        self, target: str, command: str, payload: dict[str, Any], key: str | None
    ) -> Any:
        server, name = self._setting(target)
        deadline = self.now() + timedelta(seconds=self.settings.command_seconds)
        return await self.call(
            server, command, {"name": name, **payload}, key or uuid.uuid4().hex, deadline
        )

    async def read_setting(self, target: str) -> str | None:
        said = await self._lease_call(target, "setting_get", {}, None)
        return said.get("value")

    async def apply_setting(
        self, target: str, value: Any, until: datetime, key: str | None = None
    ) -> str | None:
        """Set ``value`` until ``until`` (the mod puts the baseline back by itself past it,
        should pageant be gone); answers the baseline."""
        stamp = until.astimezone(UTC).isoformat().replace("+00:00", "Z")
        said = await self._lease_call(
            target,
            "setting_set",
            {"value": str(value), "until": stamp},
            key or f"lease/{target}/{value}/{stamp}",
        )
        return said.get("baseline")

    async def restore_setting(
        self, target: str, baseline: str | None, key: str | None = None
    ) -> None:
        await self._lease_call(target, "setting_restore", {"baseline": baseline}, key)

    # ── reconcile ────────────────────────────────────────────────────────────

    @hookimpl
    async def pageant_reconcile(self, resources: Sequence[HeldResource]) -> list[str]:
        """Entities still in their world (loaded, or in a block not active yet); leases and
        given items stand (the restore and the take find out the rest). A world that cannot
        answer raises: nothing changes."""
        still = [r.ref for r in resources if r.kind != ENTITY]
        servers = sorted({r.ref.partition("/")[0] for r in resources if r.kind == ENTITY})
        present: set[str] = set()
        for server in servers:
            deadline = self.now() + timedelta(seconds=self.settings.command_seconds)
            said = await self.call(server, "entities", {}, uuid.uuid4().hex, deadline)
            ids = [e["id"] for e in said.get("entities", [])] + said.get("unloaded", [])
            present |= {f"{server}/{i}" for i in ids}
        return still + [r.ref for r in resources if r.kind == ENTITY and r.ref in present]

    # ── declarations ─────────────────────────────────────────────────────────

    async def resolve_places(self) -> list[dict[str, str]]:
        return [
            {"value": p.id, "label": f"{p.id} ({p.x}, {p.y}, {p.z} in {p.server})"}
            for p in self.settings.places
        ]

    async def resolve_settings(self) -> list[dict[str, str]]:
        first = self.settings.servers[0]
        return [
            {"value": n if s == first else f"{s}:{n}", "label": f"{n} in {s}"}
            for s in self.settings.servers
            for n in self.settings.settings
        ]

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
        return [
            {
                "id": "luanti.setting",
                "label": "A live world setting (time_speed, gravity)",
                "read": self.read_setting,
                "apply": self.apply_setting,
                "restore": self.restore_setting,
            }
        ]

    @hookimpl
    def pageant_budgets(self) -> list[dict[str, Any]]:
        return [{"dimension": "luanti.entities", "label": "Entities spawned", "unit": "entities"}]

    @hookimpl
    def pageant_option_sources(self) -> list[dict[str, Any]]:
        return [
            {"id": "luanti.options.places", "label": "Places", "resolve": self.resolve_places},
            {
                "id": "luanti.options.settings",
                "label": "Leasable settings",
                "resolve": self.resolve_settings,
            },
        ]

    @hookimpl
    def pageant_triggers(self) -> list[dict[str, Any]]:
        return TRIGGERS


def spawned_ids(key: str, count: int) -> list[str]:
    """The ids the mod gives the entities a spawn under ``key`` makes."""
    return [f"{key}#{i}" for i in range(1, count + 1)]
