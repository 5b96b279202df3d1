"""A fixture plugin for the crash walk: ``anvil.forge`` records what it makes in a JSON file
(the "world", at ``$ANVIL_WORLD``) and, while the file says ``hang``, never answers — so a
test can kill the process in the middle of a perform. Forging twice under one key makes
one bar; ``revert`` takes it away again (and succeeds for what is not there)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from pageant import hookimpl

PLUGIN_INFO = {"owner": "anvil", "contract": "^1.0"}


def _path() -> Path:
    return Path(os.environ["ANVIL_WORLD"])


def _read() -> dict[str, Any]:
    return json.loads(_path().read_text())


def _write(world: dict[str, Any]) -> None:
    tmp = _path().with_suffix(".tmp")
    tmp.write_text(json.dumps(world))
    tmp.replace(_path())


async def forge(ctx: Any) -> dict[str, Any]:
    world = _read()
    world["calls"].append(ctx.idempotency_key)
    ref = world["bars"].get(ctx.idempotency_key) or f"bar-{ctx.idempotency_key[:8]}"
    world["bars"][ctx.idempotency_key] = ref
    _write(world)
    if world.get("hang"):
        await asyncio.sleep(3600)
    return {"ok": True, "resources": [{"kind": "bar", "ref": ref}]}


async def unforge(ctx: Any) -> dict[str, Any]:
    world = _read()
    world["reverts"].append([ctx.idempotency_key, [r.ref for r in ctx.resources]])
    world["bars"].pop(ctx.idempotency_key, None)
    _write(world)
    return {"ok": True}


@hookimpl
def pageant_actions() -> list[dict[str, Any]]:
    return [
        {
            "id": "anvil.forge",
            "label": "Forge a bar",
            "risk": "change",
            "reversible": "full",
            "budget_ms": 2_000,
            "params": [],
            "perform": forge,
            "revert": unforge,
        }
    ]
