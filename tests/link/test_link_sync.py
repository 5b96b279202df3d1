"""The game link's sync, through the real app and a real plugin's ``context.link`` on both
databases: a command is a row delivered by key and answered once; a sync held open is
answered the moment a command is queued; a command whose budget ends is withdrawn saying
whether it was ever delivered; a token speaks only for its servers; the queue is bounded."""

from __future__ import annotations

import asyncio
import re
import time
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select

from pageant.access.tokens import create_token, find_token, revoke_token
from pageant.api.app import make_app
from pageant.db.tables import link_commands, trigger_firing_keys
from pageant.hookspecs import Down, NotDelivered, Unanswered
from tests.conftest import bearer, cancel_swallowed_once
from tests.factories import make_host
from tests.fixture_plugins.lighthouse import Lighthouse

SYNC = "/api/v1/link/{}/sync"


@pytest.fixture
async def lighthouse() -> Lighthouse:
    return Lighthouse()


@pytest.fixture
async def link_host(settings, db, clock, lighthouse) -> Any:
    host = make_host(settings.model_copy(update={"link_queue_max": 3}), db, clock, [lighthouse])
    try:
        yield host
    finally:
        await host.close()


@pytest.fixture
async def agent(link_host, aiohttp_client) -> Any:
    client = await aiohttp_client(make_app(link_host, run_engine=False))
    return client


async def _token(host, servers=("world-a",), owners=("lighthouse",)) -> str:
    return await create_token(
        host.db, role="game", name="agent", now=host.clock.now(), servers=servers, owners=owners
    )


async def sync(client, token, server="world-a", **body) -> tuple[int, Any]:
    answer = await client.post(SYNC.format(server), json=body, headers=bearer(token))
    return answer.status, await answer.json()


def _call(host, lighthouse, command="light", key="step-1", seconds=5.0, server="world-a"):
    return host.link.call(
        "lighthouse",
        server,
        command,
        {"colour": "red"},
        key=key,
        deadline=host.clock.now() + timedelta(seconds=seconds),
    )


async def _rows(db) -> list[Any]:
    async with db.connect() as conn:
        return list((await conn.execute(select(link_commands).order_by(link_commands.c.id))).all())


async def _queued(db, n: int = 1) -> None:
    for _ in range(200):
        if len(await _rows(db)) >= n:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the command was never queued")


def _counted(host, name: str, labels: dict[str, str]) -> float:
    return host.metrics.registry.get_sample_value(name, labels) or 0.0


async def test_a_command_reaches_the_agent_by_key_and_its_answer_reaches_the_plugin(
    link_host, agent, db
):
    token = await _token(link_host)
    assert (await sync(agent, token, wait=0))[0] == 200  # the server is up
    call = asyncio.create_task(_call(link_host, None))
    await _queued(db)

    status, answer = await sync(agent, token, wait=0)

    assert status == 200, answer
    (command,) = answer["commands"]
    assert (command["command"], command["key"], command["payload"]) == (
        "light",
        "step-1",
        {"colour": "red"},
    )
    # Answered once: the second answer to the same key changes nothing.
    result = {"command": "light", "key": "step-1", "answer": {"id": 7}}
    assert (await sync(agent, token, wait=0, results=[result]))[0] == 200
    assert await asyncio.wait_for(call, 5) == {"id": 7}
    other = {**result, "answer": {"id": 8}}
    assert (await sync(agent, token, wait=0, results=[other]))[0] == 200
    (row,) = await _rows(db)
    assert (row.status, row.answer, row.deliveries) == ("answered", {"answer": {"id": 7}}, 1)
    # The same key again (a retry of the step) answers the first answer at once.
    assert await _call(link_host, None) == {"id": 7}
    assert len(await _rows(db)) == 1


async def test_a_held_sync_is_answered_the_moment_a_command_is_queued(link_host, agent, db):
    token = await _token(link_host)
    assert (await sync(agent, token, wait=0))[0] == 200
    held = asyncio.create_task(sync(agent, token, wait=10))
    await asyncio.sleep(0.2)
    assert not held.done()  # nothing waits: the sync is held
    started = time.monotonic()
    call = asyncio.create_task(_call(link_host, None))

    status, answer = await asyncio.wait_for(held, 5)

    assert status == 200 and [c["key"] for c in answer["commands"]] == ["step-1"]
    assert time.monotonic() - started < 1.0
    call.cancel()


async def test_an_empty_wait_runs_out_with_no_commands(link_host, agent):
    token = await _token(link_host)
    started = time.monotonic()
    status, answer = await sync(agent, token, wait=0.3)
    assert (status, answer["commands"]) == (200, [])
    assert 0.3 <= time.monotonic() - started < 2


async def test_a_command_never_taken_is_withdrawn_as_never_delivered(link_host, agent, db, clock):
    token = await _token(link_host)
    assert (await sync(agent, token, wait=0))[0] == 200
    call = asyncio.create_task(_call(link_host, None, seconds=1))
    await _queued(db)
    clock.advance(2)  # the step's budget runs out

    with pytest.raises(NotDelivered, match="was never delivered to world-a"):
        await asyncio.wait_for(call, 5)

    (row,) = await _rows(db)
    assert (row.status, row.withdrawn_as, row.deliveries) == ("withdrawn", "never_delivered", 0)
    # Expired commands are never handed out.
    assert (await sync(agent, token, wait=0))[1]["commands"] == []


async def test_a_command_delivered_and_unanswered_is_withdrawn_and_a_late_answer_recorded(
    link_host, agent, db, clock
):
    token = await _token(link_host)
    assert (await sync(agent, token, wait=0))[0] == 200
    call = asyncio.create_task(_call(link_host, None, seconds=1))
    await _queued(db)
    assert len((await sync(agent, token, wait=0))[1]["commands"]) == 1
    clock.advance(2)

    with pytest.raises(Unanswered, match="delivered to world-a but not answered"):
        await asyncio.wait_for(call, 5)

    late = {"command": "light", "key": "step-1", "answer": {"id": 9}}
    assert (await sync(agent, token, wait=0, results=[late]))[0] == 200
    (row,) = await _rows(db)
    assert (row.status, row.withdrawn_as, row.late) == ("withdrawn", "unanswered", True)
    assert row.answer == {"answer": {"id": 9}}
    assert _counted(link_host, "pageant_link_late_answers_total", {"server": "world-a"}) == 1


async def test_a_token_for_another_server_is_refused_and_takes_nothing(link_host, agent, db):
    mine = await _token(link_host, servers=("world-b",))
    other = await _token(link_host)
    assert (await sync(agent, other, wait=0))[0] == 200
    call = asyncio.create_task(_call(link_host, None))
    await _queued(db)

    status, answer = await sync(agent, mine, wait=0)

    assert status == 403, answer
    assert answer["error"]["message"] == "this token speaks for world-b, not world-a"
    assert _counted(link_host, "pageant_game_tokens_refused_total", {"reason": "server"}) == 1
    (row,) = await _rows(db)
    assert (row.status, row.deliveries) == ("queued", 0)
    call.cancel()


async def test_a_bad_or_revoked_token_is_a_401_counted(link_host, agent):
    token = await _token(link_host)
    status, answer = await sync(agent, "pgt_nothing", wait=0)
    assert (status, answer["error"]["message"]) == (401, "the bearer token is not valid")
    token_id = await find_token(link_host.db, "agent")
    await revoke_token(link_host.db, token_id, actor="admin:t", now=link_host.clock.now())
    status, answer = await sync(agent, token, wait=0)
    assert (status, answer["error"]["message"]) == (401, "the bearer token was revoked")
    assert (
        _counted(link_host, "pageant_game_tokens_refused_total", {"reason": "unauthenticated"}) == 2
    )


async def test_happenings_fire_triggers_and_a_resent_batch_counts_once(link_host, agent, db):
    token = await _token(link_host)
    seen = [{"trigger": "lighthouse.seen", "payload": {"server": "world-a"}, "id": "h-1"}]
    first = await sync(agent, token, wait=0, happenings=seen)
    again = await sync(agent, token, wait=0, happenings=seen)
    assert first[0] == again[0] == 200
    assert first[1]["happenings"] == again[1]["happenings"]
    assert first[1]["happenings"][0]["status"] == 200
    async with db.connect() as conn:
        keys = (await conn.execute(select(func.count()).select_from(trigger_firing_keys))).scalar()
    assert keys == 1


async def test_the_queue_is_bounded_and_a_call_past_it_is_refused_with_a_sentence(
    link_host, agent, db
):
    token = await _token(link_host)
    assert (await sync(agent, token, wait=0))[0] == 200
    calls = [asyncio.create_task(_call(link_host, None, key=f"k{i}")) for i in range(3)]
    await _queued(db, 3)

    with pytest.raises(NotDelivered) as refused:
        await _call(link_host, None, key="k3")

    assert refused.value.message == (
        "world-a has 3 commands waiting (link_queue_max 3); light under key k3 was not queued"
    )
    assert len(await _rows(db)) == 3
    for call in calls:
        call.cancel()


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({"wait": 21}, "body.wait: at most 20 seconds (link_wait_seconds)"),
        ({"wait": -1}, "wait"),
        ({"results": [{"key": "k"}]}, "command"),
        ({"surprise": 1}, "surprise"),
    ],
)
async def test_a_bad_sync_is_a_400_naming_what_is_wrong(link_host, agent, body, detail):
    token = await _token(link_host)
    status, answer = await sync(agent, token, **body)
    assert status == 400, answer
    assert any(detail in d for d in answer["error"]["details"]), answer


async def test_a_server_is_unknown_then_up_then_down_and_its_return_noticed(
    link_host, agent, clock
):
    token = await _token(link_host)
    link = link_host.link
    assert link.state("world-a")[0] == "unknown"
    assert (await sync(agent, token, wait=0))[0] == 200
    assert link.state("world-a") == ("up", "world-a last synced 0 s ago")
    clock.advance(42)
    await link.watch_once()
    assert link.state("world-a") == ("down", "world-a last synced 42 s ago")
    assert link_host.plugin_unavailable("lighthouse") == "world-a last synced 42 s ago"
    with pytest.raises(Down, match="world-a last synced 42 s ago"):
        await _call(link_host, None)

    assert (await sync(agent, token, wait=0))[0] == 200

    assert link.state("world-a")[0] == "up"
    assert link_host.plugin_unavailable("lighthouse") is None


async def test_the_plugins_page_healthz_and_metrics_say_each_servers_state(link_host, agent, clock):
    from tests.console.test_console import sign_in

    tokens = {"admin": await create_token(link_host.db, role="admin", name="a", now=clock.now())}
    token = await _token(link_host)
    assert (await sync(agent, token, wait=0))[0] == 200
    clock.advance(42)
    await link_host.link.watch_once()

    health = await (await agent.get("/healthz?verbose")).json()
    assert health["link"]["world-a"] == {"state": "down", "said": "world-a last synced 42 s ago"}
    listing = await (
        await agent.get("/api/v1/admin/plugins", headers=bearer(tokens["admin"]))
    ).json()
    (mine,) = [item for item in listing["items"] if item["owner"] == "lighthouse"]
    assert mine["link"]["world-a"]["state"] == "down"
    await sign_in(agent, tokens["admin"])
    page = await (await agent.get("/plugins")).text()
    assert "game link <code>world-a</code>:" in page and "world-a last synced 42 s ago" in page
    metrics = await (await agent.get("/metrics", headers=bearer(tokens["admin"]))).text()
    assert 'pageant_link_servers{state="down"} 1.0' in metrics


async def test_a_servers_return_reconciles_its_plugin(link_host, agent, clock, monkeypatch):
    asked: list[str] = []
    reconcile = link_host.reconcile

    async def spy(owner: str) -> Any:
        asked.append(owner)
        return await reconcile(owner)

    monkeypatch.setattr(link_host, "reconcile", spy)
    token = await _token(link_host)
    assert (await sync(agent, token, wait=0))[0] == 200
    clock.advance(14)
    await link_host.link.watch_once()  # still up: nothing to notice
    assert (await sync(agent, token, wait=0))[0] == 200
    clock.advance(20)
    await link_host.link.watch_once()
    assert asked == []

    assert (await sync(agent, token, wait=0))[0] == 200

    for _ in range(100):
        if asked:
            break
        await asyncio.sleep(0.01)
    assert asked == ["lighthouse"]


async def test_ten_thousand_commands_for_a_silent_server_are_bounded_and_the_rest_refused(
    settings, db, clock, lighthouse
):
    host = make_host(settings, db, clock, [lighthouse])  # link_queue_max: the default, 1,000
    calls: list[asyncio.Task[Any]] = []
    try:
        # A hundred at a time, as a busy engine would call (its plugin calls are bounded).
        for chunk in range(100):
            batch = [
                asyncio.create_task(_call(host, None, key=f"k{chunk}-{i}", seconds=600))
                for i in range(100)
            ]
            calls += batch
            await asyncio.wait(batch, timeout=0.2 if chunk < 10 else 30)
        refused = [t for t in calls if t.done() and isinstance(t.exception(), NotDelivered)]
        assert len(refused) == 9_000
        said = re.compile(
            r"world-a has 100\d commands waiting \(link_queue_max 1000\); "
            r"light under key k\d+-\d+ was not queued"
        )
        assert all(said.fullmatch(t.exception().message) for t in refused)
        async with db.connect() as conn:
            queued = (await conn.execute(select(func.count()).select_from(link_commands))).scalar()
        assert queued == 1_000
    finally:
        for call in calls:
            call.cancel()
        await asyncio.gather(*calls, return_exceptions=True)
        await host.close()


async def test_a_retry_after_a_lost_host_redelivers_its_command_within_its_own_budget(
    link_host, agent, db, clock
):
    token = await _token(link_host)
    assert (await sync(agent, token, wait=0))[0] == 200
    first = asyncio.create_task(_call(link_host, None, seconds=1))
    await _queued(db)
    assert len((await sync(agent, token, wait=0))[1]["commands"]) == 1  # its answer is lost
    first.cancel()  # the host that waited for it is gone
    clock.advance(6)  # past its first deadline and the redelivery wait

    retry = asyncio.create_task(_call(link_host, None, seconds=10))
    await asyncio.sleep(0.05)
    _, answer = await sync(agent, token, wait=0)

    assert [c["key"] for c in answer["commands"]] == ["step-1"]
    result = {"command": "light", "key": "step-1", "answer": {"id": 3}}
    assert (await sync(agent, token, wait=0, results=[result]))[0] == 200
    assert await asyncio.wait_for(retry, 5) == {"id": 3}


async def test_the_websocket_carries_the_same_messages(link_host, agent, db):
    token = await _token(link_host)
    async with agent.ws_connect("/api/v1/link/world-a/ws", headers=bearer(token)) as ws:
        assert link_host.link.state("world-a")[0] == "up"
        call = asyncio.create_task(_call(link_host, None))
        pushed = await asyncio.wait_for(ws.receive_json(), 5)
        assert [(c["command"], c["key"]) for c in pushed["commands"]] == [("light", "step-1")]
        result = {"command": "light", "key": "step-1", "answer": {"id": 4}}
        seen = {"trigger": "lighthouse.seen", "payload": {"server": "world-a"}, "id": "w-1"}
        await ws.send_json({"results": [result], "happenings": [seen]})
        assert await asyncio.wait_for(call, 5) == {"id": 4}
        answered = await asyncio.wait_for(ws.receive_json(), 5)
        assert answered["happenings"][0]["status"] == 200
        await ws.send_json({"surprise": 1})
        refused = await asyncio.wait_for(ws.receive_json(), 5)
        assert refused["error"]["code"] == "invalid"


async def test_the_websocket_refuses_another_servers_token(link_host, agent):
    token = await _token(link_host, servers=("world-b",))
    answer = await agent.get("/api/v1/link/world-a/ws", headers=bearer(token))
    assert answer.status == 403


async def test_the_watch_ends_when_cancelled_even_if_a_database_call_swallowed_the_cancel(
    link_host, monkeypatch
):
    # A driver giving its connection back may swallow the CancelledError that landed inside
    # it (seen with asyncmy on MariaDB): the app's shutdown then waited on the watch for ever.
    entered = asyncio.Event()

    async def swallowing_watch_once() -> dict[str, int]:
        entered.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            pass  # as the driver does
        return {}

    monkeypatch.setattr(link_host.link, "watch_once", swallowing_watch_once)
    watch = asyncio.create_task(link_host.link.watch(every=0.01))
    await cancel_swallowed_once(watch, entered, monkeypatch)
