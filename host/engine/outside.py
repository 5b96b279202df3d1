"""Writes by another process: a ``pageant fire`` from a terminal reaches a running host at once.

A firing made by the command line is recorded by that process in the shared database; the
running host's engine would otherwise learn of it at its next poll (``poll_seconds``, 15 s by
default). Every counted firing writes a run-log record, so the host watches the log's newest
id — the primary key's last entry, read in one index lookup on SQLite and MariaDB alike —
every ``outside_wake_ms``, and wakes its engine's advance stage when the id moved. The
engine's own records move it too; that costs one extra advance pass after a busy tick, and
nothing while the host is idle.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from pageant.db import runlog
from pageant.support.tasks import end_if_cancelled

if TYPE_CHECKING:
    from pageant.engine.loop import Engine
    from pageant.hosting import Host

log = logging.getLogger("pageant.engine")


async def watch_outside_writes(host: Host, engine: Engine, interval: float) -> None:
    """Wake ``engine`` (its advance stage) within ``interval`` seconds of any run-log record
    another process writes, until cancelled or the engine stops. A failed read is logged once
    and tried again at the next interval; it never stops the host."""
    last: int | None = None
    failing = False
    while not engine.stopping:
        try:
            async with host.db.connect() as conn:
                newest = await runlog.newest_id(conn)
        except Exception as exc:
            if not failing:
                log.warning("could not read the run log's newest line: %s", exc)
            failing = True
        else:
            failing = False
            if last is not None and newest != last:
                engine.wake(advance_only=True)
            last = newest
        end_if_cancelled()
        await asyncio.sleep(interval)
