"""One clock per page, in a real browser: Chromium in New York reads a run of an event in
Berlin. Every time on the run page — the facts, the steps, the waiting line, the log's times
and the times inside its sentences, the timeline's bars, the tooltips — is on the clock the
page names once at its top: the event's zone, then, after "Show times in my zone", the
browser's, on every page (the calendar's too) and after a reload — and in another browser
signed in with the same token, but not in one signed in with another — until it is switched
back, there and everywhere.

With ``PAGEANT_CONSOLE_SCREENSHOTS=docs/console`` it writes the run page in both zones, and
prints the run page's height (the five-step run the guide measures).
"""

from __future__ import annotations

import re
import time
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from tests.console.test_console_walk import (
    SHOTS,
    WAIT_MS,
    _api,
    _axe,
    _axe_script,
    _sign_in,
    browser,  # noqa: F401 - a fixture this walk shares
    server,  # noqa: F401 - a fixture this walk shares
)

BERLIN, NEW_YORK = "Europe/Berlin", "America/New_York"
#: How a page writes a time: the whole instant, without seconds, or the time of day alone
#: (the calendar's without seconds).
FORMATS = ("%a %Y-%m-%d %H:%M:%S %Z", "%a %Y-%m-%d %H:%M %Z", "%H:%M:%S", "%H:%M")


def five_steps() -> dict[str, Any]:
    def say(text: str, label: str) -> dict[str, Any]:
        return {
            "action": "core.announce",
            "label": label,
            "params": {"leg": "core.log", "message": text},
        }

    return {
        "schedule": {"kind": "manual"},
        "phases": [
            {
                "key": "muster",
                "label": "Muster",
                "steps": [say("Gather", "Call the muster"), say("Line up", "Line them up")],
                "advance": {"after": "1s"},
            },
            {
                "key": "fight",
                "label": "Fight",
                "steps": [
                    say("Fight!", "Start the fight"),
                    {"action": "core.wait", "label": "Let them fight", "params": {"seconds": 1}},
                    say("Well fought", "Close the fight"),
                ],
            },
        ],
    }


def times_on(page: Any) -> list[dict[str, str]]:
    """Every ``<time>`` on the page: its instant, its text and its tooltip."""
    return page.evaluate(
        """() => Array.from(document.querySelectorAll("time[datetime]")).map(el => ({
            at: el.getAttribute("datetime"), text: el.textContent.trim(),
            title: el.getAttribute("title") || ""}))"""
    )


def disagreeing(found: list[dict[str, str]], tz: str) -> list[str]:
    """The times on a page that are not on ``tz``'s clock (text or tooltip)."""
    wrong = []
    for t in found:
        there = datetime.fromisoformat(t["at"].replace("Z", "+00:00")).astimezone(ZoneInfo(tz))
        if t["text"] not in {there.strftime(f) for f in FORMATS}:
            wrong.append(f"{t['at']} shown as {t['text']!r} on {tz}")
        if t["title"] != there.strftime("%Y-%m-%d %H:%M:%S %Z"):
            wrong.append(f"{t['at']} has the tooltip {t['title']!r} on {tz}")
    return wrong


def check_run_page(page: Any, tz: str, started: datetime) -> None:
    found = times_on(page)
    assert len(found) >= 10, found  # the facts, five steps' start and end, the log
    assert disagreeing(found, tz) == []
    # The timeline's bars and caption say their times on the same clock.
    there = started.astimezone(ZoneInfo(tz)).strftime("%H:%M:%S")
    assert f"From {there} to " in page.locator("#timeline p.help").inner_text()
    # A time inside a sentence is one of the page's times, on its clock.
    sentence = page.locator("table.log td[data-label='What'] time").first
    assert sentence.count() == 1


def test_every_time_on_the_run_page_is_on_the_clock_it_names(server, browser) -> None:  # noqa: F811 - the shared fixtures
    from playwright.sync_api import expect

    expect.set_options(timeout=WAIT_MS)
    base, tokens = server["base"], server["tokens"]
    admin = tokens["admin"]
    body = {"title": "Berlin night", "timezone": BERLIN, "spec": five_steps()}
    event = _api(base, admin, "POST", "/events", body)
    _api(base, admin, "POST", f"/events/{event['id']}/publish")
    run = _api(base, admin, "POST", f"/events/{event['id']}/runs")
    deadline = time.monotonic() + WAIT_MS / 1000
    while (shown := _api(base, admin, "GET", f"/runs/{run['id']}"))["run"]["status"] != "completed":
        assert time.monotonic() < deadline, f"the run did not complete: {shown['run']}"
        time.sleep(0.2)
    started = datetime.fromisoformat(shown["run"]["started_at"].replace("Z", "+00:00"))

    context = browser.new_context(viewport={"width": 1280, "height": 800}, timezone_id=NEW_YORK)
    context.add_init_script(script=_axe_script())
    axe_found: dict[str, dict[str, int]] = {}
    page = _sign_in(context, base, tokens["moderator"])
    page.goto(f"{base}/runs/{run['id']}")

    # ── the event's zone, said once ──
    expect(page.locator("#zone-caption")).to_have_text(f"Times are in the event's zone, {BERLIN}.")
    check_run_page(page, BERLIN, started)
    height = page.evaluate("document.documentElement.scrollHeight")
    print(f"\nthe five-step run page is {height} px tall at 1280 px wide")
    if SHOTS:
        page.screenshot(path=str(Path(SHOTS) / "run-event-zone.png"), full_page=True)
    _axe(page, axe_found)

    # ── the viewer's zone: every time at once, and the caption with them ──
    page.get_by_role("button", name="Show times in my zone").click()
    expect(page.locator("#zone-caption")).to_have_text(f"Times are in your zone, {NEW_YORK}.")
    check_run_page(page, NEW_YORK, started)
    if SHOTS:
        page.screenshot(path=str(Path(SHOTS) / "run-my-zone.png"), full_page=True)
    _axe(page, axe_found)

    # ── kept across a reload and on the other pages ──
    page.reload()
    expect(page.locator("#zone-caption")).to_have_text(f"Times are in your zone, {NEW_YORK}.")
    check_run_page(page, NEW_YORK, started)
    page.goto(f"{base}/runs")
    expect(page.locator("#zone-caption")).to_have_text(f"Times are in your zone, {NEW_YORK}.")
    assert disagreeing(times_on(page), NEW_YORK) == []
    month = started.astimezone(ZoneInfo(NEW_YORK)).strftime("%Y-%m")
    page.goto(f"{base}/calendar?view=agenda&month={month}")
    expect(page.locator("#zone-caption")).to_have_text(f"Times are in your zone, {NEW_YORK}.")
    assert times_on(page) and disagreeing(times_on(page), NEW_YORK) == []

    # ── the choice is the person's: another browser (in Tokyo) with the same token has it,
    # one signed in with another token does not ──
    second = browser.new_context(viewport={"width": 1280, "height": 800}, timezone_id="Asia/Tokyo")
    elsewhere = _sign_in(second, base, tokens["moderator"])
    elsewhere.goto(f"{base}/runs")
    expect(elsewhere.locator("#zone-caption")).to_have_text(f"Times are in your zone, {NEW_YORK}.")
    assert disagreeing(times_on(elsewhere), NEW_YORK) == []
    someone = browser.new_context(viewport={"width": 1280, "height": 800}, timezone_id=NEW_YORK)
    theirs = _sign_in(someone, base, tokens["editor"])
    theirs.goto(f"{base}/runs")
    expect(theirs.locator("#zone-caption")).to_have_text("Times are in UTC.")
    # More runs, one a server (a fan-out's runs are grouped by their params): two finish,
    # one is cancelled in its first phase.
    more = [
        _api(base, admin, "POST", f"/events/{event['id']}/runs", {"scope": s})
        for s in ("arena1", "arena2", "arena3")
    ]
    _api(base, admin, "POST", f"/runs/{more[2]['id']}/cancel", {"reason": "server down"})
    for made in more[:2]:
        while _api(base, admin, "GET", f"/runs/{made['id']}")["run"]["status"] != "completed":
            assert time.monotonic() < deadline + 30, "a run did not complete"
            time.sleep(0.2)
    page.goto(f"{base}/events/{event['id']}")
    expect(page.locator("#zone-caption")).to_have_text(f"Times are in your zone, {NEW_YORK}.")
    assert disagreeing(times_on(page), NEW_YORK) == []
    # The grid of runs side by side: three runs done in both phases, one stopped.
    expect(page.locator("#grid td.g-done")).to_have_count(6)
    expect(page.locator("#grid td.g-stopped, #grid td.g-not-reached")).to_have_count(2)
    _axe(page, axe_found)
    if SHOTS:
        page.locator("#grid").screenshot(path=str(Path(SHOTS) / "grid.png"))

    # ── and back ──
    page.get_by_role("button", name="Show times in the event's zone").click()
    expect(page.locator("#zone-caption")).to_have_text(f"Times are in the event's zone, {BERLIN}.")
    assert disagreeing(times_on(page), BERLIN) == []
    page.goto(f"{base}/runs")
    expect(page.locator("#zone-caption")).to_have_text("Times are in UTC.")
    assert disagreeing(times_on(page), "UTC") == []
    assert re.search(r"\d", page.locator("table").first.inner_text())
    # Switched back in one browser, back in the other too.
    elsewhere.reload()
    expect(elsewhere.locator("#zone-caption")).to_have_text("Times are in UTC.")
    second.close()
    someone.close()
    context.close()
