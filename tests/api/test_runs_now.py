"""What is running now: ``GET /api/v1/admin/runs`` across events, its filters, its cursor and
its summary — through the real app, the real engine and the real database."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import insert, update

from pageant.api.app import make_app
from pageant.db.tables import event_definitions, event_series
from pageant.runs.create import start_now
from tests.conftest import bearer
from tests.factories import announce, phase, probe_step, publish_event, set_run, spec, step

RUNS = "/api/v1/admin/runs"


@pytest.fixture
async def api(probe_host, aiohttp_client):
    return await aiohttp_client(make_app(probe_host, run_engine=False))


async def _get(api, token, query=""):
    response = await api.get(f"{RUNS}{query}", headers=bearer(token))
    return response.status, await response.json()


def _cue(message="Spawn the keeper"):
    return step("core.cue", message=message)


async def _floor(probe_host, clock, engine):
    """Three events with a run parked at a cue, one with a run that finished, one with a
    run not yet due. Answers the parked runs' ids, oldest first."""
    host = probe_host
    parked = []
    for title in ("Muster", "Boss rush", "Lantern walk"):
        event = await publish_event(host.db, clock.now(), spec(phase("p", _cue())), title=title)
        run_id, _ = await start_now(host, event.id, scope="", actor="admin:test")
        parked.append(run_id)
    done = await publish_event(host.db, clock.now(), spec(phase("p", announce("hi"))), title="Done")
    await start_now(host, done.id, scope="", actor="admin:test")
    await engine.tick()
    later = await publish_event(host.db, clock.now(), title="Later")
    run_id, _ = await start_now(host, later.id, scope="", actor="admin:test")
    await set_run(host.db, run_id, scheduled_for=clock.now() + timedelta(hours=2))
    return parked


async def test_waiting_parked_lists_exactly_the_runs_waiting_on_a_person(
    api, tokens, probe_host, clock, engine
):
    parked = await _floor(probe_host, clock, engine)

    status, page = await _get(api, tokens["moderator"], "?waiting=parked")

    assert status == 200, page
    assert [item["id"] for item in page["items"]] == parked[::-1]  # newest first
    assert [item["definition_title"] for item in page["items"]] == [
        "Lantern walk",
        "Boss rush",
        "Muster",
    ]
    assert {item["waiting_on"]["reason"] for item in page["items"]} == {"parked"}
    assert page["next_cursor"] is None
    assert page["summary"] == {
        "waiting_on_person": 3,
        "stalled": 0,
        "degraded": 0,
        "running": 3,
    }


async def test_the_summary_counts_every_live_run_whatever_the_filters(
    api, tokens, probe_host, clock, engine
):
    parked = await _floor(probe_host, clock, engine)
    await set_run(probe_host.db, parked[0], health="stalled")
    await set_run(probe_host.db, parked[1], health="degraded")

    status, page = await _get(api, tokens["editor"], "?status=completed")

    assert status == 200
    assert [item["definition_title"] for item in page["items"]] == ["Done"]
    assert page["summary"]["stalled"] == 1 and page["summary"]["degraded"] == 1
    _, stalled = await _get(api, tokens["editor"], "?health=stalled")
    assert [item["id"] for item in stalled["items"]] == [parked[0]]
    _, either = await _get(api, tokens["editor"], "?health=stalled,degraded")
    assert [item["id"] for item in either["items"]] == [parked[1], parked[0]]


async def test_each_filter_narrows(api, tokens, probe_host, clock, engine):
    parked = await _floor(probe_host, clock, engine)
    token = tokens["admin"]
    now = clock.now()
    async with probe_host.db.begin() as conn:
        series_id = (
            await conn.execute(
                insert(event_series).values(title="Arc", slug="arc", created_at=now, updated_at=now)
            )
        ).inserted_primary_key[0]
    first = (await _get(api, token, "?waiting=parked"))[1]["items"][-1]
    async with probe_host.db.begin() as conn:
        await conn.execute(
            update(event_definitions)
            .where(event_definitions.c.id == first["definition_id"])
            .values(series_id=series_id)
        )
    _, by_event = await _get(api, token, f"?definition={first['definition_id']}")
    assert [item["id"] for item in by_event["items"]] == [parked[0]]
    _, by_series = await _get(api, token, f"?series={series_id}")
    assert [item["id"] for item in by_series["items"]] == [parked[0]]

    scoped, _ = await start_now(probe_host, first["definition_id"], scope="north", actor="x:y")
    _, by_scope = await _get(api, token, "?scope=north")
    assert [item["id"] for item in by_scope["items"]] == [scoped]

    # The window is on scheduled_for: [from, to), each end optional.
    later = (now + timedelta(hours=2)).isoformat()
    _, ahead = await _get(api, token, f"?from={later.replace('+', '%2B')}")
    assert [item["definition_title"] for item in ahead["items"]] == ["Later"]
    _, before = await _get(api, token, f"?to={later.replace('+', '%2B')}&status=scheduled")
    assert [item["id"] for item in before["items"]] == [scoped]
    _, scheduled = await _get(api, token, "?status=scheduled")
    assert {item["status"] for item in scheduled["items"]} == {"scheduled"}
    assert len(scheduled["items"]) == 2


async def test_the_cursor_walks_every_run_once_newest_first(api, tokens, probe_host, clock):
    event = await publish_event(probe_host.db, clock.now(), spec(phase("p", probe_step("a"))))
    made = []
    for i in range(5):
        run_id, _ = await start_now(probe_host, event.id, scope=f"s{i}", actor="admin:test")
        made.append(run_id)
    seen, cursor, pages = [], None, 0
    while True:
        query = "?limit=2" + (f"&cursor={cursor}" if cursor else "")
        status, page = await _get(api, tokens["admin"], query)
        assert status == 200
        seen += [item["id"] for item in page["items"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == made[::-1]
    assert pages == 3
    # A page exactly as long as what is left says there is nothing after it.
    _, whole = await _get(api, tokens["admin"], "?limit=5")
    assert len(whole["items"]) == 5 and whole["next_cursor"] is None
    _, short = await _get(api, tokens["admin"], "?limit=4")
    assert len(short["items"]) == 4 and short["next_cursor"] is not None


@pytest.mark.parametrize(
    ("query", "detail"),
    [
        ("?status=sleeping", "query.status: 'sleeping' is not one of scheduled, starting"),
        ("?health=fine", "query.health: 'fine' is not one of ok, degraded, stalled"),
        ("?waiting=lunch", "query.waiting: 'lunch' is not one of not_due"),
        (
            "?definition=abc",
            "query.definition: expected an id (a positive whole number); got 'abc'",
        ),
        ("?series=0", "query.series: expected an id (a positive whole number); got '0'"),
        ("?from=tomorrow", "query.from: 'tomorrow' is not an instant with an offset"),
        ("?to=2027-03-01T10:00:00", "query.to: '2027-03-01T10:00:00' is not an instant"),
        (
            "?from=2027-03-02T00:00:00Z&to=2027-03-01T00:00:00Z",
            "query.to: must be later than query.from",
        ),
        ("?scope=a&scope=b", "query.scope: given 2 times; expected at most once"),
        ("?limit=0", "query.limit: expected a whole number from 1 to 200"),
        ("?cursor=zzz", "query.cursor: 'zzz' is not a cursor this API issued"),
    ],
)
async def test_a_bad_filter_is_400_naming_it(api, tokens, query, detail):
    status, data = await _get(api, tokens["admin"], query)
    assert status == 400
    assert data["error"]["code"] == "invalid"
    assert any(d.startswith(detail) for d in data["error"]["details"]), data


async def test_a_filter_naming_no_event_or_series_is_404(api, tokens):
    status, data = await _get(api, tokens["admin"], "?definition=999")
    assert (status, data["error"]["message"]) == (404, "no such event: 999")
    status, data = await _get(api, tokens["admin"], "?series=999")
    assert (status, data["error"]["message"]) == (404, "no such series: 999")


async def test_a_paused_run_waits_on_a_person_once(api, tokens, probe_host, clock, engine):
    from pageant.runs.controls import pause

    parked = await _floor(probe_host, clock, engine)
    await pause(probe_host, parked[0], actor="admin:test", reason="lunch")

    _, page = await _get(api, tokens["admin"], "?status=paused")

    assert [item["id"] for item in page["items"]] == [parked[0]]
    # Paused and still at its parked step: one run waiting on a person, not two.
    assert page["summary"]["waiting_on_person"] == 3
    assert page["summary"]["running"] == 2
