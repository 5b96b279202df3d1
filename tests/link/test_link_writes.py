"""The game link's group commit: many agents' writes in one transaction, and each write's
outcome the one it would have had alone, even when the bulk statement comes up short."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from sqlalchemy import select

from pageant.access import tokens
from pageant.access.tokens import create_token, hash_token, principal_seen_within
from pageant.db import link as link_rows
from pageant.db.tables import link_commands
from pageant.link.service import Link
from pageant.link.writes import LinkWrites, Queue


def _link(db, clock, settings) -> Link:
    return Link(db, clock, settings)


async def _answered(db) -> dict[str, object]:
    async with db.connect() as conn:
        rows = (await conn.execute(select(link_commands))).all()
    return {row.key: (row.status, row.answer, row.late) for row in rows}


async def _call(link: Link, clock, server: str, key: str):
    deadline = clock.now() + timedelta(seconds=30)
    return await link.call("bench", server, "ping", {"n": key}, key=key, deadline=deadline)


async def _agent(link: Link, server: str, answer_twice: bool = False) -> None:
    """One sync's worth of an agent: take what is due and answer it (twice if asked)."""
    commands = await link.take(server, 5)
    results = [{"command": c["command"], "key": c["key"], "answer": c["payload"]} for c in commands]
    await link.record_results(server, results + (results if answer_twice else []))


async def test_twenty_servers_commands_share_few_transactions_and_each_is_answered_once(
    db, clock, settings
):
    link = _link(db, clock, settings)
    servers = [f"w{i}" for i in range(20)]
    for server in servers:
        await link.synced(server, ["bench"])
    for round_ in ("first", "second"):
        # A server's first command on a host counts its queue alone; later ones share.
        before, written = link._writes.transactions, link._writes.writes
        agents = [asyncio.create_task(_agent(link, server)) for server in servers]
        for _ in range(500):  # every agent's sync waits (it has looked, and found nothing)
            if all(link._syncs.parked(server) for server in servers):
                break
            await asyncio.sleep(0.01)
        answers = await asyncio.gather(*(_call(link, clock, s, f"{round_}-{s}") for s in servers))
        await asyncio.gather(*agents)
        assert answers == [{"n": f"{round_}-{s}"} for s in servers]
    stored = await _answered(db)
    assert {key: value[0] for key, value in stored.items()} == {
        f"{round_}-{s}": "answered" for round_ in ("first", "second") for s in servers
    }
    # Each command handed to its server's waiting sync as it is inserted (no write of its
    # own to deliver it), then answered: 40 writes, in a handful of transactions.
    assert link._writes.writes - written == 40
    assert link._writes.transactions - before <= 10


async def test_an_answer_sent_twice_in_a_batch_counts_once_and_the_others_stand(
    db, clock, settings
):
    link = _link(db, clock, settings)
    servers = ["a", "b", "c"]
    for server in servers:
        await link.synced(server, ["bench"])
    agents = [
        asyncio.create_task(_agent(link, server, answer_twice=server == "b")) for server in servers
    ]
    answers = await asyncio.gather(*(_call(link, clock, s, f"k-{s}") for s in servers))
    await asyncio.gather(*agents)
    assert answers == [{"n": "k-a"}, {"n": "k-b"}, {"n": "k-c"}]
    stored = await _answered(db)
    assert stored == {f"k-{s}": ("answered", {"answer": {"n": f"k-{s}"}}, False) for s in servers}


async def test_a_retry_queued_beside_new_commands_finds_its_command_and_the_new_ones_queue(
    db, clock, settings
):
    link = _link(db, clock, settings)
    await link.synced("a", ["bench"])
    deadline = clock.now() + timedelta(seconds=30)
    first, fresh = await link._queue("bench", "a", "ping", {"n": 1}, "retry", deadline)
    assert fresh
    later = deadline + timedelta(seconds=30)
    queued = await asyncio.gather(
        link._queue("bench", "a", "ping", {"n": 1}, "retry", later),
        link._queue("bench", "a", "ping", {"n": 2}, "new-1", deadline),
        link._queue("bench", "a", "ping", {"n": 3}, "new-2", deadline),
    )
    assert queued[0] == (first, False)
    assert [fresh for _, fresh in queued[1:]] == [True, True]
    async with db.connect() as conn:
        rows = {row.key: row for row in (await conn.execute(select(link_commands))).all()}
    assert sorted(rows) == ["new-1", "new-2", "retry"]
    assert rows["retry"].deadline == later  # the retry waits for its own, later, budget


async def test_many_answers_recorded_in_bulk_match_one_by_one(db, clock):
    now = clock.now()
    async with db.begin() as conn:
        for key in ("x", "y"):
            await link_rows.insert_command(
                conn,
                {
                    "server": "s",
                    "owner": "o",
                    "command": "c",
                    "key": key,
                    "payload": {},
                    "status": "delivered",
                    "deadline": now + timedelta(seconds=9),
                    "created_at": now,
                },
            )
        named = [("s", "c", "x", {"answer": 1}, now), ("s", "c", "nothing", {"answer": 2}, now)]
        assert await link_rows.answer_all(conn, named) == 1
        assert await link_rows.answer_all(conn, named) == 0  # the first answer stands


async def test_a_hundred_syncs_on_one_unknown_token_read_it_once(db, clock, monkeypatch):
    token = await create_token(db, role="game", name="t", now=clock.now(), servers=["a"])
    tokens.forget_tokens(db)
    reads = 0
    real = tokens.token_rows.by_hash

    async def counted(conn, token_hash):
        nonlocal reads
        reads += 1
        return await real(conn, token_hash)

    monkeypatch.setattr(tokens.token_rows, "by_hash", counted)
    found = await asyncio.gather(
        *(
            principal_seen_within(
                db, hash_token(token), now=clock.now(), within=timedelta(seconds=5)
            )
            for _ in range(100)
        )
    )
    assert reads == 1
    assert {who.name for who in found} == {"t"}


async def test_a_sync_between_a_commands_commit_and_its_caller_hearing_so_takes_it(
    db, clock, settings, monkeypatch
):
    """A sync that found nothing lets the next wait without a read, but not while a command
    for its server is being queued: committed, it may be read before its caller hears so."""
    link = _link(db, clock, settings)
    await link.synced("a", ["bench"])
    assert await link.take("a", 0) == []  # nothing due: known, for a while
    committed = asyncio.Event()
    real = LinkWrites.run

    async def heard_late(self, write):
        outcome = await real(self, write)
        if isinstance(write, Queue):
            committed.set()
            await asyncio.sleep(0.3)  # the caller hears of its commit only now
        return outcome

    monkeypatch.setattr(LinkWrites, "run", heard_late)
    call = asyncio.create_task(_call(link, clock, "a", "k-1"))
    await committed.wait()
    (command,) = await link.take("a", 0)
    assert command["key"] == "k-1"
    await link.record_results("a", [{"command": "ping", "key": "k-1", "answer": 7}])
    assert await call == 7


async def test_closing_the_link_lets_the_writes_handed_in_be_made(db, clock, settings):
    link = _link(db, clock, settings)
    await link.synced("a", ["bench"])
    call = asyncio.create_task(_call(link, clock, "a", "k-1"))
    await asyncio.sleep(0)  # the call has handed its command in, and waits
    assert link._writes._writer is not None and not link._writes._writer.done()
    await link.close()
    assert link._writes._writer.done()
    assert await _answered(db) == {"k-1": ("queued", None, False)}
    call.cancel()
    await asyncio.gather(call, return_exceptions=True)
