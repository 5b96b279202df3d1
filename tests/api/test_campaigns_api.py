"""``spec.requires`` through the HTTP API: an unknown event is a 400 naming it at save (nothing
saved) and at publish; a bad outcome or window is a 400 naming the field; and — end to end —
two events authored, published and verified through the API, A started by a person: B is
held while A runs, then starts when A completes or is skipped when A is cancelled, read back
through the run console and both calendars (the public one names the chain only when both
events are public)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pageant.engine import Engine
from tests.api.test_events_api import EVENTS, call, create, snapshot
from tests.scheduling import MAIN, utc

#: A's runs last half an hour: a gate that opens after 30 min.
LONG = {**MAIN, "advance": {"after": "30m"}}
MANUAL = {"kind": "manual"}


def requiring(event: str, **more: Any) -> dict[str, Any]:
    return {
        "schedule": MANUAL,
        "phases": [MAIN],
        "requires": {"event": event, "within": "7d", **more},
    }


# ── validation ──────────────────────────────────────────────────────────────


async def test_an_unknown_event_is_a_400_naming_it_and_saves_nothing(client, tokens, db):
    before = await snapshot(db)
    status, data = await call(
        client,
        "POST",
        EVENTS,
        tokens["admin"],
        {"title": "Boss Night", "spec": requiring("champion-muster")},
    )
    assert status == 400, data
    assert data["error"]["details"] == [
        'spec.requires.event: no event "champion-muster" (GET /api/v1/admin/events lists them)'
    ]
    assert await snapshot(db) == before

    event = await create(client, tokens["admin"], title="Boss Night")
    before = await snapshot(db)
    status, data = await call(
        client, "PUT", f"{EVENTS}/{event['id']}", tokens["admin"], {"spec": requiring("nope")}
    )
    assert status == 400, data
    assert data["error"]["details"] == [
        'spec.requires.event: no event "nope" (GET /api/v1/admin/events lists them)'
    ]
    assert await snapshot(db) == before


async def test_a_known_event_is_saved_with_the_outcome_and_window_in_one_spelling(client, tokens):
    await create(client, tokens["admin"], title="Champion Muster")
    event = await create(
        client, tokens["admin"], title="Boss Night", spec=requiring("champion-muster")
    )
    # The default outcome is written out; "168h" is stored as "7d".
    assert event["spec"]["requires"] == {
        "event": "champion-muster",
        "outcome": "completed",
        "within": "7d",
    }
    status, data = await call(
        client,
        "PUT",
        f"{EVENTS}/{event['id']}",
        tokens["admin"],
        {"spec": requiring("champion-muster", within="168h", outcome="ended")},
    )
    assert status == 200, data
    assert data["spec"]["requires"]["within"] == "7d"
    assert data["spec"]["requires"]["outcome"] == "ended"


@pytest.mark.parametrize(
    ("requires", "field", "words"),
    [
        ("champion-muster", "spec.requires:", "expected an object"),
        ({"event": "champion-muster"}, "spec.requires.within:", "got null"),
        ({"event": "", "within": "7d"}, "spec.requires.event:", "slug of another event"),
        ({"event": 3, "within": "7d"}, "spec.requires.event:", "got 3"),
        ({"event": "champion-muster", "within": "59s"}, "spec.requires.within:", "from 1m to 30d"),
        ({"event": "champion-muster", "within": "31d"}, "spec.requires.within:", 'got "31d"'),
        ({"event": "champion-muster", "within": 60}, "spec.requires.within:", "got 60"),
        (
            {"event": "champion-muster", "within": "7d", "outcome": "won"},
            "spec.requires.outcome:",
            "completed, failed, cancelled, ended",
        ),
        (
            {"event": "champion-muster", "within": "7d", "hold": "1h"},
            "spec.requires:",
            'unknown key "hold"',
        ),
    ],
)
async def test_a_bad_requirement_is_a_400_naming_the_field(
    client, tokens, db, requires, field, words
):
    await create(client, tokens["admin"], title="Champion Muster")
    event = await create(client, tokens["admin"], title="Boss Night")
    before = await snapshot(db)
    spec = {"schedule": MANUAL, "phases": [MAIN], "requires": requires}
    status, data = await call(
        client, "PUT", f"{EVENTS}/{event['id']}", tokens["admin"], {"spec": spec}
    )
    assert status == 400, data
    assert any(d.startswith(field) and words in d for d in data["error"]["details"]), data
    assert await snapshot(db) == before


@pytest.mark.parametrize("within", ["1m", "30d"])
async def test_the_window_s_bounds_are_accepted(client, tokens, within):
    await create(client, tokens["admin"], title="Champion Muster")
    event = await create(
        client,
        tokens["admin"],
        title="Boss Night",
        spec=requiring("champion-muster", within=within),
    )
    assert event["spec"]["requires"]["within"] == within


async def test_an_event_cannot_require_itself(client, tokens):
    event = await create(client, tokens["admin"], title="Boss Night")
    status, data = await call(
        client, "PUT", f"{EVENTS}/{event['id']}", tokens["admin"], {"spec": requiring("boss-night")}
    )
    assert status == 400, data
    assert data["error"]["details"] == [
        'spec.requires.event: "boss-night" is this event; an event requires another '
        "event's outcome"
    ]


async def test_publish_refuses_a_requirement_whose_event_is_gone(client, tokens, db):
    muster = await create(client, tokens["admin"], title="Champion Muster")
    event = await create(
        client, tokens["admin"], title="Boss Night", spec=requiring("champion-muster")
    )
    status, data = await call(
        client, "PUT", f"{EVENTS}/{muster['id']}", tokens["admin"], {"slug": "the-muster"}
    )
    assert status == 200, data
    before = await snapshot(db)
    status, data = await call(client, "POST", f"{EVENTS}/{event['id']}/publish", tokens["admin"])
    assert status == 400, data
    assert data["error"]["details"] == [
        'spec.requires.event: no event "champion-muster" (GET /api/v1/admin/events lists them)'
    ]
    assert await snapshot(db) == before


# ── end to end ──────────────────────────────────────────────────────────────


async def author(client: Any, admin: str, **body: Any) -> dict[str, Any]:
    """An event created, published and verified through the API."""
    event = await create(client, admin, **body)
    for action in ("publish", "verify"):
        status, data = await call(client, "POST", f"{EVENTS}/{event['id']}/{action}", admin)
        assert status == 200, data
    return event


@pytest.mark.parametrize("ending", ["completes", "is cancelled"])
async def test_b_waits_for_a_person_s_run_of_a_over_http(client, tokens, host, clock, ending):
    # Monday 1 March 2027, 12:00Z. B is on the schedule at 12:10Z, with an hour's grace.
    admin = tokens["admin"]
    a = await author(
        client,
        admin,
        title="Champion Muster",
        visibility="public",
        timezone="UTC",
        spec={"schedule": MANUAL, "phases": [LONG]},
    )
    b = await author(
        client,
        admin,
        title="Boss Night",
        visibility="public",
        timezone="UTC",
        grace_seconds=3600,
        spec={
            "schedule": {"kind": "once", "at": "2027-03-01T12:10"},
            "phases": [MAIN],
            "requires": {"event": "champion-muster", "within": "7d"},
        },
    )
    status, started = await call(client, "POST", f"{EVENTS}/{a['id']}/runs", admin, {})
    assert status in (200, 201), started
    a_run = started["id"]

    engine = Engine(host)
    try:
        await engine.tick()  # A starts and waits at its gate
        clock.set(utc(2027, 3, 1, 12, 10))
        for _ in range(3):
            await engine.tick()
        status, runs = await call(client, "GET", f"{EVENTS}/{b['id']}/runs", admin)
        (b_run,) = runs["items"]
        status, console = await call(client, "GET", f"/api/v1/admin/runs/{b_run['id']}", admin)
        assert console["run"]["status"] == "scheduled"
        held = f"waiting for champion-muster (run {a_run}) to complete"
        assert console["run"]["waiting_on"]["sentence"] == held
        assert console["run"]["waiting_on"]["reason"] == "requires"

        window = "from=2027-03-01T00:00:00Z&to=2027-03-02T00:00:00Z"
        status, staff = await call(
            client, "GET", f"/api/v1/admin/calendar?{window}&definition={b['id']}", admin
        )
        assert status == 200, staff
        (item,) = staff["items"]
        chain = {"event": "champion-muster", "outcome": "completed", "within": "7d"}
        assert (item["requires"], item["reason"]) == (chain, f"held: {held}")
        status, public = await call(client, "GET", f"/api/v1/public/events?{window}", None)
        (shown,) = [i for i in public["items"] if i["event"]["slug"] == "boss-night"]
        assert (shown["requires"], shown["status"]) == (chain, "scheduled")
        assert "waiting for" not in json.dumps(public)  # the reason is staff data

        if ending == "completes":
            clock.set(utc(2027, 3, 1, 12, 31))
        else:
            status, data = await call(
                client, "POST", f"/api/v1/admin/runs/{a_run}/cancel", admin, {"reason": "rain"}
            )
            assert status == 200, data
        for _ in range(4):
            await engine.tick()
    finally:
        await engine.stop()

    status, console = await call(client, "GET", f"/api/v1/admin/runs/{b_run['id']}", admin)
    run = console["run"]
    if ending == "completes":
        assert run["status"] == "completed"
        (start,) = [
            line for line in console["log"] if (line["detail"] or {}).get("to") == "starting"
        ]
        assert start["detail"]["because"] == (
            f"started: champion-muster completed 0 s ago (run {a_run})"
        )
    else:
        assert run["status"] == "skipped"
        assert run["cancel_reason"] == f"skipped: champion-muster run {a_run} was cancelled"
    status, staff = await call(
        client, "GET", f"/api/v1/admin/calendar?{window}&definition={b['id']}", admin
    )
    (item,) = staff["items"]
    if ending != "completes":
        assert item["reason"] == run["cancel_reason"]


async def test_the_public_calendar_never_names_a_staff_event_it_requires(client, tokens, clock):
    admin = tokens["admin"]
    await create(client, admin, title="Secret Rehearsal", visibility="staff")
    b = await author(
        client,
        admin,
        title="Boss Night",
        visibility="public",
        timezone="UTC",
        spec={
            "schedule": {"kind": "once", "at": "2027-03-02T20:00"},
            "phases": [MAIN],
            "requires": {"event": "secret-rehearsal", "within": "7d"},
        },
    )
    window = "from=2027-03-01T00:00:00Z&to=2027-03-05T00:00:00Z"
    status, staff = await call(
        client, "GET", f"/api/v1/admin/calendar?{window}&definition={b['id']}", admin
    )
    assert status == 200, staff
    (item,) = staff["items"]
    assert item["requires"]["event"] == "secret-rehearsal"

    response = await client.get(f"/api/v1/public/events?{window}")
    body = await response.text()
    assert response.status == 200, body
    (shown,) = json.loads(body)["items"]
    assert shown["event"]["slug"] == "boss-night"
    assert shown["requires"] is None
    assert "secret-rehearsal" not in body
    assert "Secret Rehearsal" not in body
