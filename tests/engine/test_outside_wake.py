"""The watch on other processes' run-log writes ends when serve cancels it, even when the
cancel landed inside the database driver and was swallowed there."""

from __future__ import annotations

import asyncio

from pageant.engine import Engine, outside
from tests.conftest import cancel_swallowed_once


async def test_the_watch_ends_when_cancelled_even_if_a_database_call_swallowed_the_cancel(
    host, monkeypatch
):
    entered = asyncio.Event()

    async def swallowing_newest_id(conn) -> int:
        entered.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            pass  # as asyncmy did while giving its connection back
        return 1

    monkeypatch.setattr(outside.runlog, "newest_id", swallowing_newest_id)
    watch = asyncio.create_task(outside.watch_outside_writes(host, Engine(host), 0.01))
    await cancel_swallowed_once(watch, entered, monkeypatch)
