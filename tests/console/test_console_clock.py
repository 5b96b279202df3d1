"""One clock per page, over the real app (both dialects): a run's page and an event's are on
the event's zone, the runs list on UTC, each saying so once; the viewer's own zone, once
chosen, is every page's, kept with their token — in every browser they sign in from, and
never another person's; a zone the host does not know, a switch that is neither on nor off,
or a return address off the host, changes nothing."""

from __future__ import annotations

import re
from html import unescape
from typing import Any

import aiohttp
import pytest
from sqlalchemy import select

from pageant.console.clock import LEGACY_COOKIE
from pageant.db.tables import api_tokens
from pageant.runs.create import start_now
from pageant.support.settings import Settings
from tests.console.test_console import page_csrf, sign_in
from tests.factories import announce, phase, publish_event, spec


@pytest.fixture
def settings(db_url: str) -> Settings:
    """A run's page trusts a token read within ``console_max_age_ms`` (here a minute, on a
    clock that stands still) without reading it again: the switch must show there at once
    all the same."""
    return Settings(database_url=db_url, console_max_age_ms=60_000)


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


async def _kept(host: Any) -> dict[str, str | None]:
    """Each token's kept zone, by the token's name."""
    async with host.db.connect() as conn:
        rows = await conn.execute(select(api_tokens.c.name, api_tokens.c.zone))
        return {row.name: row.zone for row in rows}


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
    assert (await _kept(host))["test-moderator"] == "America/New_York"
    page = await (await client.get(f"/runs/{run_id}")).text()
    assert _caption(page) == "Times are in your zone, America/New_York."
    assert _tooltips(page) == {"EST"}
    assert 'name="want" value="page"' in page and "Show times in the event&#39;s zone" in page
    listing = await (await client.get("/runs")).text()
    assert _caption(listing) == "Times are in your zone, America/New_York."
    assert _tooltips(listing) == {"EST"}

    answer = await _choose(client, "page")
    assert answer.status == 303
    assert (await _kept(host))["test-moderator"] is None
    page = await (await client.get(f"/runs/{run_id}")).text()
    assert _caption(page) == "Times are in the event's zone, Europe/Berlin."


async def test_an_unknown_zone_is_refused_and_changes_nothing(client, tokens, host):
    await sign_in(client, tokens["moderator"])
    for zone in ("", "Mars/Olympus", "../etc/passwd", "x" * 100):
        answer = await _choose(client, "mine", zone)
        assert answer.status == 400, zone
        assert "zone: " in await answer.text()
        assert "is not a time zone this host knows" in await answer.text()
    assert (await _kept(host))["test-moderator"] is None
    listing = await (await client.get("/runs")).text()
    assert _caption(listing) == "Times are in UTC."
    # Nor does a switch that is neither "mine" nor "page", even with a good zone; and a
    # chosen zone stays chosen through a bad post.
    await _choose(client, "mine", "Asia/Tokyo")
    for want in ("", "yours", "PAGE"):
        answer = await _choose(client, want, "America/New_York")
        assert answer.status == 400, want
        assert "want: expected mine or page." in await answer.text()
    answer = await _choose(client, "mine", "Mars/Olympus")
    assert answer.status == 400
    assert (await _kept(host))["test-moderator"] == "Asia/Tokyo"
    listing = await (await client.get("/runs")).text()
    assert _caption(listing) == "Times are in your zone, Asia/Tokyo."


async def test_the_choice_follows_the_person_to_another_browser_and_no_one_else(
    client, tokens, host
):
    # Two more browsers, each with a cookie jar of its own: the moderator's second, and the
    # admin's.
    jars = [aiohttp.CookieJar(unsafe=True) for _ in range(2)]
    async with (
        aiohttp.ClientSession(base_url=client.make_url("/"), cookie_jar=jars[0]) as second,
        aiohttp.ClientSession(base_url=client.make_url("/"), cookie_jar=jars[1]) as other,
    ):
        await sign_in(client, tokens["moderator"])
        await sign_in(second, tokens["moderator"])
        await sign_in(other, tokens["admin"])
        assert (await _choose(client, "mine", "America/New_York", "/runs")).status == 303

        for browser in (client, second):
            listing = await (await browser.get("/runs")).text()
            assert _caption(listing) == "Times are in your zone, America/New_York.", browser
        listing = await (await other.get("/runs")).text()
        assert _caption(listing) == "Times are in UTC."

        # The admin's own choice is theirs alone.
        assert (await _choose(other, "mine", "Asia/Tokyo", "/runs")).status == 303
        assert _caption(await (await other.get("/runs")).text()) == (
            "Times are in your zone, Asia/Tokyo."
        )
        assert _caption(await (await second.get("/runs")).text()) == (
            "Times are in your zone, America/New_York."
        )

        # Cleared in the second browser, cleared in the first; the admin's is kept.
        assert (await _choose(second, "page", next_="/runs")).status == 303
        for browser in (client, second):
            assert _caption(await (await browser.get("/runs")).text()) == "Times are in UTC."
        assert _caption(await (await other.get("/runs")).text()) == (
            "Times are in your zone, Asia/Tokyo."
        )
        assert await _kept(host) == {
            **dict.fromkeys(await _kept(host)),
            "test-admin": "Asia/Tokyo",
        }


async def test_a_zone_kept_in_a_cookie_is_not_read_and_the_switch_clears_it(client, tokens):
    await sign_in(client, tokens["moderator"])
    client.session.cookie_jar.update_cookies(
        {LEGACY_COOKIE: "Asia/Tokyo"}, response_url=client.make_url("/")
    )
    assert _caption(await (await client.get("/runs")).text()) == "Times are in UTC."
    answer = await _choose(client, "page", next_="/runs")
    assert answer.status == 303
    assert LEGACY_COOKIE not in client.session.cookie_jar.filter_cookies(client.make_url("/"))


async def test_the_switch_returns_only_to_a_page_of_this_host(client, tokens):
    await sign_in(client, tokens["moderator"])
    for away in ("https://example.org/", "//example.org/x", "runs"):
        answer = await _choose(client, "mine", "UTC", away)
        assert answer.headers["Location"] == "/now", away
    answer = await _choose(client, "mine", "UTC", "/calendar?month=2027-03")
    assert answer.headers["Location"] == "/calendar?month=2027-03"
