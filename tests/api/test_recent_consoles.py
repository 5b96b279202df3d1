"""Readers of one run console share it for ``console_max_age_ms``: a console asked for again
within it is the same answer, read once however many ask at the same moment; past it, or
after any write through the host, it is read afresh. First :class:`RecentAnswers` on its own
(time injected), then through the real app and engine."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pageant.api.app import make_app
from pageant.runs import console as console_module
from pageant.support.recent import RecentAnswers
from tests.api.test_console_reads import _run
from tests.conftest import bearer
from tests.console.test_console import sign_in
from tests.factories import announce, count_calls, make_host, probe_step


class Ticking:
    """A monotonic clock a test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Builds:
    """A build that counts its calls and answers the count; ``gate`` holds each until set."""

    def __init__(self) -> None:
        self.calls = 0
        self.gate = asyncio.Event()
        self.gate.set()

    async def __call__(self) -> int:
        self.calls += 1
        mine = self.calls
        await self.gate.wait()
        return mine


async def started(answers: RecentAnswers, build: Builds) -> asyncio.Task[Any]:
    """A reader of run 1's answer, under way (its build, or its wait for one, begun)."""
    reader = asyncio.create_task(answers.get("run 1", build))
    await asyncio.sleep(0)
    return reader


async def test_an_answer_is_kept_for_max_age_and_not_a_moment_longer() -> None:
    clock, build = Ticking(), Builds()
    answers = RecentAnswers(1.0, spread=0, now=clock)
    assert await answers.get("run 1", build) == 1
    clock.now += 1.0  # exactly max_age after it was asked for: still kept
    assert await answers.get("run 1", build) == 1
    clock.now += 0.001  # past it: read again
    assert await answers.get("run 1", build) == 2
    assert build.calls == 2  # three answers, two of them built


@pytest.mark.parametrize(("drawn", "age"), [(0.0, 1.0), (0.5, 0.75), (0.999, 0.5005)])
async def test_each_answer_is_kept_for_its_own_age_drawn_within_the_spread(
    drawn: float, age: float
) -> None:
    clock, build = Ticking(), Builds()
    answers = RecentAnswers(1.0, spread=0.5, now=clock, draw=lambda: drawn)
    assert await answers.get("run 1", build) == 1
    clock.now += age - 0.0001  # within its own age: kept
    assert await answers.get("run 1", build) == 1
    clock.now += 0.0002  # past it, though within max_age when drawn below 1: read again
    assert await answers.get("run 1", build) == 2


async def test_answers_read_together_fall_due_apart() -> None:
    clock, build = Ticking(), Builds()
    answers = RecentAnswers(1.0, now=clock)  # the default spread, drawn at random
    for run in range(40):
        await answers.get(run, build)
    assert build.calls == 40
    clock.now += 0.75  # every answer is kept at least half max_age, none past max_age
    for run in range(40):
        await answers.get(run, build)
    read_again = build.calls - 40
    assert 0 < read_again < 40  # some fell due, not all at once (a chance of 2**-39 each way)
    clock.now += 0.26
    for run in range(40):
        await answers.get(run, build)
    assert build.calls == 80  # past max_age, every first answer has fallen due; no second


async def test_each_key_is_kept_apart() -> None:
    clock, build = Ticking(), Builds()
    answers = RecentAnswers(1.0, now=clock)
    assert [await answers.get(key, build) for key in ("a", "b", "a", "b")] == [1, 2, 1, 2]


async def test_readers_at_the_same_moment_share_one_build() -> None:
    build = Builds()
    build.gate.clear()
    answers = RecentAnswers(1.0, now=Ticking())
    readers = [asyncio.create_task(answers.get("run 1", build)) for _ in range(10)]
    await asyncio.sleep(0)
    build.gate.set()
    assert await asyncio.gather(*readers) == [1] * 10
    assert build.calls == 1


async def test_max_age_zero_builds_for_every_reader() -> None:
    build = Builds()
    answers = RecentAnswers(0, now=Ticking())
    build.gate.clear()
    readers = [asyncio.create_task(answers.get("run 1", build)) for _ in range(3)]
    await asyncio.sleep(0)
    build.gate.set()
    assert sorted(await asyncio.gather(*readers)) == [1, 2, 3]
    assert await answers.get("run 1", build) == 4


async def test_a_write_during_a_build_is_seen_by_the_next_reader() -> None:
    build = Builds()
    build.gate.clear()
    answers = RecentAnswers(60.0, now=Ticking())
    before = await started(answers, build)
    answers.forget()  # a write ended while the first read was under way
    after = await started(answers, build)
    build.gate.set()
    assert (await before, await after) == (1, 2)  # the later reader did not join the first
    # The first read began before the write, so it was not kept; the second was.
    assert await answers.get("run 1", build) == 2
    answers.forget()
    assert await answers.get("run 1", build) == 3


async def test_a_reader_who_leaves_does_not_take_the_build_from_the_others() -> None:
    build = Builds()
    build.gate.clear()
    answers = RecentAnswers(1.0, now=Ticking())
    first = await started(answers, build)
    second = await started(answers, build)
    first.cancel()
    build.gate.set()
    assert await second == 1
    assert first.cancelled()


async def test_a_failed_build_reaches_every_reader_and_is_not_kept() -> None:
    calls = 0
    gate = asyncio.Event()

    async def failing() -> int:
        nonlocal calls
        calls += 1
        await gate.wait()
        if calls == 1:
            raise LookupError("no such run: 9")
        return calls

    answers = RecentAnswers(60.0, now=Ticking())
    readers = [asyncio.create_task(answers.get("run 9", failing)) for _ in range(3)]
    await asyncio.sleep(0)
    gate.set()
    outcomes = await asyncio.gather(*readers, return_exceptions=True)
    assert [str(o) for o in outcomes] == ["no such run: 9"] * 3
    assert await answers.get("run 9", failing) == 2  # read again, not the failure kept


async def test_no_more_than_the_limit_is_kept_the_oldest_going_first() -> None:
    clock, build = Ticking(), Builds()
    answers = RecentAnswers(60.0, limit=2, now=clock)
    for key in ("a", "b", "c"):
        await answers.get(key, build)
    assert await answers.get("b", build) == 2 and await answers.get("c", build) == 3
    assert await answers.get("a", build) == 4  # dropped when c was kept


async def test_what_has_expired_is_dropped_when_another_is_kept() -> None:
    clock, build = Ticking(), Builds()
    answers = RecentAnswers(1.0, now=clock)
    await answers.get("a", build)
    clock.now += 5
    await answers.get("b", build)
    assert list(answers._kept) == ["b"]  # a's answer is not held on to past its age


# ── through the real app ─────────────────────────────────────────────────────────────────


@pytest.fixture
async def kept(settings, db, clock, probe, aiohttp_client):
    """The app over a host whose consoles are kept a minute of real time: long enough that
    nothing in a test expires by itself."""
    host = make_host(settings.model_copy(update={"console_max_age_ms": 60_000}), db, clock, [probe])
    try:
        yield host, await aiohttp_client(make_app(host, run_engine=False))
    finally:
        await host.close()


async def _get(api, tokens, path) -> Any:
    response = await api.get(path, headers=bearer(tokens["admin"]))
    assert response.status == 200, await response.text()
    return response


async def test_the_engines_progress_shows_once_the_kept_console_expires_or_a_write_is_made(
    kept, tokens, clock, probe, monkeypatch
):
    from pageant.engine import Engine

    host, api = kept
    engine = Engine(host)
    probe.script["cue"] = [{"ok": True, "park": True}]
    run_id = await _run(api, tokens, host, clock, announce("hi"), probe_step("cue"))
    path = f"/api/v1/admin/runs/{run_id}"
    first = await _get(api, tokens, path)
    assert (await first.json())["run"]["status"] == "scheduled"
    await engine.tick()  # the run starts and parks on its cue: the engine's own progress
    again = await _get(api, tokens, path)
    assert again.headers["ETag"] == first.headers["ETag"]  # within max age: the kept answer
    assert (await again.json())["run"]["status"] == "scheduled"
    # Past its age (the kept answer is made older than max age), it is read afresh.
    ((key, (asked, age, answer)),) = host.recent_consoles._kept.items()
    host.recent_consoles._kept[key] = (asked - 61, age, answer)
    moved = await (await _get(api, tokens, path)).json()
    assert moved["run"]["status"] == "running"
    # A write through the host - confirming the cue - is seen by the very next read.
    cue = next(st for st in moved["steps"] if st["status"] == "running")
    confirmed = await api.post(f"{path}/steps/{cue['id']}/confirm", headers=bearer(tokens["admin"]))
    assert confirmed.status == 200
    after = await (await _get(api, tokens, path)).json()
    assert next(st for st in after["steps"] if st["id"] == cue["id"])["status"] == "done"
    await engine.stop()


async def test_fifty_readers_of_one_console_at_once_read_it_once(kept, tokens, clock, monkeypatch):
    host, api = kept
    run_id = await _run(api, tokens, host, clock, announce("hi"))
    reads = count_calls(monkeypatch, console_module, "_build")
    path = f"/api/v1/admin/runs/{run_id}"
    answers = await asyncio.gather(*(_get(api, tokens, path) for _ in range(50)))
    assert len({a.headers["ETag"] for a in answers}) == 1
    assert reads.calls == 1
    # The web console's run page (it reads the log's tail) is kept apart from the API's
    # answer, and read once for all its readers too.
    await sign_in(api, tokens["admin"])
    pages = await asyncio.gather(*(api.get(f"/runs/{run_id}/live") for _ in range(10)))
    assert [p.status for p in pages] == [200] * 10
    assert reads.calls == 2
