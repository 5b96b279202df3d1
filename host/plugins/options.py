"""Reading what plugins declared, live: option sources."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pageant.hookspecs import OptionItem, OptionSource
from pageant.plugins import tracing

log = logging.getLogger("pageant.plugins")

RESOLVE_TIMEOUT_SECONDS = 10


async def resolve_options(
    source: OptionSource,
    roots: Sequence[Path | None] = (),
    *,
    timeout: float | None = None,
) -> dict[str, Any]:
    """``{ok: true, items}`` or ``{ok: false, reason}``; a failing source never raises.

    An exception is logged with its traceback; the reason names the innermost frame in
    ``roots`` (where the plugins' code lives).
    """
    if timeout is None:
        timeout = RESOLVE_TIMEOUT_SECONDS
    try:
        async with asyncio.timeout(timeout):
            raw = await source.resolve()
    except TimeoutError:
        return {"ok": False, "reason": f"{source.id} did not answer within {timeout:g} s"}
    except Exception as exc:  # a plugin's failure is an answer, never a 500
        where = tracing.innermost_frame(exc, roots)
        at = f" at {where}" if where else ""
        log.error("option source %s raised in resolve%s", source.id, at, exc_info=exc)
        return {"ok": False, "reason": f"{source.id} raised {type(exc).__name__}: {exc}{at}"}
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
        items.append(parsed.model_dump(exclude_none=True))
    return {"ok": True, "items": items}
