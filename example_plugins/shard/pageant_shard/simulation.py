"""The shard, alive: what happens in the world without anyone running an event.

On a seeded random clock, bosses rise at landmarks and fall to players, players join, a
player now and then slays a creature an event spawned, and a gate past its deadline closes.
Each happening reaches pageant the way a real game's would, through ``context.emit``.

The faults a test or a demo asks for are played here too: an outage (the shard goes down,
comes back with a new boot id, and asks the host to reconcile) and a game master changing a
value a run has leased.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Coroutine
from datetime import UTC, datetime
from typing import Any

from pageant.hookspecs import PluginContext

from .world import ATLAS, LANDMARKS, REGIONS, World

log = logging.getLogger("pageant_shard")

#: Who joins the shard, and who kills its bosses.
PLAYERS = ("Ayla", "Bram", "Cora", "Dax", "Edda", "Finn", "Galen", "Hesper")
#: How likely each kind of happening is, given that it can happen at all.
WEIGHTS = {"boss_spawns": 5, "boss_dies": 3, "player_joins": 3, "creature_slain": 1}


class Simulation:
    """Makes a :class:`~pageant_shard.world.World` live, and plays faults on it."""

    def __init__(self, world: World, context: PluginContext, settings: Any) -> None:
        self.world = world
        self.context = context
        self.settings = settings
        self.random = random.Random(settings.seed)
        self._tasks: set[asyncio.Task[None]] = set()
        self._back = asyncio.Event()

    # ── tasks ────────────────────────────────────────────────────────────────

    def _spawn_task(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def start(self) -> None:
        """Start living (called from ``pageant_startup``, inside the host's event loop)."""
        self._spawn_task(self._live())

    async def stop(self) -> None:
        """Stop every task of the simulation and wait for them to end."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _live(self) -> None:
        while True:
            await asyncio.sleep(self.random.expovariate(1 / self.settings.tick_seconds))
            try:
                await self.happen()
            except Exception:  # a happening the host refused: the world goes on
                log.warning("a happening on the shard could not be reported", exc_info=True)

    # ── happenings ───────────────────────────────────────────────────────────

    async def happen(self) -> str | None:
        """One thing happens in the world (nothing while the shard is down); what it was."""
        if not self.world.up:
            return None
        self._close_expired_gates()
        self.world.restore_expired_leases(datetime.now(UTC))
        free = [r for r in REGIONS if r not in self.world.bosses]
        possible = {
            "boss_spawns": bool(free),
            "boss_dies": bool(self.world.bosses),
            "player_joins": True,
            "creature_slain": bool(self.world.creatures),
        }
        kinds = [k for k, ok in possible.items() if ok]
        kind = self.random.choices(kinds, [WEIGHTS[k] for k in kinds])[0]
        if kind == "boss_spawns":
            region = self.random.choice(free)
            landmark = self.random.choice([lid for lid, lm in LANDMARKS.items() if lm[1] == region])
            boss = self.random.choice([cid for cid, (_, is_boss) in ATLAS.items() if is_boss])
            self.world.bosses[region] = boss
            self.world.save()
            payload = {"region": region, "landmark": landmark, "boss": boss}
            await self.context.emit("shard.boss.spawned", payload)
        elif kind == "boss_dies":
            region = self.random.choice(sorted(self.world.bosses))
            boss = self.world.bosses.pop(region)
            self.world.save()
            killer = self.random.choice(PLAYERS)
            await self.context.emit(
                "shard.boss.killed", {"region": region, "boss": boss, "killer": killer}
            )
        elif kind == "player_joins":
            name = f"{self.random.choice(PLAYERS)}{self.random.randint(1, 99)}"
            region = self.random.choice(list(REGIONS))
            self.world.players[name] = region
            self.world.save()
            await self.context.emit("shard.player.joined", {"name": name, "region": region})
        else:
            self.world.slay(self.random.choice(sorted(self.world.creatures)))
        return kind

    def _close_expired_gates(self) -> None:
        now = datetime.now(UTC).isoformat()
        for ref, gate in list(self.world.gates.items()):
            if gate["closes_at"] <= now:
                self.world.close_gate(ref)

    # ── faults ───────────────────────────────────────────────────────────────

    def outage(self, seconds: float) -> None:
        """Take the shard down now, for ``seconds`` (or until :meth:`restart_now`); see
        :meth:`_outage`."""
        self.world.go_down()
        self.context.set_available(False, f"shard {self.world.boot_id} is restarting")
        self._spawn_task(self._outage(seconds))

    async def _outage(self, seconds: float) -> None:
        """Come back after ``seconds`` with a new boot id, tell the host, and ask it to
        reconcile: what an event made may not have survived the restart."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._back.wait(), seconds)
        self._back.clear()
        self.world.come_up()
        self.context.set_available(True)
        log.info("shard back up as boot %s", self.world.boot_id)
        await self.context.reconcile()

    def restart_now(self) -> None:
        """End an outage now rather than when its seconds run out (an operator restarting
        the shard by hand; a test's way to decide the moment)."""
        self._back.set()

    def game_master_changes(self, name: str, after: float) -> None:
        """In ``after`` seconds, a game master sets the config value ``name`` by hand, if it
        is still leased then (a lease given back at once, as the host's start-up probe is,
        is left alone)."""

        async def change() -> None:
            await asyncio.sleep(after)
            if self.world.up and name in self.world.leased:
                self.world.set_config(name, self.settings.fault_gm_value)

        self._spawn_task(change())
