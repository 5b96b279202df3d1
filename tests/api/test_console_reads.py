"""The run console's readers: an unchanged console answers 304 to the ETag it was sent, a
changed one 200 with a new tag; at most ``read_concurrency`` consoles are read at once —
through the real app."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pageant.api.app import make_app
from pageant.runs import console as console_module
from pageant.support.settings import Settings
from tests.conftest import bearer
from tests.factories import announce, make_host, phase, probe_step, publish_event, spec


@pytest.fixture
async def api(probe_host, aiohttp_client):
    return await aiohttp_client(make_app(probe_host, run_engine=False))


async def _run(api, tokens, host, clock, *steps) -> int:
    event = await publish_event(host.db, clock.now(), spec(phase("p", *steps)))
    response = await api.post(
        f"/api/v1/admin/events/{event.id}/runs", headers=bearer(tokens["admin"])
    )
    assert response.status == 201
    return (await response.json())["id"]


async def _get(api, tokens, run_id, if_none_match=None, role="admin"):
    headers = bearer(tokens[role])
    if if_none_match is not None:
        headers["If-None-Match"] = if_none_match
    return await api.get(f"/api/v1/admin/runs/{run_id}", headers=headers)


async def _backed_off(api, tokens, host, clock, engine, probe):
    """A run whose one step failed its first attempt and waits for its retry, and its console."""
    probe.script["a"] = [{"ok": False, "retry": True, "error": "shard busy"}]
    run_id = await _run(api, tokens, host, clock, probe_step("a"))
    await engine.tick()
    return run_id, await _get(api, tokens, run_id)


async def test_an_unchanged_console_answers_304_to_its_etag(
    api, tokens, probe_host, clock, engine, probe
):
    probe.script["cue"] = [{"ok": True, "park": True}]
    run_id = await _run(api, tokens, probe_host, clock, announce("hi"), probe_step("cue"))
    await engine.tick()
    first = await _get(api, tokens, run_id)
    assert first.status == 200
    tag = first.headers["ETag"]
    assert tag.startswith('"') and tag.endswith('"')
    assert first.headers["Cache-Control"] == "no-cache"
    again = await _get(api, tokens, run_id, tag)
    assert again.status == 304
    assert again.headers["ETag"] == tag
    assert await again.read() == b""
    # Among others, weakly compared, or "*": the same answer.
    assert (await _get(api, tokens, run_id, f'"other", W/{tag}')).status == 304
    assert (await _get(api, tokens, run_id, "*")).status == 304


async def test_a_step_finishing_answers_200_with_a_new_etag(
    api, tokens, probe_host, clock, engine, probe
):
    run_id, first = await _backed_off(api, tokens, probe_host, clock, engine, probe)
    assert (await first.json())["steps"][0]["status"] != "done"
    clock.advance(minutes=2)
    await engine.tick()
    after = await _get(api, tokens, run_id, first.headers["ETag"])
    assert after.status == 200
    assert after.headers["ETag"] != first.headers["ETag"]
    assert (await after.json())["steps"][0]["status"] == "done"


async def test_a_control_answers_200_with_a_new_etag(api, tokens, probe_host, clock, engine, probe):
    probe.script["cue"] = [{"ok": True, "park": True}]
    run_id = await _run(api, tokens, probe_host, clock, probe_step("cue"), announce("after"))
    await engine.tick()
    first = await _get(api, tokens, run_id)
    cue = (await first.json())["steps"][0]
    confirmed = await api.post(
        f"/api/v1/admin/runs/{run_id}/steps/{cue['id']}/confirm", headers=bearer(tokens["admin"])
    )
    assert confirmed.status == 200
    after = await _get(api, tokens, run_id, first.headers["ETag"])
    assert after.status == 200
    assert after.headers["ETag"] != first.headers["ETag"]
    assert (await after.json())["steps"][0]["status"] == "done"


async def test_every_staff_role_reads_the_same_console_and_tag(
    api, tokens, probe_host, clock, engine
):
    run_id = await _run(api, tokens, probe_host, clock, announce("hi"))
    await engine.tick()
    answers = [await _get(api, tokens, run_id, role=role) for role in ("admin", "editor")]
    assert answers[0].headers["ETag"] == answers[1].headers["ETag"]
    assert await answers[0].json() == await answers[1].json()


@pytest.mark.parametrize(
    "bad", ["garbage", '""', "W/", ",,,", '"unterminated', "W/W/x", "x" * 4000, " ,"]
)
async def test_a_bad_if_none_match_is_harmless(api, tokens, probe_host, clock, engine, bad):
    run_id = await _run(api, tokens, probe_host, clock, announce("hi"))
    await engine.tick()
    plain = await _get(api, tokens, run_id)
    answer = await _get(api, tokens, run_id, bad)
    assert answer.status == 200
    assert answer.headers["ETag"] == plain.headers["ETag"]
    assert await answer.json() == await plain.json()


async def test_a_due_instant_passing_is_read_with_no_row_changed(
    api, tokens, probe_host, clock, engine, probe
):
    run_id, backoff = await _backed_off(api, tokens, probe_host, clock, engine, probe)
    assert (await backoff.json())["run"]["waiting_on"]["reason"] == "backoff"
    clock.advance(minutes=2)  # past the retry's due instant; the engine has not ticked
    due = await _get(api, tokens, run_id, backoff.headers["ETag"])
    assert due.status == 200
    assert (await due.json())["run"]["waiting_on"] is None


class Held:
    """A console build that waits until released, counting how many run at once."""

    def __init__(self, build: Any, *, expect: int) -> None:
        self.build = build
        self.inside = 0
        self.most = 0
        self.release = asyncio.Event()
        #: Set once ``expect`` builds are inside at once.
        self.full = asyncio.Event()
        self.expect = expect

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.inside += 1
        self.most = max(self.most, self.inside)
        if self.inside >= self.expect:
            self.full.set()
        try:
            await self.release.wait()
            return await self.build(*args, **kwargs)
        finally:
            self.inside -= 1


# With one slot for every other request, readers who took it would hold everything else up.
@pytest.mark.parametrize("http_concurrency", [8, 1])
async def test_the_read_budget_bounds_consoles_read_at_once_in_slots_of_its_own(
    settings, db, clock, aiohttp_client, tokens, monkeypatch, http_concurrency
):
    host = make_host(
        settings.model_copy(update={"read_concurrency": 2, "http_concurrency": http_concurrency}),
        db,
        clock,
        [],
    )
    try:
        api = await aiohttp_client(make_app(host, run_engine=False))
        run_id = await _run(api, tokens, host, clock, announce("hi"))
        held = Held(console_module._build, expect=2)
        monkeypatch.setattr(console_module, "_build", held)
        calls = [asyncio.create_task(_get(api, tokens, run_id)) for _ in range(6)]
        # Bounded, however slowly a loaded machine gets the six requests in; then a moment
        # more, in which a third build would have entered were it not for the budget.
        await asyncio.wait_for(held.full.wait(), 10)
        await asyncio.sleep(0.2)
        assert held.inside == 2  # the other four wait their turn, past admission
        # Another request is not held behind the readers.
        other = await asyncio.wait_for(
            api.get("/api/v1/admin/plugins", headers=bearer(tokens["admin"])), 10
        )
        assert other.status == 200
        held.release.set()
        answers = await asyncio.gather(*calls)
        assert [a.status for a in answers] == [200] * 6
        assert held.most == 2
    finally:
        await host.close()


def test_readers_wait_below_http_admission_by_default():
    assert Settings().read_concurrency < Settings().http_concurrency
