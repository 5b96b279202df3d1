"""Firings at game scale: the firing routes take a token seen live from memory and check it
again in the transaction that records the firings, so a revoke still stops the next
request; and a transaction's firings are counted into their gates set-wise."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import event as sa_event
from sqlalchemy import select, update
from sqlalchemy.exc import DatabaseError

from pageant.access.tokens import create_token
from pageant.db import phase_gates as gate_rows
from pageant.db.tables import api_tokens
from pageant.hosting import Host
from tests.conftest import bearer
from tests.factories import log_lines
from tests.gates.test_firings import BATCH, FIRE, _servers, _tally


class Statements:
    """The SQL a database engine runs while the block lasts."""

    def __init__(self, host: Host) -> None:
        self.sync = host.db.sync_engine
        self.seen: list[tuple[str, bool]] = []

    def _note(self, conn, cursor, statement, parameters, context, executemany) -> None:
        self.seen.append((" ".join(statement.split()).upper(), executemany))

    def __enter__(self) -> Statements:
        sa_event.listen(self.sync, "before_cursor_execute", self._note)
        return self

    def __exit__(self, *exc: object) -> None:
        sa_event.remove(self.sync, "before_cursor_execute", self._note)

    def count(self, start: str, contains: str = "") -> int:
        return sum(1 for sql, _ in self.seen if sql.startswith(start) and contains in sql)


async def _fire(client: Any, token: str, body: Any, path: str = FIRE) -> tuple[int, Any]:
    response = await client.post(path, json=body, headers=bearer(token))
    return response.status, await response.json()


async def _revoke_elsewhere(host: Host, name: str) -> None:
    """Revoke as another process would (the CLI, another host): in the database only."""
    async with host.db.begin() as conn:
        await conn.execute(
            update(api_tokens)
            .where(api_tokens.c.name == name)
            .values(revoked_at=host.clock.now(), revoked_by="cli:ops")
        )


async def test_a_token_seen_live_is_not_looked_up_again_by_the_firing_routes(
    host, engine, client, clock
):
    runs = await _servers(host, engine, ["eu-1"])
    token = await create_token(host.db, role="game", name="shard", now=clock.now())
    assert (await _fire(client, token, {"colour": "eu-1"}))[0] == 200
    with Statements(host) as sql:
        for _ in range(3):
            assert (await _fire(client, token, {"colour": "eu-1"}))[0] == 200
    assert sql.count("SELECT", "API_TOKENS.TOKEN_HASH =") == 0
    # Checked instead by id, in each firing's own transaction (and in the read of whether a
    # gate is open, when it is made).
    assert sql.count("SELECT", "FROM API_TOKENS") >= 3
    assert await _tally(host, runs["eu-1"]) == 4


async def test_a_token_revoked_by_another_process_is_refused_on_its_next_firing(
    host, engine, client, clock
):
    runs = await _servers(host, engine, ["eu-1"])
    token = await create_token(host.db, role="game", name="shard", now=clock.now())
    assert (await _fire(client, token, {"colour": "eu-1"}))[0] == 200
    await _revoke_elsewhere(host, "shard")
    revoked = "the bearer token was revoked"
    status, body = await _fire(client, token, {"colour": "eu-1"})
    assert (status, body["error"]["message"]) == (401, revoked)
    status, body = await _fire(client, token, [{"trigger": "wisps.caught", "payload": {}}], BATCH)
    assert (status, body["error"]["message"]) == (401, revoked)
    # A request that would record nothing answers the token's refusal too, not its own.
    status, body = await _fire(client, token, {"colour": 7})
    assert (status, body["error"]["message"]) == (401, revoked)
    status, body = await _fire(client, token, [{"trigger": "nope", "payload": {}}], BATCH)
    assert (status, body["error"]["message"]) == (401, revoked)
    assert await _tally(host, runs["eu-1"]) == 1


async def test_a_token_revoked_by_another_process_is_refused_where_no_gate_is_open(
    host, client, clock
):
    token = await create_token(host.db, role="game", name="shard", now=clock.now())
    assert await _fire(client, token, {"colour": "eu-1"}) == (
        200,
        {"gates_matched": 0, "gates_closed": 0},
    )
    await _revoke_elsewhere(host, "shard")
    status, body = await _fire(client, token, {"colour": "eu-1"})
    assert (status, body["error"]["message"]) == (401, "the bearer token was revoked")


async def test_a_remembered_token_still_expires_on_time(host, engine, client, clock):
    runs = await _servers(host, engine, ["eu-1"])
    token = await create_token(
        host.db, role="game", name="shard", now=clock.now(), expires_in=timedelta(minutes=2)
    )
    assert (await _fire(client, token, {"colour": "eu-1"}))[0] == 200
    clock.advance(119)
    assert (await _fire(client, token, {"colour": "eu-1"}))[0] == 200
    clock.advance(1)
    status, body = await _fire(client, token, {"colour": "eu-1"})
    assert (status, body["error"]["message"]) == (401, "the bearer token has expired")
    assert await _tally(host, runs["eu-1"]) == 2


async def test_a_batch_counts_its_firings_into_their_gates_in_one_statement(
    host, engine, client, clock
):
    runs = await _servers(host, engine, ["eu-1", "eu-2", "eu-3"], count=3)
    token = await create_token(host.db, role="game", name="shard", now=clock.now())
    colours = ["eu-1", "eu-2", "eu-1", "eu-1", "eu-1", "eu-3", "eu-2"]
    batch = [{"trigger": "wisps.caught", "payload": {"colour": c}} for c in colours]
    with Statements(host) as sql:
        status, answers = await _fire(client, token, batch, BATCH)
    assert status == 200
    # eu-1's gate closes on its third firing; its fourth counts for nothing.
    assert [(a["gates_matched"], a["gates_closed"]) for a in answers] == [
        (1, 0),
        (1, 0),
        (1, 0),
        (1, 1),
        (0, 0),
        (1, 0),
        (1, 0),
    ]
    updates = [(s, many) for s, many in sql.seen if s.startswith("UPDATE EVENT_RUN_PHASE_GATES")]
    # One statement for every gate: SQLite's a row a gate in one turn of its thread,
    # MariaDB's one UPDATE (its drivers send an executemany of one as a round trip a row).
    assert len(updates) == 1
    assert updates[0][1] is (host.db.dialect.name == "sqlite")
    assert [await _tally(host, runs[c]) for c in ("eu-1", "eu-2", "eu-3")] == [3, 2, 1]
    lines = await log_lines(host.db, runs["eu-1"], "condition.evaluated")
    assert [line.detail["tally"] for line in lines] == [1, 2, 3]
    assert len(await log_lines(host.db, runs["eu-1"], "phase.gate")) == 1


async def test_a_transactions_counts_are_one_info_line_each_count_at_debug(
    host, engine, client, clock, caplog
):
    runs = await _servers(host, engine, ["eu-1", "eu-2"], count=3)
    token = await create_token(host.db, role="game", name="shard", now=clock.now())
    colours = ["eu-1", "eu-2", "eu-1", "eu-1", "eu-1"]
    batch = [{"trigger": "wisps.caught", "payload": {"colour": c}} for c in colours]
    caplog.set_level(logging.DEBUG)
    status, _ = await _fire(client, token, batch, BATCH)
    assert status == 200
    counts = [r for r in caplog.records if getattr(r, "event", None) == "condition.evaluated"]
    assert [(r.run_id, r.levelno) for r in counts] == [
        (runs[c], logging.DEBUG) for c in ("eu-1", "eu-2", "eu-1", "eu-1")
    ]
    closes = [r for r in caplog.records if getattr(r, "event", None) == "phase.gate"]
    assert [(r.run_id, r.levelno) for r in closes] == [(runs["eu-1"], logging.INFO)]
    [summary] = [r for r in caplog.records if getattr(r, "event", None) == "firings.recorded"]
    assert summary.levelno == logging.INFO
    assert (summary.firings, summary.counted, summary.closed) == (5, 4, 1)
    # Each count is still in its run's own log, the record.
    assert len(await log_lines(host.db, runs["eu-1"], "condition.evaluated")) == 3


async def test_the_count_into_gates_writes_only_the_gates_whose_tally_was_read(host, engine, clock):
    """The count is a compare-and-set on each gate's tally as read: a gate that changed
    anyway is not written, and the transaction records nothing (on SQLite, where the count
    rides with the next statement, that statement fails before anything commits)."""
    runs = await _servers(host, engine, ["eu-1", "eu-2"], count=5)
    gate_ids = {}
    async with host.db.connect() as conn:
        for colour, run_id in runs.items():
            row = await gate_rows.gate_of(conn, run_id, "hunt")
            gate_ids[colour] = row.id
    now = clock.now()

    def count(colour: str, was: int, new: int, closed: bool = False) -> dict[str, Any]:
        return {
            "gate_id": gate_ids[colour],
            "was": was,
            "new_tally": new,
            "closed_at": now if closed else None,
            "closed_by": "tally" if closed else None,
            "counted_at": now,
        }

    async with host.db.begin() as conn:
        written = await gate_rows.count_firings(
            conn, [count("eu-1", 0, 2), count("eu-2", 0, 5, True)]
        )
        assert written == 2
        await conn.execute(select(1))  # the statement a deferred count rides with
    assert [await _tally(host, runs[c]) for c in ("eu-1", "eu-2")] == [2, 5]
    async with host.db.connect() as conn:
        closed = await gate_rows.gate_by_id(conn, gate_ids["eu-2"])
    assert (closed["satisfied_by"], closed["satisfied_at"]) == ("tally", now)

    # eu-1's tally is 2, not the 0 this count read: neither gate is written.
    with pytest.raises((RuntimeError, DatabaseError)):
        async with host.db.begin() as conn:
            written = await gate_rows.count_firings(conn, [count("eu-1", 0, 1)])
            if written != 1:
                raise RuntimeError("a gate changed under its lock")
            await conn.execute(select(1))
    # eu-2 closed: a count into it writes nothing either.
    async with host.db.begin() as conn:
        written = await gate_rows.count_firings(conn, [count("eu-2", 5, 6)])
        if host.db.dialect.name == "sqlite":
            assert written == 1  # as promised; the turn that runs it holds it to that
            with pytest.raises(DatabaseError, match="changed 0 rows, not 1"):
                await conn.execute(select(1))
        else:
            assert written == 0
    assert [await _tally(host, runs[c]) for c in ("eu-1", "eu-2")] == [2, 5]
