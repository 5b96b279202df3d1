"""Blackouts through the HTTP API: made, listed, edited and archived like series; an event
subscribes by slug; every write re-marks the subscribed occurrences inside the horizon and
says how many moved; the staff and public calendars show a blacked-out occurrence with the
blackout's name; bad input is a 400 naming the field and writes nothing."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from pageant.db.tables import event_blackouts
from tests.api.test_events_api import EVENTS, call, create, snapshot
from tests.scheduling import spec_with, weekly

BLACKOUTS = "/api/v1/admin/blackouts"
NIGHT = {"kind": "weekly", "days": ["friday"], "start": "18:00", "end": "23:00"}
TOURNAMENT = {
    "slug": "tournament-night",
    "name": "Tournament night",
    "timezone": "Europe/Berlin",
    "periods": [NIGHT],
}


async def blackouts_table(db: Any) -> list[dict[str, Any]]:
    async with db.connect() as conn:
        rows = await conn.execute(select(event_blackouts).order_by(event_blackouts.c.id))
        return [dict(r._mapping) for r in rows]


async def make_blackout(client: Any, token: str, **body: Any) -> dict[str, Any]:
    status, data = await call(client, "POST", BLACKOUTS, token, {**TOURNAMENT, **body})
    assert status == 201, data
    return data


async def published_event(client: Any, tokens: dict[str, str], spec: dict[str, Any]) -> int:
    event = await create(
        client, tokens["admin"], title="Friday Muster", timezone="Europe/Berlin", spec=spec
    )
    status, data = await call(client, "POST", f"{EVENTS}/{event['id']}/publish", tokens["admin"])
    assert status == 200, data
    return int(event["id"])


async def calendar(client: Any, token: str, event_id: int) -> list[dict[str, Any]]:
    query = f"from=2027-03-01T00:00:00Z&to=2027-03-20T00:00:00Z&definition={event_id}"
    status, data = await call(client, "GET", f"/api/v1/admin/calendar?{query}", token)
    assert status == 200, data
    return [i for i in data["items"] if i["kind"] == "materialised"]


# ── the resource ──────────────────────────────────────────────────────────────────────────


async def test_a_blackout_is_made_read_listed_and_edited_by_authors(client, tokens):
    made = await make_blackout(client, tokens["editor"])
    blackout = made["blackout"]
    assert made == {
        "blackout": {
            "id": blackout["id"],
            "slug": "tournament-night",
            "name": "Tournament night",
            "timezone": "Europe/Berlin",
            "periods": [NIGHT],
            "state": "active",
        },
        "remarked": 0,
    }
    path = f"{BLACKOUTS}/{blackout['id']}"
    status, one = await call(client, "GET", path, tokens["moderator"])
    assert (status, one) == (200, blackout)
    status, listed = await call(client, "GET", BLACKOUTS, tokens["moderator"])
    assert (status, listed) == (200, {"items": [blackout], "next_cursor": None})

    status, edited = await call(client, "PUT", path, tokens["editor"], {"name": "Cup night"})
    assert status == 200
    assert edited == {"blackout": {**blackout, "name": "Cup night"}, "remarked": 0}

    status, archived = await call(client, "POST", f"{path}/archive", tokens["admin"])
    assert (status, archived["blackout"]["state"]) == (200, "archived")
    status, listed = await call(client, "GET", f"{BLACKOUTS}?state=active", tokens["admin"])
    assert listed["items"] == []
    status, listed = await call(client, "GET", f"{BLACKOUTS}?state=archived", tokens["admin"])
    assert [b["id"] for b in listed["items"]] == [blackout["id"]]
    status, refused = await call(client, "PUT", path, tokens["admin"], {"name": "Again"})
    assert (status, refused["error"]["code"]) == (409, "conflict")


async def test_a_moderator_may_not_write_a_blackout(client, tokens, db):
    status, data = await call(client, "POST", BLACKOUTS, tokens["moderator"], TOURNAMENT)
    assert (status, data["error"]["code"]) == (403, "forbidden")
    assert await blackouts_table(db) == []


async def test_a_taken_slug_is_a_conflict(client, tokens, db):
    await make_blackout(client, tokens["admin"])
    other = await make_blackout(client, tokens["admin"], slug="maintenance")
    before = await blackouts_table(db)
    status, data = await call(client, "POST", BLACKOUTS, tokens["admin"], TOURNAMENT)
    assert (status, data["error"]["code"]) == (409, "conflict")
    path = f"{BLACKOUTS}/{other['blackout']['id']}"
    status, data = await call(client, "PUT", path, tokens["admin"], {"slug": "tournament-night"})
    assert (status, data["error"]["code"]) == (409, "conflict")
    assert await blackouts_table(db) == before


@pytest.mark.parametrize(
    ("body", "details"),
    [
        (
            {**TOURNAMENT, "timezone": "Mars/Olympus"},
            [
                'body.timezone: "Mars/Olympus" is not a known IANA time zone, such as '
                '"Europe/Berlin" or "UTC"'
            ],
        ),
        (
            {**TOURNAMENT, "periods": [NIGHT, {**NIGHT, "end": "24:00"}]},
            ['body.periods[1].end: expected a 24-hour time as "HH:MM"; got "24:00"'],
        ),
        (
            {**TOURNAMENT, "periods": []},
            ["body.periods: expected a non-empty list of periods"],
        ),
        (
            {**TOURNAMENT, "slug": "Tournament Night"},
            [
                "body.slug: expected 1 to 100 lowercase letters and digits in words joined by "
                'single hyphens, such as "friday-muster"'
            ],
        ),
    ],
)
async def test_bad_input_is_a_400_naming_the_field_and_writes_nothing(
    client, tokens, db, body, details
):
    status, data = await call(client, "POST", BLACKOUTS, tokens["admin"], body)
    assert (status, data["error"]["details"]) == (400, details)
    assert await blackouts_table(db) == []


async def test_a_bad_edit_changes_nothing(client, tokens, db):
    made = await make_blackout(client, tokens["admin"])
    before = await blackouts_table(db)
    path = f"{BLACKOUTS}/{made['blackout']['id']}"
    body = {"periods": [{"kind": "range", "start": "2027-03-05T10:00", "end": "2027-03-05"}]}
    status, data = await call(client, "PUT", path, tokens["admin"], body)
    assert (status, data["error"]["details"]) == (
        400,
        [
            'body.periods[0].end: expected a local date and time as "YYYY-MM-DDTHH:MM"; '
            'got "2027-03-05"'
        ],
    )
    assert await blackouts_table(db) == before


async def test_an_event_naming_an_unknown_blackout_is_a_400_naming_it(client, tokens, db):
    await make_blackout(client, tokens["admin"])
    before = await snapshot(db)
    spec = {**spec_with(weekly("friday", at="20:00")), "blackouts": ["tournament-night", "cup"]}
    status, data = await call(client, "POST", EVENTS, tokens["admin"], {"title": "X", "spec": spec})
    assert (status, data["error"]["details"]) == (
        400,
        ['spec.blackouts[1]: no blackout "cup" (GET /api/v1/admin/blackouts lists them)'],
    )
    assert await snapshot(db) == before


# ── the front door, end to end ────────────────────────────────────────────────────────────


async def test_a_blackout_over_a_published_event_shows_on_both_calendars_and_archive_gives_back(
    client, tokens, db
):
    """Make blackouts, subscribe an event, publish, read the calendars; an archive re-marks
    the horizon and says how many moved."""
    maintenance = {"kind": "dates", "start": "2027-03-12"}
    await make_blackout(
        client, tokens["admin"], slug="maintenance", name="Maintenance", periods=[maintenance]
    )
    tournament = (await make_blackout(client, tokens["admin"]))["blackout"]
    friday = weekly("friday", at="20:00")  # 5 and 12 March 2027, 19:00Z
    spec = {**spec_with(friday), "blackouts": ["tournament-night", "maintenance"]}
    event_id = await published_event(client, tokens, spec)
    status, data = await call(
        client, "PUT", f"{EVENTS}/{event_id}", tokens["admin"], {"visibility": "public"}
    )
    assert status == 200, data

    # The first blackout the spec names that covers an occurrence names it.
    items = await calendar(client, tokens["moderator"], event_id)
    assert [(i["scheduled_for"], i["status"], i["blackout"]) for i in items] == [
        ("2027-03-05T19:00:00Z", "blacked_out", "Tournament night"),
        ("2027-03-12T19:00:00Z", "blacked_out", "Tournament night"),
    ]
    window = "from=2027-03-01T00:00:00Z&to=2027-03-13T00:00:00Z"
    status, public = await call(client, "GET", f"/api/v1/public/events?{window}", None)
    assert status == 200, public
    assert [(i["status"], i["blackout"]) for i in public["items"]] == [
        ("blacked_out", "Tournament night"),
        ("blacked_out", "Tournament night"),
    ]

    metrics = await client.get("/metrics", headers={"Authorization": f"Bearer {tokens['admin']}"})
    assert 'pageant_runs{status="blacked_out"} 2.0' in await metrics.text()

    path = f"{BLACKOUTS}/{tournament['id']}/archive"
    status, archived = await call(client, "POST", path, tokens["admin"])
    assert (status, archived["remarked"]) == (200, 1)  # 5 March back; 12 March still held
    items = await calendar(client, tokens["moderator"], event_id)
    assert [(i["status"], i["blackout"]) for i in items] == [
        ("scheduled", None),
        ("blacked_out", "Maintenance"),
    ]
    status, public = await call(client, "GET", f"/api/v1/public/events?{window}", None)
    assert [(i["status"], i["blackout"]) for i in public["items"]] == [
        ("scheduled", None),
        ("blacked_out", "Maintenance"),
    ]


async def test_a_blackout_added_later_remarks_the_horizon_and_counts(client, tokens):
    await make_blackout(client, tokens["admin"], periods=[{"kind": "dates", "start": "2026-01-01"}])
    spec = {**spec_with(weekly("friday", at="20:00")), "blackouts": ["tournament-night"]}
    event_id = await published_event(client, tokens, spec)
    items = await calendar(client, tokens["admin"], event_id)
    assert [i["status"] for i in items] == ["scheduled", "scheduled"]

    status, listed = await call(client, "GET", BLACKOUTS, tokens["admin"])
    path = f"{BLACKOUTS}/{listed['items'][0]['id']}"
    status, edited = await call(client, "PUT", path, tokens["admin"], {"periods": [NIGHT]})
    assert (status, edited["remarked"]) == (200, 2)
    items = await calendar(client, tokens["admin"], event_id)
    assert [(i["status"], i["blackout"]) for i in items] == [
        ("blacked_out", "Tournament night"),
        ("blacked_out", "Tournament night"),
    ]
    # Renamed: the marks carry the new name, and nothing moved.
    status, edited = await call(client, "PUT", path, tokens["admin"], {"name": "Cup night"})
    assert (status, edited["remarked"]) == (200, 0)
    items = await calendar(client, tokens["admin"], event_id)
    assert {i["blackout"] for i in items} == {"Cup night"}


async def test_a_republish_at_another_time_withdraws_the_old_marks(client, tokens):
    await make_blackout(client, tokens["admin"])
    spec = {**spec_with(weekly("friday", at="20:00")), "blackouts": ["tournament-night"]}
    event_id = await published_event(client, tokens, spec)
    status, data = await call(
        client, "PUT", f"{EVENTS}/{event_id}", tokens["admin"], {"visibility": "public"}
    )
    assert status == 200, data
    later = {**spec_with(weekly("friday", at="23:00")), "blackouts": ["tournament-night"]}
    status, data = await call(
        client, "PUT", f"{EVENTS}/{event_id}", tokens["admin"], {"spec": later}
    )
    assert status == 200, data
    status, data = await call(client, "POST", f"{EVENTS}/{event_id}/publish", tokens["admin"])
    assert status == 200, data

    items = await calendar(client, tokens["admin"], event_id)
    assert [(i["scheduled_for"][:16], i["status"], i["blackout"]) for i in items] == [
        ("2027-03-05T19:00", "cancelled", None),  # withdrawn: superseded
        ("2027-03-05T22:00", "scheduled", None),  # 23:00 is the period's end: it runs
        ("2027-03-12T19:00", "cancelled", None),
        ("2027-03-12T22:00", "scheduled", None),
    ]
    window = "from=2027-03-01T00:00:00Z&to=2027-03-13T00:00:00Z"
    status, public = await call(client, "GET", f"/api/v1/public/events?{window}", None)
    assert [(i["scheduled_for"][:16], i["status"]) for i in public["items"]] == [
        ("2027-03-05T22:00", "scheduled"),
        ("2027-03-12T22:00", "scheduled"),
    ]


async def test_changing_the_slug_unsubscribes_the_events_that_name_the_old_one(client, tokens):
    made = await make_blackout(client, tokens["admin"])
    spec = {**spec_with(weekly("friday", at="20:00")), "blackouts": ["tournament-night"]}
    event_id = await published_event(client, tokens, spec)
    assert {i["status"] for i in await calendar(client, tokens["admin"], event_id)} == {
        "blacked_out"
    }
    path = f"{BLACKOUTS}/{made['blackout']['id']}"
    status, edited = await call(client, "PUT", path, tokens["admin"], {"slug": "cup-night"})
    assert (status, edited["remarked"]) == (200, 2)
    assert {i["status"] for i in await calendar(client, tokens["admin"], event_id)} == {"scheduled"}
    status, data = await call(
        client, "PUT", f"{EVENTS}/{event_id}", tokens["admin"], {"spec": spec}
    )
    assert (status, data["error"]["details"]) == (
        400,
        [
            'spec.blackouts[0]: no blackout "tournament-night" '
            "(GET /api/v1/admin/blackouts lists them)"
        ],
    )
