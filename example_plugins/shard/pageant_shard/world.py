"""The game: a small simulated shard, held in memory and optionally saved to a file.

Nothing here knows pageant. It is the stand-in for the game server a real plugin talks to
over the network: regions and landmarks on a map, a creature atlas, the players online, a
live configuration table, and what the shard's own staff and events have put into the
world (creatures, gates between regions, rewards, messages). A real game answers these same
questions through its own API; the plugin in ``__init__`` only ever calls the methods here.

With a ``path`` the world is written to a SQLite file after every change and read back when
a world is opened on the same file, so it outlives the process that changed it: a test can
kill a host mid-event, start another and count what the world holds.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

#: Region id -> (label, x, y): the map, in tiles.
REGIONS: dict[str, tuple[str, int, int]] = {
    "yew": ("Yew Woods", 120, 340),
    "vesper": ("Vesper Docks", 610, 220),
    "dustmoor": ("Dustmoor Flats", 880, 540),
}
#: Landmark id -> (label, region, x, y).
LANDMARKS: dict[str, tuple[str, str, int, int]] = {
    "yew.shrine": ("Shrine of the Oak", "yew", 131, 352),
    "yew.crossing": ("Ferry Crossing", "yew", 98, 301),
    "vesper.lighthouse": ("Old Lighthouse", "vesper", 640, 190),
    "dustmoor.obelisk": ("Black Obelisk", "dustmoor", 902, 560),
}
#: Creature id -> (label, is a boss).
ATLAS: dict[str, tuple[str, bool]] = {
    "guardian": ("Stone Guardian", False),
    "wolf": ("Grey Wolf", False),
    "wisp": ("Marsh Wisp", False),
    "champion": ("The Ashen Champion", True),
    "kraken": ("Harbour Kraken", True),
}
#: Item id -> label: what a reward may grant.
ITEMS: dict[str, str] = {
    "gold": "Gold coins",
    "champion_sigil": "Champion's sigil",
    "potion": "Healing potion",
}
#: Server id -> (label, IANA zone): the shard's servers, each in its players' own zone, so a
#: fan-out over them may start each at the same local time (``"stagger": "local"``).
SERVERS: dict[str, tuple[str, str]] = {
    "eu-1": ("Europe (Frankfurt)", "Europe/Berlin"),
    "sa-1": ("South America (Santiago)", "America/Santiago"),
    "ap-1": ("Asia Pacific (Tokyo)", "Asia/Tokyo"),
}
#: The live configuration a game master (or a run, through a lease) may change.
CONFIG: dict[str, str] = {
    "xp_rate": "1.0",
    "spawn_rate": "normal",
    "weather": "clear",
    "max_players": "32",
}
#: Configuration the shard reads only when it starts: a change waits for the next restart.
LATCHED = frozenset({"max_players"})


class ShardDown(Exception):
    """The shard is not answering (it is down or restarting)."""


@dataclass
class World:
    """The shard's state. Every change goes through a method, which saves it."""

    path: Path | None = None
    boot_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    up: bool = True
    players: dict[str, str] = field(default_factory=dict)
    config: dict[str, str] = field(default_factory=lambda: dict(CONFIG))
    #: Creature serial -> {creature, region, key}: everything alive that someone spawned.
    creatures: dict[str, dict[str, str]] = field(default_factory=dict)
    #: Idempotency key -> the serials spawned under it (whether or not still alive).
    spawned: dict[str, list[str]] = field(default_factory=dict)
    next_serial: int = 1
    #: Gate ref -> {from, to, closes_at}: open passages between regions.
    gates: dict[str, dict[str, str]] = field(default_factory=dict)
    #: Idempotency key -> {item, amount}: rewards handed out (they cannot be taken back).
    rewards: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Every message broadcast, in order: a broadcast cannot be told apart from a repeat.
    broadcasts: list[str] = field(default_factory=list)
    #: Idempotency key -> the town crier's notice posted under it.
    notices: dict[str, str] = field(default_factory=dict)
    #: Region -> the boss alive there now (the simulation's, not an event's).
    bosses: dict[str, str] = field(default_factory=dict)
    #: Latched key -> the value it takes at the next restart.
    pending: dict[str, str | None] = field(default_factory=dict)
    #: Config key -> {until, baseline}: what a lease set, and when the shard puts the
    #: baseline back by itself if nobody has by then.
    leased: dict[str, dict[str, str | None]] = field(default_factory=dict)
    #: The idempotency keys a revert was asked for: final, so a change requested under one
    #: that arrives later (a retry, a request still on its way) makes nothing. Kept with the
    #: world, but no part of what players see (nor of ``snapshot``).
    reverted: list[str] = field(default_factory=list)

    # ── reading ──────────────────────────────────────────────────────────────

    def require_up(self) -> None:
        if not self.up:
            raise ShardDown(f"shard {self.boot_id} is down")

    def serials(self, key: str) -> list[str]:
        """The serials spawned under ``key`` that are still alive."""
        return [s for s in self.spawned.get(key, []) if s in self.creatures]

    # ── changing ─────────────────────────────────────────────────────────────

    def is_reverted(self, key: str) -> bool:
        return key in self.reverted

    def mark_reverted(self, key: str) -> None:
        """Make ``key`` final: nothing is made under it from now on."""
        self.require_up()
        if key not in self.reverted:
            self.reverted.append(key)
            self.save()

    def spawn(self, key: str, creature: str, region: str, count: int) -> list[str]:
        """Spawn ``count`` of ``creature`` in ``region`` under ``key``; spawning again under
        the same key spawns nothing and answers the first spawn's serials, and under a key
        already reverted spawns nothing and answers none."""
        self.require_up()
        if key in self.reverted:
            return []
        if key not in self.spawned:
            made = []
            for _ in range(count):
                serial = f"c{self.next_serial:05d}"
                self.next_serial += 1
                self.creatures[serial] = {"creature": creature, "region": region, "key": key}
                made.append(serial)
            self.spawned[key] = made
            self.save()
        return list(self.spawned[key])

    def despawn(self, serials: list[str]) -> int:
        """Remove the creatures named; one that is already gone is no error. How many went."""
        self.require_up()
        gone = [s for s in serials if self.creatures.pop(s, None) is not None]
        if gone:
            self.save()
        return len(gone)

    def slay(self, serial: str) -> None:
        """A player killed the creature: it leaves the world without anyone reverting it."""
        if self.creatures.pop(serial, None) is not None:
            self.save()

    def open_gate(self, key: str, origin: str, to: str, closes_at: datetime) -> str | None:
        """Open a gate from ``origin`` to ``to`` until ``closes_at``; once per key, and not
        under a key already reverted (None)."""
        self.require_up()
        if key in self.reverted:
            return None
        ref = f"gate-{key[:12]}"
        if ref not in self.gates:
            self.gates[ref] = {"from": origin, "to": to, "closes_at": closes_at.isoformat()}
            self.save()
        return ref

    def close_gate(self, ref: str) -> None:
        self.require_up()
        if self.gates.pop(ref, None) is not None:
            self.save()

    def grant(self, key: str, item: str, amount: int) -> None:
        """Hand out a reward under ``key``, once."""
        self.require_up()
        if key not in self.rewards:
            self.rewards[key] = {"item": item, "amount": amount}
            self.save()

    def broadcast(self, message: str) -> None:
        """Send ``message`` to every player: every call is one more message."""
        self.require_up()
        self.broadcasts.append(message)
        self.save()

    def post_notice(self, key: str, message: str) -> None:
        """Pin ``message`` on the town crier's board under ``key``, once."""
        self.require_up()
        if key not in self.notices:
            self.notices[key] = message
            self.save()

    def set_config(self, name: str, value: str | None) -> str | None:
        """Set (None: remove) a live configuration value; answers the value it replaced. A
        latched key keeps its value until the next restart, which takes the new one."""
        self.require_up()
        before = self.config.get(name)
        if name in LATCHED:
            self.pending[name] = value
            self.save()
            return before
        if value is None:
            self.config.pop(name, None)
        else:
            self.config[name] = value
        self.save()
        return before

    def go_down(self) -> None:
        self.up = False
        self.bosses.clear()  # a restart loses what was only alive in memory
        self.save()

    def come_up(self) -> None:
        self.up = True
        self.boot_id = uuid.uuid4().hex[:8]
        for name, value in self.pending.items():  # a restart reads the latched keys anew
            if value is None:
                self.config.pop(name, None)
            else:
                self.config[name] = value
        self.pending.clear()
        self.save()

    def lease(self, name: str, until: datetime, baseline: str | None) -> None:
        """Remember that a lease set ``name`` until ``until``, over ``baseline``."""
        self.leased[name] = {"until": until.isoformat(), "baseline": baseline}
        self.save()

    def end_lease(self, name: str) -> None:
        if self.leased.pop(name, None) is not None:
            self.save()

    def restore_expired_leases(self, now: datetime) -> list[str]:
        """Put back, by the shard itself, every leased value whose lease ended before
        ``now`` and that nobody restored: pageant is gone past the deadline. The keys."""
        expired = [n for n, held in self.leased.items() if str(held["until"]) <= now.isoformat()]
        for name in expired:
            self.set_config(name, self.leased.pop(name)["baseline"])
        if expired:
            self.save()
        return expired

    # ── keeping ──────────────────────────────────────────────────────────────

    KEPT = (
        "boot_id",
        "up",
        "players",
        "config",
        "creatures",
        "spawned",
        "next_serial",
        "gates",
        "rewards",
        "broadcasts",
        "notices",
        "bosses",
        "pending",
        "leased",
    )

    def snapshot(self) -> dict[str, Any]:
        """The world as plain data (what is saved, and what ``observe`` answers)."""
        return json.loads(json.dumps({name: getattr(self, name) for name in self.KEPT}))

    def save(self) -> None:
        if self.path is None:
            return
        doc = {**self.snapshot(), "reverted": self.reverted}
        with contextlib.closing(sqlite3.connect(self.path)) as db, db:
            db.execute("CREATE TABLE IF NOT EXISTS world (id INTEGER PRIMARY KEY, doc TEXT)")
            db.execute("INSERT OR REPLACE INTO world (id, doc) VALUES (1, ?)", (json.dumps(doc),))

    @classmethod
    def open(cls, path: str | Path | None) -> World:
        """The world saved at ``path`` (a new one if nothing is there yet); in memory only
        when ``path`` is None."""
        if path is None:
            return cls()
        world = cls(path=Path(path))
        with contextlib.closing(sqlite3.connect(path)) as db:
            db.execute("CREATE TABLE IF NOT EXISTS world (id INTEGER PRIMARY KEY, doc TEXT)")
            row = db.execute("SELECT doc FROM world WHERE id = 1").fetchone()
        if row is None:
            world.save()
            return world
        for name, value in json.loads(row[0]).items():
            setattr(world, name, value)
        return world
