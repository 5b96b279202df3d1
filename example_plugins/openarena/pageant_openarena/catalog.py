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


#: A means of death (the game log's ``MOD_...``) in words, for a frag's sentence; one not
#: here reads as its name without ``MOD_``, in lower case.
MEANS = {
    "MOD_SHOTGUN": "a shotgun",
    "MOD_GAUNTLET": "a gauntlet",
    "MOD_MACHINEGUN": "a machine gun",
    "MOD_GRENADE": "a grenade",
    "MOD_GRENADE_SPLASH": "a grenade's blast",
    "MOD_ROCKET": "a rocket",
    "MOD_ROCKET_SPLASH": "a rocket's blast",
    "MOD_PLASMA": "plasma",
    "MOD_PLASMA_SPLASH": "plasma's splash",
    "MOD_RAILGUN": "a railgun",
    "MOD_LIGHTNING": "lightning",
    "MOD_BFG": "the BFG",
    "MOD_BFG_SPLASH": "the BFG's blast",
    "MOD_NAIL": "a nailgun",
    "MOD_CHAINGUN": "a chaingun",
    "MOD_PROXIMITY_MINE": "a proximity mine",
    "MOD_KAMIKAZE": "a kamikaze",
    "MOD_TELEFRAG": "a telefrag",
    "MOD_WATER": "water",
    "MOD_SLIME": "slime",
    "MOD_LAVA": "lava",
    "MOD_CRUSH": "a crush",
    "MOD_FALLING": "a fall",
    "MOD_SUICIDE": "suicide",
    "MOD_TRIGGER_HURT": "the map",
}


def means(mod: str) -> str:
    """``MOD_ROCKET`` -> ``a rocket``."""
    return MEANS.get(mod, mod.removeprefix("MOD_").lower().replace("_", " "))


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
            _var("means", "string", "The means of death, in words.", "a rocket"),
            _var("killer_is_bot", "boolean", "Whether a bot fragged.", True),
            _SERVER,
        ],
        "sentence": "{killer} fragged {victim} with {means}",
    },
    {
        "id": "openarena.player.joined",
        "label": "A player joined",
        "variables": [_NAME, _var("bot", "boolean", "Whether it is a bot.", True), _SERVER],
        "sentence": "{name} joined {server}",
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
