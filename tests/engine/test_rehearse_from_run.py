"""Rehearsal from a run: a real run of the shard demo's Champion Muster, its boss firings sent
by a game through the API, then an edited version rehearsed against those recorded firings
at their real offsets, with the differences said; and the refusals, which write nothing."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta
from typing import Any

import pytest

from pageant.cli.showcase import SWITCHBOARD, demo_spec
from tests.api.test_events_api import EVENTS, call, create
from tests.engine.test_rehearse import everything

ACTIONS = "/api/v1/admin/actions"
RUNS = "/api/v1/admin/runs"
BOSS = "/api/v1/triggers/shard.boss.spawned/fire"


@pytest.fixture
def engine(host_engine: Any) -> Any:
    return host_engine


def boss(region: str) -> dict[str, Any]:
    return {"region": region, "boss": "champion", "landmark": f"{region}.shrine"}


async def ticks(engine: Any, times: int = 3) -> None:
    for _ in range(times):
        await engine.tick()


async def muster_event(client: Any, tokens: dict[str, str]) -> int:
    admin = tokens["admin"]
    for action, caps in SWITCHBOARD.items():
        status, data = await call(
            client, "PUT", f"{ACTIONS}/{action}", admin, {"enabled": True, "caps": caps}
        )
        assert status == 200, data
    event = await create(client, admin, title="Champion Muster", spec=demo_spec())
    status, data = await call(client, "POST", f"{EVENTS}/{event['id']}/publish", admin)
    assert status == 200, data
    return event["id"]


async def real_night(client: Any, tokens: dict[str, str], engine: Any, clock: Any) -> tuple:
    """The Champion Muster run for real: the cue confirmed at once, bosses rising in Yew at
    +10 and +25 minutes (one in Vesper at +12, which its gate does not count), the champion's
    two minutes, the wind-down. Answers (event id, run id, the run's start)."""
    event_id = await muster_event(client, tokens)
    status, run = await call(client, "POST", f"{EVENTS}/{event_id}/runs", tokens["admin"])
    assert status == 201, run
    start = clock.now()
    await ticks(engine)
    status, view = await call(client, "GET", f"{RUNS}/{run['id']}", tokens["moderator"])
    (cue,) = [s for s in view["steps"] if s["action"] == "core.cue"]
    status, data = await call(
        client, "POST", f"{RUNS}/{run['id']}/steps/{cue['id']}/confirm", tokens["moderator"], {}
    )
    assert status == 200, data
    await ticks(engine)
    for minute, region in ((10, "yew"), (12, "vesper"), (25, "yew")):
        clock.set(start + timedelta(minutes=minute))
        status, data = await call(client, "POST", BOSS, tokens["game"], boss(region))
        assert status == 200, data
        await ticks(engine)
    clock.set(start + timedelta(minutes=27))
    await ticks(engine)
    status, view = await call(client, "GET", f"{RUNS}/{run['id']}", tokens["moderator"])
    assert view["run"]["status"] == "completed", view["run"]
    return event_id, run["id"], start


async def publish(client: Any, tokens: dict[str, str], event_id: int, spec: dict) -> None:
    admin = tokens["admin"]
    status, data = await call(client, "PUT", f"{EVENTS}/{event_id}", admin, {"spec": spec})
    assert status == 200, data
    status, data = await call(client, "POST", f"{EVENTS}/{event_id}/publish", admin)
    assert status == 200, data


async def test_a_lower_gate_opens_earlier_on_the_real_nights_firings(client, tokens, engine, clock):
    event_id, run_id, _ = await real_night(client, tokens, engine, clock)
    edited = demo_spec()
    (muster,) = [p for p in edited["phases"] if p["key"] == "muster"]
    muster["advance"]["count"] = 1
    await publish(client, tokens, event_id, edited)

    status, report = await call(
        client, "POST", f"{EVENTS}/{event_id}/rehearse", tokens["editor"], {"from_run": run_id}
    )
    assert status == 200, report
    assert report["version"]["number"] == 2
    # The run recorded the two Yew bosses its gate counted (the Vesper one it never counted);
    # the first, at its real offset, opens the new gate, and the rehearsed run has ended
    # before the second's offset comes.
    replayed = report["replayed"]
    assert (replayed["recorded"], replayed["firings"], replayed["from_run"]) == (2, 1, run_id)
    assert [(f["after_seconds"], f["trigger"], f["gates_matched"]) for f in report["firings"]] == [
        (600, "shard.boss.spawned", 1)
    ]
    real = {p["key"]: p for p in report["replayed"]["phases"]}
    assert real["muster"]["gate_opened_seconds"] == 1500
    rehearsed = {p["key"]: p for p in report["timeline"]["phases"]}
    assert rehearsed["muster"]["gate_opened_seconds"] == 600
    said = {(d["phase"], d["what"]): d for d in report["differences"]}
    gate = said[("muster", "gate_opened")]
    assert (gate["real"], gate["rehearsed"]) == (1500, 600)
    assert gate["sentence"] == (
        "the new version's gate `muster` would have opened 15 min earlier "
        "(at +10 min instead of +25 min)"
    )
    assert said[("champion", "entered")]["sentence"] == (
        "phase 3 `champion` would have begun at +10 min instead of +25 min"
    )
    assert said[("champion", "ended")]["rehearsed"] == 720
    assert said[(None, "run_ended")]["sentence"].startswith("the run would have ended at +12 min")
    assert report["outcome"]["status"] == "completed"


async def test_a_removed_phase_is_said_to_be_skipped_and_the_same_version_differs_in_nothing(
    client, tokens, engine, clock
):
    event_id, run_id, _ = await real_night(client, tokens, engine, clock)
    status, same = await call(
        client, "POST", f"{EVENTS}/{event_id}/rehearse", tokens["admin"], {"from_run": run_id}
    )
    assert status == 200, same
    assert same["differences"] == [] and same["replayed"]["firings"] == 2
    assert [f["after_seconds"] for f in same["firings"]] == [600, 1500]

    edited = copy.deepcopy(demo_spec())
    edited["phases"] = [p for p in edited["phases"] if p["key"] != "champion"]
    await publish(client, tokens, event_id, edited)
    status, report = await call(
        client, "POST", f"{EVENTS}/{event_id}/rehearse", tokens["admin"], {"from_run": run_id}
    )
    assert status == 200, report
    said = {(d["phase"], d["what"]): d["sentence"] for d in report["differences"]}
    assert said[("champion", "removed")] == (
        "phase 3 `champion` would have been skipped: version 2 has no such phase "
        "(the real run entered it at +25 min)"
    )
    # The champion's two minutes gone, the wind-down begins as the muster ends.
    assert said[("wind-down", "entered")] == (
        "phase 3 `wind-down` would have begun at +25 min instead of +27 min"
    )
    # A rehearsal of the run's own version names it.
    status, again = await call(
        client,
        "POST",
        f"{EVENTS}/{event_id}/rehearse",
        tokens["admin"],
        {"from_run": run_id, "version": 1},
    )
    assert status == 200 and again["differences"] == []


async def test_a_higher_gate_would_not_open_on_the_recorded_firings(client, tokens, engine, clock):
    event_id, run_id, _ = await real_night(client, tokens, engine, clock)
    edited = demo_spec()
    (muster,) = [p for p in edited["phases"] if p["key"] == "muster"]
    muster["advance"]["count"] = 3
    await publish(client, tokens, event_id, edited)
    status, report = await call(
        client, "POST", f"{EVENTS}/{event_id}/rehearse", tokens["admin"], {"from_run": run_id}
    )
    assert status == 200, report
    said = {(d["phase"], d["what"]): d["sentence"] for d in report["differences"]}
    assert said[("muster", "gate_opened")] == (
        "the new version's gate `muster` would not have opened on the recorded firings "
        "(the real one opened at +25 min)"
    )
    assert said[("champion", "not_reached")].startswith("phase 3 `champion` would not have been")
    assert said[(None, "outcome")].startswith("the run would have stalled in phase `muster`")


async def test_bad_runs_are_refused_with_a_sentence_and_write_nothing(
    client, tokens, engine, clock, db
):
    event_id, run_id, _ = await real_night(client, tokens, engine, clock)
    other = await create(client, tokens["admin"], title="Other", spec=demo_spec())
    status, data = await call(client, "POST", f"{EVENTS}/{other['id']}/publish", tokens["admin"])
    assert status == 200, data
    status, live = await call(client, "POST", f"{EVENTS}/{event_id}/runs", tokens["admin"])
    assert status == 201, live
    before = await everything(db)
    path = f"{EVENTS}/{event_id}/rehearse"

    status, data = await call(
        client, "POST", f"{EVENTS}/{other['id']}/rehearse", tokens["admin"], {"from_run": run_id}
    )
    assert (status, data["error"]["details"]) == (
        400,
        [
            f"body.from_run: run {run_id} is a run of event {event_id} ('Champion Muster'), "
            f"not of event {other['id']}"
        ],
    )
    status, data = await call(client, "POST", path, tokens["admin"], {"from_run": live["id"]})
    assert (status, data["error"]["message"]) == (
        409,
        f"run {live['id']} is scheduled: a rehearsal replays the firings of a run that has "
        "ended, so wait until it ends",
    )
    status, data = await call(client, "POST", path, tokens["admin"], {"from_run": 999_999})
    assert (status, data["error"]["message"]) == (404, "no run 999999")
    for body in ({"from_run": 0}, {"from_run": "12"}):
        status, data = await call(client, "POST", path, tokens["admin"], body)
        assert status == 400 and data["error"]["details"][0].startswith("body.from_run"), data
    both = {
        "from_run": run_id,
        "firings": [{"after": "1m", "trigger": "shard.boss.spawned", "payload": boss("yew")}],
    }
    status, data = await call(client, "POST", path, tokens["admin"], both)
    assert status == 400 and data["error"]["details"][0].startswith("body.from_run:"), data
    assert await everything(db) == before


async def test_a_runs_firings_are_kept_as_long_as_its_log(client, tokens, engine, clock, host):
    event_id, run_id, _ = await real_night(client, tokens, engine, clock)
    status, view = await call(client, "GET", f"{RUNS}/{run_id}", tokens["moderator"])
    ended = datetime.fromisoformat(view["run"]["ended_at"].replace("Z", "+00:00"))
    keep = timedelta(days=host.settings.log_retention_days)
    path = f"{EVENTS}/{event_id}/rehearse"

    # A day short of the keep, the prune leaves the run's log, and its firings, alone.
    clock.set(ended + keep - timedelta(days=1))
    await engine.tick()
    status, report = await call(client, "POST", path, tokens["admin"], {"from_run": run_id})
    assert status == 200, report
    assert report["replayed"]["recorded"] == 2 and report["differences"] == []

    # Past the keep, the prune takes the log and the firings with it; the rehearsal says so.
    clock.set(ended + keep + timedelta(seconds=1))
    await engine.tick()
    status, data = await call(client, "POST", path, tokens["admin"], {"from_run": run_id})
    assert (status, data["error"]["message"]) == (
        409,
        f"run {run_id} ended {ended:%Y-%m-%d %H:%M} UTC and its log, with the firings recorded "
        f"in it, has been pruned (a run's log is kept {keep.days} days after it ends): there "
        "is nothing left to replay",
    )
