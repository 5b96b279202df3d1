"""Events that compose: core's lifecycle triggers, fired once per transition after it commits,
waited on by another event's gate; and an event that would wait on itself, refused at save.
Through the real app, the real engine and the real database."""

from __future__ import annotations

from typing import Any

import pytest

from pageant.api.app import make_app
from pageant.db import runs
from pageant.runs.controls import cancel
from pageant.runs.create import start_now
from tests.api.test_events_api import EVENTS, call
from tests.conftest import bearer
from tests.factories import announce, log_lines, probe_step, run_row

COMPLETED = "core.run.completed"


@pytest.fixture
async def api(probe_host, aiohttp_client):
    return await aiohttp_client(make_app(probe_host, run_engine=False))


@pytest.fixture
def fired(probe_host) -> list[tuple[str, dict[str, Any]]]:
    """Every firing through the host's emit path, in order, as if an open gate waited on
    every trigger (a lifecycle firing no open gate waits on is not sent at all:
    ``test_a_transition_no_gate_waits_on_reads_no_run_and_fires_nothing``)."""
    seen: list[tuple[str, dict[str, Any]]] = []
    fire = probe_host.firings.fire

    async def every(triggers: Any, *, token_id: int | None = None) -> set[str]:
        return set(triggers)

    probe_host.firings.open_among = every

    async def spy(firings: Any, **how: Any) -> Any:
        seen.extend((firing.trigger_id, firing.payload) for firing in firings)
        return await fire(firings, **how)

    probe_host.firings.fire = spy
    return seen


def _phase(key: str, *steps: dict[str, Any], advance: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "label": key.title(), "steps": list(steps)}
    if advance is not None:
        out["advance"] = advance
    return out


def _waits_on(trigger: str, slug: str) -> dict[str, Any]:
    return {"on": trigger, "where": {"var": "event", "op": "eq", "value": slug}}


async def _event(api, tokens, slug: str, *phases: dict[str, Any]) -> int:
    body = {"title": slug.title(), "slug": slug, "spec": {"phases": list(phases)}}
    status, event = await call(api, "POST", EVENTS, tokens["admin"], body)
    assert status == 201, event
    status, published = await call(api, "POST", f"{EVENTS}/{event['id']}/publish", tokens["admin"])
    assert status == 200, published
    return event["id"]


async def test_a_boss_rush_starts_when_the_muster_completes(api, tokens, probe_host, engine, fired):
    muster = await _event(api, tokens, "champion-muster", _phase("gather", announce("Gather")))
    rush = await _event(
        api,
        tokens,
        "boss-rush",
        _phase("wait", advance=_waits_on(COMPLETED, "champion-muster")),
        _phase("rush", announce("The boss rush begins")),
    )
    rush_run, _ = await start_now(probe_host, rush, scope="", actor="admin:test")
    await engine.tick()
    assert (await run_row(probe_host.db, rush_run)).current_phase == "wait"

    muster_run, _ = await start_now(probe_host, muster, scope="", actor="admin:test")
    await engine.tick()  # the muster completes, and its completion counts for the gate
    assert (await run_row(probe_host.db, muster_run)).status == "completed"
    await engine.tick()

    assert (await run_row(probe_host.db, rush_run)).status == "completed"
    evaluated = await log_lines(probe_host.db, rush_run, "condition.evaluated")
    assert [(line.detail["trigger_id"], line.detail["matched"]) for line in evaluated] == [
        (COMPLETED, True)
    ]
    assert evaluated[0].actor == "core"
    assert evaluated[0].detail["values"] == {"event": "champion-muster"}
    # A second muster completing finds no open gate: the rush's gate opened exactly once.
    again, _ = await start_now(probe_host, muster, scope="again", actor="admin:test")
    await engine.tick()
    assert (await run_row(probe_host.db, again)).status == "completed"
    assert len(await log_lines(probe_host.db, rush_run, "condition.evaluated")) == 1
    completions = [p for t, p in fired if t == COMPLETED]
    assert [p["run_id"] for p in completions] == [muster_run, rush_run, again]


async def test_each_transition_fires_once_with_the_runs_public_facts(
    api, tokens, probe_host, engine, fired
):
    event = await _event(
        api, tokens, "lantern-walk", _phase("light", announce("a")), _phase("walk", announce("b"))
    )
    run_id, _ = await start_now(probe_host, event, scope="north", actor="admin:test")
    await engine.tick()
    await engine.tick()  # nothing moves: nothing fires again

    assert fired == [
        (
            "core.run.started",
            {
                "event": "lantern-walk",
                "run_id": run_id,
                "scope": "north",
                "status": "running",
                "phase": "light",
                "health": "ok",
            },
        ),
        ("core.phase.entered", {**fired[0][1], "phase": "light"}),
        ("core.phase.entered", {**fired[0][1], "phase": "walk"}),
        # The last phase ended; what the run holds is being given back.
        ("core.run.ending", {**fired[0][1], "status": "ending", "phase": "walk"}),
        (COMPLETED, {**fired[0][1], "status": "completed", "phase": "walk"}),
    ]


async def test_each_occurrence_a_schedule_makes_fires_scheduled_once(
    api, tokens, probe_host, clock, engine, fired
):
    body = {
        "title": "Weekly muster",
        "slug": "weekly-muster",
        "spec": {
            "schedule": {"kind": "weekly", "days": ["friday"], "time": "20:00"},
            "phases": [_phase("p", announce("a"))],
        },
    }
    status, event = await call(api, "POST", EVENTS, tokens["admin"], body)
    assert status == 201, event
    assert fired == []  # a draft makes no occurrence
    status, _ = await call(api, "POST", f"{EVENTS}/{event['id']}/publish", tokens["admin"])
    assert status == 200

    async def occurrences() -> list[int]:
        async with probe_host.db.connect() as conn:
            found = await runs.runs_of_definition(conn, event["id"], after_id=0, limit=100)
            return sorted(r.id for r in found)

    made = await occurrences()
    assert len(made) == 2  # two Fridays within the 14-day horizon
    scheduled = [p for t, p in fired if t == "core.run.scheduled"]
    assert [p["run_id"] for p in scheduled] == made
    assert {(p["event"], p["status"], p["phase"]) for p in scheduled} == {
        ("weekly-muster", "scheduled", "")
    }
    await engine.tick()  # nothing new to make: nothing fires
    assert len([t for t, _ in fired if t == "core.run.scheduled"]) == 2
    # A week on, the engine's expansion makes the next Friday's run, and fires for it alone.
    clock.advance(days=7)
    fired.clear()
    await engine.tick()
    new = sorted(set(await occurrences()) - set(made))
    assert len(new) == 1
    assert [p["run_id"] for t, p in fired if t == "core.run.scheduled"] == new


async def test_a_cancel_fires_once_and_a_refused_cancel_not_at_all(api, tokens, probe_host, fired):
    event = await _event(api, tokens, "muster", _phase("p", announce("a")))
    run_id, _ = await start_now(probe_host, event, scope="", actor="admin:test")
    await cancel(probe_host, run_id, actor="admin:test", reason="storm")
    with pytest.raises(Exception, match="cancel acts on"):
        await cancel(probe_host, run_id, actor="admin:test", reason="again")
    assert [(t, p["status"]) for t, p in fired] == [("core.run.cancelled", "cancelled")]


async def test_a_failure_fires_without_its_staff_only_detail(
    api, tokens, probe_host, engine, probe, fired
):
    probe.script["boom"] = [{"ok": False, "retry": False, "error": "secret: shard 7 password"}]
    watcher = await _event(
        api,
        tokens,
        "aftermath",
        _phase("wait", advance=_waits_on("core.run.failed", "siege")),
        _phase("mourn", announce("The siege fell")),
    )
    siege = await _event(
        api, tokens, "siege", _phase("p", probe_step("boom", on_failure="abort_run"))
    )
    watch_run, _ = await start_now(probe_host, watcher, scope="", actor="admin:test")
    # The watcher waits before the siege starts: a gate counts firings from its phase's
    # entry, and two runs started in one tick may be dispatched in either order.
    await engine.tick()
    watching = await run_row(probe_host.db, watch_run)
    assert (watching.status, watching.current_phase) == ("running", "wait")
    siege_run, _ = await start_now(probe_host, siege, scope="", actor="admin:test")
    await engine.tick()
    await engine.tick()

    assert (await run_row(probe_host.db, siege_run)).status == "failed"
    assert (await run_row(probe_host.db, watch_run)).status == "completed"
    failures = [p for t, p in fired if t == "core.run.failed"]
    assert len(failures) == 1
    assert set(failures[0]) == {"event", "run_id", "scope", "status", "phase", "health"}
    assert "secret" not in repr(fired)
    watch_log = await log_lines(probe_host.db, watch_run)
    assert "secret" not in repr([line.detail for line in watch_log])


# ── an event cannot wait on itself ────────────────────────────────────────────


@pytest.mark.parametrize(
    "where",
    [
        {"var": "event", "op": "eq", "value": "ouroboros"},
        {"var": "event", "op": "in", "value": ["ouroboros"]},
        {
            "all": [
                {"var": "scope", "op": "eq", "value": "north"},
                {"var": "event", "op": "eq", "value": "ouroboros"},
            ]
        },
    ],
)
async def test_a_self_wait_is_refused_at_save_naming_it(api, tokens, db, where):
    from tests.api.test_events_api import snapshot

    before = await snapshot(db)
    spec = {
        "phases": [
            _phase("first", announce("a")),
            _phase("second", advance={"on": COMPLETED, "where": where}),
        ]
    }
    body = {"title": "Ouroboros", "slug": "ouroboros", "spec": spec}
    status, data = await call(api, "POST", EVENTS, tokens["admin"], body)

    assert status == 400, data
    assert data["error"]["message"] == "invalid spec: an event cannot wait on itself"
    assert data["error"]["details"] == [
        'spec.phases[1].advance: waits on core.run.completed where event eq "ouroboros" — '
        "this event itself; its run would wait on its own lifecycle and never advance"
    ]
    assert await snapshot(db) == before


async def test_a_self_wait_made_by_an_edit_or_a_rename_is_refused(api, tokens, db):
    from tests.api.test_events_api import snapshot

    other = {"phases": [_phase("p", advance=_waits_on(COMPLETED, "ouroboros"))]}
    # Waiting on another event is composition, and saves.
    status, event = await call(
        api, "POST", EVENTS, tokens["admin"], {"title": "Tail", "slug": "tail", "spec": other}
    )
    assert status == 201, event
    before = await snapshot(db)
    # Renamed to the slug it waits on, it would wait on itself.
    path = f"{EVENTS}/{event['id']}"
    status, data = await call(api, "PUT", path, tokens["admin"], {"slug": "ouroboros"})
    assert status == 400 and data["error"]["details"][0].startswith("spec.phases[0].advance")
    mine = {"phases": [_phase("p", advance=_waits_on("core.phase.entered", "tail"))]}
    status, data = await call(api, "PUT", path, tokens["admin"], {"spec": mine})
    assert status == 400 and "core.phase.entered" in data["error"]["details"][0]
    assert await snapshot(db) == before
    # Waiting on any run of any event (no event named) is not a self-wait.
    anyone = {"phases": [_phase("p", advance={"on": COMPLETED})]}
    status, _ = await call(api, "PUT", path, tokens["admin"], {"spec": anyone})
    assert status == 200


async def test_the_catalog_lists_core_lifecycle_triggers(api, tokens):
    response = await api.get("/api/v1/admin/catalog", headers=bearer(tokens["editor"]))
    catalog = await response.json()
    ids = {t["id"] for t in catalog["triggers"]}
    assert {
        "core.run.scheduled",
        "core.run.started",
        "core.run.ending",
        "core.run.completed",
        "core.run.failed",
        "core.run.cancelled",
        "core.phase.entered",
    } <= ids


async def test_a_transition_no_gate_waits_on_reads_no_run_and_fires_nothing(
    api, tokens, probe_host, engine, monkeypatch
):
    reads: list[int] = []
    get_run = runs.get_run

    async def counted(conn: Any, run_id: int) -> Any:
        reads.append(run_id)
        return await get_run(conn, run_id)

    monkeypatch.setattr(runs, "get_run", counted)
    sent: list[str] = []
    fire = probe_host.firings.fire

    async def spy(firings: Any, **how: Any) -> Any:
        sent.extend(firing.trigger_id for firing in firings)
        return await fire(firings, **how)

    probe_host.firings.fire = spy
    quiet = await _event(api, tokens, "quiet-walk", _phase("walk", announce("a")))
    run_id, _ = await start_now(probe_host, quiet, scope="", actor="admin:test")
    await engine.tick()
    assert (await run_row(probe_host.db, run_id)).status == "completed"
    # Started, entered, ending, completed: no gate could count one, so none was read for.
    assert (sent, reads) == ([], [])

    # A gate waiting on completions: only that trigger is read for and fired.
    waiting = await _event(
        api,
        tokens,
        "after-walk",
        _phase("wait", advance=_waits_on(COMPLETED, "quiet-walk")),
        _phase("go", announce("b")),
    )
    gated, _ = await start_now(probe_host, waiting, scope="", actor="admin:test")
    await engine.tick()
    sent.clear()
    reads.clear()
    again, _ = await start_now(probe_host, quiet, scope="again", actor="admin:test")
    await engine.tick()
    await engine.tick()
    assert sent[:1] == [COMPLETED] and reads[:1] == [again]
    assert (await run_row(probe_host.db, gated)).status == "completed"


def _lost_race() -> Exception:
    import pymysql
    from sqlalchemy.exc import OperationalError

    return OperationalError("UPDATE ...", {}, pymysql.err.OperationalError(1213, "Deadlock found"))


async def test_a_lifecycle_firing_that_loses_a_race_is_fired_again_and_counted(
    api, tokens, probe_host, caplog
):
    """A deadlock, or a Galera certification conflict, rolled the firing back whole: it is
    fired again (once in all), counted, and logged below ERROR; a firing that keeps losing
    is given up after its bound with one WARNING."""
    import logging

    from pageant.runs import lifecycle

    event = await _event(api, tokens, "contended", _phase("only", announce("a")))
    run_id, _ = await start_now(probe_host, event, scope="", actor="admin:test")

    async def every(triggers: Any, *, token_id: int | None = None) -> set[str]:
        return set(triggers)

    probe_host.firings.open_among = every
    fire = probe_host.firings.fire
    tries: list[int] = []
    recorded: list[Any] = []

    def losing(times: int) -> Any:
        async def spy(firings: Any, **how: Any) -> Any:
            tries.append(1)
            if len(tries) <= times:
                raise _lost_race()
            recorded.extend(f.trigger_id for f in firings)
            return await fire(firings, **how)

        return spy

    def counted() -> float:
        return probe_host.metrics.deadlocks_retried.labels(
            where="firing lifecycle triggers"
        )._value.get()

    probe_host.firings.fire = losing(2)
    with caplog.at_level(logging.DEBUG):
        await lifecycle.announce(probe_host, run_id, COMPLETED)
    assert (len(tries), recorded, counted()) == (3, [COMPLETED], 2)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]

    tries.clear()
    recorded.clear()
    caplog.clear()
    probe_host.firings.fire = losing(99)
    with caplog.at_level(logging.DEBUG):
        await lifecycle.announce(probe_host, run_id, COMPLETED)
    assert (len(tries), recorded) == (lifecycle.CONFLICT_ATTEMPTS, [])
    assert counted() == 2 + lifecycle.CONFLICT_ATTEMPTS
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.levelno for r in warnings] == [logging.WARNING]
    assert "5 times in a row; not fired" in warnings[0].getMessage()
