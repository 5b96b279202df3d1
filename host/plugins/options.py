"""Reading what plugins declared, live: option sources."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import ValidationError

from pageant.hookspecs import OptionItem, OptionSource

RESOLVE_TIMEOUT_SECONDS = 10


async def resolve_options(source: OptionSource) -> dict[str, Any]:
    """``{ok: true, items}`` or ``{ok: false, reason}``; a failing source never raises."""
    try:
        raw = await asyncio.wait_for(source.resolve(), RESOLVE_TIMEOUT_SECONDS)
    except TimeoutError:
        return {
            "ok": False,
            "reason": f"{source.id} did not answer within {RESOLVE_TIMEOUT_SECONDS} s",
        }
    except Exception as exc:  # a plugin's failure is an answer, never a 500
        return {"ok": False, "reason": f"{source.id} raised {type(exc).__name__}: {exc}"}
    if not isinstance(raw, list):
        return {
            "ok": False,
            "reason": f"{source.id} answered {type(raw).__name__}; expected a list",
        }
    items = []
    for i, item in enumerate(raw):
        try:
            parsed = item if isinstance(item, OptionItem) else OptionItem.model_validate(item)
        except ValidationError as exc:
            return {
                "ok": False,
                "reason": f"{source.id} item [{i}] is invalid: {exc.errors()[0]['msg']}",
            }
        items.append(parsed.model_dump())
    return {"ok": True, "items": items}
