"""Progress players can see: a count gate marked ``"public": true`` shows on the public event
page and its progress route as "label: count of target", moving with each firing, and
nothing else of the run — a test reads each public body whole for staff-only strings."""

from __future__ import annotations

from typing import Any

import pytest

from pageant.engine import Engine
from tests.api.test_events_api import EVENTS, call, create
from tests.conftest import bearer
from tests.factories import announce, phase, spec

PUBLIC = "/api/v1/public/events"
FIRE = "/api/v1/triggers/wisps.caught/fire"
CRIMSON = {"var": "colour", "op": "eq", "value": "crimson-secret"}

#: What staff wrote or did that no public answer may hold.
SECRETS = (
    "wisps.caught",  # the gates' trigger
    "crimson-secret",  # a condition's value
    "colour",  # a trigger variable
    "hunt-secret",  # phase keys
    "warmup-secret",
    "Staff Hunt Notes",  # a phase label the gate's label stands in for
    "staff-only announcement",  # a step's message
    "staff-scope-zz",  # the run's scope
    "test-game",  # the token that fired
    "admin:",
    "core.announce",
)


@pytest.fixture
async def engine(host: Any) -> Any:
    e = Engine(host)
    try:
        yield e
    finally:
        await e.stop()


def hunt() -> dict[str, Any]:
    """A warm-up held by a gate players do not see, then a hunt whose gate they do."""
    return spec(
        phase(
            "warmup-secret",
            announce("staff-only announcement"),
            advance={"on": "wisps.caught", "count": 1},
        ),
        {
            "key": "hunt-secret",
            "label": "Staff Hunt Notes",
            "steps": [announce("staff-only announcement")],
            "advance": {
                "on": "wisps.caught",
                "where": CRIMSON,
                "count": 4,
                "public": True,
                "label": "Wisps caught tonight",
            },
        },
    )


async def fire(client: Any, tokens: dict[str, str], colour: str) -> None:
    response = await client.post(FIRE, json={"colour": colour}, headers=bearer(tokens["game"]))
    assert response.status == 200, await response.text()


async def public_bodies(client: Any, slug: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The event's public page and its progress, each body read whole for secrets."""
    found = []
    for path in (f"{PUBLIC}/{slug}", f"{PUBLIC}/{slug}/progress"):
        response = await client.get(path)
        text = await response.text()
        assert response.status == 200, (path, text)
        for secret in SECRETS:
            assert secret not in text, (path, secret)
        found.append(await response.json())
    return found[0], found[1]


async def test_a_public_gate_shows_its_count_as_firings_arrive_and_nothing_private(
    client, tokens, engine
):
    admin = tokens["admin"]
    event = await create(client, admin, title="Wisp Night", visibility="public", spec=hunt())
    status, data = await call(client, "POST", f"{EVENTS}/{event['id']}/publish", admin)
    assert status == 200, data
    status, run = await call(
        client, "POST", f"{EVENTS}/{event['id']}/runs", admin, {"scope": "staff-scope-zz"}
    )
    assert status == 201, run
    await engine.tick()
    page, progress = await public_bodies(client, "wisp-night")
    assert page["progress"] == progress["items"] == []  # the warm-up's gate is not public

    await fire(client, tokens, "north")  # satisfies the warm-up
    await engine.tick()
    await fire(client, tokens, "crimson-secret")
    await fire(client, tokens, "north")  # the hunt's gate does not count it
    page, progress = await public_bodies(client, "wisp-night")
    [shown] = progress["items"]
    assert {k: shown[k] for k in ("label", "count", "target", "reached")} == {
        "label": "Wisps caught tonight",
        "count": 1,
        "target": 4,
        "reached": False,
    }
    assert page["progress"] == progress["items"]
    assert shown["scheduled_for"] == run["scheduled_for"]

    for _ in range(3):
        await fire(client, tokens, "crimson-secret")
    _, progress = await public_bodies(client, "wisp-night")
    [shown] = progress["items"]
    assert (shown["count"], shown["target"], shown["reached"]) == (4, 4, True)


async def test_progress_is_cacheable_for_seconds_and_a_staff_event_has_none(client, tokens):
    admin = tokens["admin"]
    shown = await create(client, admin, title="Wisp Night", visibility="public", spec=hunt())
    hidden = await create(client, admin, title="Staff Drill", visibility="staff", spec=hunt())
    for made in (shown, hidden):
        status, data = await call(client, "POST", f"{EVENTS}/{made['id']}/publish", admin)
        assert status == 200, data
    response = await client.get(f"{PUBLIC}/wisp-night/progress")
    assert response.status == 200
    assert response.headers["Cache-Control"] == "public, max-age=5"
    assert await response.json() == {"items": []}
    response = await client.get(f"{PUBLIC}/staff-drill/progress")
    assert response.status == 404
    assert "Staff Drill" not in await response.text()


@pytest.mark.parametrize(
    ("advance", "problem"),
    [
        ({"on": "wisps.caught", "public": True, "label": "x" * 100}, None),
        (
            {"on": "wisps.caught", "public": True, "label": "x" * 101},
            "spec.phases[0].advance.label: one line of at most 100 characters; got 101",
        ),
        (
            {"on": "wisps.caught", "public": True, "label": "two\nlines"},
            "spec.phases[0].advance.label: one line of at most 100 characters; got 9",
        ),
        (
            {"on": "wisps.caught", "label": "Wisps"},
            'spec.phases[0].advance.label: a label is what players read; give "public": true too',
        ),
        (
            {"on": "wisps.caught", "public": "yes"},
            'spec.phases[0].advance.public: expected true or false; got "yes"',
        ),
        (
            {"after": "5m", "public": True},
            'spec.phases[0].advance: unknown key "public" for an "after" gate; expected after',
        ),
    ],
)
async def test_a_public_gate_is_checked_when_saved(client, tokens, advance, problem):
    body = {"title": "Gate", "spec": spec(phase("p", advance=advance))}
    status, data = await call(client, "POST", EVENTS, tokens["admin"], body)
    if problem is None:
        assert status == 201, data
        assert data["spec"]["phases"][0]["advance"]["public"] is True
    else:
        assert (status, data["error"]["details"]) == (400, [problem])
