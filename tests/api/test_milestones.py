"""Milestone announcements of a public count gate: authored and published through the API, a
run started, firings counted through the trigger route — each milestone is announced once on
each leg it names, with only the gate's numbers, shown on the run's steps and log; nothing
after a cancel; a milestone the run never reached is passed over with a note; and a bad
milestone spec is a 400 naming the field that saves nothing."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from pageant import hookimpl
from pageant.api.app import make_app
from pageant.engine import Engine
from tests.api.test_events_api import EVENTS, call, create, snapshot
from tests.conftest import bearer
from tests.factories import announce, log_lines, make_host, phase, spec

FIRE = "/api/v1/triggers/arena.boss_slain/fire"
MESSAGE = "Bosses slain tonight: {count} of {target} ({percent}%)"


class Arena:
    """A game with one trigger, ``arena.boss_slain``, and an announce leg, ``arena.say``,
    that keeps every message it is sent (answering from ``answers`` first)."""

    PLUGIN_INFO = {"owner": "arena", "contract": "^1.0"}  # noqa: RUF012 - read by the loader

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []
        self.answers: list[dict[str, Any]] = []

    async def send(self, message: str, ctx: Any) -> dict[str, Any]:
        if self.answers:
            return self.answers.pop(0)
        self.sent.append((message, ctx.idempotency_key))
        return {"ok": True}

    @hookimpl
    def pageant_announce_legs(self) -> list[dict[str, Any]]:
        return [{"id": "arena.say", "label": "Arena chat", "send": self.send}]

    @hookimpl
    def pageant_triggers(self) -> list[dict[str, Any]]:
        boss = {"name": "boss", "type": "string", "example": "Yew", "description": "Which."}
        return [{"id": "arena.boss_slain", "label": "A boss was slain", "variables": [boss]}]

    def messages(self) -> list[str]:
        return [message for message, _ in self.sent]


@pytest.fixture
def arena() -> Arena:
    return Arena()


@pytest.fixture
async def arena_host(settings: Any, db: Any, clock: Any, arena: Arena) -> Any:
    h = make_host(settings, db, clock, [arena])
    try:
        yield h
    finally:
        await h.close()


@pytest.fixture
async def arena_client(arena_host: Any, aiohttp_client: Any) -> Any:
    return await aiohttp_client(make_app(arena_host, run_engine=False))


@pytest.fixture
async def engine(arena_host: Any) -> Any:
    e = Engine(arena_host)
    try:
        yield e
    finally:
        await e.stop()


def night(milestones: Any, *, count: int = 8, public: bool = True) -> dict[str, Any]:
    """A hunt whose gate opens at ``count`` slain bosses, then a wind-down."""
    advance: dict[str, Any] = {"on": "arena.boss_slain", "count": count}
    if public:
        advance |= {"public": True, "label": "Bosses slain tonight"}
    if milestones is not None:
        advance["milestones"] = milestones
    return spec(
        phase("hunt", announce("The hunt begins"), advance=advance),
        phase("wind-down", announce("Well fought")),
    )


MILESTONES = {"at": [25, 50, 100], "legs": ["core.log", "arena.say"], "message": MESSAGE}


async def started(client: Any, tokens: dict[str, str], event_spec: dict[str, Any]) -> int:
    admin = tokens["admin"]
    event = await create(client, admin, title="Boss Night", visibility="public", spec=event_spec)
    status, data = await call(client, "POST", f"{EVENTS}/{event['id']}/publish", admin)
    assert status == 200, data
    status, run = await call(client, "POST", f"{EVENTS}/{event['id']}/runs", admin, {})
    assert status == 201, run
    return int(run["id"])


async def slay(client: Any, tokens: dict[str, str], times: int) -> None:
    for _ in range(times):
        response = await client.post(FIRE, json={"boss": "Yew"}, headers=bearer(tokens["game"]))
        assert response.status == 200, await response.text()


async def logged(host: Any, run_id: int) -> list[str]:
    """The milestones ``core.log`` announced on the run's log (not the phases' own)."""
    lines = await log_lines(host.db, run_id, "announce")
    return [line.detail["message"] for line in lines if line.detail["message"].startswith("Boss")]


def said(count: int, percent: int) -> str:
    return f"Bosses slain tonight: {count} of 8 ({percent}%)"


async def test_each_milestone_is_announced_once_on_both_legs_as_the_count_crosses_it(
    arena_client, tokens, arena_host, engine, arena
):
    run_id = await started(arena_client, tokens, night(MILESTONES))
    await engine.tick()
    assert arena.messages() == []

    await slay(arena_client, tokens, 1)  # 1 of 8: below 25% (2)
    await engine.tick()
    assert arena.messages() == []
    await slay(arena_client, tokens, 2)  # 3 of 8: past 25%, short of 50% (4)
    await engine.tick()
    await engine.tick()
    assert arena.messages() == [said(2, 25)]
    assert await logged(arena_host, run_id) == [said(2, 25)]

    await slay(arena_client, tokens, 5)  # 8 of 8: 50% and 100% at once, the gate opens
    for _ in range(4):
        await engine.tick()
    assert arena.messages() == [said(2, 25), said(4, 50), said(8, 100)]
    assert await logged(arena_host, run_id) == [said(2, 25), said(4, 50), said(8, 100)]
    # Each once: more ticks send nothing again, and each carried its own key.
    await engine.tick()
    assert len(arena.sent) == 3
    assert len({key for _, key in arena.sent}) == 3

    status, console = await call(
        arena_client, "GET", f"/api/v1/admin/runs/{run_id}", tokens["admin"]
    )
    assert status == 200, console
    assert console["run"]["status"] == "completed"
    shown = [st for st in console["steps"] if st["phase"].startswith("(milestones:")]
    assert sorted((st["label"], st["status"]) for st in shown) == sorted(
        (f"Milestone: {percent}% ({count}) ({leg})", "done")
        for percent, count in ((25, 2), (50, 4), (100, 8))
        for leg in ("core.log", "arena.say")
    )


async def test_a_leg_that_fails_is_retried_and_the_milestone_still_sent_once(
    arena_client, tokens, arena_host, engine, arena, clock
):
    await started(arena_client, tokens, night({**MILESTONES, "at": [25]}))
    await engine.tick()
    arena.answers.append({"ok": False, "retry": True, "error": "chat is down"})
    await slay(arena_client, tokens, 2)
    await engine.tick()
    await engine.tick()
    assert arena.messages() == []  # the first try failed
    clock.set(clock.now() + timedelta(minutes=2))
    await engine.tick()
    await engine.tick()
    assert arena.messages() == [said(2, 25)]
    clock.set(clock.now() + timedelta(minutes=5))
    await engine.tick()
    assert arena.messages() == [said(2, 25)]


async def test_nothing_is_announced_after_a_cancel(arena_client, tokens, arena_host, engine, arena):
    run_id = await started(arena_client, tokens, night(MILESTONES))
    await engine.tick()
    await slay(arena_client, tokens, 2)
    await engine.tick()
    await engine.tick()
    assert arena.messages() == [said(2, 25)]
    status, data = await call(
        arena_client,
        "POST",
        f"/api/v1/admin/runs/{run_id}/cancel",
        tokens["admin"],
        {"reason": "rain"},
    )
    assert status == 200, data
    await slay(arena_client, tokens, 6)
    for _ in range(3):
        await engine.tick()
    assert arena.messages() == [said(2, 25)]
    assert await logged(arena_host, run_id) == [said(2, 25)]


async def test_a_milestone_the_run_never_reached_is_passed_over_with_a_note(
    arena_client, tokens, arena_host, engine, arena
):
    run_id = await started(arena_client, tokens, night(MILESTONES))
    await engine.tick()
    await slay(arena_client, tokens, 2)
    await engine.tick()
    # A person opens the gate early: the run completes at 2 of 8.
    status, data = await call(
        arena_client,
        "POST",
        f"/api/v1/admin/runs/{run_id}/advance",
        tokens["admin"],
        {"reason": "late"},
    )
    assert status == 200, data
    for _ in range(4):
        await engine.tick()
    assert arena.messages() == [said(2, 25)]
    status, console = await call(
        arena_client, "GET", f"/api/v1/admin/runs/{run_id}", tokens["admin"]
    )
    assert console["run"]["status"] == "completed"
    unreached = [
        st
        for st in console["steps"]
        if st["phase"].startswith("(milestones:") and st["status"] != "done"
    ]
    assert len(unreached) == 4
    assert {(st["status"], st["note"]) for st in unreached} == {
        ("skipped", "the run ended before the count reached it")
    }


# ── validation ──────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("milestones", "public", "field", "words"),
    [
        (MILESTONES, False, "spec.phases[0].advance.milestones:", '"public": true'),
        ("25,50", True, "spec.phases[0].advance.milestones:", "expected an object"),
        ({**MILESTONES, "at": []}, True, "spec.phases[0].advance.milestones.at:", "a list"),
        (
            {**MILESTONES, "at": [0]},
            True,
            "spec.phases[0].advance.milestones.at[0]:",
            "from 1 to 100",
        ),
        ({**MILESTONES, "at": [101]}, True, "spec.phases[0].advance.milestones.at[0]:", "got 101"),
        (
            {**MILESTONES, "at": [50.0]},
            True,
            "spec.phases[0].advance.milestones.at[0]:",
            "got 50.0",
        ),
        (
            {**MILESTONES, "at": [50, 45]},
            True,
            "spec.phases[0].advance.milestones.at[1]:",
            "45% of 8 is 4, as is spec.phases[0].advance.milestones.at[0]",
        ),
        (
            {**MILESTONES, "at": list(range(1, 101, 9))},
            True,
            "spec.phases[0].advance.milestones.at:",
            "at most 10",
        ),
        (
            {**MILESTONES, "legs": ["arena.shout"]},
            True,
            "spec.phases[0].advance.milestones.legs[0]:",
            "is not an announce leg",
        ),
        (
            {**MILESTONES, "legs": []},
            True,
            "spec.phases[0].advance.milestones.legs:",
            "expected a list",
        ),
        (
            {**MILESTONES, "message": "Slain by {player}"},
            True,
            "spec.phases[0].advance.milestones.message:",
            "{player} is not a placeholder; expected {count}, {target}, {percent}",
        ),
        (
            {**MILESTONES, "every": 10},
            True,
            "spec.phases[0].advance.milestones:",
            'unknown key "every"',
        ),
    ],
)
async def test_a_bad_milestone_spec_is_a_400_naming_the_field_and_saves_nothing(
    arena_client, tokens, db, milestones, public, field, words
):
    event = await create(arena_client, tokens["admin"], title="Boss Night")
    before = await snapshot(db)
    status, data = await call(
        arena_client,
        "PUT",
        f"{EVENTS}/{event['id']}",
        tokens["admin"],
        {"spec": night(milestones, public=public)},
    )
    assert status == 400, data
    assert any(d.startswith(field) and words in d for d in data["error"]["details"]), data
    assert await snapshot(db) == before


async def test_milestones_are_stored_in_order_and_validate_again_unchanged(arena_client, tokens):
    event = await create(
        arena_client,
        tokens["admin"],
        title="Boss Night",
        spec=night({**MILESTONES, "at": [100, 25, 50]}),
    )
    stored = event["spec"]["phases"][0]["advance"]["milestones"]
    assert stored == {**MILESTONES, "at": [25, 50, 100]}
    status, again = await call(
        arena_client, "PUT", f"{EVENTS}/{event['id']}", tokens["admin"], {"spec": event["spec"]}
    )
    assert status == 200, again
    assert again["spec"] == event["spec"]
