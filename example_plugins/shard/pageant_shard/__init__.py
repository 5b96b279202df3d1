"""shard: a simulated game shard, and the plugin that lets pageant run events on it.

The model a game-module author copies. Everything pageant sees is in this module, written
against the public contract alone (``pageant.hookspecs`` and ``pageant.hookimpl``):

- five actions, one of each kind a game needs: ``shard.broadcast`` (a message that cannot
  be taken back or safely repeated), ``shard.towncrier.post`` (a notice, idempotent by the
  step's key), ``shard.spawn`` (creatures, given back by serial), ``shard.gate.open`` (a
  passage that closes at its own deadline) and ``shard.reward.grant`` (irreversible);
- a lease, ``shard.config``: a live configuration value a run borrows and puts back;
- two budget dimensions, five option sources (the servers' with each one's time zone)
  and three triggers;
- a reading, ``shard.players_online`` (contract 1.5): how many players the shard has now,
  unknown while it is down, for an event's quorum (``start_when``);
- ``pageant_reconcile``, answered from what the world holds;
- availability: the plugin tells the host when the shard goes down, and asks it to
  reconcile when the shard comes back with a new boot id.

The game itself is :mod:`pageant_shard.world`; :mod:`pageant_shard.simulation` makes it live
(bosses spawn and die, players join) and plays the faults a test or a demo asks for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, Field

from pageant import hookimpl
from pageant.hookspecs import UNKNOWN, ActionContext, HeldResource, PluginContext, ReadContext

from .simulation import Simulation
from .world import ATLAS, ITEMS, LANDMARKS, REGIONS, SERVERS, ShardDown, World

#: The most creatures one step may spawn, and the most of an item one step may grant.
MAX_SPAWN = 50
MAX_REWARD = 10_000
#: The longest a gate may stay open.
MAX_GATE_MINUTES = 24 * 60
#: How long ``shard.broadcast`` may take: it answers on its own before the host's bound.
BROADCAST_BUDGET_MS = 5_000


class ShardSettings(BaseModel):
    """The plugin's settings: ``[plugins.shard]`` in the settings file, or
    ``PAGEANT_PLUGIN_SHARD_<NAME>`` in the environment. The ``fault_*`` knobs are for tests
    and demos: each makes the simulated shard misbehave in one way a real one does."""

    seed: int = Field(7, description="Seeds the simulation's random clock.")
    simulate: bool = Field(False, description="Run the simulation: bosses, players.")
    tick_seconds: float = Field(2.0, gt=0, description="Mean real seconds between happenings.")
    world_path: str | None = Field(None, description="Keep the world in this SQLite file.")
    broadcast_ack_seconds: float = Field(
        BROADCAST_BUDGET_MS / 2000,
        gt=0,
        lt=BROADCAST_BUDGET_MS / 1000,
        description="How long a broadcast waits for its ack (less than its budget).",
    )
    fault_hang_seconds: float = Field(
        0.0, ge=0, description="A world change's answer hangs this long after it is made."
    )
    fault_hang_count: int = Field(1, ge=0, description="How many world changes hang.")
    fault_apply_delay_seconds: float = Field(
        0.0,
        ge=0,
        description="A spawn is applied this long after it is requested, whether or not "
        "anyone still waits for its answer (a slow game).",
    )
    fault_broadcast_acks_lost: int = Field(
        0, ge=0, description="The first N broadcasts are never acknowledged."
    )
    fault_revert_hang_seconds: float = Field(
        0.0, ge=0, description="Every despawn hangs this long before it answers."
    )
    fault_revert_failures: int = Field(
        0, ge=0, description="The first despawn fails this many times, then succeeds."
    )
    fault_down_after: int = Field(0, ge=0, description="Go down after N world changes (0: never).")
    fault_down_seconds: float = Field(5.0, ge=0, description="How long the shard stays down.")
    fault_gm_after_seconds: float | None = Field(
        None, ge=0, description="A game master changes a leased value this long after a lease."
    )
    fault_gm_value: str = Field("set-by-gm", description="What the game master sets it to.")


class ShardPlugin:
    """The plugin. The host makes one per start (the entry point names this class), so each
    host has its own world."""

    def __init__(self) -> None:
        self.settings = ShardSettings()
        self.world = World()
        self.context: PluginContext | None = None
        self.simulation: Simulation | None = None
        self._changes = 0  # world changes made, for fault_down_after
        self._hangs = 0
        self._acks_lost = 0
        self._revert_failures = 0
        self._failing: tuple[str, ...] | None = None  # the despawn fault_revert_failures fails
        self.PLUGIN_INFO = {
            "owner": "shard",
            "contract": "^1.5",
            "settings": ShardSettings,
            "observe": self.observe,
        }

    async def observe(self) -> dict[str, Any]:
        """The world as it stands: ``pageant contract-check`` compares it around every dry
        run, so a ``verify`` that writes is caught."""
        return self.world.snapshot()

    # ── lifecycle ────────────────────────────────────────────────────────────

    @hookimpl
    def pageant_startup(self, context: PluginContext) -> None:
        """Keep the context, open the world, and start the simulation when asked to."""
        self.context = context
        self.settings = getattr(context, "settings", None) or ShardSettings()
        self.world = World.open(self.settings.world_path)
        if not self.world.up:  # the process died while the shard was down: it is back
            self.world.come_up()
        self.simulation = Simulation(self.world, context, self.settings)
        if self.settings.simulate:
            self.simulation.start()

    async def stop(self) -> None:
        """Stop the simulation and any fault in progress (the host has no shutdown hook in
        contract 1.1: an embedder calls this, and a closing event loop cancels it anyway)."""
        if self.simulation is not None:
            await self.simulation.stop()

    @hookimpl
    async def pageant_reconcile(self, resources: Sequence[HeldResource]) -> list[str]:
        """The ``ref`` of each recorded resource the world still holds: creatures alive
        (a player may have slain one), gates still open (one closes at its own deadline),
        and every config lease (the table always has the key; whether it still holds the
        leased value is the restore's question). A shard that is down cannot say: raise,
        and the host changes nothing."""
        self.world.require_up()
        alive = {
            "creature": set(self.world.creatures),
            "gate": set(self.world.gates),
        }
        return [
            res.ref
            for res in resources
            if res.kind == "shard.config" or res.ref in alive.get(res.kind, set())
        ]

    # ── the actions ──────────────────────────────────────────────────────────

    async def broadcast(self, ctx: ActionContext) -> dict[str, Any]:
        """Send a message to every player. Not idempotent — a second call is a second
        message — so once it has left, a failure says ``retry: false``."""
        if ctx.verify:
            return {"ok": True}
        try:
            self.world.broadcast(ctx.params["message"])
        except ShardDown as exc:  # it never left: trying again later is safe
            return {"ok": False, "retry": True, "error": str(exc)}
        try:
            # The shard acknowledges a broadcast; answer before the host's bound runs out,
            # because a timeout would read as "retry" and the message would go twice.
            async with asyncio.timeout(self.settings.broadcast_ack_seconds):
                await self._acknowledgement()
        except TimeoutError:
            return {
                "ok": False,
                "retry": False,
                "error": "the broadcast left but the shard did not acknowledge it; not sent again",
            }
        return {"ok": True}

    async def post_notice(self, ctx: ActionContext) -> dict[str, Any]:
        """Pin a notice on the town crier's board: posting twice under one key posts once,
        so any failure may be retried."""
        if ctx.verify:
            return {"ok": True}
        try:
            self.world.post_notice(ctx.idempotency_key, ctx.params["message"])
        except ShardDown as exc:
            return {"ok": False, "retry": True, "error": str(exc)}
        return {"ok": True}

    async def spawn(self, ctx: ActionContext) -> dict[str, Any]:
        """Spawn ``count`` creatures in a region, once per idempotency key; one resource per
        creature serial, so the host can give each one back."""
        region, creature, count = (ctx.params[k] for k in ("region", "creature", "count"))
        problem = _unknown(region=region, creature=creature) or _outside(count, 1, MAX_SPAWN)
        if problem:
            return {"ok": False, "retry": False, "error": problem}
        if ctx.verify:
            return {"ok": True}
        try:
            serials = await self._applied(
                lambda: self.world.spawn(ctx.idempotency_key, creature, region, count)
            )
            await self._maybe_hang()
        except ShardDown as exc:  # the host holds steps while we are down; a race lands here
            return {"ok": False, "retry": True, "error": str(exc)}
        if serials:
            self._changed()
        return {
            "ok": True,
            "resources": [
                {"kind": "creature", "ref": s, "creature": creature, "region": region}
                for s in serials
            ],
        }

    async def despawn(self, ctx: ActionContext) -> dict[str, Any]:
        """Despawn the creatures named in ``ctx.resources`` — or, when the host has none to
        name (the spawn's answer was lost), everything spawned under the step's key.
        A serial already gone is no error: a revert must be safe to repeat. The key is
        final from here on: a spawn under it that reaches the shard later makes nothing."""
        if ctx.verify:
            return {"ok": True}
        serials = [r.ref for r in ctx.resources] or list(
            self.world.spawned.get(ctx.idempotency_key, [])
        )
        if self.settings.fault_revert_hang_seconds:
            await asyncio.sleep(self.settings.fault_revert_hang_seconds)
        if self._revert_fails(serials):
            return {
                "ok": False,
                "retry": True,
                "error": f"the shard refused the despawn (fault {self._revert_failures} of "
                f"{self.settings.fault_revert_failures})",
            }
        try:
            # Final first, then given back: a spawn landing between the two makes nothing.
            self.world.mark_reverted(ctx.idempotency_key)
            self.world.despawn(serials + self.world.serials(ctx.idempotency_key))
        except ShardDown as exc:
            return {"ok": False, "retry": True, "error": str(exc)}
        return {"ok": True}

    async def open_gate(self, ctx: ActionContext) -> dict[str, Any]:
        """Open a gate between two regions for ``minutes``. The gate is the run's: it is
        reported with its deadline, closes on its own then, and is closed by the revert if
        the run ends first."""
        origin, to, minutes = (ctx.params[k] for k in ("from", "to", "minutes"))
        problem = _unknown(region=origin) or _unknown(region=to)
        problem = problem or _outside(minutes, 1, MAX_GATE_MINUTES)
        if not problem and origin == to:
            problem = f"a gate needs two regions; both are {origin!r}"
        if problem:
            return {"ok": False, "retry": False, "error": problem}
        if ctx.verify:
            return {"ok": True}
        closes_at = datetime.now(UTC) + timedelta(minutes=minutes)
        try:
            ref = self.world.open_gate(ctx.idempotency_key, origin, to, closes_at)
            await self._maybe_hang()
        except ShardDown as exc:
            return {"ok": False, "retry": True, "error": str(exc)}
        if ref is None:  # reverted before it arrived: nothing was opened
            return {"ok": True}
        self._changed()
        closes = self.world.gates[ref]["closes_at"]
        return {"ok": True, "resources": [{"kind": "gate", "ref": ref, "closes_at": closes}]}

    async def close_gate(self, ctx: ActionContext) -> dict[str, Any]:
        """Close the gate (a gate already closed is no error). The key is final from here
        on: an open under it that arrives later opens nothing."""
        if ctx.verify:
            return {"ok": True}
        refs = [r.ref for r in ctx.resources] or [f"gate-{ctx.idempotency_key[:12]}"]
        try:
            self.world.mark_reverted(ctx.idempotency_key)
            for ref in refs:
                self.world.close_gate(ref)
        except ShardDown as exc:
            return {"ok": False, "retry": True, "error": str(exc)}
        return {"ok": True}

    async def grant(self, ctx: ActionContext) -> dict[str, Any]:
        """Grant a reward to everyone in the event, once per key. Nothing is reported: a
        reward cannot be taken back, so there is nothing for the host to give back."""
        item, amount = ctx.params["item"], ctx.params["amount"]
        problem = _unknown(item=item) or _outside(amount, 1, MAX_REWARD)
        if problem:
            return {"ok": False, "retry": False, "error": problem}
        if ctx.verify:
            return {"ok": True}
        try:
            self.world.grant(ctx.idempotency_key, item, amount)
            await self._maybe_hang()
        except ShardDown as exc:
            return {"ok": False, "retry": True, "error": str(exc)}
        self._changed()
        return {"ok": True}

    # ── the lease ────────────────────────────────────────────────────────────

    async def read_config(self, target: str) -> str | None:
        """The live value of the config key ``target`` (None: unset)."""
        self.world.require_up()
        return self.world.config.get(target)

    async def apply_config(self, target: str, value: str, until: datetime) -> str | None:
        """Set ``target`` to ``value`` until ``until``; answers the value it replaced (the
        baseline). Past ``until`` the shard puts the baseline back by itself, should pageant
        be gone by then."""
        baseline = self.world.set_config(target, value)
        self.world.lease(target, until, baseline)
        if self.simulation is not None and self.settings.fault_gm_after_seconds is not None:
            self.simulation.game_master_changes(target, self.settings.fault_gm_after_seconds)
        return baseline

    async def restore_config(self, target: str, baseline: str | None) -> None:
        """Put the baseline back (None: the key was unset). Safe to repeat."""
        self.world.set_config(target, baseline)
        self.world.end_lease(target)

    # ── faults ───────────────────────────────────────────────────────────────

    async def _acknowledgement(self) -> None:
        """The shard's acknowledgement of a broadcast; the first
        ``fault_broadcast_acks_lost`` never come."""
        if self._acks_lost < self.settings.fault_broadcast_acks_lost:
            self._acks_lost += 1
            await asyncio.Event().wait()  # never set: the acknowledgement is lost

    async def _applied(self, change: Any) -> Any:
        """Make ``change`` in the world and answer what it answered; with
        ``fault_apply_delay_seconds`` the shard makes it that long after the request, and
        makes it even when the caller stopped waiting (the request is already sent)."""
        delay = self.settings.fault_apply_delay_seconds
        if not delay:
            return change()
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Any] = loop.create_future()

        def apply() -> None:
            try:
                made = change()
            except Exception as exc:
                if not answer.done():
                    answer.set_exception(exc)
                return
            if not answer.done():
                answer.set_result(made)

        loop.call_later(delay, apply)
        return await answer

    async def _maybe_hang(self) -> None:
        """The shard's answer to a world change is slow (``fault_hang_seconds``, for the first
        ``fault_hang_count`` changes): the change is made, the answer takes its time."""
        if self.settings.fault_hang_seconds and self._hangs < self.settings.fault_hang_count:
            self._hangs += 1
            await asyncio.sleep(self.settings.fault_hang_seconds)

    def _revert_fails(self, serials: list[str]) -> bool:
        """Whether this despawn fails: the first one asked fails ``fault_revert_failures``
        times in a row, then succeeds."""
        if self._revert_failures >= self.settings.fault_revert_failures:
            return False
        if self._failing is None:
            self._failing = tuple(serials)
        if self._failing != tuple(serials):
            return False
        self._revert_failures += 1
        return True

    def _changed(self) -> None:
        """Count a world change; the N-th one takes the shard down, when asked to."""
        self._changes += 1
        if self.simulation is not None and self._changes == self.settings.fault_down_after:
            self.simulation.outage(self.settings.fault_down_seconds)

    # ── the option sources ───────────────────────────────────────────────────

    async def regions(self) -> list[dict[str, str]]:
        return [{"value": rid, "label": label} for rid, (label, _, _) in REGIONS.items()]

    async def landmarks(self) -> list[dict[str, str]]:
        return [
            {"value": lid, "label": f"{label} ({REGIONS[region][0]})"}
            for lid, (label, region, _, _) in LANDMARKS.items()
        ]

    async def creatures(self) -> list[dict[str, str]]:
        return [{"value": cid, "label": label} for cid, (label, _boss) in ATLAS.items()]

    async def items(self) -> list[dict[str, str]]:
        return [{"value": iid, "label": label} for iid, label in ITEMS.items()]

    async def servers(self) -> list[dict[str, str]]:
        # Each with its zone (contract 1.4): a fan-out over servers may start each one's
        # runs at the same local time.
        return [
            {"value": sid, "label": label, "zone": zone} for sid, (label, zone) in SERVERS.items()
        ]

    # ── the reading ──────────────────────────────────────────────────────────

    async def players_online(self, params: dict[str, Any], ctx: ReadContext) -> Any:
        """How many players are online: the simulated shard's servers share one world, so
        each server reads the world's players; unknown while the shard is down (never a
        guess, never the last count)."""
        if not self.world.up or params["server"] not in SERVERS:
            return UNKNOWN
        return len(self.world.players)

    # ── declarations ─────────────────────────────────────────────────────────

    @hookimpl
    def pageant_actions(self) -> list[dict[str, Any]]:
        message = _param("message", "string", "What to say.", "The Champion stirs in Yew")
        region = _param("region", "string", "Which region.", "yew", "shard.options.regions")
        return [
            {
                "id": "shard.broadcast",
                "label": "Broadcast to every player",
                "risk": "notify",
                "budget_ms": BROADCAST_BUDGET_MS,
                "params": [message],
                "perform": self.broadcast,
                "description": "A message on every player's screen; never sent twice.",
            },
            {
                "id": "shard.towncrier.post",
                "label": "Post a town crier notice",
                "risk": "notify",
                "budget_ms": 5_000,
                "params": [message],
                "perform": self.post_notice,
                "description": "A notice on the town crier's board, once per step.",
            },
            {
                "id": "shard.spawn",
                "label": "Spawn creatures",
                "risk": "change",
                "reversible": "full",
                "budget_ms": 5_000,
                "params": [
                    region,
                    _param(
                        "creature",
                        "string",
                        "What to spawn.",
                        "guardian",
                        "shard.options.creatures",
                    ),
                    _param(
                        "count",
                        "integer",
                        f"How many (1 to {MAX_SPAWN}).",
                        4,
                        bounds=(1, MAX_SPAWN),
                    ),
                ],
                "cost": lambda params: {"shard.creatures": params["count"]},
                "perform": self.spawn,
                "revert": self.despawn,
                "description": "Creatures in a region, despawned when the run ends.",
            },
            {
                "id": "shard.gate.open",
                "label": "Open a gate between regions",
                "risk": "change",
                "reversible": "full",
                "budget_ms": 5_000,
                "params": [
                    _param("from", "string", "Where it opens.", "yew", "shard.options.regions"),
                    _param("to", "string", "Where it leads.", "dustmoor", "shard.options.regions"),
                    _param(
                        "minutes",
                        "integer",
                        f"How long it stays open (1 to {MAX_GATE_MINUTES}).",
                        30,
                        bounds=(1, MAX_GATE_MINUTES),
                    ),
                ],
                "perform": self.open_gate,
                "revert": self.close_gate,
                "description": "A passage that closes at its deadline, or when the run ends.",
            },
            {
                "id": "shard.reward.grant",
                "label": "Grant a reward",
                "risk": "irreversible",
                "reversible": "none",
                "budget_ms": 5_000,
                "params": [
                    _param(
                        "item", "string", "Which item.", "champion_sigil", "shard.options.items"
                    ),
                    _param(
                        "amount",
                        "integer",
                        f"How many (1 to {MAX_REWARD}).",
                        1,
                        bounds=(1, MAX_REWARD),
                    ),
                ],
                "cost": lambda params: {"shard.rewards": params["amount"]},
                "perform": self.grant,
                "description": "Items handed to the event's players; never taken back.",
            },
        ]

    @hookimpl
    def pageant_leases(self) -> list[dict[str, Any]]:
        return [
            {
                "id": "shard.config",
                "label": "A live configuration value",
                "example": "2.0",
                # Each key the lease offers, with a value the host probes it with at start.
                # max_players is latched (read when the shard starts), so it is not offered:
                # named here, its probe would not read back and the host would drop it.
                "self_check": {"xp_rate": "1.5", "spawn_rate": "high", "weather": "storm"},
                "read": self.read_config,
                "apply": self.apply_config,
                "restore": self.restore_config,
            }
        ]

    @hookimpl
    def pageant_budgets(self) -> list[dict[str, Any]]:
        return [
            {"dimension": "shard.creatures", "label": "Creatures spawned", "unit": "creatures"},
            {"dimension": "shard.rewards", "label": "Reward items granted", "unit": "items"},
        ]

    @hookimpl
    def pageant_option_sources(self) -> list[dict[str, Any]]:
        return [
            {"id": "shard.options.regions", "label": "Regions", "resolve": self.regions},
            {"id": "shard.options.landmarks", "label": "Landmarks", "resolve": self.landmarks},
            {"id": "shard.options.creatures", "label": "Creatures", "resolve": self.creatures},
            {"id": "shard.options.items", "label": "Reward items", "resolve": self.items},
            {"id": "shard.options.servers", "label": "Servers", "resolve": self.servers},
        ]

    @hookimpl
    def pageant_readings(self) -> list[dict[str, Any]]:
        server = _param("server", "string", "Which server.", "eu-1", "shard.options.servers")
        return [
            {
                "id": "shard.players_online",
                "label": "Players online",
                "unit": "players online",
                "params": [server],
                "read": self.players_online,
                "description": "The players on the shard now; unknown while it is down.",
            }
        ]

    @hookimpl
    def pageant_triggers(self) -> list[dict[str, Any]]:
        region = {"name": "region", "type": "string", "description": "Where.", "example": "yew"}
        boss = {
            "name": "boss",
            "type": "string",
            "description": "Which boss.",
            "example": "champion",
        }
        return [
            {
                "id": "shard.boss.spawned",
                "label": "A boss spawned",
                "variables": [
                    region,
                    {
                        "name": "landmark",
                        "type": "string",
                        "description": "The landmark it rose at.",
                        "example": "yew.shrine",
                    },
                    boss,
                ],
            },
            {
                "id": "shard.boss.killed",
                "label": "A boss was killed",
                "variables": [
                    region,
                    boss,
                    {
                        "name": "killer",
                        "type": "string",
                        "description": "Who landed the last blow.",
                        "example": "Ayla",
                    },
                ],
            },
            {
                "id": "shard.player.joined",
                "label": "A player joined",
                "variables": [
                    {
                        "name": "name",
                        "type": "string",
                        "description": "The player.",
                        "example": "Ayla",
                    },
                    region,
                ],
            },
        ]


def _param(
    name: str,
    kind: str,
    description: str,
    example: Any,
    source: str | None = None,
    *,
    bounds: tuple[int, int] | None = None,
) -> dict[str, Any]:
    declared = {
        "name": name,
        "type": kind,
        "required": True,
        "description": description,
        "example": example,
        "option_source": source,
    }
    if bounds is not None:
        # Contract 1.3: the host refuses a value outside them when the spec is saved.
        declared["minimum"], declared["maximum"] = bounds
    return declared


def _unknown(**named: str) -> str | None:
    """Why a named region, creature or item is not in the world, or None."""
    known: dict[str, Mapping[str, object]] = {"region": REGIONS, "creature": ATLAS, "item": ITEMS}
    for kind, value in named.items():
        if value not in known[kind]:
            return f"no such {kind} {value!r}; the shard has {', '.join(known[kind])}"
    return None


def _outside(value: int, low: int, high: int) -> str | None:
    return None if low <= value <= high else f"{value} is outside {low} to {high}"
