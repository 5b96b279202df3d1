"""Stagger: a fan-out's runs spread over a window, each param set at an offset taken from a
hash of its scope: inside the window, the same every week, after a re-expansion and on
another host; the calendar's forecasts agree; bad values are a 400 naming the field."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

import pytest

from pageant.engine import Engine
from pageant.hosting import Host
from pageant.schedules import stagger
from tests.api.test_events_api import EVENTS, call, create, snapshot
from tests.scheduling import MAIN, runs_of, utc

SERVER = {"name": "colour", "type": "string", "label": "Server", "required": True}
SETS = [{"colour": "eu-1"}, {"colour": "eu-2"}, {"colour": "na-1"}, {"colour": "sa-1"}]


def fan_out(stagger_value: Any = "10m", sets: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    schedule: dict[str, Any] = {
        "kind": "weekly",
        "days": ["friday"],
        "time": "20:00",
        "params": SETS if sets is None else sets,
    }
    if stagger_value is not None:
        schedule["stagger"] = stagger_value
    return {"params": [SERVER], "schedule": schedule, "phases": [MAIN]}


async def published(client: Any, tokens: dict[str, str], spec: dict[str, Any]) -> int:
    event = await create(
        client, tokens["admin"], title="Frenzy", timezone="Europe/Berlin", spec=spec
    )
    status, data = await call(client, "POST", f"{EVENTS}/{event['id']}/publish", tokens["admin"])
    assert status == 200, data
    return int(event["id"])


def offsets(rows: list[Any]) -> dict[str, dict[str, timedelta]]:
    """Per occurrence (its slot), each server's offset from the authored instant."""
    found: dict[str, dict[str, timedelta]] = defaultdict(dict)
    for row in rows:
        # Friday 20:00 Berlin is 19:00Z in March (before the 28th).
        authored = datetime.fromisoformat(row.occurrence_local + ":00+01:00")
        found[row.occurrence_local][row.params["colour"]] = row.scheduled_for - authored
    return dict(found)


def test_an_offset_is_a_pure_function_of_the_scope_and_the_window():
    # Fixed numbers: the offset comes from SHA-256 of the scope, never from Python's
    # per-process hash(), the order of the sets or the clock, so every host agrees.
    found = [stagger.offset(f"colour={c}", 600).total_seconds() for c in ("eu-1", "eu-2", "na-1")]
    assert found == [140, 571, 183]
    seconds = {stagger.offset(f"server-{n}", 300).total_seconds() for n in range(200)}
    assert min(seconds) >= 0 and max(seconds) < 300  # inside the window, never at its end
    assert len(seconds) > 100  # spread, not bunched
    assert stagger.offset("anything", 0) == timedelta(0)


@pytest.mark.parametrize(
    ("text", "seconds"), [("1s", 1), ("5m", 300), ("1d", 86_400), ("86400s", 86_400)]
)
def test_a_stagger_window_inside_the_bounds_is_read(text, seconds):
    assert stagger.parse_stagger(text) == seconds


@pytest.mark.parametrize("text", ["0s", "86401s", "2d", "local", "5 m", "1h30m", 300, None])
def test_a_stagger_window_outside_the_bounds_or_grammar_is_not(text):
    assert stagger.parse_stagger(text) is None


async def test_each_set_runs_at_its_own_offset_inside_the_window_every_week(client, tokens, db):
    event_id = await published(client, tokens, fan_out("10m"))
    rows = await runs_of(db, event_id)
    by_week = offsets(rows)
    assert sorted(by_week) == ["2027-03-05T20:00", "2027-03-12T20:00"]
    weeks = list(by_week.values())
    assert weeks[0] == weeks[1]  # the same offsets every week
    assert all(timedelta(0) <= o < timedelta(minutes=10) for o in weeks[0].values())
    assert len(set(weeks[0].values())) > 1  # spread, not all at one instant
    for colour, by in weeks[0].items():
        assert by == stagger.offset(f"colour={colour}", 600)
    assert {r.status for r in rows} == {"scheduled"}


async def test_the_offsets_survive_a_republish_and_another_hosts_expansion(
    client, tokens, db, settings, clock
):
    event_id = await published(client, tokens, fan_out("10m"))
    before = {(r.id, r.scheduled_for, r.status) for r in await runs_of(db, event_id)}
    first_week = next(iter(offsets(await runs_of(db, event_id)).values()))

    # Publishing the same schedule again re-expands it: the same rows, not moved.
    status, data = await call(client, "POST", f"{EVENTS}/{event_id}/publish", tokens["admin"])
    assert status == 200, data
    assert {(r.id, r.scheduled_for, r.status) for r in await runs_of(db, event_id)} == before

    # A week on, another host (a separate process would compute the same) expands the next
    # week: its sets start at the offsets the first host gave them.
    clock.advance(timedelta(days=7).total_seconds())
    other = Host(settings, clock=clock, db=db)
    engine = Engine(other)
    try:
        await engine.tick()
    finally:
        await engine.stop()
        await other.close()
    rows = await runs_of(db, event_id)
    by_week = offsets(rows)
    assert "2027-03-19T20:00" in by_week
    assert by_week["2027-03-19T20:00"] == first_week
    assert {(r.id, r.scheduled_for) for r in rows} >= {(i, at) for i, at, _ in before}


async def test_the_calendar_forecasts_the_offsets_past_the_horizon(client, tokens, clock):
    event_id = await published(client, tokens, fan_out("10m"))
    window = "from=2027-03-01T00:00:00Z&to=2027-03-27T00:00:00Z"
    query = f"/api/v1/admin/calendar?{window}&definition={event_id}"
    status, data = await call(client, "GET", query, tokens["admin"])
    assert status == 200, data
    by_kind: dict[str, dict[str, str]] = defaultdict(dict)
    for item in data["items"]:
        friday = item["scheduled_for"][:10]
        if friday in ("2027-03-12", "2027-03-26"):  # the last row, the first forecast
            by_kind[item["kind"]][item["params"]["colour"]] = item["scheduled_for"][11:]
    assert set(by_kind) == {"materialised", "projected"}
    assert by_kind["materialised"] == by_kind["projected"]


async def test_a_stagger_on_a_schedule_without_a_fan_out_is_refused(client, tokens, db):
    before = await snapshot(db)
    spec = fan_out("10m", sets=[])
    del spec["schedule"]["params"]
    status, data = await call(client, "POST", EVENTS, tokens["admin"], {"title": "X", "spec": spec})
    assert (status, data["error"]["details"]) == (
        400,
        [
            "spec.schedule.stagger: a stagger spreads the runs of a fan-out; this schedule "
            "has no params (spec.schedule.params)"
        ],
    )
    assert await snapshot(db) == before


@pytest.mark.parametrize("value", ["0s", "86401s", "LOCAL", 300])
async def test_a_stagger_outside_the_bounds_is_a_400_naming_it(client, tokens, db, value):
    before = await snapshot(db)
    spec = fan_out(value)
    status, data = await call(client, "POST", EVENTS, tokens["admin"], {"title": "X", "spec": spec})
    assert status == 400
    (detail,) = data["error"]["details"]
    assert detail.startswith('spec.schedule.stagger: expected a duration from "1s" to "1d"')
    assert await snapshot(db) == before


@pytest.mark.parametrize("value", ["1s", "1d"])
async def test_a_stagger_at_either_bound_is_accepted(client, tokens, value):
    event = await create(client, tokens["admin"], title="X", spec=fan_out(value))
    assert event["spec"]["schedule"]["stagger"] == value


async def test_a_day_wide_stagger_still_makes_every_sets_run_inside_the_horizon(
    client, tokens, host, db, clock
):
    # The widest window can carry a set's run a day past the authored instant: each week's
    # expansion still makes every set's run once the horizon reaches it, none twice.
    event_id = await published(client, tokens, fan_out("1d"))
    engine = Engine(host)
    try:
        for _ in range(4):
            clock.advance(timedelta(days=7).total_seconds())
            await engine.tick()
    finally:
        await engine.stop()
    rows = await runs_of(db, event_id)
    horizon = clock.now() + timedelta(days=host.settings.horizon_days)
    per_slot: dict[str, int] = defaultdict(int)
    for row in rows:
        per_slot[row.occurrence_local] += 1
    due = [r for r in rows if r.scheduled_for < horizon]
    assert len(due) == len(rows)
    # Every Friday from 5 March up to the horizon's last full one has all four sets.
    fridays = sorted(per_slot)
    assert fridays[0] == "2027-03-05T20:00" and len(fridays) >= 6
    assert all(per_slot[f] == len(SETS) for f in fridays[:-1]), dict(per_slot)
    assert utc(2027, 3, 5, 19) <= min(r.scheduled_for for r in rows)
