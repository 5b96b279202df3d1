"""One OpenArena server as the plugin sees it: its remote console, its game log, whether it
answers, and the idempotency keys whose bots were taken back."""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .gamelog import Follower, GameLog
from .pacing import Bucket
from .rcon import Rcon
from .settings import OpenArenaSettings, ServerSettings

#: A ``status`` row: number, score, ping, name, address, rate (colours already stripped).
STATUS_ROW = re.compile(r"^\s*(\d+)\s+-?\d+\s+\S+\s+(.*?)\s+(\S+)\s+\d+\s*$")
#: ``"g_gravity" is:"800", the default`` (or ``... default:"800"``).
CVAR = re.compile(r'^"(?P<name>[^"]+)" is:"(?P<value>[^"]*)"', re.MULTILINE)
#: How long one ``status`` answers every read of who is connected asked after it was sent
#: (unless the plugin changed who is connected since): the probe, a reconcile and an add
#: asking within a second cost the server's ration one request, not three.
STATUS_WINDOW = 1.0


@dataclass(frozen=True)
class Client:
    number: int
    name: str
    bot: bool


class Server:
    """One server: ``rcon`` to steer it, ``log`` and ``follower`` to hear it."""

    def __init__(self, config: ServerSettings, settings: OpenArenaSettings) -> None:
        assert config.rcon_host and config.rcon_port and config.rcon_password, "resolved()"
        self.id = config.id
        self.rcon = Rcon(
            config.rcon_host,
            config.rcon_port,
            config.rcon_password.get_secret_value(),
            timeout=settings.rcon_timeout_seconds,
            retries=settings.rcon_retries,
            bucket=Bucket(
                config.rcon_burst or settings.rcon_burst,
                config.rcon_per_second or settings.rcon_per_second,
            ),
        )
        self.log = GameLog(self.id)
        base = _state_base(config, settings)
        self.follower = (
            Follower(Path(config.log_path), Path(f"{base}.offset.json"))
            if config.log_path and base
            else None
        )
        self._reverted_path = Path(f"{base}.reverted.json") if base else None
        self.reverted: set[str] = self._load_reverted()
        #: None until the first probe; then whether it answered the last one.
        self.up: bool | None = None
        #: The frag tally when a run first added bots here: the run's own fraggers.
        self.marks: dict[int, Counter[str]] = {}
        #: Why this server cannot be steered (its password is refused), or None.
        self.problem: str | None = None
        #: Bumped before every command that changes who is connected: a ``status`` asked
        #: before it no longer answers for now.
        self._changes = 0
        #: The last ``status``: (when it was sent, ``_changes`` then, what it listed).
        self._status: tuple[float, int, list[Client]] | None = None
        #: The ``status`` under way, and ``_changes`` when it was asked.
        self._reading: tuple[asyncio.Future[list[Client]], int] | None = None

    # ── reads ────────────────────────────────────────────────────────────────

    async def clients(self) -> list[Client]:
        """Who is connected, from ``status``: one request answers every caller that asks
        while it is under way or within :data:`STATUS_WINDOW` after it was sent, unless
        the plugin added or kicked someone since."""
        if self._status is not None:
            sent_at, changes, found = self._status
            if changes == self._changes and time.monotonic() - sent_at <= STATUS_WINDOW:
                return found
        if self._reading is not None and self._reading[1] == self._changes:
            return await asyncio.shield(self._reading[0])
        changes, sent_at = self._changes, time.monotonic()
        reading = asyncio.ensure_future(self._read_status())
        # Retrieved here, so a failure every caller already saw is not reported again.
        reading.add_done_callback(lambda done: done.cancelled() or done.exception())
        self._reading = (reading, changes)
        try:
            found = await asyncio.shield(reading)
        finally:
            if self._reading is not None and self._reading[0] is reading:
                self._reading = None
        self._status = (sent_at, changes, found)
        return found

    async def _read_status(self) -> list[Client]:
        answer = await self.rcon.command("status", idempotent=True)
        found = []
        for line in answer.splitlines():
            row = STATUS_ROW.match(line)
            if row is not None:
                found.append(Client(int(row[1]), row[2], row[3] == "bot"))
        return found

    async def bot_names(self) -> set[str]:
        return {c.name for c in await self.clients() if c.bot}

    async def bot_names_now(self) -> set[str]:
        """The bots a new ``status`` lists, never a recent answer: for a reconcile, which
        asks because the world may have changed behind the plugin's back (a restart, an
        admin's kick)."""
        changes, sent_at = self._changes, time.monotonic()
        found = await self._read_status()
        self._status = (sent_at, changes, found)
        return {c.name for c in found if c.bot}

    async def read_cvar(self, name: str) -> str | None:
        """A cvar's value, or None when the server has no such cvar."""
        answer = await self.rcon.command(name, idempotent=True)
        found = CVAR.search(answer)
        return found["value"] if found is not None and found["name"] == name else None

    # ── changes ──────────────────────────────────────────────────────────────

    async def set_cvar(self, name: str, value: str | None) -> None:
        # ``unset`` removes a cvar the server did not have before it was leased.
        command = f"unset {name}" if value is None else f"set {name} {value}"
        await self.rcon.command(command, idempotent=True)

    async def add_bot(self, character: str, skill: int, name: str) -> str | None:
        """Add one bot named ``name``; None, or why the server refused. Waits ``resend``
        seconds for the answer, not the whole timeout: an unanswered add is settled by
        reading ``status`` (the server runs requests in order, so a ``status`` answered
        after the add shows its bot if the add ran)."""
        changes = self._changes
        self._changes += 1
        answer = await self.rcon.command(
            f"addbot {character} {skill} free 0 {name}", idempotent=False, within=self.rcon.resend
        )
        joined = re.search(r"ClientBegin: (\d+)", answer)
        if joined is None:
            return answer.strip().splitlines()[-1] if answer.strip() else "no bot joined"
        self._amend(changes, lambda found: [*found, Client(int(joined[1]), name, True)])
        return None

    async def kick(self, name: str) -> bool:
        """Kick the player ``name``; False when no such player is on the server."""
        changes = self._changes
        self._changes += 1
        answer = await self.rcon.command(f"kick {name}", idempotent=True)
        self._amend(changes, lambda found: [c for c in found if c.name != name])
        return "is not on the server" not in answer

    def _amend(self, changes: int, change: Callable[[list[Client]], list[Client]]) -> None:
        """The last ``status``, with a change the server confirmed, still answers for now:
        the plugin knows what it did (``changes``: the count before it)."""
        if self._status is not None and self._status[1] == changes:
            sent_at, _, found = self._status
            self._status = (sent_at, self._changes, change(found))

    async def say(self, message: str) -> str | None:
        """Say ``message`` to everyone; None, or what the server printed instead of the
        broadcast (``console: MESSAGE``)."""
        answer = await self.rcon.command(f"say {message}", idempotent=False)
        return None if f"console: {message}" in answer else answer.strip() or "no broadcast"

    # ── reverted keys ────────────────────────────────────────────────────────

    def mark_reverted(self, key: str) -> None:
        """Remember that ``key``'s bots were taken back, across restarts when there is a
        place to keep it."""
        if key in self.reverted:
            return
        self.reverted.add(key)
        if self._reverted_path is not None:
            temporary = self._reverted_path.with_name(self._reverted_path.name + ".tmp")
            temporary.write_text(json.dumps(sorted(self.reverted)))
            os.replace(temporary, self._reverted_path)

    def _load_reverted(self) -> set[str]:
        if self._reverted_path is None:
            return set()
        try:
            return set(json.loads(self._reverted_path.read_text()))
        except (OSError, ValueError, TypeError):
            return set()


def _state_base(config: ServerSettings, settings: OpenArenaSettings) -> str | None:
    """Where a server's small state files go: ``state_dir/openarena-<id>``, else beside its
    game log, else nowhere (kept in memory only)."""
    if settings.state_dir:
        return str(Path(settings.state_dir) / f"openarena-{config.id}")
    if config.log_path:
        return f"{config.log_path}.pageant"
    return None
