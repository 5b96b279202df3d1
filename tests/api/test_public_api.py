"""The public calendar and pages: only public, ready events and public series; occurrences
in players' words; the window's bounds on both halves; 404s that say nothing about what
exists; and nothing staff-only in any answer. Through the real app on both dialects, events
made and published through the admin routes, time injected."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import pytest
from sqlalchemy import update

from pageant.api.routes.public import (
    PublicCalendar,
    PublicEvent,
    PublicEventPage,
    PublicOccurrence,
    PublicSeriesEvent,
    PublicSeriesPage,
    PublicSeriesRef,
)
from pageant.db.tables import event_runs
from pageant.engine import Engine
from pageant.support.timefmt import iso
from tests.api.test_events_api import EVENTS, call, create
from tests.conftest import bearer
from tests.schedules.test_schedule_lifecycle import edit, publish
from tests.scheduling import monthly, runs_of, spec_with, utc, weekly

PUBLIC = "/api/v1/public"
CALENDAR = f"{PUBLIC}/events"
ADMIN_CALENDAR = "/api/v1/admin/calendar"
SERIES = "/api/v1/admin/series"
NOW = utc(2027, 3, 1, 12)  # the clock fixture's start, a Monday
FRIDAY = weekly("friday", at="20:00")  # 19:00Z in winter, 18:00Z from 28 March


@pytest.fixture
async def ticking(host: Any) -> Any:
    engine = Engine(host)
    try:
        yield engine
    finally:
        await engine.stop()


async def event(
    client: Any,
    tokens: dict[str, str],
    schedule: dict[str, Any] = FRIDAY,
    *,
    title: str = "Wisp Night",
    visibility: str = "public",
    published: bool = True,
    **fields: Any,
) -> dict[str, Any]:
    """An event made through the admin API (in Berlin), published unless told otherwise."""
    made = await create(
        client,
        tokens["admin"],
        title=title,
        timezone="Europe/Berlin",
        visibility=visibility,
        spec=spec_with(schedule),
        **fields,
    )
    if published:
        await publish(client, tokens, made["id"])
    return made


async def series(client: Any, tokens: dict[str, str], title: str, visibility: str) -> dict:
    status, made = await call(
        client,
        "POST",
        SERIES,
        tokens["admin"],
        {"title": title, "visibility": visibility, "description": f"All about {title}."},
    )
    assert status == 201, made
    return made


async def fetch(client: Any, path: str, token: str | None = None, **query: Any) -> Any:
    """(status, body, headers) of a GET, with no token unless one is given."""
    query = {k: iso(v) if hasattr(v, "tzinfo") else v for k, v in query.items()}
    url = f"{path}?{urlencode(query)}" if query else path
    response = await client.get(url, headers=bearer(token) if token else {})
    return response.status, await response.json(), response.headers


async def occurrences(client: Any, **query: Any) -> list[dict[str, Any]]:
    status, data, headers = await fetch(client, CALENDAR, **query)
    assert status == 200, data
    assert headers["Cache-Control"] == "public, max-age=60"
    PublicCalendar.model_validate(data)
    for item in data["items"]:
        assert set(item) == set(PublicOccurrence.model_fields)
        assert set(item["event"]) == set(PublicEvent.model_fields)
    return data["items"]


def brief(items: list[dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    return [(i["event"]["slug"], i["scheduled_for"], i["kind"], i["status"]) for i in items]


async def page(client: Any, kind: str, slug: str) -> dict[str, Any]:
    status, data, headers = await fetch(client, f"{PUBLIC}/{kind}/{slug}")
    assert status == 200, data
    assert headers["Cache-Control"] == "public, max-age=60"
    return data


# ── the calendar ──────────────────────────────────────────────────────────────


async def test_the_calendar_needs_no_token_and_shows_rows_then_projections(client, tokens, ticking):
    made = await event(client, tokens, description="Lanterns by the lake.")
    await ticking.tick()
    found = await occurrences(client, to=NOW + timedelta(days=40))

    assert found[0] == {
        "event": {
            "slug": "wisp-night",
            "title": "Wisp Night",
            "description": "Lanterns by the lake.",
            "timezone": "Europe/Berlin",
            "series": None,
        },
        "scheduled_for": "2027-03-05T19:00:00Z",
        "local_time": "2027-03-05T20:00:00+01:00",
        "status": "scheduled",
        "kind": "materialised",
        "params": {},
        "blackout": None,
        "requires": None,
    }
    # Inside the 14-day horizon rows, past it forecasts; summer time moves the instant only.
    assert [(i["local_time"], i["kind"], i["status"]) for i in found] == [
        ("2027-03-05T20:00:00+01:00", "materialised", "scheduled"),
        ("2027-03-12T20:00:00+01:00", "materialised", "scheduled"),
        ("2027-03-19T20:00:00+01:00", "projected", "scheduled"),
        ("2027-03-26T20:00:00+01:00", "projected", "scheduled"),
        ("2027-04-02T20:00:00+02:00", "projected", "scheduled"),
        ("2027-04-09T20:00:00+02:00", "projected", "scheduled"),
    ]
    assert found[-1]["scheduled_for"] == "2027-04-09T18:00:00Z"
    assert {i["event"]["slug"] for i in found} == {made["slug"]}


async def test_staff_draft_and_archived_events_are_never_shown(client, tokens, ticking):
    await event(client, tokens, title="Shown")
    await event(client, tokens, title="Staff Muster", visibility="staff")
    await event(client, tokens, title="Draft Muster", published=False)
    archived = await event(client, tokens, title="Archived Muster")
    status, _ = await call(client, "POST", f"{EVENTS}/{archived['id']}/archive", tokens["admin"])
    assert status == 200
    manual = await event(client, tokens, {"kind": "manual"}, title="Manual Muster")
    await ticking.tick()

    found = await occurrences(client, **{"from": NOW - timedelta(days=1)})
    assert {i["event"]["slug"] for i in found} == {"shown"}
    # The manual event is public and ready: it has a page, but nothing on the calendar.
    assert (await page(client, "events", manual["slug"]))["upcoming"] == []


async def test_a_cancelled_occurrence_is_shown_as_cancelled(client, tokens, ticking, db):
    made = await event(client, tokens)
    first, _ = await runs_of(db, made["id"])
    status, _ = await call(
        client,
        "POST",
        f"/api/v1/admin/runs/{first.id}/cancel",
        tokens["moderator"],
        {"reason": "the shard is down"},
    )
    assert status == 200
    await ticking.tick()

    found = await occurrences(client, to=NOW + timedelta(days=14))
    assert [(i["scheduled_for"], i["kind"], i["status"]) for i in found] == [
        ("2027-03-05T19:00:00Z", "materialised", "cancelled"),
        ("2027-03-12T19:00:00Z", "materialised", "scheduled"),
    ]
    shown = await page(client, "events", made["slug"])
    assert shown["next_occurrence"] == "2027-03-12T19:00:00Z"
    assert [(i["scheduled_for"], i["status"]) for i in shown["upcoming"][:2]] == [
        ("2027-03-05T19:00:00Z", "cancelled"),
        ("2027-03-12T19:00:00Z", "scheduled"),
    ]


async def test_a_rescheduled_occurrence_is_moved_not_shown_as_cancelled(
    client, tokens, ticking, db
):
    made = await event(client, tokens)
    await edit(client, tokens, made["id"], spec=spec_with(weekly("friday", at="21:00")))
    await publish(client, tokens, made["id"], reason="an hour later from now on")
    await ticking.tick()

    # Staff see the superseded rows; players see the event at its new time only.
    status, admin = await call(
        client,
        "GET",
        f"{ADMIN_CALENDAR}?{urlencode({'from': iso(NOW), 'to': iso(NOW + timedelta(days=14))})}",
        tokens["admin"],
    )
    assert status == 200
    assert [i["status"] for i in admin["items"]] == ["cancelled", "scheduled"] * 2
    found = await occurrences(client, to=NOW + timedelta(days=14))
    assert [(i["local_time"], i["status"]) for i in found] == [
        ("2027-03-05T21:00:00+01:00", "scheduled"),
        ("2027-03-12T21:00:00+01:00", "scheduled"),
    ]


async def test_a_persons_cancel_reading_superseded_is_still_shown(client, tokens, db):
    made = await event(client, tokens)
    first, _ = await runs_of(db, made["id"])
    status, _ = await call(
        client,
        "POST",
        f"/api/v1/admin/runs/{first.id}/cancel",
        tokens["moderator"],
        {"reason": "superseded"},
    )
    assert status == 200
    found = await occurrences(client, to=NOW + timedelta(days=7))
    assert [(i["scheduled_for"], i["status"]) for i in found] == [
        ("2027-03-05T19:00:00Z", "cancelled")
    ]


@pytest.mark.parametrize(
    ("run_status", "told"),
    [
        ("scheduled", "scheduled"),
        ("starting", "running"),
        ("running", "running"),
        ("paused", "running"),
        ("ending", "running"),
        ("completed", "completed"),
        ("failed", "cancelled"),
        ("cancelled", "cancelled"),
        ("missed", "missed"),
        ("skipped", "cancelled"),
    ],
)
async def test_every_run_status_is_told_in_players_words(client, tokens, db, run_status, told):
    made = await event(client, tokens)
    first, _ = await runs_of(db, made["id"])
    async with db.begin() as conn:
        await conn.execute(
            update(event_runs).where(event_runs.c.id == first.id).values(status=run_status)
        )
    found = await occurrences(client, to=NOW + timedelta(days=7))
    assert [(i["kind"], i["status"]) for i in found] == [("materialised", told)]


async def test_a_past_window_shows_what_happened(client, tokens, ticking, clock):
    await event(client, tokens)
    clock.advance(timedelta(days=20).total_seconds())
    await ticking.tick()  # nobody ran the two Fridays inside the horizon: missed
    found = await occurrences(client, **{"from": NOW, "to": NOW + timedelta(days=14)})
    assert [(i["kind"], i["status"]) for i in found] == [("materialised", "missed")] * 2


# ── the window ────────────────────────────────────────────────────────────────

OCCURRENCE = utc(2027, 3, 26, 19)  # Friday 26 March, 20:00 in Berlin
TICK = timedelta(microseconds=1)


@pytest.mark.parametrize(
    ("now", "first", "last"),
    [
        # to defaults to now + 30 days, exclusive: an occurrence exactly there is outside...
        (OCCURRENCE - timedelta(days=30), "2027-02-26T19:00:00Z", "2027-03-19T19:00:00Z"),
        # ...and a microsecond later it is inside.
        (OCCURRENCE - timedelta(days=30) + TICK, "2027-02-26T19:00:00Z", "2027-03-26T19:00:00Z"),
        # from defaults to now, inclusive: an occurrence at now is inside...
        (OCCURRENCE, "2027-03-26T19:00:00Z", "2027-04-23T18:00:00Z"),
        # ...and a microsecond after it, outside.
        (OCCURRENCE + TICK, "2027-04-02T18:00:00Z", "2027-04-23T18:00:00Z"),
    ],
    ids=["to-at-occurrence", "to-past-occurrence", "from-at-occurrence", "from-past-occurrence"],
)
async def test_the_default_window_is_now_for_thirty_days(client, tokens, clock, now, first, last):
    clock.set(now)
    await event(client, tokens)
    found = await occurrences(client)
    assert (found[0]["scheduled_for"], found[-1]["scheduled_for"]) == (first, last)


@pytest.mark.parametrize(
    ("query", "shown"),
    [
        ({"from": OCCURRENCE, "to": OCCURRENCE + timedelta(days=1)}, True),
        ({"from": OCCURRENCE + TICK, "to": OCCURRENCE + timedelta(days=1)}, False),
        ({"from": OCCURRENCE - timedelta(days=1), "to": OCCURRENCE}, False),
        ({"from": OCCURRENCE - timedelta(days=1), "to": OCCURRENCE + TICK}, True),
    ],
    ids=["from-at", "from-after", "to-at", "to-after"],
)
async def test_a_window_holds_from_and_not_to(client, tokens, query, shown):
    await event(client, tokens)
    found = await occurrences(client, **query)
    assert [i["scheduled_for"] for i in found] == (["2027-03-26T19:00:00Z"] if shown else [])


async def test_from_alone_looks_thirty_days_ahead_of_it(client, tokens):
    await event(client, tokens)
    found = await occurrences(client, **{"from": "2027-04-01T00:00:00+02:00"})
    # 31 March 22:00Z + 30 days = 30 April 22:00Z: five Fridays, all forecasts.
    assert [(i["local_time"][:10], i["kind"]) for i in found] == [
        (f"2027-04-{day:02}", "projected") for day in (2, 9, 16, 23, 30)
    ]


@pytest.mark.parametrize(
    ("span", "ok"),
    [(timedelta(days=400), True), (timedelta(days=400) + TICK, False)],
    ids=["400-days", "400-days-and-a-microsecond"],
)
async def test_a_window_may_be_at_most_400_days(client, tokens, span, ok):
    await event(client, tokens)
    status, data, _ = await fetch(client, CALENDAR, **{"from": NOW, "to": NOW + span})
    if ok:
        assert status == 200, data
        assert len(data["items"]) == 57  # every Friday from 5 March 2027 to 31 March 2028
    else:
        assert status == 400
        assert data["error"]["details"] == [
            "query.to: must be at most 400 days after query.from; "
            "this window is 400 days, 0:00:00.000001"
        ]


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ({"to": iso(NOW)}, ["query.to"]),  # from is now: to must come after it
        ({"to": iso(NOW + timedelta(days=401))}, ["query.to"]),
        ({"from": iso(NOW), "to": iso(NOW - TICK)}, ["query.to"]),
        ({"from": "2027-03-01T12:00:00"}, ["query.from"]),
        ({"from": "soon", "to": "later"}, ["query.from", "query.to"]),
    ],
    ids=["to-is-now", "to-too-far", "to-before-from", "no-offset", "unparsable"],
)
async def test_a_bad_window_is_a_400_worded_as_the_staff_calendar_words_it(
    client, tokens, query, named
):
    status, data, headers = await fetch(client, CALENDAR, **query)
    assert status == 400, data
    assert data["error"]["code"] == "invalid"
    assert [d.split(":")[0] for d in data["error"]["details"]] == named
    assert "Cache-Control" not in headers
    if "from" in query and "to" in query:
        staff = f"{ADMIN_CALENDAR}?{urlencode(query)}"
        _, admin = await call(client, "GET", staff, tokens["moderator"])
        assert admin["error"]["details"] == data["error"]["details"]


# ── series ────────────────────────────────────────────────────────────────────


async def test_the_calendar_filters_by_public_series(client, tokens):
    winter = await series(client, tokens, "Winter Invasion", "public")
    inside = await event(client, tokens, title="Frost Muster", series_id=winter["id"])
    await event(client, tokens, title="Staff Frost", visibility="staff", series_id=winter["id"])
    await event(client, tokens, weekly("monday", at="20:00"), title="Elsewhere")

    everything = await occurrences(client, to=NOW + timedelta(days=14))
    assert {i["event"]["slug"] for i in everything} == {"frost-muster", "elsewhere"}
    found = await occurrences(client, to=NOW + timedelta(days=14), series=winter["slug"])
    assert brief(found) == [
        ("frost-muster", "2027-03-05T19:00:00Z", "materialised", "scheduled"),
        ("frost-muster", "2027-03-12T19:00:00Z", "materialised", "scheduled"),
    ]
    assert found[0]["event"]["series"] == {"slug": "winter-invasion", "title": "Winter Invasion"}
    assert inside["slug"] == "frost-muster"


async def test_a_staff_series_is_a_404_like_an_unknown_one_and_hidden_on_its_events(client, tokens):
    arc = await series(client, tokens, "Hidden Arc", "staff")
    await event(client, tokens, title="Lakeside", series_id=arc["id"])
    answers = {}
    for slug in ("hidden-arc", "no-such-arc"):
        status, data, headers = await fetch(client, CALENDAR, series=slug)
        answers[slug] = (status, data, "Cache-Control" in headers)
        status, data, headers = await fetch(client, f"{PUBLIC}/series/{slug}")
        answers[slug + "/page"] = (status, data, "Cache-Control" in headers)
    for slug in ("hidden-arc", "no-such-arc"):
        for key in (slug, slug + "/page"):
            assert answers[key] == (
                404,
                {"error": {"code": "not_found", "message": f"no series {slug!r}", "details": []}},
                False,
            )
    # The public event of a staff series is shown, with no series.
    found = await occurrences(client, to=NOW + timedelta(days=7))
    assert [i["event"]["series"] for i in found] == [None]
    assert (await page(client, "events", "lakeside"))["series"] is None


async def test_a_series_page_lists_its_public_events_and_what_comes_next(client, tokens, ticking):
    winter = await series(client, tokens, "Winter Invasion", "public")
    in_winter = {"series_id": winter["id"]}
    await event(client, tokens, monthly(-1, "friday", "20:00"), title="Siege", **in_winter)
    await event(client, tokens, weekly("tuesday", at="19:00"), title="Patrol", **in_winter)
    await event(client, tokens, {"kind": "manual"}, title="Parley", **in_winter)
    await event(client, tokens, title="Staff Only", visibility="staff", **in_winter)
    await event(client, tokens, title="Unpublished", published=False, **in_winter)
    await event(client, tokens, title="Elsewhere")
    await ticking.tick()

    shown = await page(client, "series", "winter-invasion")
    PublicSeriesPage.model_validate(shown)
    assert set(shown) == set(PublicSeriesPage.model_fields)
    assert (shown["slug"], shown["title"], shown["description"]) == (
        "winter-invasion",
        "Winter Invasion",
        "All about Winter Invasion.",
    )
    # Soonest first; an event with nothing ahead last.
    assert [(e["slug"], e["next_occurrence"]) for e in shown["events"]] == [
        ("patrol", "2027-03-02T18:00:00Z"),
        ("siege", "2027-03-26T19:00:00Z"),  # past the horizon: projected
        ("parley", None),
    ]
    for listed in shown["events"]:
        assert set(listed) == set(PublicSeriesEvent.model_fields)
        assert listed["series"] == {"slug": "winter-invasion", "title": "Winter Invasion"}
    assert [(i["event"]["slug"], i["local_time"][:10]) for i in shown["upcoming"]] == [
        ("patrol", "2027-03-02"),
        ("patrol", "2027-03-09"),
        ("patrol", "2027-03-16"),
        ("patrol", "2027-03-23"),
        ("siege", "2027-03-26"),
        ("patrol", "2027-03-30"),
        ("patrol", "2027-04-06"),
        ("patrol", "2027-04-13"),
        ("patrol", "2027-04-20"),
        ("patrol", "2027-04-27"),
    ]


# ── an event's page ───────────────────────────────────────────────────────────


async def test_an_event_page_shows_its_next_ten_occurrences(client, tokens, ticking):
    winter = await series(client, tokens, "Winter Invasion", "public")
    await event(
        client,
        tokens,
        monthly(-1, "friday", "20:00"),
        title="Siege",
        description="The walls hold.",
        series_id=winter["id"],
    )
    await ticking.tick()
    shown = await page(client, "events", "siege")
    PublicEventPage.model_validate(shown)
    assert {k: v for k, v in shown.items() if k != "upcoming"} == {
        "slug": "siege",
        "title": "Siege",
        "description": "The walls hold.",
        "timezone": "Europe/Berlin",
        "series": {"slug": "winter-invasion", "title": "Winter Invasion"},
        "next_occurrence": "2027-03-26T19:00:00Z",
        "last_completed": None,
        "progress": [],
    }
    # Ten last-Fridays reach past a month and past the horizon: all forecasts but none skipped.
    assert [(i["local_time"], i["kind"]) for i in shown["upcoming"]] == [
        (f"2027-{month}T20:00:00{offset}", "projected")
        for month, offset in [
            ("03-26", "+01:00"),
            ("04-30", "+02:00"),
            ("05-28", "+02:00"),
            ("06-25", "+02:00"),
            ("07-30", "+02:00"),
            ("08-27", "+02:00"),
            ("09-24", "+02:00"),
            ("10-29", "+02:00"),
            ("11-26", "+01:00"),
            ("12-31", "+01:00"),
        ]
    ]
    assert set(PublicSeriesRef.model_fields) == set(shown["series"])


async def test_a_page_shows_the_published_zone_not_an_unpublished_edit(client, tokens):
    made = await event(client, tokens)
    await edit(client, tokens, made["id"], timezone="Asia/Tokyo", title="Wisp Night II")
    shown = await page(client, "events", made["slug"])
    # The title is live; the zone the schedule runs in changes only with a publish.
    assert (shown["title"], shown["timezone"]) == ("Wisp Night II", "Europe/Berlin")
    assert shown["upcoming"][0]["local_time"] == "2027-03-05T20:00:00+01:00"


async def test_a_hidden_event_is_a_404_exactly_like_an_unknown_slug(client, tokens):
    await event(client, tokens, title="Staff Muster", visibility="staff")
    await event(client, tokens, title="Draft Muster", published=False)
    archived = await event(client, tokens, title="Archived Muster")
    await call(client, "POST", f"{EVENTS}/{archived['id']}/archive", tokens["admin"])

    answers = []
    for slug in ("staff-muster", "draft-muster", "archived-muster", "no-such-muster"):
        response = await client.get(f"{PUBLIC}/events/{slug}")
        body = (await response.text()).replace(slug, "SLUG")
        answers.append((response.status, body, sorted(set(response.headers) - {"Date"})))
    assert answers[0][0] == 404
    assert json.loads(answers[0][1]) == {
        "error": {"code": "not_found", "message": "no event 'SLUG'", "details": []}
    }
    assert "Cache-Control" not in answers[0][2]
    assert answers == [answers[0]] * 4


# ── no token; nothing staff-only ───────────────────────────────────────────────


async def test_every_public_route_answers_without_a_token_and_is_cacheable(client, tokens):
    winter = await series(client, tokens, "Winter Invasion", "public")
    await event(client, tokens, series_id=winter["id"])
    for path in (CALENDAR, f"{PUBLIC}/events/wisp-night", f"{PUBLIC}/series/winter-invasion"):
        status, anonymous, headers = await fetch(client, path)
        assert (status, headers["Cache-Control"]) == (200, "public, max-age=60"), path
        # A staff token sees the same answer: nothing more is shown to staff here.
        status, as_staff, _ = await fetch(client, path, tokens["admin"])
        assert (status, as_staff) == (200, anonymous)


HOUR_LONG = {
    "key": "main",
    "label": "Main",
    "steps": [{"action": "core.wait", "params": {"seconds": 3600}}],
}
SECRETS = (
    "Secret Staff Muster",  # a staff event's title
    "staff-only notes",  # and its description
    "Hidden Arc",  # a staff series' title
    "All about Hidden Arc",  # and its description
    "secret-key",  # concurrency keys
    "the shard is down",  # a cancel's reason
    "test-moderator",  # actor names
    "admin:",
    "grace window",  # a missed run's last_error
    "core.announce",  # the spec
    "core.wait",
    "north",  # a run's scope
)
#: Every key a public answer may hold, at any depth.
ALLOWED_KEYS = (
    set(PublicCalendar.model_fields)
    | set(PublicOccurrence.model_fields)
    | set(PublicEventPage.model_fields)
    | set(PublicSeriesPage.model_fields)
    | set(PublicSeriesEvent.model_fields)
    | set(PublicSeriesRef.model_fields)
)


def keys_of(node: Any) -> set[str]:
    if isinstance(node, dict):
        return set(node) | {k for value in node.values() for k in keys_of(value)}
    if isinstance(node, list):
        return {k for value in node for k in keys_of(value)}
    return set()


async def test_staff_data_never_reaches_a_public_answer(client, tokens, ticking, clock, db):
    hidden = await series(client, tokens, "Hidden Arc", "staff")
    shown = await series(client, tokens, "Winter Invasion", "public")
    await event(
        client,
        tokens,
        title="Secret Staff Muster",
        description="staff-only notes",
        visibility="staff",
        series_id=shown["id"],
        concurrency_key="secret-key-1",
    )
    lake = await event(
        client, tokens, title="Lakeside", series_id=hidden["id"], concurrency_key="secret-key-2"
    )
    frost = await create(
        client,
        tokens["admin"],
        title="Frost",
        timezone="Europe/Berlin",
        visibility="public",
        series_id=shown["id"],
        concurrency_key="secret-key-3",
        spec=spec_with(weekly("monday", at="20:00"), HOUR_LONG),
    )
    await publish(client, tokens, frost["id"])
    first, _ = await runs_of(db, lake["id"])
    status, _ = await call(
        client,
        "POST",
        f"/api/v1/admin/runs/{first.id}/cancel",
        tokens["moderator"],
        {"reason": "the shard is down"},
    )
    assert status == 200
    clock.advance(timedelta(days=8).total_seconds())
    await ticking.tick()  # Frost's first two Mondays were never run: missed, with a last_error
    missed = [r for r in await runs_of(db, frost["id"]) if r.status == "missed"]
    assert len(missed) == 2 and all("grace window" in r.last_error for r in missed)
    status, _ = await call(
        client, "POST", f"{EVENTS}/{frost['id']}/runs", tokens["admin"], {"scope": "north"}
    )
    assert status == 201
    await ticking.tick()  # the hand start is under way, in its hour-long wait

    year = {"from": iso(NOW - timedelta(days=30)), "to": iso(NOW + timedelta(days=365))}
    paths = [
        f"{CALENDAR}?{urlencode(year)}",
        f"{CALENDAR}?series=winter-invasion",
        f"{PUBLIC}/events/lakeside",
        f"{PUBLIC}/events/frost",
        f"{PUBLIC}/series/winter-invasion",
    ]
    seen_statuses = set()
    for path in paths:
        response = await client.get(path)
        text = await response.text()
        assert response.status == 200, (path, text)
        for secret in SECRETS:
            assert secret not in text, (path, secret)
        data = await response.json()
        assert keys_of(data) <= ALLOWED_KEYS, (path, keys_of(data) - ALLOWED_KEYS)
        seen_statuses |= {i["status"] for i in data.get("items", [])}
    # The calendar did show the rows those secrets belong to, in players' words.
    assert seen_statuses == {"scheduled", "running", "cancelled", "missed"}
    response = await client.get(f"{PUBLIC}/events/secret-staff-muster")
    assert response.status == 404
    assert "Secret Staff Muster" not in await response.text()


async def test_the_public_routes_are_documented_without_a_token(client):
    response = await client.get("/api/v1/openapi.json")
    doc = await response.json()
    for path, model in (
        ("/api/v1/public/events", PublicCalendar),
        ("/api/v1/public/events/{slug}", PublicEventPage),
        ("/api/v1/public/series/{slug}", PublicSeriesPage),
    ):
        operation = doc["paths"][path]["get"]
        assert "security" not in operation, path
        schema = operation["responses"]["200"]["content"]["application/json"]["schema"]
        assert set(schema["properties"]) == set(model.model_fields), path
    query = {p["name"] for p in doc["paths"]["/api/v1/public/events"]["get"]["parameters"]}
    assert query == {"from", "to", "series"}
