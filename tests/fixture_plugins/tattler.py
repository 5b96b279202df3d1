"""tattler: a fixture plugin that leaves a mark whenever it is started.

Its ``pageant_startup`` and its lease's calls (the boot-time self-check reads, applies and
restores a target) each append a line to the file named by ``TATTLER_MARKER``, as a plugin
that binds a port or reaches its game at startup would show itself: a command that starts
plugins leaves lines, one that only reads the catalogue leaves none.
"""

from __future__ import annotations

import os
from typing import Any

from pageant import hookimpl

PLUGIN_INFO = {"owner": "tattler", "contract": "^1.2"}
MARKER = "TATTLER_MARKER"

GLOW: dict[str, str] = {}


def mark(what: str) -> None:
    path = os.environ.get(MARKER)
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(what + "\n")


async def flash(ctx: Any) -> dict[str, Any]:
    return {"ok": True}


async def dim(ctx: Any) -> dict[str, Any]:
    return {"ok": True}


async def read(target: str) -> str:
    mark(f"read {target}")
    return GLOW.get(target, "dim")


async def apply(target: str, value: str) -> str:
    mark(f"apply {target}")
    baseline = GLOW.get(target, "dim")
    GLOW[target] = value
    return baseline


async def restore(target: str, baseline: str) -> None:
    mark(f"restore {target}")
    GLOW[target] = baseline


@hookimpl
def pageant_startup(context: Any) -> None:
    mark("startup")


@hookimpl
def pageant_actions() -> list[dict[str, Any]]:
    return [
        {
            "id": "tattler.flash",
            "label": "Flash the tattler",
            "risk": "change",
            "reversible": "full",
            "budget_ms": 1_000,
            "perform": flash,
            "revert": dim,
        }
    ]


@hookimpl
def pageant_leases() -> list[dict[str, Any]]:
    return [
        {
            "id": "tattler.glow",
            "label": "The tattler's glow",
            "self_check": {"north": "bright"},
            "read": read,
            "apply": apply,
            "restore": restore,
        }
    ]
