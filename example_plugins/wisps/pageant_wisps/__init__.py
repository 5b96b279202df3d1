"""wisps: the smallest complete pageant plugin.

One ``change`` action with ``cost``, ``perform`` and ``revert``; one lease (a region's
weather); one budget dimension; one option source; one trigger; and ``pageant_reconcile``.
The "game" is two dictionaries in this module: a real plugin would talk to its game server
where this one reads and writes ``WORLD`` and ``WEATHER``.

What the host's ledger does with it: every wisp ``summon`` reports is recorded, and given
back through ``dismiss`` when the run ends (whatever the ending); ``wisps.weather`` is
borrowed by ``core.lease`` and put back; ``reconcile`` tells the host which recorded wisps
are still in the world.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pageant import hookimpl
from pageant.hookspecs import HeldResource

COLOURS = ("north", "south", "ember")
MAX_WISPS = 50

#: The stand-in for a game world: idempotency key -> the wisps summoned under it.
WORLD: dict[str, list[str]] = {}
#: The keys a revert has been asked for: final, so a summon under one makes nothing
#: (contract 1.2: a retry, or a call still on its way, lands after the revert).
REVERTED: set[str] = set()
#: Each region's weather, which a run may borrow (the ``wisps.weather`` lease).
WEATHER: dict[str, str] = dict.fromkeys(COLOURS, "clear")


async def observe() -> dict[str, list[str]]:
    """The world as it stands: contract-check compares it around every dry run."""
    return {key: list(refs) for key, refs in WORLD.items()}


PLUGIN_INFO = {"owner": "wisps", "contract": "^1.2", "observe": observe}


def cost(params: dict[str, Any]) -> dict[str, float]:
    """Each wisp costs one unit of the ``wisps.wisps`` budget."""
    return {"wisps.wisps": params["count"]}


async def summon(ctx: Any) -> dict[str, Any]:
    """Summon ``count`` wisps of ``colour``; summoning twice under one key summons once,
    and under a key already reverted, not at all."""
    count, colour = ctx.params["count"], ctx.params["colour"]
    if colour not in COLOURS:
        return {"ok": False, "retry": False, "error": f"no such colour {colour!r}"}
    if not 1 <= count <= MAX_WISPS:
        return {"ok": False, "retry": False, "error": f"count must be 1 to {MAX_WISPS}"}
    if ctx.verify or ctx.idempotency_key in REVERTED:
        return {"ok": True}
    refs = WORLD.setdefault(
        ctx.idempotency_key, [f"{colour}-{ctx.idempotency_key[:8]}-{i}" for i in range(count)]
    )
    return {"ok": True, "resources": [{"kind": "wisp", "ref": ref} for ref in refs]}


async def dismiss(ctx: Any) -> dict[str, Any]:
    """Dismiss the wisps named in ``ctx.resources`` — or, when the host has none to name
    (the answer of the summon was lost), everything summoned under the step's key.
    Dismissing what is not there succeeds: a revert must be safe to repeat. The key is
    final from here on: a summon that arrives later under it makes nothing."""
    if ctx.verify:
        return {"ok": True}
    REVERTED.add(ctx.idempotency_key)
    if not ctx.resources:
        WORLD.pop(ctx.idempotency_key, None)
        return {"ok": True}
    gone = {res.ref for res in ctx.resources}
    left = [ref for ref in WORLD.get(ctx.idempotency_key, []) if ref not in gone]
    if left:
        WORLD[ctx.idempotency_key] = left
    else:
        WORLD.pop(ctx.idempotency_key, None)
    return {"ok": True}


async def read_weather(region: str) -> str:
    """The weather of ``region`` now (a region nobody changed is clear)."""
    return WEATHER.get(region, "clear")


async def apply_weather(region: str, value: str) -> str:
    """Set the weather of ``region``; answers the weather it replaced (the baseline)."""
    before = await read_weather(region)
    WEATHER[region] = value
    return before


async def restore_weather(region: str, baseline: str) -> None:
    """Put the weather the lease replaced back (safe to repeat)."""
    WEATHER[region] = baseline


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
def pageant_leases() -> list[dict[str, Any]]:
    return [
        {
            "id": "wisps.weather",
            "label": "A region's weather",
            "read": read_weather,
            "apply": apply_weather,
            "restore": restore_weather,
        }
    ]


@hookimpl
async def pageant_reconcile(resources: Sequence[HeldResource]) -> list[str]:
    """The ``ref`` of each recorded resource still in the world: the wisps still summoned
    (a player may have caught one meanwhile) and every weather lease (a region's weather
    always exists; whether it still holds the leased value is the restore's question)."""
    summoned = {ref for refs in WORLD.values() for ref in refs}
    return [
        res.ref
        for res in resources
        if res.kind == "wisps.weather" or (res.kind == "wisp" and res.ref in summoned)
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
