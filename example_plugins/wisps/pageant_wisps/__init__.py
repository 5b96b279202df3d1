"""wisps: the smallest complete pageant plugin.

One ``change`` action with ``cost``, ``perform`` and ``revert``; one budget dimension; one
option source; one trigger. The "game" is a dictionary in this module: a real plugin
would talk to its game server where this one reads and writes ``WORLD``.
"""

from __future__ import annotations

from typing import Any

from pageant import hookimpl

COLOURS = ("north", "south", "ember")
MAX_WISPS = 50

#: The stand-in for a game world: idempotency key -> the wisps summoned under it.
WORLD: dict[str, list[str]] = {}


async def observe() -> dict[str, list[str]]:
    """The world as it stands: contract-check compares it around every dry run."""
    return {key: list(refs) for key, refs in WORLD.items()}


PLUGIN_INFO = {"owner": "wisps", "contract": "^1.1", "observe": observe}


def cost(params: dict[str, Any]) -> dict[str, float]:
    """Each wisp costs one unit of the ``wisps.wisps`` budget."""
    return {"wisps.wisps": params["count"]}


async def summon(ctx: Any) -> dict[str, Any]:
    """Summon ``count`` wisps of ``colour``; summoning twice under one key summons once."""
    count, colour = ctx.params["count"], ctx.params["colour"]
    if colour not in COLOURS:
        return {"ok": False, "retry": False, "error": f"no such colour {colour!r}"}
    if not 1 <= count <= MAX_WISPS:
        return {"ok": False, "retry": False, "error": f"count must be 1 to {MAX_WISPS}"}
    if ctx.verify:
        return {"ok": True}
    refs = WORLD.setdefault(
        ctx.idempotency_key, [f"{colour}-{ctx.idempotency_key[:8]}-{i}" for i in range(count)]
    )
    return {"ok": True, "resources": [{"kind": "wisp", "ref": ref} for ref in refs]}


async def dismiss(ctx: Any) -> dict[str, Any]:
    """Dismiss what was summoned under the step's key; dismissing nothing succeeds."""
    if not ctx.verify:
        WORLD.pop(ctx.idempotency_key, None)
    return {"ok": True}


async def colours() -> list[dict[str, str]]:
    return [{"value": c, "label": c.title()} for c in COLOURS]


@hookimpl
def pageant_actions() -> list[dict[str, Any]]:
    return [
        {
            "id": "wisps.summon",
            "label": "Summon wisps",
            "version": 1,
            "risk": "change",
            "reversible": "full",
            "budget_ms": 5_000,
            "params": [
                {
                    "name": "colour",
                    "type": "string",
                    "required": True,
                    "description": "Which wisps to summon.",
                    "example": "north",
                    "option_source": "wisps.options.colours",
                },
                {
                    "name": "count",
                    "type": "integer",
                    "required": True,
                    "description": f"How many (1 to {MAX_WISPS}).",
                    "example": 3,
                },
            ],
            "cost": cost,
            "perform": summon,
            "revert": dismiss,
        }
    ]


@hookimpl
def pageant_budgets() -> list[dict[str, Any]]:
    return [{"dimension": "wisps.wisps", "label": "Wisps summoned", "unit": "wisps"}]


@hookimpl
def pageant_option_sources() -> list[dict[str, Any]]:
    return [{"id": "wisps.options.colours", "label": "Wisp colours", "resolve": colours}]


@hookimpl
def pageant_triggers() -> list[dict[str, Any]]:
    return [
        {
            "id": "wisps.caught",
            "label": "A wisp was caught",
            "variables": [
                {
                    "name": "colour",
                    "type": "string",
                    "description": "The wisp's colour.",
                    "example": "north",
                },
                {
                    "name": "weight",
                    "type": "number",
                    "description": "How heavy it was.",
                    "example": 1.5,
                },
            ],
        }
    ]
