"""Countdown ladders through the HTTP API: authoring one (normalised, each mistake named by
its place, nothing written on refusal), and a walk from authoring to a cancelled run whose
countdown stopped where the cancel found it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from pageant.db.countdown import COUNTDOWN_PHASE
from tests.api.test_events_api import EVENTS, call, create, snapshot
from tests.factories import announce, phase, spec

RUNS = "/api/v1/admin/runs"


def counted(before: Any = None, legs: Any = None, message: Any = "Starts in {remaining}") -> dict:
    """A one-phase spec whose phase counts down (``before`` and ``legs`` as given)."""
    first = phase("muster", announce("The muster begins"))
    first["countdown"] = {
        "before": ["15m", "5m"] if before is None else before,
        "legs": ["core.log"] if legs is None else legs,
        "message": message,
    }
    return spec(first)


@pytest.fixture
def engine(host_engine: Any) -> Any:
    return host_engine


async def test_a_countdown_saves_normalised_and_reads_back_unchanged(client, tokens):
    event = await create(client, tokens["editor"], spec=counted(["300s", "1h", "15m"]))
    assert event["spec"]["phases"][0]["countdown"] == {
        "before": ["1h", "15m", "5m"],
        "legs": ["core.log"],
        "message": "Starts in {remaining}",
    }
    status, again = await call(
        client, "PUT", f"{EVENTS}/{event['id']}", tokens["editor"], {"spec": event["spec"]}
    )
    assert (status, again["spec"]) == (200, event["spec"])


async def test_countdown_mistakes_are_named_by_their_place_and_write_nothing(client, tokens, db):
    bad = counted(
        ["15m", "900s", "soon", "8d"],
        ["core.log", "core.log", "core.pigeon"],
        "Starts in {remaining} at {when:%H}, {starts}",
    )
    bad["phases"][0]["countdown"]["colour"] = "red"
    before = await snapshot(db)
    status, data = await call(client, "POST", EVENTS, tokens["admin"], {"title": "x", "spec": bad})
    assert (status, data["error"]["code"]) == (400, "invalid")
    where = "spec.phases[0].countdown"
    expected_duration = (
        'expected a duration such as "15m" (a whole number of s, m, h or d) from 1m to 7d'
    )
    assert data["error"]["details"] == [
        f'{where}: unknown key "colour"; expected before, legs, message',
        f'{where}.before[1]: "900s" is the same time as {where}.before[0]',
        f'{where}.before[2]: {expected_duration}; got "soon"',
        f'{where}.before[3]: {expected_duration}; got "8d"',
        f'{where}.legs[1]: "core.log" is named twice',
        f'{where}.legs[2]: "core.pigeon" is not an announce leg; expected one of '
        "core.discord, core.email, core.log, core.slack, core.webhook",
        f"{where}.message: {{when}} has a conversion or a format; write a bare {{when}}",
        f"{where}.message: {{starts}} is not a placeholder; expected {{remaining}}",
    ]
    assert await snapshot(db) == before


async def test_a_countdown_on_a_later_phase_is_refused_naming_it(client, tokens):
    later = phase("frenzy", announce("Go"))
    later["countdown"] = {"before": ["5m"], "legs": ["core.log"], "message": "Soon"}
    body = {"title": "x", "spec": spec(phase("muster", announce("hi")), later)}
    status, data = await call(client, "POST", EVENTS, tokens["admin"], body)
    assert status == 400, data
    assert data["error"]["details"] == [
        'spec.phases[1].countdown: only the first phase may carry a countdown; phase "frenzy" '
        "begins when the phases before it end, which is not known in advance"
    ]


@pytest.mark.parametrize(
    ("before", "ok"),
    [
        (["1m"], True),
        (["59s"], False),
        (["7d"], True),
        (["169h"], False),
        ([f"{n}m" for n in range(1, 11)], True),
        ([f"{n}m" for n in range(1, 12)], False),
        ([], False),
    ],
)
async def test_countdown_bounds_hold_on_both_sides(client, tokens, before, ok):
    status, data = await call(
        client, "POST", EVENTS, tokens["admin"], {"title": "x", "spec": counted(before)}
    )
    assert status == (201 if ok else 400), data


async def test_countdown_legs_are_bounded_on_both_sides(client, tokens):
    legs = ["core.log", "core.webhook", "core.email", "core.discord", "core.slack"]
    status, data = await call(
        client, "POST", EVENTS, tokens["admin"], {"title": "x", "spec": counted(legs=legs)}
    )
    assert status == 201, data
    status, data = await call(
        client, "POST", EVENTS, tokens["admin"], {"title": "y", "spec": counted(legs=[*legs, "x"])}
    )
    assert (status, data["error"]["details"]) == (
        400,
        ["spec.phases[0].countdown.legs: at most 5 legs; got 6"],
    )


async def test_a_countdown_walk_from_authoring_to_a_cancel(client, tokens, engine, clock):
    """Authored, published and scheduled through the API; the engine ticks on the fake
    clock; the run console shows each rung as it goes; a cancel stops the rest."""
    admin = tokens["admin"]
    clock.set(datetime(2027, 3, 1, 12, 0, tzinfo=UTC))
    start = datetime(2027, 3, 1, 13, 0, tzinfo=UTC)
    body = counted(["30m", "15m", "5m"], message="The muster starts in {remaining}")
    body["schedule"] = {"kind": "once", "at": "2027-03-01T13:00"}
    event = await create(client, admin, title="Muster", spec=body)
    status, data = await call(client, "POST", f"{EVENTS}/{event['id']}/publish", admin)
    assert status == 200, data
    await engine.tick()
    status, listed = await call(client, "GET", f"{RUNS}?definition={event['id']}", admin)
    assert status == 200, listed
    [run] = listed["items"]

    async def rungs() -> list[dict[str, Any]]:
        status, view = await call(client, "GET", f"{RUNS}/{run['id']}", admin)
        assert status == 200, view
        return [st for st in view["steps"] if st["phase"] == COUNTDOWN_PHASE]

    async def announced() -> list[str]:
        status, view = await call(client, "GET", f"{RUNS}/{run['id']}", admin)
        assert status == 200, view
        return [line["detail"]["message"] for line in view["log"] if line["kind"] == "announce"]

    made = await rungs()
    assert [(st["status"], st["due_at"]) for st in made] == [
        ("pending", (start - timedelta(minutes=m)).isoformat().replace("+00:00", "Z"))
        for m in (30, 15, 5)
    ]
    assert made[0]["label"] == "Countdown: 30 minutes before (core.log)"

    clock.set(start - timedelta(minutes=30))
    await engine.tick()
    assert await announced() == ["The muster starts in 30 minutes"]

    clock.set(start - timedelta(minutes=20))
    status, data = await call(
        client, "POST", f"{RUNS}/{run['id']}/cancel", admin, {"reason": "the server is down"}
    )
    assert status == 200, data
    for minutes in (15, 5, 0):
        clock.set(start - timedelta(minutes=minutes))
        await engine.tick()
    assert await announced() == ["The muster starts in 30 minutes"]
    assert [st["status"] for st in await rungs()] == ["done", "cancelled", "cancelled"]


async def test_the_rehearsal_shows_the_countdown_before_the_start(client, tokens):
    body = counted(["15m", "5m"], ["core.log", "core.webhook"], "Muster in {remaining}")
    event = await create(client, tokens["editor"], spec=body)
    status, data = await call(client, "POST", f"{EVENTS}/{event['id']}/publish", tokens["admin"])
    assert status == 200, data
    status, report = await call(
        client, "POST", f"{EVENTS}/{event['id']}/rehearse", tokens["editor"], {}
    )
    assert status == 200, report
    assert report["timeline"]["countdown"] == [
        {
            "at_seconds": -900,
            "leg": "core.log",
            "label": "Countdown: 15 minutes before (core.log)",
            "message": "Muster in 15 minutes",
        },
        {
            "at_seconds": -900,
            "leg": "core.webhook",
            "label": "Countdown: 15 minutes before (core.webhook)",
            "message": "Muster in 15 minutes",
        },
        {
            "at_seconds": -300,
            "leg": "core.log",
            "label": "Countdown: 5 minutes before (core.log)",
            "message": "Muster in 5 minutes",
        },
        {
            "at_seconds": -300,
            "leg": "core.webhook",
            "label": "Countdown: 5 minutes before (core.webhook)",
            "message": "Muster in 5 minutes",
        },
    ]
    # The rehearsed run starts at once: its own rungs, passed, are not its timeline's steps.
    assert [st["phase"] for st in report["timeline"]["steps"]] == ["muster"]
