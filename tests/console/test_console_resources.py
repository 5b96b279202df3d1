"""The run console's resources and cleanup over the real app and database (both dialects):
what a run holds in the world (the ledger's rows, a lease's deadline), its cleanup state with
the domain's summary, and the admin's cleanup control (CSRF, roles, the server's refusals).

The games are the ledger tests' own: ``smith`` forges swords (a revert that can be told to
fail) and ``wx`` lends a region's weather (a lease with a deadline)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from pageant.api.app import make_app
from tests.console.test_console import csrf_of, page_csrf, sign_in
from tests.factories import log_lines, phase, run_row, spec, start_event, step
from tests.ledger.games import forge, lease


@pytest.fixture
async def wx_client(wx_host, aiohttp_client):
    return await aiohttp_client(make_app(wx_host, run_engine=False))


def _rows(html: str) -> dict[str, str]:
    """Each listed resource's row, by its status attribute and order: ``{"confirmed-0": ...}``."""
    table = re.search(r'<table class="list" id="resource-list">(.*?)</table>', html, re.S)
    assert table, "the page lists no resources"
    rows = re.findall(
        r'<tr data-resource="\d+" data-status="([a-z_]+)">(.*?)</tr>', table.group(1), re.S
    )
    seen: dict[str, int] = {}
    out = {}
    for status, row in rows:
        out[f"{status}-{seen.get(status, 0)}"] = row
        seen[status] = seen.get(status, 0) + 1
    return out


def _cell(row: str, label: str) -> str:
    found = re.search(rf'<td data-label="{label}">(.*?)</td>', row, re.S)
    assert found, label
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", found.group(1))).strip()


async def _cold_forge_run(host: Any, engine: Any, smith: Any, clock: Any) -> int:
    """A completed run whose three swords could not be taken back (every attempt spent)."""
    smith.revert_error = "the forge is cold"
    run_id = await start_event(host, spec(phase("p", forge(3))))
    for _ in range(4):
        await engine.tick()
        clock.advance(seconds=1)
    run = await run_row(host.db, run_id)
    assert (run.status, run.cleanup_status) == ("completed", "incomplete")
    return run_id


async def test_a_running_run_lists_what_it_holds_and_a_leases_deadline(
    wx_host, wx_engine, wx_client, tokens, clock
):
    run_id = await start_event(
        wx_host,
        spec(
            phase(
                "p", forge(2), lease("north", "storm", minutes=5), step("core.wait", seconds=3600)
            )
        ),
    )
    await wx_engine.tick()
    await sign_in(wx_client, tokens["editor"])
    html = await (await wx_client.get(f"/runs/{run_id}/live")).text()
    assert 'id="resources-h">Resources and cleanup</h2>' in html
    rows = _rows(html)
    assert sorted(rows) == ["confirmed-0", "confirmed-1", "confirmed-2"]
    sword = rows["confirmed-0"]
    assert _cell(sword, "What").startswith("sword sword-1")
    assert _cell(sword, "Recorded by").startswith("smith.forge")
    # the status is a word (and its name), never colour alone
    assert _cell(sword, "Status") == "● held confirmed"
    assert _cell(sword, "Give-back attempts") == "0"
    assert _cell(sword, "Deadline") == ""
    borrowed = rows["confirmed-2"]
    assert _cell(borrowed, "What").startswith("lease wx.sky on north")
    assert _cell(borrowed, "Recorded by").startswith("core.lease")
    deadline = _cell(borrowed, "Deadline")
    assert deadline.startswith("given back by ") and "12:05" in deadline
    state = re.search(r'<p id="cleanup-state">(.*?)</p>', html, re.S).group(1)
    assert "Cleanup: <span" in state and ">pending</span>" in state
    assert "given back when the run ends, or at a lease&#39;s deadline" in state
    summary = re.search(r'<p id="cleanup-summary">(.*?)</p>', html, re.S).group(1)
    assert summary == "3 held while the run goes on (3 recorded in all)."
    # the live part is what htmx polls: the section updates with the rest of the page
    assert f'hx-get="/runs/{run_id}/live"' in html


async def test_an_admin_tries_cleanup_again_and_a_moderator_sees_no_control(
    wx_host, wx_engine, wx_client, smith, tokens, clock, db
):
    run_id = await _cold_forge_run(wx_host, wx_engine, smith, clock)
    await sign_in(wx_client, tokens["moderator"])
    html = await (await wx_client.get(f"/runs/{run_id}")).text()
    rows = _rows(html)
    assert sorted(rows) == ["revert_failed-0", "revert_failed-1", "revert_failed-2"]
    for row in rows.values():
        assert _cell(row, "Status") == "● held; giving it back failed revert_failed"
        assert _cell(row, "Give-back attempts") == "3"
        assert _cell(row, "Last error") == "the forge is cold"
    assert ">incomplete</span>" in html
    summary = re.search(r'<p id="cleanup-summary">(.*?)</p>', html, re.S).group(1)
    assert summary == (
        "3 of these are still out there (nothing is left to try; an admin can try cleanup"
        " again) (3 recorded in all)."
    )
    # a moderator has no cleanup control, and the server refuses one posted anyway
    assert f'action="/runs/{run_id}/cleanup"' not in html
    refused = await wx_client.post(f"/runs/{run_id}/cleanup", data={"csrf_token": csrf_of(html)})
    assert refused.status == 403
    assert len(smith.world) == 3 and len(smith.reverts) == 9

    smith.revert_error = None
    wx_client.session.cookie_jar.clear()  # sign in afresh, as an admin
    await sign_in(wx_client, tokens["admin"])
    html = await (await wx_client.get(f"/runs/{run_id}")).text()
    assert f'<form method="post" action="/runs/{run_id}/cleanup"' in html
    assert "Try cleanup again</button>" in html
    # without the session's CSRF token: refused, nothing tried
    for data in ({}, {"csrf_token": "guessed"}):
        forged = await wx_client.post(f"/runs/{run_id}/cleanup", data=data)
        assert forged.status == 403
    assert len(smith.world) == 3 and len(smith.reverts) == 9
    done = await wx_client.post(
        f"/runs/{run_id}/cleanup", data={"csrf_token": csrf_of(html)}, allow_redirects=False
    )
    assert done.status == 303 and done.headers["Location"] == f"/runs/{run_id}"
    assert smith.world == {}
    run = await run_row(db, run_id)
    assert run.cleanup_status == "complete"
    html = await (await wx_client.get(f"/runs/{run_id}")).text()
    rows = _rows(html)
    assert sorted(rows) == ["reverted-0", "reverted-1", "reverted-2"]
    assert {_cell(r, "Status") for r in rows.values()} == {"○ given back reverted"}
    assert {_cell(r, "Give-back attempts") for r in rows.values()} == {"4"}
    assert ">complete</span>" in html
    # nothing is held any more: no control, and the page no longer polls
    assert "Try cleanup again" not in html and "hx-get=" not in html
    summary = re.search(r'<p id="cleanup-summary">(.*?)</p>', html, re.S).group(1)
    assert summary == (
        "Everything this run created or borrowed has been given back (3 recorded in all)."
    )
    (line,) = await log_lines(db, run_id, "control.cleanup")
    assert (line.actor, line.detail) == ("admin:test-admin", {"result": "complete"})


async def test_an_editor_has_no_cleanup_control_and_is_refused(
    wx_host, wx_engine, wx_client, smith, tokens, clock
):
    run_id = await _cold_forge_run(wx_host, wx_engine, smith, clock)
    await sign_in(wx_client, tokens["editor"])
    html = await (await wx_client.get(f"/runs/{run_id}")).text()
    assert "revert_failed" in html and "Try cleanup again" not in html
    smith.revert_error = None
    refused = await wx_client.post(f"/runs/{run_id}/cleanup", data={"csrf_token": csrf_of(html)})
    assert refused.status == 403
    assert len(smith.world) == 3
    assert (await run_row(wx_host.db, run_id)).cleanup_status == "incomplete"


async def test_cleanup_of_a_run_in_flight_or_of_one_that_recorded_nothing_shows_the_refusal(
    wx_host, wx_engine, wx_client, smith, tokens
):
    live = await start_event(wx_host, spec(phase("p", forge(1), step("core.wait", seconds=600))))
    quiet = await start_event(
        wx_host, spec(phase("p", step("core.announce", leg="core.log", message="hi")))
    )
    await wx_engine.tick()
    assert (await run_row(wx_host.db, quiet)).status == "completed"
    await sign_in(wx_client, tokens["admin"])
    # in flight: no control on the page; posted anyway, the server's sentence (409)
    html = await (await wx_client.get(f"/runs/{live}")).text()
    assert "Try cleanup again" not in html and 'data-status="confirmed"' in html
    answer = await wx_client.post(f"/runs/{live}/cleanup", data={"csrf_token": csrf_of(html)})
    assert answer.status == 409
    page = await answer.text()
    assert f"run {live} is running; cleanup acts on a run that has ended" in page
    assert 'id="resource-list"' in page  # the page is drawn again around the sentence
    assert len(smith.world) == 1
    # ended, but recorded nothing: nothing listed, no control, and the refusal
    html = await (await wx_client.get(f"/runs/{quiet}")).text()
    assert 'id="resource-list"' not in html and "Try cleanup again" not in html
    assert ">not required</span>" in html
    assert "This run has recorded nothing in the world." in html
    answer = await wx_client.post(f"/runs/{quiet}/cleanup", data={"csrf_token": csrf_of(html)})
    assert answer.status == 409
    assert f"run {quiet} recorded nothing in the world" in await answer.text()
    # no such run: a page saying so, never a 500
    missing = await wx_client.post(
        "/runs/999999/cleanup", data={"csrf_token": await page_csrf(wx_client)}
    )
    assert missing.status == 404


async def test_an_ended_run_still_giving_back_keeps_its_page_updating(
    wx_host, wx_engine, wx_client, smith, tokens, clock
):
    smith.revert_error = "the forge is cold"
    run_id = await start_event(wx_host, spec(phase("p", forge(1))))
    await wx_engine.tick()
    run = await run_row(wx_host.db, run_id)
    assert (run.status, run.cleanup_status) == ("completed", "pending")
    await sign_in(wx_client, tokens["moderator"])
    html = await (await wx_client.get(f"/runs/{run_id}/live")).text()
    assert f'hx-get="/runs/{run_id}/live"' in html
    assert "while the host gives back what the run still holds" in html
    assert "Giving back what is still held; the host keeps trying." in html
    for _ in range(3):
        clock.advance(seconds=1)
        await wx_engine.tick()
    assert (await run_row(wx_host.db, run_id)).cleanup_status == "incomplete"
    html = await (await wx_client.get(f"/runs/{run_id}/live")).text()
    assert "hx-get=" not in html
