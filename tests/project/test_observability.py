"""What an operator watches: /metrics moving during a run, /healthz judging the engine, one
log line per committed state change, structured log formats, and lock contention retried
quietly up to a bound."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import pymysql
import pytest
from sqlalchemy.exc import OperationalError

from pageant.cli.serving import JsonFormatter, KeyValueFormatter
from pageant.engine.contention import BOUND, ContentionPersisted, retrying
from pageant.runs.create import start_now
from tests.conftest import bearer
from tests.factories import phase, probe_step, publish_event, spec

RETRY = {"ok": False, "retry": True, "error": "shard busy"}


def sample(text: str, name: str, **labels: str) -> float:
    """One sample's value from the Prometheus text, 0 when absent."""
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        if key == (f"{name}{{{want}}}" if want else name):
            return float(value)
    return 0.0


@pytest.fixture
async def api(probe_host: Any, aiohttp_client: Any) -> Any:
    from pageant.api.app import make_app

    return await aiohttp_client(make_app(probe_host, run_engine=False))


# ── /metrics ──────────────────────────────────────────────────────────────────


async def test_metrics_move_during_a_run(api, tokens, probe_host, engine, probe) -> None:
    async def scrape() -> str:
        response = await api.get("/metrics", headers=bearer(tokens["admin"]))
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        return await response.text()

    before = await scrape()
    assert sample(before, "pageant_steps_dispatched_total", action="probe.step") == 0
    assert sample(before, "pageant_plugins", status="loaded") >= 2  # core and probe
    probe.script["b"] = [RETRY]
    event = await publish_event(
        probe_host.db, probe_host.clock.now(), spec(phase("main", probe_step("a"), probe_step("b")))
    )
    run_id, _ = await start_now(probe_host, event.id, scope="", actor="admin:test")
    await engine.tick()

    after = await scrape()
    assert sample(after, "pageant_steps_dispatched_total", action="probe.step") == 2
    assert sample(after, "pageant_steps_retried_total", action="probe.step") == 1
    assert sample(after, "pageant_dispatch_seconds_count", action="probe.step") == 2
    assert sample(after, "pageant_tick_seconds_count") == 1
    assert sample(after, "pageant_engine_last_tick_timestamp_seconds") > 0
    assert sample(after, "pageant_runs", status="running") == 1
    assert sample(after, "pageant_runs", status="completed") == 0
    for family in (
        "pageant_steps_failed",
        "pageant_steps_refused",
        "pageant_step_lateness_seconds",
        "pageant_deadlocks_retried",
    ):
        assert f"# HELP {family}" in after
    # The retried step is due again later: claimed that late, the lateness is observed.
    probe_host.clock.advance(probe_host.settings.retry_seconds + 7)
    await engine.tick()
    later = await scrape()
    assert sample(later, "pageant_step_lateness_seconds_count") == 1
    assert sample(later, "pageant_step_lateness_seconds_bucket", le="5.0") == 0
    assert sample(later, "pageant_step_lateness_seconds_bucket", le="15.0") == 1
    assert sample(later, "pageant_runs", status="completed") == 1
    assert run_id


async def test_metrics_need_the_admin_token(api, tokens) -> None:
    assert (await api.get("/metrics")).status == 401
    for role in ("editor", "moderator", "game"):
        assert (await api.get("/metrics", headers=bearer(tokens[role]))).status == 403


async def test_two_hosts_in_one_process_keep_their_own_counters(probe_host, settings, db) -> None:
    from pageant.hosting import Host

    other = Host(settings, discover=False, db=db)
    probe_host.metrics.steps_dispatched.labels(action="x").inc()
    assert b'action="x"' not in other.metrics.render()


# ── /healthz ──────────────────────────────────────────────────────────────────


async def test_healthz_judges_the_engine_by_its_last_tick(api, probe_host, engine) -> None:
    poll = probe_host.settings.poll_seconds
    engine.last_tick_at = time.monotonic() - (3 * poll - 1)
    response = await api.get("/healthz")
    assert response.status == 200
    body = await response.json()
    assert body["status"] == "ok" and body["engine"]["running"] is True
    assert 3 * poll - 1 <= body["engine"]["last_tick_seconds_ago"] < 3 * poll

    engine.last_tick_at = time.monotonic() - (3 * poll + 1)
    response = await api.get("/healthz")
    assert response.status == 503
    body = await response.json()
    assert body["status"] == "unhealthy"
    assert body["problems"][0].startswith(f"engine: no tick for {3 * poll + 1:.0f} s")
    verbose = await api.get("/healthz?verbose")
    assert verbose.status == 200 and (await verbose.json())["status"] == "degraded"


async def test_a_stopping_engine_is_unhealthy_so_a_balancer_drains_it(api, engine) -> None:
    engine.last_tick_at = time.monotonic()
    engine.stopping = True
    response = await api.get("/healthz")
    assert response.status == 503
    assert (await response.json())["problems"] == ["engine: stopping"]


# ── the log ───────────────────────────────────────────────────────────────────


async def test_each_state_change_is_one_info_line_with_its_fields(
    probe_host, engine, probe, caplog
) -> None:
    event = await publish_event(
        probe_host.db, probe_host.clock.now(), spec(phase("main", probe_step("a")))
    )
    with caplog.at_level(logging.INFO, logger="pageant.runs"):
        run_id, _ = await start_now(probe_host, event.id, scope="", actor="admin:test")
        await engine.tick()
    lines = [r for r in caplog.records if r.name == "pageant.runs"]
    [done] = [r for r in lines if getattr(r, "step_id", None) is not None]
    assert (done.run_id, done.action, done.outcome, done.event) == (
        run_id,
        "probe.step",
        "done",
        "step.status",
    )
    assert done.levelno == logging.INFO
    outcomes = [r.outcome for r in lines if getattr(r, "step_id", None) is None]
    assert "completed" in outcomes


def _record(**fields: Any) -> logging.LogRecord:
    record = logging.LogRecord("pageant.runs", logging.INFO, "x", 1, "run %s done", (7,), None)
    record.__dict__.update(fields)
    return record


def test_the_json_format_is_one_object_a_line_with_the_fields() -> None:
    line = JsonFormatter().format(_record(run_id=7, step_id=3, action="core.announce"))
    data = json.loads(line)
    assert data["msg"] == "run 7 done" and data["level"] == "INFO"
    assert (data["run_id"], data["step_id"], data["action"]) == (7, 3, "core.announce")
    assert data["ts"].endswith("Z") and "\n" not in line


def test_the_kv_format_quotes_what_needs_it() -> None:
    line = KeyValueFormatter().format(_record(run_id=7, because='a "b" c'))
    assert 'msg="run 7 done"' in line and "run_id=7" in line
    assert 'because="a \\"b\\" c"' in line and line.startswith("ts=")


def test_log_format_and_level_are_settings() -> None:
    from pageant.support.settings import Invalid, load_settings

    loaded = load_settings(environ={"PAGEANT_LOG_FORMAT": "JSON", "PAGEANT_LOG_LEVEL": "debug"})
    assert (loaded.log_format, loaded.log_level) == ("json", "DEBUG")
    with pytest.raises(Invalid):
        load_settings({"log_format": "xml"}, environ={})


# ── lock contention ──────────────────────────────────────────────────────────


def _deadlock() -> OperationalError:
    return OperationalError("UPDATE ...", {}, pymysql.err.OperationalError(1213, "Deadlock"))


async def test_contention_below_the_bound_is_retried_at_debug_and_counted(
    probe_host, caplog
) -> None:
    calls = []

    async def work() -> str:
        calls.append(1)
        if len(calls) < BOUND:
            raise _deadlock()
        return "done"

    with caplog.at_level(logging.DEBUG, logger="pageant.engine"):
        assert await retrying(probe_host, "the test stage", work) == "done"
    assert len(calls) == BOUND
    levels = {r.levelno for r in caplog.records if r.name == "pageant.engine"}
    assert levels == {logging.DEBUG}
    text = probe_host.metrics.render().decode()
    assert sample(text, "pageant_deadlocks_retried_total", where="the test stage") == BOUND - 1


async def test_contention_at_the_bound_is_one_warning(probe_host, caplog) -> None:
    async def work() -> None:
        raise _deadlock()

    with caplog.at_level(logging.DEBUG, logger="pageant.engine"):
        with pytest.raises(ContentionPersisted):
            await retrying(probe_host, "the test stage", work)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and f"{BOUND} times in a row" in warnings[0].getMessage()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_other_errors_are_not_retried(probe_host) -> None:
    calls = []

    async def work() -> None:
        calls.append(1)
        raise ValueError("a bug")

    with pytest.raises(ValueError):
        await retrying(probe_host, "the test stage", work)
    assert calls == [1]


async def test_a_tick_stage_that_collides_is_not_an_error(probe_host, engine, caplog, monkeypatch):
    collided = []

    async def reclaim(host: Any, now: Any) -> None:
        if not collided:
            collided.append(1)
            raise _deadlock()

    monkeypatch.setattr("pageant.engine.loop.STAGES", (reclaim,))
    with caplog.at_level(logging.DEBUG, logger="pageant.engine"):
        await engine.tick()
    assert collided == [1]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
