"""Firings a game can send: idempotency keys (per token, a replay counts nothing), batches
(one answer per firing, a bad one refused by itself), ``at`` (kept, bounded), and a cost by
what matches (a firing reads and writes only the gates whose match key it carries), under
concurrent senders on both databases."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import event as sa_event
from sqlalchemy import func, select

from pageant.access.tokens import create_token
from pageant.db import phase_gates as gate_rows
from pageant.db.tables import event_run_phase_gates, trigger_firing_keys
from pageant.engine import Engine
from pageant.gates.matching import NO_KEY, firing_keys, gate_key, match_key
from pageant.hosting import Host
from pageant.runs.create import start_now
from tests.conftest import bearer
from tests.factories import announce, log_lines, phase, publish_event

FIRE = "/api/v1/triggers/wisps.caught/fire"
BATCH = "/api/v1/triggers/fire"
BY_SERVER = {"var": "colour", "op": "eq", "value": {"param": "colour"}}
DECLARED = [{"name": "colour", "type": "string", "label": "Server", "required": True}]


async def _servers(host: Host, engine: Engine, servers: list[str], count: int = 1000) -> dict:
    """One run per server of an event whose gate counts its own server's firings; answers
    {server: run id}, each run ticked into its gated phase."""
    spec = {
        "params": DECLARED,
        "schedule": {"kind": "manual"},
        "phases": [
            phase(
                "hunt",
                announce("go"),
                advance={"on": "wisps.caught", "where": BY_SERVER, "count": count},
            ),
            phase("end", announce("done")),
        ],
    }
    event = await publish_event(host.db, host.clock.now(), spec)
    runs = {}
    for server in servers:
        runs[server], _ = await start_now(
            host, event.id, params={"colour": server}, actor="admin:test"
        )
    await engine.tick()
    return runs


async def _tally(host: Host, run_id: int) -> int:
    async with host.db.connect() as conn:
        return (await gate_rows.gate_of(conn, run_id, "hunt")).tally


async def _post(client: Any, path: str, token: str, body: Any, **headers: str) -> Any:
    response = await client.post(path, json=body, headers={**bearer(token), **headers})
    return response.status, await response.json()


# ── match keys ────────────────────────────────────────────────────────────────


def test_a_gate_key_is_one_equality_its_condition_requires():
    assert gate_key({"var": "colour", "op": "eq", "value": "north"}) == 'colour="north"'
    assert gate_key(
        {
            "all": [
                {"var": "weight", "op": "gt", "value": 1},
                {"all": [{"var": "colour", "op": "eq", "value": "n"}]},
            ]
        }
    ) == ('colour="n"')
    # An equality under any or not does not narrow the gate: every firing is judged.
    assert gate_key({"any": [{"var": "colour", "op": "eq", "value": "n"}]}) == NO_KEY
    assert gate_key({"not": {"var": "colour", "op": "eq", "value": "n"}}) == NO_KEY
    assert gate_key({"var": "colour", "op": "ne", "value": "n"}) == NO_KEY
    assert gate_key(None) == NO_KEY
    # 2 and 2.0 are one value to the evaluator, so one key.
    assert match_key("weight", 2.0) == match_key("weight", 2) == "weight=2"
    assert set(firing_keys({"colour": "n", "weight": 2.0})) == {"", 'colour="n"', "weight=2"}
    assert len(match_key("colour", "x" * 1000)) <= 255


async def test_a_firing_reads_and_writes_only_the_gates_it_can_count_for(host, engine):
    servers = [f"s{i}" for i in range(30)]
    runs = await _servers(host, engine, servers)
    async with host.db.connect() as conn:
        read = await gate_rows.open_on_gates(
            conn, "wisps.caught", firing_keys({"colour": "s7", "weight": 1.0})
        )
    assert [row.run_id for row in read] == [runs["s7"]]

    updates: list[str] = []

    def count(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith("UPDATE EVENT_RUN_PHASE_GATES"):
            updates.append(statement)

    sync = host.db.sync_engine
    sa_event.listen(sync, "before_cursor_execute", count)
    try:
        assert await host.emit("wisps.caught", {"colour": "s7"}) == {
            "gates_matched": 1,
            "gates_closed": 0,
        }
        assert len(updates) == 1  # the one gate it counted for; none for the 29 it missed
        updates.clear()
        assert await host.emit("wisps.caught", {"colour": "nobody"}) == {
            "gates_matched": 0,
            "gates_closed": 0,
        }
        assert updates == []
    finally:
        sa_event.remove(sync, "before_cursor_execute", count)
    assert await _tally(host, runs["s7"]) == 1
    assert [await _tally(host, runs[s]) for s in servers if s != "s7"] == [0] * 29


async def test_a_gate_no_equality_narrows_is_judged_by_every_firing(host, engine):
    where = {
        "any": [
            {"var": "colour", "op": "eq", "value": "n"},
            {"var": "weight", "op": "gt", "value": 5},
        ]
    }
    event = await publish_event(
        host.db,
        host.clock.now(),
        {
            "schedule": {"kind": "manual"},
            "phases": [phase("hunt", advance={"on": "wisps.caught", "where": where, "count": 9})],
        },
    )
    run_id, _ = await start_now(host, event.id, actor="admin:test")
    await engine.tick()
    await host.emit("wisps.caught", {"colour": "s", "weight": 9.0})
    await host.emit("wisps.caught", {"colour": "n"})
    await host.emit("wisps.caught", {"colour": "s", "weight": 1.0})
    assert await _tally(host, run_id) == 2


# ── idempotency keys ──────────────────────────────────────────────────────────


async def test_the_same_key_twice_answers_the_first_answer_and_counts_once(
    client, tokens, host, engine, db, clock
):
    runs = await _servers(host, engine, ["eu-1"], count=2)
    key = {"Idempotency-Key": "kill-41"}
    first = await _post(client, FIRE, tokens["game"], {"colour": "eu-1"}, **key)
    assert first == (200, {"gates_matched": 1, "gates_closed": 0})
    clock.advance(30)
    assert await _post(client, FIRE, tokens["game"], {"colour": "eu-1"}, **key) == first
    assert await _tally(host, runs["eu-1"]) == 1
    # Keys are per token: another game server's kill-41 is its own firing.
    other = await create_token(db, role="game", name="eu-2", now=clock.now())
    closed = await _post(client, FIRE, other, {"colour": "eu-1"}, **key)
    assert closed == (200, {"gates_matched": 1, "gates_closed": 1})
    # A replay after the gate closed still answers what it was first answered.
    assert await _post(client, FIRE, tokens["game"], {"colour": "eu-1"}, **key) == first
    assert await _tally(host, runs["eu-1"]) == 2
    status, error = await _post(
        client, FIRE, tokens["game"], {"colour": "eu-1"}, **{"Idempotency-Key": "k" * 201}
    )
    assert status == 400 and error["error"]["details"] == [
        "headers.Idempotency-Key: expected 1 to 200 characters; got 201"
    ]


async def test_the_same_key_sent_concurrently_counts_once(client, tokens, host, engine):
    runs = await _servers(host, engine, ["eu-1"])
    answers = await asyncio.gather(
        *(
            _post(client, FIRE, tokens["game"], {"colour": "eu-1"}, **{"Idempotency-Key": "k1"})
            for _ in range(12)
        )
    )
    assert {status for status, _ in answers} == {200}
    assert all(body == {"gates_matched": 1, "gates_closed": 0} for _, body in answers)
    assert await _tally(host, runs["eu-1"]) == 1
    async with host.db.connect() as conn:
        kept = (await conn.execute(select(func.count()).select_from(trigger_firing_keys))).scalar()
    assert kept == 1


async def test_keys_are_forgotten_after_the_keep(settings, db, clock, engine_factory=None):
    from pageant.support.settings import Settings

    host = Host(
        Settings(database_url=settings.database_url, firing_key_hours=24), clock=clock, db=db
    )
    engine = Engine(host)
    try:
        runs = await _servers(host, engine, ["eu-1"])
        await host.emit("wisps.caught", {"colour": "eu-1"}, key="a", issuer="token:1")
        clock.advance(23 * 3600)
        await host.emit("wisps.caught", {"colour": "eu-1"}, key="a", issuer="token:1")
        assert await _tally(host, runs["eu-1"]) == 1  # kept for the whole day
    finally:
        await engine.stop()
        await host.close()
    # A host that prunes after the keep has passed forgets it: the key counts again.
    clock.advance(2 * 3600)
    later = Host(
        Settings(database_url=settings.database_url, firing_key_hours=24), clock=clock, db=db
    )
    try:
        await later.emit("wisps.caught", {"colour": "eu-1"}, key="b", issuer="token:1")
        await later.emit("wisps.caught", {"colour": "eu-1"}, key="a", issuer="token:1")
        assert await _tally(later, runs["eu-1"]) == 3
    finally:
        await later.close()


# ── batches ───────────────────────────────────────────────────────────────────


async def test_a_batch_answers_each_firing_in_order_and_a_bad_one_alone(
    client, tokens, host, engine, clock
):
    runs = await _servers(host, engine, ["eu-1", "eu-2"])
    batch = [
        {"trigger": "wisps.caught", "payload": {"colour": "eu-1"}, "id": "a"},
        {"trigger": "wisps.caught", "payload": {"colour": 7}},
        {"trigger": "nobody.fired", "payload": {}},
        {"trigger": "wisps.caught", "payload": {"colour": "eu-2"}, "id": "b"},
        {"trigger": "wisps.caught", "payload": {"colour": "eu-1"}, "id": "a"},  # a duplicate
        {"trigger": "wisps.caught", "payload": {"colour": "eu-1"}, "extra": 1},
    ]
    status, answers = await _post(client, BATCH, tokens["game"], batch)
    assert status == 200
    assert [a["status"] for a in answers] == [200, 400, 404, 200, 200, 400]
    assert answers[0] == {"status": 200, "gates_matched": 1, "gates_closed": 0}
    assert answers[4] == answers[0]
    assert answers[1]["error"]["details"] == [
        'body[1].payload.colour: expected a string for "colour", got 7'
    ]
    assert answers[5]["error"]["details"] == [
        "body[5].extra: unknown key; expected trigger, payload, id, at"
    ]
    assert [await _tally(host, runs[s]) for s in ("eu-1", "eu-2")] == [1, 1]
    # The same batch again is all replays: nothing counts.
    status, again = await _post(client, BATCH, tokens["game"], batch)
    assert [a.get("gates_matched") for a in again] == [a.get("gates_matched") for a in answers]
    assert [await _tally(host, runs[s]) for s in ("eu-1", "eu-2")] == [1, 1]


@pytest.mark.parametrize("size", [0, 501])
async def test_a_batch_out_of_bounds_is_refused_whole(client, tokens, host, engine, size):
    runs = await _servers(host, engine, ["eu-1"])
    batch = [{"trigger": "wisps.caught", "payload": {"colour": "eu-1"}}] * size
    status, error = await _post(client, BATCH, tokens["game"], batch)
    assert status == 400 and "1 to 500 firings" in error["error"]["message"]
    assert await _tally(host, runs["eu-1"]) == 0


async def test_a_batch_of_500_counts_every_firing(client, tokens, host, engine):
    runs = await _servers(host, engine, ["eu-1", "eu-2"])
    batch = [
        {"trigger": "wisps.caught", "payload": {"colour": "eu-1" if i % 5 else "eu-2"}}
        for i in range(500)
    ]
    status, answers = await _post(client, BATCH, tokens["game"], batch)
    assert status == 200 and len(answers) == 500
    assert [await _tally(host, runs[s]) for s in ("eu-1", "eu-2")] == [400, 100]


# ── at ────────────────────────────────────────────────────────────────────────


async def test_at_is_kept_and_bounded(client, tokens, host, engine, clock):
    runs = await _servers(host, engine, ["eu-1"])
    clock.advance(600)
    when = (clock.now() - timedelta(seconds=90)).isoformat().replace("+00:00", "Z")
    status, _ = await _post(client, f"{FIRE}?at={when}", tokens["game"], {"colour": "eu-1"})
    assert status == 200
    (line,) = await log_lines(host.db, runs["eu-1"], "condition.evaluated")
    assert line.detail["fired_at"] == when
    future = (clock.now() + timedelta(seconds=60)).isoformat()
    old = (clock.now() - timedelta(hours=2)).isoformat()
    batch = [
        {"trigger": "wisps.caught", "payload": {"colour": "eu-1"}, "at": future},
        {"trigger": "wisps.caught", "payload": {"colour": "eu-1"}, "at": old},
        {"trigger": "wisps.caught", "payload": {"colour": "eu-1"}, "at": "yesterday"},
        # Within the drift a game server's clock is allowed: kept as now.
        {
            "trigger": "wisps.caught",
            "payload": {"colour": "eu-1"},
            "at": (clock.now() + timedelta(seconds=3)).isoformat(),
        },
    ]
    status, answers = await _post(client, BATCH, tokens["game"], batch)
    assert [a["status"] for a in answers] == [400, 400, 400, 200]
    assert "is in the future" in answers[0]["error"]["details"][0]
    assert "older than 3600 s" in answers[1]["error"]["details"][0]
    assert answers[2]["error"]["details"][0].startswith("body[2].at:")
    assert await _tally(host, runs["eu-1"]) == 2


# ── under load ────────────────────────────────────────────────────────────────


async def test_concurrent_senders_each_gate_counts_its_own_servers_firings(
    client, tokens, host, engine
):
    servers = ["eu-1", "eu-2", "na-1", "na-2"]
    runs = await _servers(host, engine, servers)
    sent = {s: 0 for s in servers}
    plan = [servers[(i * 7) % 4] for i in range(80)]
    for server in plan:
        sent[server] += 1

    async def one(i: int, server: str) -> Any:
        if i % 4 == 0:
            return await _post(
                client,
                BATCH,
                tokens["game"],
                [{"trigger": "wisps.caught", "payload": {"colour": server}, "id": f"b{i}"}],
            )
        return await _post(
            client, FIRE, tokens["game"], {"colour": server}, **{"Idempotency-Key": f"s{i}"}
        )

    answers = await asyncio.gather(*(one(i, s) for i, s in enumerate(plan)))
    assert {status for status, _ in answers} == {200}
    assert {s: await _tally(host, runs[s]) for s in servers} == sent


async def test_a_plugin_fires_with_a_key_and_in_a_batch(host, engine):
    runs = await _servers(host, engine, ["eu-1"])
    await host.start_plugins()
    context = host.context_for("wisps[wisps]", "wisps")
    first = await context.emit("wisps.caught", {"colour": "eu-1"}, key="p1")
    assert await context.emit("wisps.caught", {"colour": "eu-1"}, key="p1") == first
    answers = await context.emit_batch(
        [
            {"trigger": "wisps.caught", "payload": {"colour": "eu-1"}, "id": "p1"},
            {"trigger": "wisps.caught", "payload": {"colour": "eu-1"}, "id": "p2"},
            {"trigger": "wisps.caught", "payload": {"shape": "x"}},
        ]
    )
    assert [a["status"] for a in answers] == [200, 200, 400]
    assert await _tally(host, runs["eu-1"]) == 2
    # A plugin's keys are its own: a game token's p1 is another firing.
    await host.emit("wisps.caught", {"colour": "eu-1"}, key="p1", issuer="token:9")
    assert await _tally(host, runs["eu-1"]) == 3
    async with host.db.connect() as conn:
        rows = (await conn.execute(select(event_run_phase_gates.c.match_key))).all()
    assert {row.match_key for row in rows} >= {'colour="eu-1"'}


async def test_a_batch_item_of_a_trigger_the_sender_may_not_fire_is_refused_by_itself(
    client, tokens, host, engine
):
    runs = await _servers(host, engine, ["eu-1"])
    batch = [
        {"trigger": "core.run.completed", "payload": {}},
        {"trigger": "wisps.caught", "payload": {"colour": "eu-1"}},
    ]
    status, answers = await _post(client, BATCH, tokens["game"], batch)
    assert status == 200 and [a["status"] for a in answers] == [403, 200]
    assert "lifecycle triggers" in answers[0]["error"]["message"]
    await host.start_plugins()
    context = host.context_for("wisps[wisps]", "wisps")
    answers = await context.emit_batch(batch)
    assert [a["status"] for a in answers] == [403, 200]
    assert "may fire only its own triggers" in answers[0]["error"]["message"]
    assert await _tally(host, runs["eu-1"]) == 2


# ── which triggers an open gate waits on ─────────────────────────────────────────


async def test_askers_at_one_moment_share_a_read_of_the_open_gates(host, engine, monkeypatch):
    await _servers(host, engine, ["north"])  # a gate open on wisps.caught
    reads: list[list[str]] = []
    open_on = gate_rows.open_on

    async def counted(conn: Any, trigger_ids: Any) -> set[str]:
        reads.append(sorted(trigger_ids))
        return await open_on(conn, trigger_ids)

    monkeypatch.setattr(gate_rows, "open_on", counted)
    asked = [{"wisps.caught", "core.run.completed"}, {"core.run.ending"}] * 25
    answers = await asyncio.gather(*(host.firings.open_among(t) for t in asked))
    # Each asker is answered for its own triggers only, and fifty asks cost at most two
    # reads: the first, and the one every asker that came while it ran shares.
    assert answers == [{"wisps.caught"}, set()] * 25
    assert 1 <= len(reads) <= 2
    assert set().union(*reads) == {"wisps.caught", "core.run.completed", "core.run.ending"}


async def test_a_trigger_found_without_an_open_gate_is_read_again_next_time(host, engine):
    # A run ends: no gate waits on that, so nothing is found, and nothing is kept of it.
    assert await host.firings.open_among({"core.run.completed"}) == set()
    spec = {
        "schedule": {"kind": "manual"},
        "phases": [
            phase("muster", announce("go"), advance={"on": "core.run.completed", "count": 1}),
            phase("end", announce("done")),
        ],
    }
    event = await publish_event(host.db, host.clock.now(), spec)
    await start_now(host, event.id, actor="admin:test")
    await engine.tick()
    # The gate opened since: the next ask reads again and finds it.
    assert await host.firings.open_among({"core.run.completed"}) == {"core.run.completed"}
