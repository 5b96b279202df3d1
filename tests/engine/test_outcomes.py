"""Participants and results: reported in an action's envelope, kept once per run, shown on
the run console, and — for a public event — on its public page and in its history."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import update

from pageant.api.app import make_app
from pageant.db.tables import event_definitions
from pageant.hookspecs import Participant, ResultEntry, Results
from pageant.hookspecs.envelope import MAX_ENTRIES, MAX_PARTICIPANTS, classify
from pageant.runs.console_text import render_console
from pageant.runs.controls import cancel
from pageant.runs.create import start_now
from pageant.support.timefmt import iso
from tests.conftest import bearer
from tests.factories import phase, probe_step, publish_event, run_row, spec

PUBLIC = "/api/v1/public/events"
RESULTS = {
    "title": "Boss rush",
    "entries": [
        {"rank": 1, "name": "Ada", "detail": "4:12"},
        {"rank": 2, "name": "Brann", "detail": "5:40"},
        {"name": "Cato", "detail": "did not finish"},
    ],
}

# ── the envelope ──────────────────────────────────────────────────────────────


def test_participants_and_results_are_read_from_the_envelope():
    found = classify(
        {
            "ok": True,
            "participants": [{"name": " Ada ", "role": "tank"}, {"name": "Brann"}],
            "results": RESULTS,
        }
    )
    assert found.ok and found.malformed is None
    assert found.participants == (Participant("Ada", "tank"), Participant("Brann", None))
    assert found.results == Results(
        "Boss rush",
        (
            ResultEntry("Ada", "4:12", 1),
            ResultEntry("Brann", "5:40", 2),
            ResultEntry("Cato", "did not finish", None),
        ),
    )
    plain = classify({"ok": True})
    assert (plain.participants, plain.results) == ((), None)


@pytest.mark.parametrize(
    ("answer", "fits"),
    [
        ({"participants": [{"name": "x" * 100}]}, True),
        ({"participants": [{"name": "x" * 101}]}, False),
        ({"participants": [{"name": f"p{i}"} for i in range(MAX_PARTICIPANTS)]}, True),
        ({"participants": [{"name": f"p{i}"} for i in range(MAX_PARTICIPANTS + 1)]}, False),
        ({"participants": [{"name": "Ada", "role": "r" * 50}]}, True),
        ({"participants": [{"name": "Ada", "role": "r" * 51}]}, False),
        ({"participants": [{"name": "  "}]}, False),
        ({"participants": "Ada"}, False),
        (
            {"results": {"title": "t", "entries": [{"name": "a", "detail": "d"}] * MAX_ENTRIES}},
            True,
        ),
        (
            {
                "results": {
                    "title": "t",
                    "entries": [{"name": "a", "detail": "d"}] * (MAX_ENTRIES + 1),
                }
            },
            False,
        ),
        ({"results": {"title": "t", "entries": [{"name": "a", "detail": "d", "rank": 1}]}}, True),
        ({"results": {"title": "t", "entries": [{"name": "a", "detail": "d", "rank": 0}]}}, False),
        (
            {"results": {"title": "t", "entries": [{"name": "a", "detail": "d", "rank": True}]}},
            False,
        ),
        ({"results": {"title": "t", "entries": [{"name": "a", "detail": "d" * 200}]}}, True),
        ({"results": {"title": "t", "entries": [{"name": "a", "detail": "d" * 201}]}}, False),
        ({"results": {"title": "", "entries": []}}, False),
        ({"results": ["Ada"]}, False),
    ],
)
def test_a_bad_report_is_a_retryable_malformed_answer(answer: dict[str, Any], fits: bool):
    found = classify({"ok": True, **answer})
    if fits:
        assert found.ok, found.error
    else:
        assert (found.ok, found.retry) == (False, True)
        assert found.malformed in ("bad participants", "bad results")


# ── through the engine ────────────────────────────────────────────────────────


@pytest.fixture
async def api(probe_host, aiohttp_client):
    return await aiohttp_client(make_app(probe_host, run_engine=False))


async def _public(db: Any, event_id: int) -> None:
    async with db.begin() as conn:
        await conn.execute(
            update(event_definitions)
            .where(event_definitions.c.id == event_id)
            .values(visibility="public")
        )


async def _rush(probe_host, probe, clock):
    probe.script["muster"] = [
        {"ok": True, "participants": [{"name": "Ada", "role": "tank"}, {"name": "Brann"}]}
    ]
    probe.script["finale"] = [
        {"ok": False, "retry": True, "error": "shard busy"},
        {
            "ok": True,
            "participants": [{"name": "Brann", "role": "healer"}, {"name": "Cato"}],
            "results": RESULTS,
        },
    ]
    event = await publish_event(
        probe_host.db,
        clock.now(),
        spec(phase("muster", probe_step("muster")), phase("finale", probe_step("finale"))),
        title="Boss rush",
    )
    return event


async def test_the_console_shows_who_took_part_and_how_it_ended(
    api, tokens, probe_host, probe, engine, clock
):
    event = await _rush(probe_host, probe, clock)
    run_id, _ = await start_now(probe_host, event.id, scope="", actor="admin:test")
    await engine.tick()
    clock.advance(probe_host.settings.retry_seconds)
    await engine.tick()
    assert (await run_row(probe_host.db, run_id)).status == "completed"

    response = await api.get(f"/api/v1/admin/runs/{run_id}", headers=bearer(tokens["moderator"]))
    console = await response.json()
    # A name counts once per run, as first reported; the retried step records once.
    assert [(p["name"], p["role"]) for p in console["participants"]] == [
        ("Ada", "tank"),
        ("Brann", None),
        ("Cato", None),
    ]
    (table,) = console["results"]
    assert (table["phase"], table["title"], table["entries"]) == (
        "finale",
        "Boss rush",
        [
            {"rank": 1, "name": "Ada", "detail": "4:12"},
            {"rank": 2, "name": "Brann", "detail": "5:40"},
            {"rank": None, "name": "Cato", "detail": "did not finish"},
        ],
    )
    text = render_console(console)
    assert "Participants (3)" in text and "Ada (tank), Brann, Cato" in text
    assert "Results: Boss rush (phase finale)" in text and "did not finish" in text


async def test_the_public_page_shows_the_last_completed_occurrence(
    api, probe_host, probe, engine, clock
):
    event = await _rush(probe_host, probe, clock)
    await _public(probe_host.db, event.id)
    status_page = await api.get(f"{PUBLIC}/{event.slug}")
    assert (await status_page.json())["last_completed"] is None

    await start_now(probe_host, event.id, scope="", actor="admin:test")
    started = clock.now()
    await engine.tick()
    clock.advance(probe_host.settings.retry_seconds)
    await engine.tick()

    page = await (await api.get(f"{PUBLIC}/{event.slug}")).json()
    assert page["last_completed"] == {
        "scheduled_for": iso(started),
        "local_time": started.isoformat(),
        "ended_at": iso(clock.now()),
        "participants": 3,
        "results": [
            {
                "title": "Boss rush",
                "entries": [*RESULTS["entries"][:2], {**RESULTS["entries"][2], "rank": None}],
            }
        ],
    }


async def test_the_history_lists_past_occurrences_with_their_outcome(
    api, probe_host, probe, engine, clock
):
    event = await publish_event(probe_host.db, clock.now(), spec(phase("p", probe_step("a"))))
    await _public(probe_host.db, event.id)
    probe.script["a"] = [{"ok": True, "participants": [{"name": "Ada"}]}]
    await start_now(probe_host, event.id, scope="", actor="admin:test")
    await engine.tick()
    clock.advance(3600)
    called_off, _ = await start_now(probe_host, event.id, scope="", actor="admin:test")
    await cancel(probe_host, called_off, actor="admin:test", reason="storm")
    clock.advance(3600)
    await start_now(probe_host, event.id, scope="", actor="admin:test")  # not over: not listed

    response = await api.get(f"{PUBLIC}/{event.slug}/history")
    assert response.status == 200
    assert response.headers["Cache-Control"] == "public, max-age=60"
    history = await response.json()
    assert [(i["status"], i["participants"]) for i in history["items"]] == [
        ("cancelled", 0),
        ("completed", 1),
    ]
    assert history["next_before"] is None
    first = await (await api.get(f"{PUBLIC}/{event.slug}/history?limit=1")).json()
    assert len(first["items"]) == 1 and first["next_before"] == first["items"][0]["scheduled_for"]
    before = first["next_before"].replace("+", "%2B")
    rest = await (await api.get(f"{PUBLIC}/{event.slug}/history?before={before}")).json()
    assert [i["status"] for i in rest["items"]] == ["completed"]
    assert set(rest["items"][0]) == {"scheduled_for", "local_time", "status", "participants"}


async def test_a_staff_event_has_no_public_history(api, probe_host, clock):
    event = await publish_event(probe_host.db, clock.now())
    response = await api.get(f"{PUBLIC}/{event.slug}/history")
    assert response.status == 404
    bad = await api.get(f"{PUBLIC}/{event.slug}/history?limit=0&before=soon")
    data = await bad.json()
    assert bad.status == 400
    assert [d.split(":")[0] for d in data["error"]["details"]] == ["query.before", "query.limit"]
