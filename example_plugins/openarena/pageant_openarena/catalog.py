"""What the stock game ships and how the plugin names what it adds: the characters
``addbot`` accepts, the deathmatch maps, the bots' names made from a step's key, and the
triggers its game log fires."""

from __future__ import annotations

import hashlib
from typing import Any

MAX_BOTS, MAX_SKILL, MAX_MESSAGE = 8, 5, 150
#: The resource kind of one bot; its ref is ``<server>/<name>``.
BOT = "openarena.bot"
#: The characters the stock game ships (``scripts/bots.txt``): what ``addbot`` accepts.
CHARACTERS = (
    "Andriy Angelyss Arachna Assassin Ayumi Beret Broadklin Cyber-Garg Dark Gargoyle Ghost "
    "Grism Grunt Headcrash Jenna Kyonshi Liz Major Merman Metalbot Morgan Murielle Neko "
    "Nekoyss Penguin Rai S_Marine Sarge Sergei Skelebot Sorceress Tanisha Tony"
).split()
#: Who joins when a step names no character.
MIX = ("Sarge", "Grunt", "Major", "Kyonshi", "Angelyss", "Tony", "Jenna", "Penguin")
#: The deathmatch maps the stock game ships.
MAPS = (
    "oa_dm1 oa_dm2 oa_dm3 oa_dm4 oa_dm5 oa_dm6 oa_dm7 aggressor czest1dm delta dm4ish dm6ish "
    "fan hydronex islanddm kaos kaos2 oa_rpg3dm2 oasago2 oa_minia oa_shouse oa_thor slimefac"
).split()


def bot_names(key: str, count: int, character: str | None) -> list[tuple[str, str]]:
    """``(character, name)`` of each bot a step adds: the same names for the same key, so
    a retry finds the bots it already added instead of adding more."""
    tag = hashlib.sha256(key.encode()).hexdigest()[:6]
    chosen = [character or MIX[i % len(MIX)] for i in range(count)]
    return [(c, f"{c}-{tag}{i + 1}") for i, c in enumerate(chosen)]


def _var(name: str, kind: str, description: str, example: Any) -> dict[str, Any]:
    return {"name": name, "type": kind, "description": description, "example": example}


#: The triggers the game log fires, each with the server it happened on.
_SERVER = _var("server", "string", "Which server it happened on.", "main")
_NAME = _var("name", "string", "The player.", "Sarge")
TRIGGERS: list[dict[str, Any]] = [
    {
        "id": "openarena.frag",
        "label": "A player was fragged",
        "variables": [
            _var(
                "killer",
                "string",
                "Who fragged (the victim for a suicide, world for lava, a fall or a kick).",
                "Sarge",
            ),
            _var("victim", "string", "Who died.", "Grunt"),
            _var("weapon", "string", "The means of death.", "MOD_ROCKET"),
            _var("killer_is_bot", "boolean", "Whether a bot fragged.", True),
            _SERVER,
        ],
    },
    {
        "id": "openarena.player.joined",
        "label": "A player joined",
        "variables": [_NAME, _var("bot", "boolean", "Whether it is a bot.", True), _SERVER],
    },
    {
        "id": "openarena.chat",
        "label": "A player said something",
        "variables": [_NAME, _var("text", "string", "What they said.", "gg"), _SERVER],
    },
    {
        "id": "openarena.match.started",
        "label": "A match started",
        "variables": [_var("map", "string", "The map.", "oa_dm1"), _SERVER],
    },
    {
        "id": "openarena.match.ended",
        "label": "A match ended",
        "variables": [
            _var("reason", "string", "Why (Fraglimit hit., shutdown, ...).", "shutdown"),
            _SERVER,
        ],
    },
]
