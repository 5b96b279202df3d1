"""Rehearsal: the real engine on a virtual clock in a throwaway database — the timeline, the
spend, the refusals and the stalls a real run would meet, and the real database untouched."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from sqlalchemy import select

from pageant.db.tables import ALL_TABLES
from pageant.support.muting import muted
from tests.api.test_events_api import EVENTS, call, create
from tests.scheduling import spec_with

ACTIONS = "/api/v1/admin/actions"


async def everything(db: Any) -> dict[str, list[dict[str, Any]]]:
    """Every row of every table — but when a token was last used, which the request itself
    (not the rehearsal) may write."""
    async with db.connect() as conn:
        return {
            table.name: [
                {k: v for k, v in r._mapping.items() if k != "last_used_at"}
                for r in await conn.execute(select(table).order_by(*table.primary_key.columns))
            ]
            for table in ALL_TABLES
        }


def wait(seconds: int) -> dict[str, Any]:
    return {"action": "core.wait", "params": {"seconds": seconds}}


def announce(message: str) -> dict[str, Any]:
    return {"action": "core.announce", "params": {"leg": "core.log", "message": message}}


def summon(count: int) -> dict[str, Any]:
    return {"action": "wisps.summon", "params": {"colour": "north", "count": count}}


THREE_PHASES = [
    {
        "key": "muster",
        "label": "Muster",
        "steps": [announce("The wisps stir"), wait(300), summon(5)],
        "advance": {"after": "10m"},
    },
    {
        "key": "hunt",
        "label": "Hunt",
        "steps": [announce("Catch two north wisps")],
        "advance": {
            "on": "wisps.caught",
            "where": {"var": "colour", "op": "eq", "value": "north"},
            "count": 2,
        },
    },
    {"key": "wind-down", "label": "Wind down", "steps": [wait(60)]},
]


async def _event(client, tokens, phases) -> int:
    event = await create(
        client, tokens["admin"], title="Hunt", spec=spec_with({"kind": "manual"}, *phases)
    )
    status, data = await call(client, "POST", f"{EVENTS}/{event['id']}/publish", tokens["admin"])
    assert status == 200, data
    return event["id"]


async def test_a_three_phase_rehearsal_answers_the_timeline_and_spend_and_writes_nothing(
    client, tokens, db
):
    status, _ = await call(
        client,
        "PUT",
        f"{ACTIONS}/wisps.summon",
        tokens["admin"],
        {"enabled": True, "caps": {"wisps.wisps": 30}},
    )
    assert status == 200
    event_id = await _event(client, tokens, THREE_PHASES)
    before = await everything(db)
    body = {
        "firings": [
            {"after": "12m", "trigger": "wisps.caught", "payload": {"colour": "north"}},
            {"after": "14m", "trigger": "wisps.caught", "payload": {"colour": "south"}},
            {"after": "20m", "trigger": "wisps.caught", "payload": {"colour": "north"}},
        ]
    }
    status, report = await call(
        client, "POST", f"{EVENTS}/{event_id}/rehearse", tokens["editor"], body
    )
    assert status == 200, report
    assert await everything(db) == before  # the real database was not written

    assert report["outcome"]["status"] == "completed"
    assert report["outcome"]["ended_seconds"] == 1260
    assert [
        (p["key"], p["entered_seconds"], p["left_seconds"]) for p in report["timeline"]["phases"]
    ] == [("muster", 0, 600), ("hunt", 600, 1200), ("wind-down", 1200, 1260)]
    assert [
        (s["phase"], s["action"], s["status"], s["started_seconds"])
        for s in report["timeline"]["steps"]
    ] == [
        ("muster", "core.announce", "done", 0),
        ("muster", "core.wait", "done", 0),
        ("muster", "wisps.summon", "done", 300),
        ("hunt", "core.announce", "done", 600),
        ("wind-down", "core.wait", "done", 1200),
    ]
    assert report["spend"] == [
        {
            "dimension": "wisps.wisps",
            "label": "Wisps summoned",
            "unit": "wisps",
            "worst_case": 5,
            "rehearsed": 5,
            "cap": 30,
            "cap_source_action": "wisps.summon",
            "over_cap": False,
        }
    ]
    assert report["refusals"] == [] and report["stalls"] == []
    assert [(f["after_seconds"], f["gates_matched"]) for f in report["firings"]] == [
        (720, 1),
        (840, 0),
        (1200, 1),
    ]


async def test_a_rehearsal_reports_the_refusals_and_the_stall_a_real_run_would_meet(
    client, tokens, db, caplog
):
    # wisps.summon is off (no switchboard row), and nothing ever catches a wisp.
    phases = [
        {**THREE_PHASES[0], "steps": [announce("go"), {**summon(5), "on_failure": "skip"}]},
        THREE_PHASES[1],
    ]
    event_id = await _event(client, tokens, phases)
    before = await everything(db)
    caplog.set_level(logging.DEBUG)
    status, report = await call(client, "POST", f"{EVENTS}/{event_id}/rehearse", tokens["admin"])
    assert status == 200, report
    assert await everything(db) == before
    # The made-up run's lines (its refusal, its stall) are the report's, not the host's log.
    assert [r.getMessage() for r in caplog.records if r.name.startswith("pageant")] == []
    assert [(r["action"], r["code"]) for r in report["refusals"]] == [("wisps.summon", "disabled")]
    # The hunt is entered at 10 minutes and, its gate never opening, stalls an hour later.
    assert report["stalls"] == [
        {"phase": "hunt", "trigger_id": "wisps.caught", "stalled_seconds": 600 + 3600}
    ]
    assert report["outcome"]["status"] == "running"


async def test_bad_firings_are_a_400_naming_each(client, tokens):
    event_id = await _event(client, tokens, THREE_PHASES)
    body = {
        "firings": [
            {"after": "soon", "trigger": "wisps.caught", "payload": {}},
            {"after": "1m", "trigger": "wisps.nothing"},
            {"after": "1m", "trigger": "wisps.caught", "payload": {"colour": 3}},
        ]
    }
    status, data = await call(
        client, "POST", f"{EVENTS}/{event_id}/rehearse", tokens["admin"], body
    )
    assert (status, data["error"]["code"]) == (400, "invalid")
    details = data["error"]["details"]
    assert details[0].startswith("body.firings[0].after: expected a length")
    assert details[1] == "body.firings[1].trigger: no plugin registers 'wisps.nothing'"
    assert details[2].startswith("body.firings[2].payload")
    status, _ = await call(client, "POST", f"{EVENTS}/999/rehearse", tokens["admin"])
    assert status == 404


async def test_a_forty_phase_five_hundred_step_event_rehearses_quickly(client, tokens):
    phases = [
        {
            "key": f"p{i}",
            "label": f"Phase {i}",
            "steps": [
                wait(30) if j % 2 else announce(f"{i}.{j}")
                for j in range(500 // 40 + (i < 500 % 40))
            ],
        }
        for i in range(40)
    ]
    assert sum(len(p["steps"]) for p in phases) == 500
    event_id = await _event(client, tokens, phases)
    began = time.perf_counter()
    status, report = await call(client, "POST", f"{EVENTS}/{event_id}/rehearse", tokens["admin"])
    took = time.perf_counter() - began
    assert status == 200, report
    assert report["outcome"]["status"] == "completed"
    assert len(report["timeline"]["steps"]) == 500
    print(f"40 phases, 500 steps: {took:.2f} s through the API, {report['took_ms']} ms inside")


async def test_a_named_version_is_rehearsed_and_an_unknown_one_is_a_404(client, tokens):
    event_id = await _event(client, tokens, [{"key": "main", "label": "Main", "steps": [wait(5)]}])
    path = f"{EVENTS}/{event_id}/rehearse"
    status, report = await call(client, "POST", path, tokens["admin"], {"version": 1})
    assert status == 200, report
    assert report["version"]["number"] == 1 and report["outcome"]["ended_seconds"] == 5
    status, data = await call(client, "POST", path, tokens["admin"], {"version": 9})
    assert (status, data["error"]["message"]) == (404, f"event {event_id} has no version 9")
    status, data = await call(client, "POST", path, tokens["admin"], {"firings": "soon"})
    assert (status, data["error"]["code"]) == (400, "invalid")


async def test_muting_holds_for_the_rehearsal_and_never_for_the_host_beside_it(caplog):
    """The host's own tasks keep logging while a rehearsal is muted in another task."""
    caplog.set_level(logging.INFO)
    log = logging.getLogger("pageant.runs")
    go, done = asyncio.Event(), asyncio.Event()

    async def host_engine() -> None:
        await go.wait()
        log.info("run 7 real")
        done.set()

    beside = asyncio.create_task(host_engine())

    async def child() -> None:
        log.info("run 1 in a task the rehearsal started")

    async def rehearsal() -> None:
        with muted():
            log.info("run 1 made up")
            await asyncio.create_task(child())
            go.set()
            await done.wait()

    await rehearsal()
    await beside
    log.info("run 8 after")
    assert [r.getMessage() for r in caplog.records if r.name == "pageant.runs"] == [
        "run 7 real",
        "run 8 after",
    ]
