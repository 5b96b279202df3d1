"""The admin calendar and each event's next occurrence: materialised rows inside the horizon,
projections past it from the same arithmetic, never one occurrence twice; and the window's
rules, each bound on both halves. Through the real app on both dialects."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import pytest

from pageant.api.routes.calendar import CalendarItem
from pageant.engine import Engine
from pageant.schedules import calendar
from pageant.support.timefmt import iso
from tests.api.test_events_api import EVENTS, call, create
from tests.conftest import bearer
from tests.schedules.test_schedule_lifecycle import edit, publish, scheduled_event
from tests.scheduling import monthly, ready_event, runs_of, spec_with, utc, weekly

CALENDAR = "/api/v1/admin/calendar"
NOW = utc(2027, 3, 1, 12)


@pytest.fixture
async def ticking(host: Any) -> Any:
    engine = Engine(host)
    try:
        yield engine
    finally:
        await engine.stop()


async def window(
    client: Any, token: str, start: Any = NOW, end: Any = None, **more: Any
) -> tuple[int, Any]:
    end = end if end is not None else start + timedelta(days=30)
    query = {
        "from": start if isinstance(start, str) else iso(start),
        "to": end if isinstance(end, str) else iso(end),
        **more,
    }
    response = await client.get(f"{CALENDAR}?{urlencode(query)}", headers=bearer(token))
    return response.status, await response.json()


async def items(client: Any, tokens: dict[str, str], **kw: Any) -> list[dict[str, Any]]:
    status, data = await window(client, tokens["moderator"], **kw)
    assert status == 200, data
    for item in data["items"]:
        CalendarItem.model_validate(item)
        assert set(item) == set(CalendarItem.model_fields)
    return data["items"]


# ── a year ahead ──────────────────────────────────────────────────────────────


async def test_a_year_ahead_is_materialised_inside_the_horizon_and_projected_beyond(
    client, tokens, ticking, db
):
    event_id = await scheduled_event(client, tokens, weekly("friday", at="20:00"))
    await ticking.tick()
    found = await items(client, tokens, end=NOW + timedelta(days=365))

    assert len(found) == 52  # Friday 5 March 2027 to Friday 25 February 2028
    assert Counter(i["local_time"][:10] for i in found).most_common(1)[0][1] == 1
    assert [i["kind"] for i in found[:3]] == ["materialised", "materialised", "projected"]
    assert {i["kind"] for i in found[2:]} == {"projected"}
    runs = await runs_of(db, event_id)
    assert [(i["run_id"], i["status"]) for i in found[:2]] == [(r.id, "scheduled") for r in runs]
    assert {(i["run_id"], i["status"]) for i in found[2:]} == {(None, None)}
    assert {i["timezone"] for i in found} == {"Europe/Berlin"}
    assert [i["scheduled_for"] for i in found] == sorted(i["scheduled_for"] for i in found)

    at = {i["local_time"][:10]: i for i in found}
    assert at["2027-03-05"]["local_time"] == "2027-03-05T20:00:00+01:00"
    assert at["2027-03-26"]["scheduled_for"] == "2027-03-26T19:00:00Z"
    assert at["2027-04-02"]["local_time"] == "2027-04-02T20:00:00+02:00"
    assert at["2027-04-02"]["scheduled_for"] == "2027-04-02T18:00:00Z"
    assert at["2027-10-29"]["local_time"] == "2027-10-29T20:00:00+02:00"
    assert at["2027-11-05"]["local_time"] == "2027-11-05T20:00:00+01:00"
    assert at["2027-11-05"]["scheduled_for"] == "2027-11-05T19:00:00Z"
    assert {i["local_time"][11:19] for i in found} == {"20:00:00"}
    assert {i["dst_adjusted"] is None for i in found} == {True}


async def test_a_gap_shifted_occurrence_shows_its_adjustment_materialised_and_projected(
    client, tokens, ticking, clock
):
    clock.set(utc(2027, 3, 20, 12))
    await scheduled_event(client, tokens, weekly("sunday", at="02:30"))
    await ticking.tick()
    found = await items(client, tokens, start=clock.now(), end=clock.now() + timedelta(days=400))
    gaps = [i for i in found if i["dst_adjusted"]]
    assert [(i["kind"], i["local_time"], i["dst_adjusted"]) for i in gaps] == [
        ("materialised", "2027-03-28T03:00:00+02:00", {"kind": "gap", "shift_minutes": 30}),
        ("projected", "2027-10-31T02:30:00+02:00", {"kind": "fold", "shift_minutes": 0}),
        ("projected", "2028-03-26T03:00:00+02:00", {"kind": "gap", "shift_minutes": 30}),
    ]


async def test_a_cancelled_occurrence_shows_once_as_its_cancelled_row(client, tokens, ticking, db):
    event_id = await scheduled_event(client, tokens, weekly("friday", at="20:00"))
    first, _ = await runs_of(db, event_id)
    status, _ = await call(
        client, "POST", f"/api/v1/admin/runs/{first.id}/cancel", tokens["admin"], {"reason": "x"}
    )
    assert status == 200
    await ticking.tick()
    found = await items(client, tokens, end=NOW + timedelta(days=7))
    assert [(i["kind"], i["run_id"], i["status"]) for i in found] == [
        ("materialised", first.id, "cancelled")
    ]


async def test_an_event_no_engine_has_expanded_yet_is_projected_from_now(client, tokens, db):
    event = await ready_event(db, NOW, weekly("friday", at="20:00"))
    found = await items(client, tokens, end=NOW + timedelta(days=14))
    assert [(i["definition_id"], i["kind"], i["scheduled_for"]) for i in found] == [
        (event.id, "projected", "2027-03-05T19:00:00Z"),
        (event.id, "projected", "2027-03-12T19:00:00Z"),
    ]


async def test_a_window_in_the_past_shows_only_what_happened(client, tokens, ticking, clock, db):
    event_id = await scheduled_event(client, tokens, weekly("friday", at="20:00"))
    clock.advance(timedelta(days=20).total_seconds())
    await ticking.tick()  # the two Fridays passed with nobody running them: missed
    found = await items(
        client, tokens, start=NOW - timedelta(days=30), end=NOW + timedelta(days=14)
    )
    assert [(i["kind"], i["status"]) for i in found] == [("materialised", "missed")] * 2
    assert {i["definition_id"] for i in found} == {event_id}


async def test_draft_and_archived_events_do_not_project(client, tokens, ticking, db):
    draft = await create(
        client, tokens["admin"], title="Draft", spec=spec_with(weekly("monday", at="20:00"))
    )
    archived = await scheduled_event(client, tokens, weekly("tuesday", at="20:00"))
    status, _ = await call(client, "POST", f"{EVENTS}/{archived}/archive", tokens["admin"])
    assert status == 200
    await ticking.tick()
    found = await items(client, tokens, end=NOW + timedelta(days=60))
    assert draft["id"] not in {i["definition_id"] for i in found}
    assert [(i["definition_id"], i["kind"], i["status"]) for i in found] == [
        (archived, "materialised", "cancelled")
    ] * 2


async def test_the_calendar_filters_by_series_and_by_definition(client, tokens, ticking):
    status, series = await call(
        client, "POST", "/api/v1/admin/series", tokens["admin"], {"title": "Winter"}
    )
    assert status == 201
    inside = await scheduled_event(client, tokens, weekly("friday", at="20:00"))
    await edit(client, tokens, inside, series_id=series["id"])
    outside = await scheduled_event(client, tokens, weekly("monday", at="20:00"))
    await ticking.tick()
    everything = {i["definition_id"] for i in await items(client, tokens)}
    assert everything == {inside, outside}
    in_series = await items(client, tokens, series=series["id"])
    assert {i["definition_id"] for i in in_series} == {inside}
    assert {i["kind"] for i in in_series} == {"materialised", "projected"}
    one = await items(client, tokens, definition=outside)
    assert {i["definition_id"] for i in one} == {outside}
    assert await items(client, tokens, series=series["id"], definition=outside) == []


# ── the window's rules ────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("span", "ok"),
    [(timedelta(days=400), True), (timedelta(days=400, microseconds=1), False)],
    ids=["400-days", "400-days-and-a-microsecond"],
)
async def test_a_window_may_be_at_most_400_days(client, tokens, span, ok):
    status, data = await window(client, tokens["editor"], end=NOW + span)
    if ok:
        assert status == 200, data
    else:
        assert status == 400
        assert data["error"]["details"] == [
            "query.to: must be at most 400 days after query.from; "
            "this window is 400 days, 0:00:00.000001"
        ]


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ({"from": iso(NOW), "to": iso(NOW - timedelta(seconds=1))}, ["query.to"]),
        ({"from": iso(NOW), "to": iso(NOW)}, ["query.to"]),
        ({"from": "soon", "to": iso(NOW)}, ["query.from"]),
        ({"from": "2027-03-01T12:00:00", "to": "2027-03-02T12:00:00Z"}, ["query.from"]),
        ({"from": iso(NOW)}, ["query.to"]),
        ({}, ["query.from", "query.to"]),
        ({"from": iso(NOW), "to": iso(NOW + timedelta(days=1)), "series": "abc"}, ["query.series"]),
        (
            {"from": iso(NOW), "to": iso(NOW + timedelta(days=1)), "definition": "0"},
            ["query.definition"],
        ),
        (
            {"from": "x", "to": "y", "series": "-1", "definition": "²"},
            ["query.from", "query.to", "query.series", "query.definition"],
        ),
    ],
    ids=[
        "to-before-from",
        "empty",
        "unparsable",
        "no-offset",
        "no-to",
        "nothing",
        "series",
        "definition",
        "all-at-once",
    ],
)
async def test_a_bad_query_is_a_400_naming_each_parameter(client, tokens, query, named):
    response = await client.get(f"{CALENDAR}?{urlencode(query)}", headers=bearer(tokens["admin"]))
    data = await response.json()
    assert response.status == 400, data
    assert data["error"]["code"] == "invalid"
    assert [d.split(":")[0] for d in data["error"]["details"]] == named


async def test_an_unknown_series_or_definition_is_a_404(client, tokens):
    status, data = await window(client, tokens["admin"], series=999)
    assert (status, data["error"]["message"]) == (404, "no series 999")
    status, data = await window(client, tokens["admin"], definition=999)
    assert (status, data["error"]["message"]) == (404, "no event 999")


@pytest.mark.parametrize(("cap", "ok"), [(4, True), (3, False)])
async def test_a_window_holding_more_than_the_cap_is_refused(
    client, tokens, ticking, monkeypatch, cap, ok
):
    await scheduled_event(client, tokens, weekly("friday", at="20:00"))  # 2 rows, then projected
    await ticking.tick()
    monkeypatch.setattr(calendar, "MAX_ITEMS", cap)
    status, data = await window(client, tokens["admin"], end=NOW + timedelta(days=28))
    if ok:
        assert (status, len(data["items"])) == (200, 4)
    else:
        assert status == 400
        assert data["error"]["details"][0].startswith("query.to: the window holds more than 3")


@pytest.mark.parametrize(
    ("role", "status"),
    [("admin", 200), ("editor", 200), ("moderator", 200), ("game", 403), (None, 401)],
)
async def test_the_calendar_is_for_staff(client, tokens, role, status):
    query = urlencode({"from": iso(NOW), "to": iso(NOW + timedelta(days=1))})
    headers = bearer(tokens[role]) if role else {}
    response = await client.get(f"{CALENDAR}?{query}", headers=headers)
    assert response.status == status


# ── next_occurrence ───────────────────────────────────────────────────────────


async def test_the_events_list_fills_next_occurrence(client, tokens, ticking, db):
    weekly_id = await scheduled_event(client, tokens, weekly("friday", at="20:00"))
    monthly_id = await scheduled_event(client, tokens, monthly(-1, "friday", "20:00"))
    cancelled_id = await scheduled_event(client, tokens, weekly("monday", at="20:00"))
    manual = await create(client, tokens["admin"], title="Manual")
    await publish(client, tokens, manual["id"])
    draft = await create(
        client, tokens["admin"], title="Draft", spec=spec_with(weekly("friday", at="20:00"))
    )
    archived_id = await scheduled_event(client, tokens, weekly("friday", at="20:00"))
    await call(client, "POST", f"{EVENTS}/{archived_id}/archive", tokens["admin"])
    first = (await runs_of(db, cancelled_id))[0]
    await call(
        client, "POST", f"/api/v1/admin/runs/{first.id}/cancel", tokens["admin"], {"reason": "x"}
    )
    await ticking.tick()

    status, data = await call(client, "GET", EVENTS, tokens["moderator"])
    assert status == 200
    upcoming = {e["id"]: e["next_occurrence"] for e in data["items"]}
    assert upcoming == {
        weekly_id: "2027-03-05T19:00:00Z",  # the earliest scheduled run
        monthly_id: "2027-03-26T19:00:00Z",  # past the horizon: projected
        cancelled_id: "2027-03-08T19:00:00Z",  # 1 March 20:00 was cancelled
        manual["id"]: None,
        draft["id"]: None,
        archived_id: None,
    }
    status, one = await call(client, "GET", f"{EVENTS}/{monthly_id}", tokens["moderator"])
    assert one["next_occurrence"] == "2027-03-26T19:00:00Z"


# ── the status and scope filters ─────────────────────────────────────────────


async def test_the_status_and_scope_filters_narrow_to_runs(client, tokens, ticking, db, host):
    from pageant.runs.controls import cancel
    from pageant.runs.create import start_now

    event_id = await scheduled_event(client, tokens, weekly("friday", at="20:00"))
    await ticking.tick()
    scheduled = [r.id for r in await runs_of(db, event_id)]
    await cancel(host, scheduled[0], actor="admin:test", reason="storm")
    scoped, _ = await start_now(host, event_id, scope="north", actor="admin:test")

    every = await items(client, tokens, end=NOW + timedelta(days=60))
    assert {i["kind"] for i in every} == {"materialised", "projected"}
    cancelled = await items(client, tokens, end=NOW + timedelta(days=60), status="cancelled")
    assert [(i["run_id"], i["status"]) for i in cancelled] == [(scheduled[0], "cancelled")]
    both = await items(client, tokens, end=NOW + timedelta(days=60), status="cancelled,scheduled")
    assert [i["run_id"] for i in both] == [scoped, *scheduled]
    north = await items(client, tokens, end=NOW + timedelta(days=60), scope="north")
    assert [(i["run_id"], i["scope"]) for i in north] == [(scoped, "north")]
    # The empty scope keeps the schedule's own occurrences and their projections.
    plain = await items(client, tokens, end=NOW + timedelta(days=60), scope="")
    assert scoped not in {i["run_id"] for i in plain}
    assert {i["kind"] for i in plain} == {"materialised", "projected"}
    # Filtered by event, the status filter still applies.
    only = await items(
        client, tokens, end=NOW + timedelta(days=60), status="cancelled", definition=event_id
    )
    assert [i["run_id"] for i in only] == [scheduled[0]]


async def test_a_bad_status_filter_is_400(client, tokens):
    status, data = await window(client, tokens["admin"], status="asleep")
    assert status == 400
    assert data["error"]["details"][0].startswith("query.status: 'asleep' is not one of")


async def test_the_outline_completed_is_the_calendar_itself(client, tokens, ticking, db, host):
    """What the console reads (every occurrence placed, the shown ones completed) is item for
    item what GET /api/v1/admin/calendar reads, materialised and projected alike."""
    from pageant.runs.create import start_now

    event_id = await scheduled_event(client, tokens, weekly("friday", at="20:00"))
    await ticking.tick()
    await start_now(host, event_id, scope="extra", actor="admin:test")
    end = NOW + timedelta(days=120)
    async with db.connect() as conn:
        whole = await calendar.calendar_items(conn, start=NOW, end=end, now=NOW)
        outline = await calendar.calendar_outline(conn, start=NOW, end=end, now=NOW)
        assert [(i["scheduled_for"], i["run_id"], i["local_time"]) for i in outline] == [
            (i["scheduled_for"], i["run_id"], i["local_time"]) for i in whole
        ]
        assert {i["kind"] for i in outline} == {"materialised", "projected"}
        assert all(i.get("outline") for i in outline if i["kind"] == "materialised")
        assert await calendar.complete(conn, outline, now=NOW) == whole
        some = [outline[0], outline[-1]]
        assert await calendar.complete(conn, some, now=NOW) == [whole[0], whole[-1]]
        assert (
            await calendar.calendar_outline(conn, start=NOW, end=end, now=NOW, definition_ids=[])
            == []
        )
