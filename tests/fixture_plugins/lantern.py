"""lantern: a fixture plugin that declares one of every kind.

An action with cost, perform and revert; a budget; a lease; an option source; a trigger;
an announce leg. Nothing here touches anything: the bodies answer what a game would.
"""

from __future__ import annotations

from typing import Any

from pageant import hookimpl

PLUGIN_INFO = {"owner": "lantern", "contract": "^1.0"}

#: What the lease reads and writes: target -> brightness.
BRIGHTNESS: dict[str, int] = {}


def cost(params: dict[str, Any]) -> dict[str, float]:
    return {"lantern.oil": 1}


async def light(ctx: Any) -> dict[str, Any]:
    return {"ok": True, "resources": [{"kind": "flame", "ref": ctx.idempotency_key}]}


async def snuff(ctx: Any) -> dict[str, Any]:
    return {"ok": True}


async def read(target: str) -> int:
    return BRIGHTNESS.get(target, 0)


async def apply(target: str, value: int) -> int:
    baseline = BRIGHTNESS.get(target, 0)
    BRIGHTNESS[target] = value
    return baseline


async def restore(target: str, baseline: int) -> None:
    BRIGHTNESS[target] = baseline


async def wicks() -> list[dict[str, str]]:
    return [{"value": "long", "label": "Long wick"}, {"value": "short", "label": "Short wick"}]


async def beacon(message: str, ctx: Any) -> dict[str, Any]:
    return {"ok": True}


@hookimpl
def pageant_actions() -> list[dict[str, Any]]:
    return [
        {
            "id": "lantern.light",
            "label": "Light the lantern",
            "risk": "change",
            "reversible": "full",
            "budget_ms": 2_000,
            "params": [
                {
                    "name": "wick",
                    "type": "string",
                    "required": True,
                    "description": "Which wick to light.",
                    "example": "long",
                    "option_source": "lantern.options.wicks",
                }
            ],
            "cost": cost,
            "perform": light,
            "revert": snuff,
        }
    ]


@hookimpl
def pageant_budgets() -> list[dict[str, Any]]:
    return [{"dimension": "lantern.oil", "label": "Lamp oil", "unit": "flasks"}]


@hookimpl
def pageant_leases() -> list[dict[str, Any]]:
    return [
        {
            "id": "lantern.brightness",
            "label": "Brightness",
            "read": read,
            "apply": apply,
            "restore": restore,
        }
    ]


@hookimpl
def pageant_option_sources() -> list[dict[str, Any]]:
    return [{"id": "lantern.options.wicks", "label": "Wicks", "resolve": wicks}]


@hookimpl
def pageant_triggers() -> list[dict[str, Any]]:
    return [
        {
            "id": "lantern.lit",
            "label": "A lantern was lit",
            "variables": [
                {"name": "where", "type": "string", "description": "Where.", "example": "Yew"}
            ],
        }
    ]


@hookimpl
def pageant_announce_legs() -> list[dict[str, Any]]:
    return [{"id": "lantern.beacon", "label": "Beacon", "send": beacon}]
