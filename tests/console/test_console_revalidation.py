"""The fragments htmx polls (the run page's ``/runs/{id}/live``, ``/now/live``) over the real
app and database (both dialects): a 200 carries an ``ETag`` (a digest of the HTML sent) and
``Cache-Control: no-cache``; the same poll with that tag answers 304 with no body; a step
finishing or a control answers 200 with a new tag; a malformed ``If-None-Match`` is
ignored; and the tag is per response (a session's CSRF token is in the HTML it tags)."""

from __future__ import annotations

from typing import Any

import pytest

from pageant.api.app import make_app
from pageant.runs.create import start_now
from tests.console.test_console import page_csrf, sign_in
from tests.factories import announce, phase, probe_step, publish_event, spec


@pytest.fixture
async def web(probe_host, aiohttp_client, tokens):
    client = await aiohttp_client(make_app(probe_host, run_engine=False))
    await sign_in(client, tokens["admin"])
    return client


async def _run(host: Any, *steps: Any) -> int:
    event = await publish_event(host.db, host.clock.now(), spec(phase("p", *steps)))
    run_id, _ = await start_now(host, event.id, scope="", actor="admin:test")
    return run_id


async def _poll(client: Any, path: str, if_none_match: str | None = None) -> Any:
    headers = {"HX-Request": "true"}
    if if_none_match is not None:
        headers["If-None-Match"] = if_none_match
    return await client.get(path, headers=headers)


async def _parked(host: Any, engine: Any, probe: Any) -> int:
    """A run whose first step is parked, waiting for a person to confirm it."""
    probe.script["cue"] = [{"ok": True, "park": True}]
    run_id = await _run(host, probe_step("cue"), announce("after"))
    await engine.tick()
    return run_id


async def test_an_unchanged_fragment_answers_304_to_its_etag(web, probe_host, engine, probe):
    run_id = await _parked(probe_host, engine, probe)
    path = f"/runs/{run_id}/live"
    first = await _poll(web, path)
    assert first.status == 200
    tag = first.headers["ETag"]
    assert tag.startswith('"') and tag.endswith('"')
    assert first.headers["Cache-Control"] == "no-cache"
    assert (await first.text()).lstrip().startswith('<div id="run-live"')
    again = await _poll(web, path, tag)
    assert again.status == 304
    assert await again.read() == b""
    assert again.headers["ETag"] == tag
    assert again.headers["Cache-Control"] == "no-cache"
    # The console's frame headers are on the 304 too.
    assert again.headers["X-Content-Type-Options"] == "nosniff"
    assert (await _poll(web, path, f'"other", W/{tag}')).status == 304


async def test_a_step_finishing_answers_200_with_a_new_etag(web, probe_host, clock, engine, probe):
    probe.script["a"] = [{"ok": False, "retry": True, "error": "shard busy"}]
    run_id = await _run(probe_host, probe_step("a"))
    await engine.tick()
    path = f"/runs/{run_id}/live"
    first = await _poll(web, path)
    assert "shard busy" in await first.text()
    clock.advance(minutes=2)
    await engine.tick()
    after = await _poll(web, path, first.headers["ETag"])
    assert after.status == 200
    assert after.headers["ETag"] != first.headers["ETag"]
    assert 'id="run-status">completed<' in await after.text()


async def test_a_control_answers_200_with_a_new_etag(web, probe_host, engine, probe):
    run_id = await _parked(probe_host, engine, probe)
    path = f"/runs/{run_id}/live"
    first = await _poll(web, path)
    assert (await _poll(web, path, first.headers["ETag"])).status == 304
    csrf = await page_csrf(web, f"/runs/{run_id}")
    paused = await web.post(f"/runs/{run_id}/pause", data={"csrf_token": csrf})
    assert paused.status == 200  # followed the 303 back to the run page
    after = await _poll(web, path, first.headers["ETag"])
    assert after.status == 200
    assert after.headers["ETag"] != first.headers["ETag"]
    assert 'id="run-status">paused<' in await after.text()


@pytest.mark.parametrize(
    "bad", ["garbage", '""', "W/", ",,,", '"unterminated', "W/W/x", "x" * 4000, " ,"]
)
async def test_a_bad_if_none_match_is_harmless(web, probe_host, engine, probe, bad):
    run_id = await _parked(probe_host, engine, probe)
    plain = await _poll(web, f"/runs/{run_id}/live")
    answer = await _poll(web, f"/runs/{run_id}/live", bad)
    assert answer.status == 200
    assert answer.headers["ETag"] == plain.headers["ETag"]
    assert await answer.text() == await plain.text()


async def test_the_tag_is_per_session_as_the_html_is(
    web, probe_host, engine, probe, aiohttp_client, tokens
):
    run_id = await _parked(probe_host, engine, probe)
    path = f"/runs/{run_id}/live"
    mine = await _poll(web, path)
    other = await aiohttp_client(make_app(probe_host, run_engine=False))
    await sign_in(other, tokens["admin"])
    theirs = await _poll(other, path)
    # Each session's CSRF token is in its fragment: the bytes differ, and so do the tags.
    assert await mine.text() != await theirs.text()
    assert mine.headers["ETag"] != theirs.headers["ETag"]
    assert (await _poll(other, path, mine.headers["ETag"])).status == 200


async def test_now_live_revalidates_too(web, probe_host, engine, probe):
    run_id = await _parked(probe_host, engine, probe)
    first = await _poll(web, "/now/live")
    assert first.status == 200 and first.headers["Cache-Control"] == "no-cache"
    assert f'href="/runs/{run_id}"' in await first.text()
    again = await _poll(web, "/now/live", first.headers["ETag"])
    assert again.status == 304 and await again.read() == b""
    csrf = await page_csrf(web, f"/runs/{run_id}")
    await web.post(f"/runs/{run_id}/pause", data={"csrf_token": csrf})
    after = await _poll(web, "/now/live", first.headers["ETag"])
    assert after.status == 200 and after.headers["ETag"] != first.headers["ETag"]
