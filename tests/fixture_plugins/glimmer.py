"""glimmer: a fixture plugin that passes every contract check.

An action with a required and an optional param (``perform`` copes with the optional one
left out), a cost, a revert, its own option source, a budget, a trigger and an announce leg.
"""

from __future__ import annotations

from typing import Any

from pageant import hookimpl

PLUGIN_INFO = {"owner": "glimmer", "contract": "^1.0"}

SHADES = ("amber", "violet")
#: The keys reverted so far: a kindle under one makes nothing (a revert is final).
DOUSED: set[str] = set()


def cost(params: dict[str, Any]) -> dict[str, float]:
    return {"glimmer.sparks": params.get("sparks", 1)}


async def kindle(ctx: Any) -> dict[str, Any]:
    if ctx.params["shade"] not in SHADES:
        return {"ok": False, "retry": False, "error": f"no such shade {ctx.params['shade']!r}"}
    if ctx.verify or ctx.idempotency_key in DOUSED:
        return {"ok": True}
    return {"ok": True, "resources": [{"kind": "glow", "ref": ctx.idempotency_key}]}


async def douse(ctx: Any) -> dict[str, Any]:
    DOUSED.add(ctx.idempotency_key)
    return {"ok": True}


async def shades() -> list[dict[str, str]]:
    return [{"value": s, "label": s.title()} for s in SHADES]


async def flare(message: str, ctx: Any) -> dict[str, Any]:
    return {"ok": True}


@hookimpl
def pageant_actions() -> list[dict[str, Any]]:
    return [
        {
            "id": "glimmer.kindle",
            "label": "Kindle a glimmer",
            "risk": "change",
            "reversible": "full",
            "budget_ms": 4_000,
            "params": [
                {
                    "name": "shade",
                    "type": "string",
                    "required": True,
                    "description": "Which shade.",
                    "example": "amber",
                    "option_source": "glimmer.options.shades",
                },
                {
                    "name": "sparks",
                    "type": "integer",
                    "description": "How many sparks (default 1).",
                    "example": 2,
                },
            ],
            "cost": cost,
            "perform": kindle,
            "revert": douse,
        }
    ]


@hookimpl
def pageant_budgets() -> list[dict[str, Any]]:
    return [{"dimension": "glimmer.sparks", "label": "Sparks", "unit": "sparks"}]


@hookimpl
def pageant_option_sources() -> list[dict[str, Any]]:
    return [{"id": "glimmer.options.shades", "label": "Shades", "resolve": shades}]


@hookimpl
def pageant_triggers() -> list[dict[str, Any]]:
    return [
        {
            "id": "glimmer.seen",
            "label": "A glimmer was seen",
            "variables": [
                {
                    "name": "shade",
                    "type": "string",
                    "description": "Its shade.",
                    "example": "amber",
                },
                {"name": "bright", "type": "boolean", "description": "Bright?", "example": True},
            ],
        }
    ]


@hookimpl
def pageant_announce_legs() -> list[dict[str, Any]]:
    return [{"id": "glimmer.flare", "label": "Flare", "send": flare}]
