"""A cleanup held because a plugin is down says so.

An ended run whose rows wait for a plugin that is unavailable (its game down, not
configured) is not given back and spends nothing: the cleanup stage passes it by. That
wait is a fact a person needs: the run's ``waiting_on`` names the plugin and why (reason
``unavailable``, with ``plugin``), its health becomes ``degraded``, and each is logged once
(``run.waiting``, ``run.health``). When the plugin is back
(:meth:`pageant.hosting.Host.plugin_back`) the stage gives the rows back by itself and the
note is cleared once the run's cleanup has settled.

It reads and writes through :mod:`pageant.db` alone, so the engine's cleanup stage and the
run console (which derives ``waiting_on`` again from the rows) share the one sentence.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db import resources, runlog, runs
from pageant.states import Health

#: Answers why an owner's plugin is unavailable, or None (``Host.plugin_unavailable``).
Unavailable = Callable[[str], "str | None"]

#: The waiting reason of a held cleanup (one of ``pageant.runs.waiting.REASONS``).
REASON = "unavailable"


def held_by(held: Mapping[str, int], unavailable: Unavailable) -> dict[str, Any] | None:
    """What an ended run's cleanup waits on, from ``held`` (``{owner: rows still to give
    back}``): the first unavailable owner, named with its reason and how much waits; None
    when nothing waits for a plugin that is down."""
    for owner in sorted(held):
        why = unavailable(owner)
        if why is None:
            continue
        count = sum(held.values())
        things = "thing" if count == 1 else "things"
        return {
            "reason": REASON,
            "plugin": owner,
            "sentence": (
                f"cleanup waits for {owner}, which is unavailable ({why}): {count} {things} "
                f"this run holds will be given back once {owner} is back"
            ),
        }
    return None


async def note_held(
    conn: AsyncConnection, run_id: int, waiting: dict[str, Any], *, now: datetime
) -> bool:
    """Record on an ended run that its cleanup is held (``waiting``, from :func:`held_by`)
    and raise its health to ``degraded``; each is logged once, when it changes. Answers
    whether anything changed."""
    changed = False
    if await runs.escalate_health(
        conn, run_id, Health.DEGRADED, because=waiting["sentence"], at=now
    ):
        changed = True
    if await runs.set_waiting(conn, run_id, REASON, now):
        await runlog.run_waiting(conn, run_id, at=now, waiting={**waiting, "since": now})
        changed = True
    return changed


async def clear_held(conn: AsyncConnection, run_id: int, *, now: datetime) -> None:
    """The run's cleanup went on: it no longer waits (logged once, if it did)."""
    if await runs.set_waiting(conn, run_id, None, None):
        await runlog.run_waiting(conn, run_id, at=now, waiting=None)


async def to_note(
    conn: AsyncConnection, owners: tuple[str, ...], unavailable: Unavailable, *, limit: int
) -> list[tuple[int, dict[str, Any]]]:
    """The ended runs whose cleanup waits for one of ``owners`` (the plugins down now) and
    that do not say so yet, each with what to say: read only, so a pass with nothing new
    to note takes no write lock."""
    by_run: dict[int, dict[str, int]] = {}
    noted: dict[int, bool] = {}
    for row in await resources.held_for_owners(conn, owners, limit=limit):
        by_run.setdefault(row.run_id, {})[row.owner] = row.held
        noted[row.run_id] = row.health != Health.OK and row.waiting_reason == REASON
    out = []
    for run_id, held in by_run.items():
        waiting = held_by(held, unavailable)
        if waiting is not None and not noted[run_id]:
            out.append((run_id, waiting))
    return out
