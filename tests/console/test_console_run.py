"""The run console's additions over the real app and database (both dialects): the budget
meter, who took part and the results, the reschedule control for a scheduled run, and the
run's params."""

from __future__ import annotations

import re
from typing import Any

import pytest

from pageant.api.app import make_app
from pageant.engine import Engine
from pageant.runs.create import start_now
from tests.api.test_events_api import call
from tests.console.test_console import csrf_of, page_csrf, sign_in
from tests.console.test_console_admin import _summon, _wisps_event
from tests.engine.test_outcomes import _rush
from tests.factories import announce, log_lines, phase, publish_event, run_row, spec
from tests.schedules.test_schedule_lifecycle import scheduled_event
from tests.scheduling import runs_of, utc, weekly


@pytest.fixture
async def ticking(host: Any) -> Any:
    engine = Engine(host)
    try:
        yield engine
    finally:
        await engine.stop()


async def test_the_budget_meter_shows_spent_of_cap_and_where_the_cap_is_set(
    client, tokens, host, ticking
):
    status, data = await call(
        client,
        "PUT",
        "/api/v1/admin/actions/wisps.summon",
        tokens["admin"],
        {"enabled": True, "caps": {"wisps.wisps": 30}},
    )
    assert status == 200, data
    event_id = await _wisps_event(client, tokens, _summon(5), _summon(7))
    status, data = await call(
        client, "POST", f"/api/v1/admin/events/{event_id}/verify", tokens["admin"]
    )
    assert status == 200, data
    run_id, _ = await start_now(host, event_id, scope="", actor="admin:test")
    await ticking.tick()
    assert (await run_row(host.db, run_id)).status == "completed"
    await sign_in(client, tokens["moderator"])
    html = await (await client.get(f"/runs/{run_id}")).text()
    row = re.search(r'<tr data-dimension="wisps.wisps">(.*?)</tr>', html, re.S).group(1)
    assert "Wisps summoned" in row and "12 of 30 wisps" in row
    assert 'value="12"' in row and 'max="30"' in row
    assert 'href="/switchboard/wisps.summon"' in row
    assert "(cap reached)" not in row


async def test_a_run_with_no_budget_shows_no_meter(client, tokens, host):
    event = await publish_event(host.db, host.clock.now())
    run_id, _ = await start_now(host, event.id, scope="", actor="admin:test")
    await sign_in(client, tokens["admin"])
    html = await (await client.get(f"/runs/{run_id}")).text()
    assert 'id="budget-h"' not in html and 'id="participants-h"' not in html


async def test_the_run_console_shows_who_took_part_and_the_results(
    tokens, probe_host, probe, engine, clock, aiohttp_client
):
    client = await aiohttp_client(make_app(probe_host, run_engine=False))
    event = await _rush(probe_host, probe, clock)
    run_id, _ = await start_now(probe_host, event.id, scope="", actor="admin:test")
    await engine.tick()
    clock.advance(probe_host.settings.retry_seconds)
    await engine.tick()
    await sign_in(client, tokens["editor"])
    html = await (await client.get(f"/runs/{run_id}/live")).text()
    people = re.search(r'<ul id="participants">(.*?)</ul>', html, re.S).group(1)
    assert re.findall(r"<li>([^<]+)", people) == ["Ada ", "Brann", "Cato"]
    assert '<span class="help">(tank)</span>' in people
    table = re.search(r'<table class="list results">(.*?)</table>', html, re.S).group(1)
    assert "Boss rush" in table and "(phase finale)" in table
    rows = re.findall(r"<tr><td[^>]*>([^<]*)</td><td[^>]*>([^<]*)</td><td[^>]*>([^<]*)</td>", table)
    assert rows == [("1", "Ada", "4:12"), ("2", "Brann", "5:40"), ("", "Cato", "did not finish")]


async def test_a_moderator_reschedules_a_scheduled_run_from_its_console(
    client, tokens, host, ticking, db
):
    event_id = await scheduled_event(client, tokens, weekly("friday", at="20:00"))
    await ticking.tick()
    first = (await runs_of(db, event_id))[0]
    await sign_in(client, tokens["moderator"])
    html = await (await client.get(f"/runs/{first.id}")).text()
    assert f'action="/runs/{first.id}/reschedule"' in html
    # The event's zone: its wall clock in the form and in the error, never microseconds.
    assert (
        '<label for="reschedule-at">New start (on the event\'s clock, Europe/Berlin)</label>'
        in html
    )
    csrf = csrf_of(html)
    # a bad instant and one in the past: at the field, nothing moved
    for value, words in (
        ("next friday", "Expected a date and time such as"),
        (
            "2020-01-01T10:00",
            r"Wed 2020-01-01 10:00 CET is not later than now \(Mon 2027-03-01 13:00 CET\)",
        ),
    ):
        answer = await client.post(
            f"/runs/{first.id}/reschedule",
            data={"csrf_token": csrf, "scheduled_for": value, "reason": "raid night"},
        )
        assert answer.status == 400
        page = await answer.text()
        assert re.search(r'id="reschedule-err">⚠ [^<]*' + words, page)
        assert 'aria-invalid="true" aria-describedby="reschedule-err"' in page
    # no reason
    answer = await client.post(
        f"/runs/{first.id}/reschedule",
        data={"csrf_token": csrf, "scheduled_for": "2027-03-06T17:00", "reason": " "},
    )
    assert answer.status == 400 and "A reason is required" in await answer.text()
    assert (await runs_of(db, event_id))[0].scheduled_for == first.scheduled_for
    answer = await client.post(
        f"/runs/{first.id}/reschedule",
        data={"csrf_token": csrf, "scheduled_for": "2027-03-06T17:00", "reason": "raid night"},
        allow_redirects=False,
    )
    assert answer.status == 303
    # 17:00 in Berlin (CET, UTC+1) is 16:00 UTC.
    assert (await run_row(db, first.id)).scheduled_for == utc(2027, 3, 6, 16)
    (line,) = await log_lines(db, first.id, "control.reschedule")
    assert line.actor == "moderator:test-moderator" and line.detail["reason"] == "raid night"


async def test_an_editor_has_no_reschedule_control(client, tokens, host, ticking, db):
    event_id = await scheduled_event(client, tokens, weekly("friday", at="20:00"))
    await ticking.tick()
    first = (await runs_of(db, event_id))[0]
    await sign_in(client, tokens["editor"])
    html = await (await client.get(f"/runs/{first.id}")).text()
    assert "reschedule" not in html.lower().replace("control.reschedule", "")
    answer = await client.post(
        f"/runs/{first.id}/reschedule",
        data={
            "csrf_token": await page_csrf(client),
            "scheduled_for": "2027-03-06T17:00",
            "reason": "x",
        },
    )
    assert answer.status == 403
    assert (await run_row(db, first.id)).scheduled_for == first.scheduled_for


async def test_a_run_that_has_ended_cannot_be_rescheduled(client, tokens, host, ticking):
    event = await publish_event(host.db, host.clock.now())
    run_id, _ = await start_now(host, event.id, scope="", actor="admin:test")
    await ticking.tick()
    assert (await run_row(host.db, run_id)).status == "completed"
    await sign_in(client, tokens["admin"])
    answer = await client.post(
        f"/runs/{run_id}/reschedule",
        data={
            "csrf_token": await page_csrf(client),
            "scheduled_for": "2027-03-06T17:00",
            "reason": "x",
        },
    )
    assert answer.status == 409
    assert f"run {run_id} is completed; reschedule acts on a scheduled run" in await answer.text()


async def _run_with_lines(host: Any, count: int) -> tuple[int, int]:
    """A run whose log has ``count`` lines: its own, then ``run.waiting`` lines numbered
    from 0 in their detail; answers the run and how many numbered lines it has."""
    from pageant.db import runlog
    from pageant.db.log_kinds import LogKind

    event = await publish_event(host.db, host.clock.now())
    run_id, _ = await start_now(host, event.id, scope="", actor="admin:test")
    numbered = count - len(await log_lines(host.db, run_id))
    async with host.db.begin() as conn:
        for n in range(numbered):
            await runlog.write(
                conn, run_id, LogKind.RUN_WAITING, at=host.clock.now(), detail={"n": n}
            )
    return run_id, numbered


@pytest.mark.parametrize("extra", [-1, 0, 1])
async def test_the_log_tail_is_the_newest_lines_in_order_and_the_count(host, extra):
    from pageant.db import runlog

    run_id, _ = await _run_with_lines(host, 10)
    async with host.db.connect() as conn:
        every = await runlog.lines_of(conn, run_id)
        tail, total = await runlog.tail_of(conn, run_id, 10 + extra)
    assert len(every) == total == 10
    assert [line.id for line in tail] == [line.id for line in every][-(10 + extra) :]


async def test_the_run_page_shows_the_newest_lines_of_a_long_log_with_the_count(
    client, tokens, host
):
    from pageant.console.runs import LOG_LINES

    run_id, numbered = await _run_with_lines(host, LOG_LINES + 5)
    await sign_in(client, tokens["moderator"])
    html = (await (await client.get(f"/runs/{run_id}/live")).text()).replace("&#34;", '"')
    assert f"The newest {LOG_LINES} of {LOG_LINES + 5} lines." in html
    shown = [int(n) for n in re.findall(r'\{"n": (\d+)\}', html)]
    # The run's own first lines and the oldest numbered ones are left out; the rest in order.
    assert shown == list(range(numbered - LOG_LINES, numbered))


async def test_the_run_page_shows_the_runs_params_and_a_run_without_params_shows_none(
    client, tokens, host
):
    declared = [
        {"name": "server", "type": "string", "label": "Server", "required": True},
        {"name": "rounds", "type": "integer", "label": "Rounds", "default": 3},
    ]
    with_params = await publish_event(
        host.db, host.clock.now(), {**spec(phase("main", announce("hi"))), "params": declared}
    )
    run_id, _ = await start_now(
        host, with_params.id, params={"server": "eu-2 <b>"}, actor="admin:test"
    )
    plain = await publish_event(host.db, host.clock.now())
    plain_id, _ = await start_now(host, plain.id, actor="admin:test")
    await sign_in(client, tokens["moderator"])

    for path in (f"/runs/{run_id}", f"/runs/{run_id}/live"):
        html = await (await client.get(path)).text()
        shown = re.search(r'<dd id="run-params">(.*?)</dd>', html, re.S).group(1)
        # Each pair in name order, the default filled in, the value escaped.
        assert re.findall(r"<code>(.*?)</code>", shown) == ["rounds=3", "server=eu-2 &lt;b&gt;"]
    html = await (await client.get(f"/runs/{plain_id}")).text()
    assert 'id="run-params"' not in html and "<dt>Params</dt>" not in html


async def test_a_counted_firing_says_the_gate_is_moving_until_the_engine_moves_it(
    client, tokens, host
):
    event = await publish_event(
        host.db,
        host.clock.now(),
        spec(
            phase("hunt", advance={"on": "wisps.caught", "count": 1, "dormant": False}),
            phase("after", announce("done")),
        ),
    )
    run_id, _ = await start_now(host, event.id, scope="", actor="admin:test")
    engine = Engine(host)
    await engine.tick()
    await sign_in(client, tokens["moderator"])
    waiting = await (await client.get(f"/runs/{run_id}")).text()
    assert "waiting on wisps.caught" in waiting and "the gate is moving" not in waiting
    await host.emit("wisps.caught", {"colour": "north"})
    moving = await (await client.get(f"/runs/{run_id}")).text()
    line = re.search(r'id="waiting-on">(.*?)</p>', moving, re.S).group(1)
    assert "a firing was counted; the gate is moving." in line and "Advancing" not in line
    await engine.tick()
    moved = await (await client.get(f"/runs/{run_id}")).text()
    assert "the gate is moving" not in moved
    await engine.stop()
