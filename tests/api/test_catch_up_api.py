"""``spec.catch_up`` through the HTTP API: a bad value is a 400 naming the field that writes
nothing, a good one is stored in its one spelling, and — end to end — an event authored and
published through the API catches up after an outage as its policy says, read back through
the runs and the calendar (the staff one with the reasons, the public one without)."""

from __future__ import annotations

from typing import Any

import pytest

from pageant.engine import Engine
from pageant.schedules.catchup import MAX_WITHIN_SECONDS, MIN_WITHIN_SECONDS
from tests.api.test_events_api import EVENTS, call, create, snapshot
from tests.scheduling import MAIN, utc, weekly

EVERY_DAY = weekly(
    "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", at="20:00"
)


def spec_catching(catching: Any) -> dict[str, Any]:
    return {"schedule": EVERY_DAY, "phases": [MAIN], "catch_up": catching}


# ── validation ──────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("catching", "field", "words"),
    [
        ("all", "spec.catch_up:", "expected an object with a policy"),
        ({"policy": "some", "within": "3h"}, "spec.catch_up.policy:", "none, one, all"),
        ({"policy": "one"}, "spec.catch_up.within:", 'required for "one"'),
        ({"policy": "all", "within": " "}, "spec.catch_up.within:", 'required for "all"'),
        ({"policy": "all", "within": "3 hours"}, "spec.catch_up.within:", "from 1m to 7d"),
        ({"policy": "all", "within": "8d"}, "spec.catch_up.within:", 'got "8d"'),
        ({"policy": "all", "within": "59s"}, "spec.catch_up.within:", 'got "59s"'),
        ({"policy": "all", "within": 10800}, "spec.catch_up.within:", "got 10800"),
        ({"policy": "none", "within": "3h"}, "spec.catch_up.within:", "only"),
        ({"policy": "one", "within": "3h", "max": 2}, "spec.catch_up:", 'unknown key "max"'),
    ],
)
async def test_a_bad_catch_up_is_400_naming_the_field_and_writes_nothing(
    client, tokens, db, catching, field, words
):
    event = await create(client, tokens["admin"])
    before = await snapshot(db)
    status, data = await call(
        client, "PUT", f"{EVENTS}/{event['id']}", tokens["admin"], {"spec": spec_catching(catching)}
    )
    assert status == 400, data
    assert data["error"]["code"] == "invalid"
    assert any(d.startswith(field) and words in d for d in data["error"]["details"]), data
    assert await snapshot(db) == before


@pytest.mark.parametrize(
    ("within", "stored"),
    [
        ("1m", "1m"),  # the shortest window
        ("60s", "1m"),  # one spelling is stored
        ("7d", "7d"),  # the longest
        ("168h", "7d"),
        ("180m", "3h"),
    ],
)
async def test_a_window_inside_the_bounds_is_kept_in_one_spelling(client, tokens, within, stored):
    assert (MIN_WITHIN_SECONDS, MAX_WITHIN_SECONDS) == (60, 7 * 86_400)
    event = await create(
        client, tokens["admin"], spec=spec_catching({"policy": "all", "within": within})
    )
    assert event["spec"]["catch_up"] == {"policy": "all", "within": stored}


async def test_none_and_no_catch_up_are_one_spec(client, tokens):
    event = await create(client, tokens["admin"], spec=spec_catching({"policy": "none"}))
    assert "catch_up" not in event["spec"]


# ── end to end ──────────────────────────────────────────────────────────────


async def test_an_event_published_through_the_api_catches_up_after_an_outage(
    client, tokens, host, clock
):
    # Daily at 20:00 Berlin (19:00Z), public; catch up every occurrence of the last two days.
    admin = tokens["admin"]
    event = await create(
        client,
        admin,
        title="Evening Muster",
        timezone="Europe/Berlin",
        visibility="public",
        spec=spec_catching({"policy": "all", "within": "2d"}),
    )
    for action in ("publish", "verify"):
        status, data = await call(client, "POST", f"{EVENTS}/{event['id']}/{action}", admin)
        assert status == 200, data

    engine = Engine(host)
    try:
        await engine.tick()  # Monday 1 March 12:00Z, the last tick before the outage
        clock.set(utc(2027, 3, 4, 12))  # back on Thursday at 12:00Z
        for _ in range(10):
            await engine.tick()
    finally:
        await engine.stop()

    status, runs = await call(client, "GET", f"{EVENTS}/{event['id']}/runs?limit=200", admin)
    assert status == 200, runs
    by_instant = {run["scheduled_for"]: run for run in runs["items"]}
    monday, tuesday, wednesday = (f"2027-03-0{day}T19:00:00Z" for day in (1, 2, 3))
    assert [by_instant[at]["status"] for at in (monday, tuesday, wednesday)] == [
        "missed",
        "completed",
        "completed",
    ]
    assert by_instant["2027-03-04T19:00:00Z"]["status"] == "scheduled"
    assert (
        "older than the catch-up window (catch_up: all, within 2d)"
        in (by_instant[monday]["last_error"])
    )
    # Tuesday's started first, and Wednesday's only once Tuesday's had ended.
    assert by_instant[tuesday]["ended_at"] <= by_instant[wednesday]["started_at"]

    status, console = await call(
        client, "GET", f"/api/v1/admin/runs/{by_instant[wednesday]['id']}", admin
    )
    assert status == 200, console
    starts = [line for line in console["log"] if (line["detail"] or {}).get("to") == "starting"]
    assert [line["detail"]["because"] for line in starts] == [
        "started 17 h late, catching up after the host was down (catch_up: all, within 2d)"
    ]

    window = "from=2027-03-01T00:00:00Z&to=2027-03-05T00:00:00Z"
    status, staff = await call(
        client, "GET", f"/api/v1/admin/calendar?{window}&definition={event['id']}", admin
    )
    assert status == 200, staff
    reasons = {item["scheduled_for"]: (item["status"], item["reason"]) for item in staff["items"]}
    assert reasons[tuesday] == (
        "completed",
        "started 1 d 17 h late, catching up after the host was down (catch_up: all, within 2d)",
    )
    assert reasons[monday][0] == "missed" and "catch-up window" in reasons[monday][1]

    status, public = await call(client, "GET", f"/api/v1/public/events?{window}", None)
    assert status == 200, public
    assert [item["status"] for item in public["items"]][:3] == ["missed", "completed", "completed"]
    for item in public["items"]:
        assert "reason" not in item and "catching" not in str(item)


async def test_the_served_openapi_document_describes_catch_up(client):
    answer = await client.get("/api/v1/openapi.json")
    assert answer.status == 200
    document = await answer.json()
    found = [schema["properties"]["catch_up"] for schema in _schemas_with_catch_up(document)]
    assert found, "no spec schema in the OpenAPI document has catch_up"
    for schema in found:
        assert schema["properties"]["policy"]["enum"] == ["none", "one", "all"]
        assert "within" in schema["properties"]


def _schemas_with_catch_up(node: Any) -> list[dict[str, Any]]:
    out = []
    if isinstance(node, dict):
        if isinstance(node.get("properties"), dict) and "catch_up" in node["properties"]:
            out.append(node)
        for value in node.values():
            out += _schemas_with_catch_up(value)
    elif isinstance(node, list):
        for value in node:
            out += _schemas_with_catch_up(value)
    return out
