"""The run page's "Rehearse the current version against this run": offered to authors on a
finished run, it shows the replay and where the published version differs, or the refusal's
sentence; a run still live offers nothing to replay."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest

from pageant.cli.showcase import demo_spec
from tests.api.test_events_api import EVENTS, call
from tests.console.test_console import csrf_of, form_of, sign_in
from tests.engine.test_rehearse_from_run import publish, real_night

BUTTON = "Rehearse the current version against this run"


@pytest.fixture
def engine(host_engine: Any) -> Any:
    return host_engine


async def test_a_finished_runs_page_rehearses_the_published_version_against_it(
    client, tokens, engine, clock
):
    event_id, run_id, _ = await real_night(client, tokens, engine, clock)
    edited = demo_spec()
    (muster,) = [p for p in edited["phases"] if p["key"] == "muster"]
    muster["advance"]["count"] = 1
    await publish(client, tokens, event_id, edited)

    await sign_in(client, tokens["moderator"])
    assert BUTTON not in await (await client.get(f"/runs/{run_id}")).text()
    client.session.cookie_jar.clear()  # signed out

    await sign_in(client, tokens["editor"])
    html = await (await client.get(f"/runs/{run_id}")).text()
    assert BUTTON in html
    fields = form_of(html.replace(f'action="/runs/{run_id}/rehearse"', 'id="rr" action=""'), "rr")
    assert [name for name, _ in fields] == ["csrf_token"]
    answer = await client.post(f"/runs/{run_id}/rehearse", data=dict(fields))
    html = await answer.text()
    assert answer.status == 200, html
    replayed = "Replayed 1 of the 2 firings this run recorded against version 2"
    assert re.sub(r"\s+", " ", html).count(f"{replayed} (this run ran version 1)") == 1
    differences = re.search(r'<ul id="differences">(.*?)</ul>', html, re.S)
    assert differences is not None
    assert (
        "<li>the new version&#39;s gate `muster` would have opened 15 min earlier "
        "(at +10 min instead of +25 min)</li>"
    ) in differences.group(1)
    assert 'id="rehearsal"' in html and csrf_of(html)


async def test_a_live_run_offers_no_rehearsal_and_a_pruned_one_says_so(
    client, tokens, engine, clock, host
):
    event_id, run_id, _ = await real_night(client, tokens, engine, clock)
    status, live = await call(client, "POST", f"{EVENTS}/{event_id}/runs", tokens["admin"])
    assert status == 201, live
    await sign_in(client, tokens["admin"])
    assert BUTTON not in await (await client.get(f"/runs/{live['id']}")).text()
    csrf = csrf_of(await (await client.get(f"/runs/{run_id}")).text())
    refused = await client.post(f"/runs/{live['id']}/rehearse", data={"csrf_token": csrf})
    assert refused.status == 409
    assert "a rehearsal replays the firings of a run that has ended" in await refused.text()

    clock.advance(timedelta(days=host.settings.log_retention_days + 1).total_seconds())
    await engine.tick()
    answer = await client.post(f"/runs/{run_id}/rehearse", data={"csrf_token": csrf})
    html = await answer.text()
    assert answer.status == 409
    assert "has been pruned" in html and "there is nothing left to replay" in html
