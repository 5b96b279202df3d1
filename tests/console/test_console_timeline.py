"""The run page read as a person reads it, over the real app and database (both dialects):
the log in the terminal's sentences, one numbering of steps, each step's times, the run
drawn on a time axis, phases a cancelled run never reached; and the axis's ticks."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from markupsafe import escape

from pageant.console import timeline
from pageant.engine import Engine
from pageant.runs import sentences
from pageant.runs.console import console
from pageant.runs.console_text import describe
from pageant.runs.controls import cancel, confirm
from pageant.runs.create import start_now
from pageant.runs.sentences import Context
from tests.console.test_console import sign_in
from tests.factories import announce, phase, publish_event, run_row, spec

CUE = {"action": "core.cue", "params": {"message": "GM: release the wisps"}, "label": "Cue"}
THREE = spec(
    phase("gather", announce("The wisps gather"), announce("Still gathering")),
    phase("hunt", CUE, advance={"after": "10m"}),
    phase("wind-down", announce("Thanks")),
)


async def _parked(host: Any) -> int:
    event = await publish_event(host.db, host.clock.now(), THREE)
    run_id, _ = await start_now(host, event.id, scope="", actor="admin:ada")
    async with Engine(host) as engine:
        await engine.tick()
        host.clock.advance(5)
        await engine.tick()
    return run_id


async def test_the_log_reads_as_the_terminal_s_sentences_with_the_records_behind_one_switch(
    client, tokens, host
):
    run_id = await _parked(host)
    await sign_in(client, tokens["moderator"])
    page = await (await client.get(f"/runs/{run_id}")).text()
    data = await console(host, run_id)
    log = page.split('id="log-h"')[1]
    context = Context.of_console(data)
    for line in data["log"]:
        if not any(isinstance(p, datetime) for p in sentences.words(line, context)):
            assert str(escape(describe(line, context))) in log, describe(line, context)
    assert "<details>" not in log and log.count('id="show-stored"') == 1
    assert log.count('<code class="stored">') == len(data["log"])


async def test_the_waiting_sentence_the_table_and_the_log_number_a_step_alike(client, tokens, host):
    run_id = await _parked(host)
    data = await console(host, run_id)
    (cue,) = [st for st in data["steps"] if st["action"] == "core.cue"]
    assert cue["seq"] == 0 and cue["id"] != 1  # position and id differ: one must be chosen
    await sign_in(client, tokens["moderator"])
    page = await (await client.get(f"/runs/{run_id}")).text()
    waiting = re.search(r'id="waiting-on">(.*?)</p>', page, re.S)[1]
    assert f"confirm “Cue” (step {cue['id']})" in waiting
    row = re.search(rf'<tr id="step-{cue["id"]}">(.*?)</tr>', page, re.S)[1]
    assert f'<td data-label="Step">step {cue["id"]}</td>' in row
    assert 'data-label="#"' not in page
    started = cue["started_at"].strftime("%Y-%m-%d %H:%M:%S UTC")
    assert '<td data-label="Started"><time datetime="' in row and started in row
    assert "“Cue” waits for a person to confirm it" in page.split('id="log-h"')[1]


async def test_the_timeline_draws_phases_and_steps_with_the_gate_s_wait(client, tokens, host):
    run_id = await _parked(host)
    async with Engine(host) as engine:
        await engine.tick()
        steps = (await console(host, run_id))["steps"]
        cue = next(st for st in steps if st["action"] == "core.cue")
        await confirm(host, run_id, cue["id"], actor="moderator:test", note=None)
        host.clock.advance(601)
        for _ in range(4):
            await engine.tick()
    assert (await run_row(host.db, run_id)).status == "completed"
    await sign_in(client, tokens["editor"])
    page = await (await client.get(f"/runs/{run_id}")).text()
    drawn = page.split('id="timeline"')[1].split("</section>")[0]
    labels = re.findall(r'<span class="tlr-label">(?:<strong>)?([^<]+)', drawn)
    assert labels[0] == "Phase 1: Gather" and labels[3] == "Phase 2: Hunt"
    assert len(labels) == 3 + 2 + 2  # three phases, four steps
    hunt = drawn.split("Phase 2: Hunt")[1].split("</li>")[0]
    assert "gate: after 10 min" in hunt and 'class="tlr-wait"' in hunt
    assert "tlr-wait" not in drawn.split("Phase 2: Hunt")[0]  # no gate, no wait
    assert "10 min" in drawn  # the axis and the hunt's length, in real durations


async def test_a_cancelled_run_s_later_phases_are_not_reached(client, tokens, host):
    run_id = await _parked(host)
    await cancel(host, run_id, actor="admin:test", reason="rain")
    await sign_in(client, tokens["moderator"])
    page = await (await client.get(f"/runs/{run_id}")).text()
    states = re.findall(r'<span class="badge">([^<]+)</span></h3>', page)
    assert states == ["done", "stopped here", "not reached"]
    assert "ahead" not in states


@pytest.mark.parametrize(
    ("span", "words"),
    [
        (1.2, ["0 s", "0.2 s", "0.4 s", "0.6 s", "0.8 s", "1 s", "1.2 s"]),
        (1.4, ["0 s", "0.5 s", "1 s"]),
        (1.5, ["0 s", "0.5 s", "1 s", "1.5 s"]),
        (3600, ["0 s", "10 min", "20 min", "30 min", "40 min", "50 min", "1 h"]),
        (3601, ["0 s", "15 min", "30 min", "45 min", "1 h"]),
    ],
)
def test_the_axis_ticks_are_round_and_at_most_seven(span, words):
    ticks = timeline.ticks(span)
    assert [t["words"] for t in ticks] == words
    assert ticks[0]["x"] == 0 and all(0 <= t["x"] <= 100 for t in ticks)


def test_a_run_not_yet_started_has_no_timeline():
    run = {"started_at": None, "ended_at": None}
    assert timeline.draw(run, [], {}, now=datetime(2027, 1, 1, tzinfo=UTC), tz="UTC") is None
    assert (
        timeline.span_words(9.5) == "9.5 s"
        and timeline.span_words(timedelta(minutes=2).total_seconds()) == "2 min"
    )


def test_a_resource_shows_the_detail_its_plugin_reported():
    from pageant.console.runs import _ledger

    base = {
        "owner": "shard",
        "status": "confirmed",
        "revert_attempts": 0,
        "last_error": None,
        "lease_until": None,
    }
    data = {
        "run": {"status": "running", "cleanup_status": "pending"},
        "steps": [{"id": 4, "label": "Spawn", "action": "shard.spawn", "phase": "rise"}],
        "resources": [
            {
                **base,
                "id": 1,
                "step_id": 4,
                "kind": "creature",
                "ref": "c-17",
                "payload": {"action": "shard.spawn", "detail": {"creature": "wraith"}},
            },
            {**base, "id": 2, "step_id": 4, "kind": "creature", "ref": "c-18", "payload": {}},
        ],
        "cleanup_summary": "2 held while the run goes on.",
    }
    first, second = _ledger(data)["resources"]
    assert first["detail"] == {"creature": "wraith"} and first["what"] == "creature c-17"
    assert second["detail"] is None
