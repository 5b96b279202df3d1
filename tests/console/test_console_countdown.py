"""The run page shows a run's countdown ahead of its phases: each rung, its status and why
one was skipped."""

from __future__ import annotations

import re
from datetime import timedelta

from pageant.db.countdown import COUNTDOWN_PHASE
from pageant.engine import Engine
from pageant.runs.console import console
from tests.console.test_console import sign_in
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
