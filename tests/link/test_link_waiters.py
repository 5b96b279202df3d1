"""The link's periodic check of waiting calls ends when it is stopped, even when the cancel
landed inside its database call and was swallowed there."""

from __future__ import annotations

import asyncio

from pageant.link import waiters
from pageant.link.waiters import Checker
from tests.conftest import cancel_swallowed_once


async def test_the_check_ends_when_cancelled_even_if_a_database_call_swallowed_the_cancel(
    monkeypatch,
):
    entered = asyncio.Event()

    async def swallowing_check() -> None:
        entered.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            pass  # as a driver may while giving its connection back

    monkeypatch.setattr(waiters, "CHECK_SECONDS", 0.01)
    checker = Checker(swallowing_check, busy=lambda: True)
    checker.ensure()
    assert checker._task is not None
    await cancel_swallowed_once(checker._task, entered, monkeypatch)
