"""The run page shows a run's countdown ahead of its phases: each rung, its status and why
one was skipped."""

from __future__ import annotations

import re
from datetime import timedelta

from pageant.db.countdown import COUNTDOWN_PHASE
from pageant.engine import Engine
from pageant.runs.console import console
from tests.api.test_events_api import EVENTS, call
from tests.console.test_console import form_of, sign_in
from tests.factories import announce, phase, publish_event
from tests.scheduling import once, runs_of, utc


async def test_the_run_page_lists_the_countdown_before_the_phases(client, tokens, host, clock):
    clock.set(utc(2027, 3, 1, 12, 50))
    first = phase("muster", announce("The muster begins"))
    first["countdown"] = {
        "before": ["15m", "5m"],
        "legs": ["core.log"],
        "message": "Starts in {remaining}",
    }
    event = await publish_event(
        host.db, clock.now(), {"schedule": once("2027-03-01T13:00"), "phases": [first]}
    )
    async with Engine(host) as engine:
        await engine.tick()
        clock.set(utc(2027, 3, 1, 13, 0) - timedelta(minutes=5))
        await engine.tick()
    [run] = await runs_of(host.db, event.id)
    rungs = [st for st in (await console(host, run.id))["steps"] if st["phase"] == COUNTDOWN_PHASE]
    assert [st["status"] for st in rungs] == ["skipped", "done"]

    await sign_in(client, tokens["moderator"])
    page = await (await client.get(f"/runs/{run.id}")).text()
    section = page.split('id="timeline-h"')[1]
    assert section.index("Countdown") < section.index("Muster")
    skipped = re.search(rf'<tr id="step-{rungs[0]["id"]}">(.*?)</tr>', section, re.S)[1]
    assert "Countdown: 15 minutes before (core.log)" in skipped
    assert "its time had passed when the run was made" in skipped
    sent = re.search(rf'<tr id="step-{rungs[1]["id"]}">(.*?)</tr>', section, re.S)[1]
    assert "Countdown: 5 minutes before (core.log)" in sent and "s-done" in sent


async def test_the_editor_keeps_a_countdown_and_a_public_gate_and_names_a_mistake(
    client, tokens, host
):
    first = phase(
        "muster",
        announce("The muster begins"),
        advance={"on": "wisps.caught", "count": 3, "public": True, "label": "Wisps caught"},
    )
    first["countdown"] = {
        "before": ["15m", "5m"],
        "legs": ["core.log", "core.webhook"],
        "message": "Starts in {remaining}",
    }
    made = {"schedule": {"kind": "manual"}, "phases": [first]}
    event = await publish_event(host.db, host.clock.now(), made, published=False)
    await sign_in(client, tokens["admin"])
    html = await (await client.get(f"/events/{event.id}")).text()
    fields = form_of(html)
    assert ("p0-countdown-before", "15m, 5m") in fields
    assert ("p0-countdown-legs", "core.log, core.webhook") in fields
    assert ("p0-public", "on") in fields and ("p0-public-label", "Wisps caught") in fields
    answer = await client.post(
        f"/events/{event.id}", data=[*fields, ("op", "save")], allow_redirects=False
    )
    assert answer.status == 303, await answer.text()
    status, saved = await call(client, "GET", f"{EVENTS}/{event.id}", tokens["admin"])
    assert status == 200, saved
    [kept] = saved["spec"]["phases"]
    assert kept["countdown"] == first["countdown"]
    assert (kept["advance"]["public"], kept["advance"]["label"]) == (True, "Wisps caught")

    wrong = [(k, "15m, soon" if k == "p0-countdown-before" else v) for k, v in fields]
    answer = await client.post(f"/events/{event.id}", data=[*wrong, ("op", "save")])
    assert answer.status == 400
    assert "expected a duration such as &#34;15m&#34;" in await answer.text()
