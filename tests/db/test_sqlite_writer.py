"""SQLite's in-process writer lock: one writer at a time, and a cancelled waiter stays
cancelled."""

from __future__ import annotations

import asyncio

import pytest

from pageant.db.engine import create_engine


@pytest.fixture
async def sqlite_db(tmp_path):
    db = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'writer.db'}")
    try:
        yield db
    finally:
        await db.dispose()


async def test_a_writer_cancelled_as_the_lock_is_handed_to_it_stays_cancelled(sqlite_db):
    entered: list[str] = []

    async def second_writer() -> None:
        async with sqlite_db.begin():
            entered.append("second")
            await asyncio.sleep(30)

    async with sqlite_db.begin():
        waiter = asyncio.create_task(second_writer())
        for _ in range(20):  # let it queue on the lock
            await asyncio.sleep(0)
    # The lock was handed to the waiter just now; cancel it before it runs.
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(waiter, 5)
    assert entered == []
    # Nothing holds the lock: the next writer gets in at once.
    async with asyncio.timeout(5):
        async with sqlite_db.begin():
            entered.append("third")
    assert entered == ["third"]
