"""The boot-time check of each plugin's own problems (``PLUGIN_INFO["check"]``, contract 1.3).

A setting the game refuses — a wrong rcon password for one of a plugin's several servers —
is otherwise found by the first step that needs it, at the event's hour. When the host
starts, after every plugin's startup and beside the lease self-check, each loaded plugin
that declares ``check`` is asked what is wrong; every sentence it answers is kept on its
record (``problems``), logged as a WARNING, shown by ``pageant plugins`` (which exits 1),
``GET /api/v1/admin/plugins`` and ``/healthz``'s detail. A problem does not refuse the
plugin: the parts that work keep working.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from pageant.plugins.loader import PluginRecord

log = logging.getLogger("pageant.plugins")

#: The bound on one plugin's check: a game that does not answer is itself a problem.
CHECK_SECONDS = 10.0


async def check_one(record: PluginRecord) -> list[str]:
    """``record``'s plugin's problems, as sentences (a raise or a timeout is one)."""
    check = getattr(record.info, "check", None)
    if check is None:
        return []
    try:
        async with asyncio.timeout(CHECK_SECONDS):
            found = await check()
    except TimeoutError:
        return [f"its check did not answer within {CHECK_SECONDS:g} s"]
    except Exception as exc:  # the plugin's failure is a problem, never the host's
        return [f"its check raised {type(exc).__name__}: {exc}"]
    if not isinstance(found, list) or not all(isinstance(p, str) for p in found):
        return [f"its check answered {found!r}; expected a list of sentences"]
    return found


async def check_plugins(records: Iterable[PluginRecord]) -> dict[str, list[str]]:
    """Ask every loaded plugin that declares ``check``, all at once; record each one's
    problems on its record and answer ``{label: problems}`` for those with any."""
    loaded = [r for r in records if r.status == "loaded" and getattr(r.info, "check", None)]
    answers = await asyncio.gather(*(check_one(r) for r in loaded))
    found: dict[str, list[str]] = {}
    for record, problems in zip(loaded, answers, strict=True):
        record.problems = problems
        for problem in problems:
            log.warning("plugin %s reports a problem: %s", record.label, problem)
        if problems:
            found[record.label] = problems
    return found
