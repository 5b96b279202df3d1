"""A command queued while its server's sync waits on this host goes straight to that sync:
inserted delivered in the queueing's own write, handed over from memory, with no read and no
write of its own to deliver it. A sync whose agent has gone is handed nothing: the command
stays queued, and its withdrawal says truthfully that it was never delivered."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from sqlalchemy import select

from pageant.db.tables import link_commands
from pageant.hookspecs.link import NotDelivered
from pageant.link.service import Link
from pageant.support.timefmt import iso


async def _rows(db) -> dict[str, tuple[str, int, str | None]]:
    async with db.connect() as conn:
        rows = (await conn.execute(select(link_commands))).all()
    return {row.key: (row.status, row.deliveries, row.withdrawn_as) for row in rows}


async def _held(link: Link, server: str) -> None:
    """Until a sync of ``server`` waits (it looked, found nothing, and waits)."""
    for _ in range(500):
        if link._syncs.parked(server):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"no sync of {server} waits")


async def test_a_command_for_a_waiting_sync_is_handed_to_it_with_one_write(db, clock, settings):
    link = Link(db, clock, settings)
    await link.synced("world-a", ["bench"])
    sync = asyncio.create_task(link.take("world-a", 5))
    await _held(link, "world-a")
    written = link.writes.writes
    deadline = clock.now() + timedelta(seconds=30)
    call = asyncio.create_task(
        link.call("bench", "world-a", "spawn", {"n": [1, 2]}, key="k1", deadline=deadline)
    )
    commands = await asyncio.wait_for(sync, 5)
    assert commands == [
        {"command": "spawn", "key": "k1", "payload": {"n": [1, 2]}, "deadline": iso(deadline)}
    ]
    # Inserted delivered, in the queueing's one write: no second write delivered it.
    assert link.writes.writes - written == 1
    assert await _rows(db) == {"k1": ("delivered", 1, None)}
    await link.record_results("world-a", [{"command": "spawn", "key": "k1", "answer": 7}])
    assert await asyncio.wait_for(call, 5) == 7
    assert await _rows(db) == {"k1": ("answered", 1, None)}
    await link.close()


async def test_a_sync_whose_agent_has_gone_is_handed_nothing_and_the_command_waits(
    db, clock, settings
):
    link = Link(db, clock, settings)
    await link.synced("world-a", ["bench"])
    there = [True]
    sync = asyncio.create_task(link.take("world-a", 5, lambda: there[0]))
    await _held(link, "world-a")
    there[0] = False  # the agent closed its connection; its sync is still held
    deadline = clock.now() + timedelta(seconds=1)
    call = asyncio.create_task(
        link.call("bench", "world-a", "spawn", {}, key="k1", deadline=deadline)
    )
    for _ in range(500):
        if await _rows(db):
            break
        await asyncio.sleep(0.01)
    assert await _rows(db) == {"k1": ("queued", 0, None)}
    assert await asyncio.wait_for(sync, 5) == []  # woken, and it took nothing
    clock.advance(2)
    with pytest.raises(NotDelivered):
        await asyncio.wait_for(call, 5)
    assert await _rows(db) == {"k1": ("withdrawn", 0, "never_delivered")}
    await link.close()


async def test_a_sync_gone_as_its_command_is_inserted_leaves_it_queued_never_delivered(
    db, clock, settings
):
    link = Link(db, clock, settings)
    await link.synced("world-a", ["bench"])
    there = [True]
    sync = asyncio.create_task(link.take("world-a", 5, lambda: there[0]))
    await _held(link, "world-a")
    writes = link.writes
    run = writes.run

    async def gone_meanwhile(write):
        there[0] = False  # the agent goes while the command is being inserted for it
        return await run(write)

    writes.run = gone_meanwhile  # type: ignore[method-assign]  # the agent goes mid-insert
    deadline = clock.now() + timedelta(seconds=1)
    call = asyncio.create_task(
        link.call("bench", "world-a", "spawn", {}, key="k1", deadline=deadline)
    )
    assert await asyncio.wait_for(sync, 5) == []
    for _ in range(500):
        if (await _rows(db)).get("k1", ("",))[0] == "queued":
            break
        await asyncio.sleep(0.01)
    # Inserted delivered for the sync, then put back: no one was handed it.
    assert await _rows(db) == {"k1": ("queued", 0, None)}
    writes.run = run  # type: ignore[method-assign]  # the queue as it was
    # The agent back: its next sync takes the command, and its answer ends the call.
    assert [c["key"] for c in await link.take("world-a", 0)] == ["k1"]
    await link.record_results("world-a", [{"command": "spawn", "key": "k1", "answer": "ok"}])
    assert await asyncio.wait_for(call, 5) == "ok"
    assert await _rows(db) == {"k1": ("answered", 1, None)}
    await link.close()


async def test_commands_handed_over_and_queued_share_one_insert(db, clock, settings):
    link = Link(db, clock, settings)
    deadline = clock.now() + timedelta(seconds=30)
    for server in ("world-a", "world-b"):  # each server's queue counted once
        await link.synced(server, ["bench"])
        sync = asyncio.create_task(link.take(server, 5))
        await _held(link, server)
        call = asyncio.create_task(
            link.call("bench", server, "spawn", {}, key=f"{server}-0", deadline=deadline)
        )
        assert [c["key"] for c in await asyncio.wait_for(sync, 5)] == [f"{server}-0"]
        await link.record_results(server, [{"command": "spawn", "key": f"{server}-0"}])
        await asyncio.wait_for(call, 5)
    sync = asyncio.create_task(link.take("world-a", 5))
    await _held(link, "world-a")
    before = link.writes.transactions
    # world-b's command is queued, world-a's goes to its waiting sync: one transaction.
    calls = [
        asyncio.create_task(
            link.call("bench", server, "spawn", {}, key=f"{server}-1", deadline=deadline)
        )
        for server in ("world-b", "world-a")
    ]
    assert [c["key"] for c in await asyncio.wait_for(sync, 5)] == ["world-a-1"]
    assert link.writes.transactions - before == 1
    rows = await _rows(db)
    assert (rows["world-a-1"], rows["world-b-1"]) == (("delivered", 1, None), ("queued", 0, None))
    for call in calls:
        call.cancel()
    await asyncio.gather(*calls, return_exceptions=True)
    await link.close()
