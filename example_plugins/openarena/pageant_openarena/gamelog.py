"""The game log (``g_log``): what happened on the server, read line by line.

:class:`GameLog` turns lines such as ``  0:24 Kill: 0 1 4: Sarge killed Grunt by
MOD_GRENADE`` into trigger firings; :class:`Follower` reads the lines a file gained since it
last looked, across rotation, truncation, server restarts and restarts of pageant itself.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from .catalog import means
from .rcon import strip_colours

#: ``  1:04 Kill: ...``: the game clock, then what happened.
LINE = re.compile(r"^\s*\d+:\d{2} (?P<what>\w+): ?(?P<rest>.*)$")
KILL = re.compile(
    r"^(?P<k>\d+) (?P<v>\d+) \d+: (?P<killer>.*) killed (?P<victim>.*) by (?P<mod>\S+)$"
)
#: The killer number of a death no player caused (lava, a fall, a kick).
WORLD = 1022


@dataclass(frozen=True)
class Firing:
    """One trigger to fire: its id and payload."""

    trigger: str
    payload: dict[str, Any]


@dataclass
class GameLog:
    """Reads one server's log lines in order; knows who is connected (names, bots) and who
    fragged how often, which the lines themselves only say by client number."""

    server: str
    clients: dict[int, tuple[str, bool]] = field(default_factory=dict)
    present: set[str] = field(default_factory=set)
    #: Frags per killer (not the world, not oneself) since this reader began.
    tally: Counter[str] = field(default_factory=Counter)
    _ended: bool = True

    def read(self, line: str) -> list[Firing]:
        """The firings one line makes (most lines make none)."""
        found = LINE.match(line.rstrip("\r\n"))
        if found is None:
            return []
        what, rest = found["what"], found["rest"]
        handler = getattr(self, f"_on_{what.lower()}", None)
        return handler(rest) if handler is not None else []

    def _fire(self, trigger: str, **payload: Any) -> list[Firing]:
        return [Firing(trigger, {**payload, "server": self.server})]

    def _on_clientuserinfochanged(self, rest: str) -> list[Firing]:
        number, _, info = rest.partition(" ")
        parts = info.split("\\")
        fields = dict(zip(parts[::2], parts[1::2], strict=False))
        if number.isdigit() and "n" in fields:
            # Only bots carry a skill in their userinfo.
            self.clients[int(number)] = (strip_colours(fields["n"]), "skill" in fields)
        return []

    def _on_clientbegin(self, rest: str) -> list[Firing]:
        client = self.clients.get(int(rest)) if rest.strip().isdigit() else None
        if client is None or client[0] in self.present:
            return []  # a map change begins everyone again: they did not join
        self.present.add(client[0])
        return self._fire("openarena.player.joined", name=client[0], bot=client[1])

    def _on_clientdisconnect(self, rest: str) -> list[Firing]:
        client = self.clients.pop(int(rest), None) if rest.strip().isdigit() else None
        if client is not None:
            self.present.discard(client[0])
        return []

    def _on_kill(self, rest: str) -> list[Firing]:
        found = KILL.match(rest)
        if found is None:
            return []
        k, v = int(found["k"]), int(found["v"])
        victim = strip_colours(found["victim"])
        if k == WORLD:
            killer, is_bot = "world", False
        else:
            killer = strip_colours(found["killer"])
            is_bot = self.clients.get(k, (killer, False))[1]
            if k != v:
                self.tally[killer] += 1
        return self._fire(
            "openarena.frag",
            killer=killer,
            victim=victim,
            weapon=found["mod"],
            means=means(found["mod"]),
            killer_is_bot=is_bot,
        )

    def _on_say(self, rest: str) -> list[Firing]:
        name, sep, text = rest.partition(": ")
        if not sep:
            return []
        return self._fire("openarena.chat", name=strip_colours(name), text=strip_colours(text))

    _on_sayteam = _on_say

    def _on_initgame(self, rest: str) -> list[Firing]:
        parts = rest.split("\\")
        info = dict(zip(parts[1::2], parts[2::2], strict=False))
        self._ended = False
        return self._fire("openarena.match.started", map=info.get("mapname", ""))

    def _on_exit(self, rest: str) -> list[Firing]:
        if self._ended:
            return []
        self._ended = True
        return self._fire("openarena.match.ended", reason=rest.strip() or "exit")

    def _on_shutdowngame(self, rest: str) -> list[Firing]:
        # A match that ends by a limit says Exit first; one stopped by a map change or a
        # server stop says only this.
        if self._ended:
            return []
        self._ended = True
        return self._fire("openarena.match.ended", reason="shutdown")


class Follower:
    """Reads the complete lines a log file gained since the last look.

    Where it got to (the file's inode and the byte offset) is kept in ``state_path``,
    written before the lines are handed over: a restart of pageant goes on from there and
    never hands a line over twice (a crash between the write and the firing loses those
    lines instead). With no state yet it starts at the end: history is not news.

    A new file at ``path`` (rotation) is read from its start, after the old one's last
    lines; a file shorter than the offset (truncation) is read from its start; a last line
    without its newline waits for it.
    """

    def __init__(self, path: Path, state_path: Path) -> None:
        self.path, self.state_path = path, state_path
        self._file: BinaryIO | None = None
        self._inode: int | None = None
        self._offset = 0
        state = self._load()
        if state is not None:
            self._inode, self._offset = state

    def _load(self) -> tuple[int, int] | None:
        try:
            raw = json.loads(self.state_path.read_text())
            return int(raw["inode"]), int(raw["offset"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _save(self) -> None:
        temporary = self.state_path.with_name(self.state_path.name + ".tmp")
        temporary.write_text(json.dumps({"inode": self._inode, "offset": self._offset}))
        os.replace(temporary, self.state_path)

    def poll(self) -> list[str]:
        """The new complete lines, oldest first (none when the file does not exist yet)."""
        lines: list[str] = []
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return lines
        if self._file is not None and os.fstat(self._file.fileno()).st_ino != stat.st_ino:
            lines += self._drain()  # rotated: the old file's last lines first
            self._file.close()
            self._file = None
            self._inode, self._offset = stat.st_ino, 0
        if self._file is None:
            self._file = self.path.open("rb")
            if self._inode is None:
                self._offset = stat.st_size  # first look ever: start at the end
            elif self._inode != stat.st_ino:
                self._offset = 0  # replaced while pageant was away
            self._inode = stat.st_ino
        if stat.st_size < self._offset:
            self._offset = 0  # truncated
        lines += self._drain()
        self._save()
        return lines

    def _drain(self) -> list[str]:
        assert self._file is not None
        self._file.seek(self._offset)
        data = self._file.read()
        complete = data[: data.rfind(b"\n") + 1]
        self._offset += len(complete)
        return complete.decode("latin-1").splitlines()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
