"""The event page's grid over the real app and database: the newest runs as columns, the
phases as rows, each cell how that run fared (done, current, stopped there, not reached) with
the phase's duration on hover and a link to the run."""

from __future__ import annotations

import re
from typing import Any

from pageant.engine import Engine
from pageant.runs import controls
from pageant.runs.create import start_now
from pageant.runs.grid import GRID_RUNS
from tests.console.test_console import sign_in
from tests.factories import announce, phase, publish_event, spec

CUE = {"action": "core.cue", "params": {"message": "GM: go"}, "label": "Cue"}


def _cells(html: str) -> dict[tuple[str, int], tuple[str, str]]:
    """(phase label, run id) -> (state class, tooltip) for every cell of the grid."""
    grid = html.split('id="grid"')[1].split("</section>")[0]
    found = {}
    for row in re.findall(r"<tr><th scope=\"row\">(.*?)</th>(.*?)</tr>", grid, re.S):
        label, cells = row
        for state, run_id, title in re.findall(
            r'<td class="g-([a-z-]+)"><a href="/runs/(\d+)" title="([^"]*)"', cells
        ):
            found[(label, int(run_id))] = (state, title)
    return found


async def test_the_grid_shows_each_run_in_each_phase(client, tokens, host):
    event = await publish_event(
        host.db,
        host.clock.now(),
        spec(phase("gather", announce("hi")), phase("hunt", CUE)),
    )
    engine = Engine(host)
    runs = []
    for scope in ("a", "b", "c"):
        run_id, _ = await start_now(host, event.id, scope=scope, actor="admin:test")
        runs.append(run_id)
    await engine.tick()
    host.clock.advance(90)
    await engine.tick()
    done, stopped, live = runs
    cue = next(st["id"] for st in (await _steps(host, done)) if st["action"] == "core.cue")
    await controls.confirm(host, done, cue, actor="moderator:test", note=None)
    await controls.cancel(host, stopped, actor="admin:test", reason="rain")
    for _ in range(3):
        await engine.tick()
    await engine.stop()

    await sign_in(client, tokens["moderator"])
    html = await (await client.get(f"/events/{event.id}")).text()
    cells = _cells(html)
    assert cells[("Gather", done)][0] == "done"
    assert cells[("Hunt", done)][0] == "done"
    assert cells[("Hunt", stopped)][0] == "stopped"
    assert cells[("Hunt", live)][0] == "current"
    # The duration is on hover, in words, and the column heads link to the runs.
    assert cells[("Hunt", live)][1].startswith(f"Run {live}, Hunt: current, 1 min")
    assert f'<a href="/runs/{live}" title="Run {live}, running">{live}</a>' in html


async def test_the_grid_keeps_the_newest_runs_and_groups_a_fan_out(client, tokens, host):
    event = await publish_event(host.db, host.clock.now(), spec(phase("gather", announce("x"))))
    made = [
        (await start_now(host, event.id, scope=f"s{i}", actor="admin:test"))[0]
        for i in range(GRID_RUNS + 2)
    ]
    await sign_in(client, tokens["moderator"])
    html = await (await client.get(f"/events/{event.id}")).text()
    grid = html.split('id="grid"')[1].split("</section>")[0]
    heads = [int(n) for n in re.findall(r'<th scope="col"><a href="/runs/(\d+)"', grid)]
    assert sorted(heads) == made[2:]  # the newest 30
    # Runs of a fan-out are grouped by their params (here each its own scope).
    assert '<th scope="colgroup" colspan="1">scope s31</th>' in grid
    assert "scope s0<" not in grid and "scope s1<" not in grid
    cells = _cells(html)
    assert {state for state, _ in cells.values()} == {"not-reached"}


async def _steps(host: Any, run_id: int) -> list[dict[str, Any]]:
    from pageant.runs.console import console

    return (await console(host, run_id))["steps"]
