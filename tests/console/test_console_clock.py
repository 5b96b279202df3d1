"""One clock per page, over the real app: a run's page and an event's are on the event's zone,
the runs list on UTC, each saying so once; the viewer's own zone, once chosen, is every page's,
kept in a cookie; a zone the host does not know, or a return address off the host, changes
nothing."""

from __future__ import annotations

import re
from html import unescape
from typing import Any

from pageant.console.clock import COOKIE
from pageant.runs.create import start_now
from tests.console.test_console import page_csrf, sign_in
from tests.factories import announce, phase, publish_event, spec


async def _berlin_run(host: Any) -> int:
    event = await publish_event(host.db, host.clock.now(), spec(phase("p", announce("hi"))))
    async with host.db.begin() as conn:
        from sqlalchemy import update

        from pageant.db.tables import event_definitions

        await conn.execute(
            update(event_definitions)
            .where(event_definitions.c.id == event.id)
            .values(timezone="Europe/Berlin")
        )
    run_id, _ = await start_now(host, event.id, scope="", actor="admin:test")
    return run_id


def _caption(html: str) -> str:
    return unescape(re.search(r'id="zone-caption">([^<]+)<', html).group(1))


def _tooltips(html: str) -> set[str]:
    return {zone for zone in re.findall(r'<time [^>]*title="[^"]* ([A-Z+\-0-9]+)"', html)}


async def _choose(client: Any, want: str, zone: str = "", next_: str = "/runs/1") -> Any:
    csrf = await page_csrf(client, "/runs")
    return await client.post(
        "/zone",
        data={"csrf_token": csrf, "want": want, "zone": zone, "next": next_},
        allow_redirects=False,
    )


async def test_each_page_names_its_one_zone_and_the_viewer_may_choose_theirs(client, tokens, host):
    run_id = await _berlin_run(host)
    await sign_in(client, tokens["moderator"])
    page = await (await client.get(f"/runs/{run_id}")).text()
    assert _caption(page) == "Times are in the event's zone, Europe/Berlin."
    assert _tooltips(page) == {"CET"}  # March 2027, before summer time
    listing = await (await client.get("/runs")).text()
    assert _caption(listing) == "Times are in UTC." and _tooltips(listing) == {"UTC"}

    answer = await _choose(client, "mine", "America/New_York", f"/runs/{run_id}")
    assert answer.status == 303 and answer.headers["Location"] == f"/runs/{run_id}"
    assert client.session.cookie_jar.filter_cookies(client.make_url("/"))[COOKIE].value == (
        "America/New_York"
    )
    page = await (await client.get(f"/runs/{run_id}")).text()
    assert _caption(page) == "Times are in your zone, America/New_York."
    assert _tooltips(page) == {"EST"}
    assert 'name="want" value="page"' in page and "Show times in the event&#39;s zone" in page
    listing = await (await client.get("/runs")).text()
    assert _caption(listing) == "Times are in your zone, America/New_York."
    assert _tooltips(listing) == {"EST"}

    answer = await _choose(client, "page")
    assert answer.status == 303
    page = await (await client.get(f"/runs/{run_id}")).text()
    assert _caption(page) == "Times are in the event's zone, Europe/Berlin."


async def test_an_unknown_zone_is_refused_and_changes_nothing(client, tokens, host):
    await sign_in(client, tokens["moderator"])
    for zone in ("", "Mars/Olympus", "../etc/passwd", "x" * 100):
        answer = await _choose(client, "mine", zone)
        assert answer.status == 400, zone
        assert "is not a time zone this host knows" in await answer.text()
    assert COOKIE not in client.session.cookie_jar.filter_cookies(client.make_url("/"))
    listing = await (await client.get("/runs")).text()
    assert _caption(listing) == "Times are in UTC."


async def test_the_switch_returns_only_to_a_page_of_this_host(client, tokens):
    await sign_in(client, tokens["moderator"])
    for away in ("https://example.org/", "//example.org/x", "runs"):
        answer = await _choose(client, "mine", "UTC", away)
        assert answer.headers["Location"] == "/now", away
    answer = await _choose(client, "mine", "UTC", "/calendar?month=2027-03")
    assert answer.headers["Location"] == "/calendar?month=2027-03"
