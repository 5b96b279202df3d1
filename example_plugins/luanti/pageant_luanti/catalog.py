"""What the plugin declares, apart from the callables: its actions' params and its triggers."""

from __future__ import annotations

from typing import Any

#: The entities the bridge registers (``pageant_bridge:beacon``, ...).
KINDS = ("beacon", "guardian")
#: The most entities one spawn makes, and the most items one gift holds.
MAX_ENTITIES = 10
MAX_ITEMS = 99


def _v(name: str, kind: str, description: str, example: Any) -> dict[str, Any]:
    return {"name": name, "type": kind, "description": description, "example": example}


def _p(name: str, kind: str, description: str, example: Any, **more: Any) -> dict[str, Any]:
    return {**_v(name, kind, description, example), "required": True, **more}


_PLACE = _p(
    "place",
    "string",
    "Where (a place of the settings).",
    "altar",
    option_source="luanti.options.places",
)
_PLAYER = _v("player", "string", "The player's name.", "sam")

ACTIONS: dict[str, dict[str, Any]] = {
    "luanti.say": {
        "id": "luanti.say",
        "label": "Say to every player",
        "risk": "notify",
        "budget_ms": 20_000,
        "params": [
            _p("message", "string", "The chat line.", "Beacon Night begins"),
            _p("server", "string", "Which world (default: the first).", "world", required=False),
        ],
        "description": "A chat line every player in the world sees.",
    },
    "luanti.spawn": {
        "id": "luanti.spawn",
        "label": "Spawn entities",
        "risk": "change",
        "reversible": "full",
        "budget_ms": 20_000,
        "params": [
            _p("kind", "string", f"What ({', '.join(KINDS)}).", "beacon"),
            _p("count", "integer", f"How many (1 to {MAX_ENTITIES}).", 3),
            _PLACE,
        ],
        "cost": lambda params: {"luanti.entities": params["count"]},
        "description": "Glowing entities in a row at a place; removed when the run ends.",
    },
    "luanti.give": {
        "id": "luanti.give",
        "label": "Give an item stack into a chest",
        "risk": "change",
        "reversible": "partial",
        "budget_ms": 20_000,
        "params": [
            _p("item", "string", "The item's name.", "default:diamond"),
            _p("count", "integer", f"How many (1 to {MAX_ITEMS}).", 3),
            _PLACE,
        ],
        "description": "Into the chest at a place (one is put there if none is); taken back "
        "when the run ends, as much as is still in it.",
    },
}


def _trigger(id: str, label: str, *variables: dict[str, Any]) -> dict[str, Any]:
    return {"id": id, "label": label, "variables": list(variables)}


TRIGGERS: list[dict[str, Any]] = [
    _trigger("luanti.player.joined", "A player joined", _PLAYER),
    _trigger("luanti.player.died", "A player died", _PLAYER),
    _trigger(
        "luanti.chat", "A player said something", _PLAYER, _v("message", "string", "What.", "hi")
    ),
    _trigger(
        "luanti.node.dug",
        "A node was dug",
        _v("node", "string", "The node's name.", "default:dirt"),
        _v("x", "integer", "Where: x.", 3),
        _v("y", "integer", "Where: y.", 8),
        _v("z", "integer", "Where: z.", -2),
        _v("player", "string", "Who dug it (empty for the game itself).", "sam"),
    ),
    _trigger(
        "luanti.entity.killed",
        "An entity of the bridge was killed",
        _v("entity", "string", f"Its kind ({', '.join(KINDS)}).", "guardian"),
        _v("id", "string", "Its id (the spawn's key and its number).", "run-1-step-4#1"),
        _v("killer", "string", "Who killed it (a player's name, or an entity's).", "sam"),
    ),
]
