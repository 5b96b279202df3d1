"""Run params in a real browser: Debian's Chromium driven by Playwright against a real
``pageant serve`` (the browser walk's own set-up). An admin declares a run param with an
option source, makes a step's param "the run's param" from its picker, publishes, starts a
run choosing the param's value from the source's values, and sees the run carry it and its
step announce it; then fans the schedule out over two sets and finds one run for each on
the calendar. No JSON is typed; axe-core runs on every page (no serious or critical
violation), and at a phone's width nothing scrolls sideways."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.conftest import FIGURES
from tests.console.test_console_walk import (  # noqa: F401 - fixtures used by name
    SHOTS,
    WAIT_MS,
    _axe,
    _axe_script,
    _no_horizontal_scroll,
    _shot,
    _sign_in,
    browser,
    server,
)


def _shot_path(name: str) -> str | None:
    """Where a part of a page is drawn for the console's guide (None: not drawn)."""
    return str(Path(SHOTS) / f"{name}.png") if SHOTS else None


def test_an_admin_declares_a_param_picks_it_for_a_step_starts_with_it_and_fans_out(
    server: dict[str, Any],  # noqa: F811 - the fixture imported above
    browser: Any,  # noqa: F811 - the fixture imported above
) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=WAIT_MS)
    base, tokens = server["base"], server["tokens"]
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.add_init_script(script=_axe_script())
    found: dict[str, dict[str, int]] = {}
    page = _sign_in(context, base, tokens["admin"])

    page.goto(f"{base}/events/new")
    page.get_by_label("Title").fill("Wisp parade")
    page.get_by_role("button", name="Create the draft").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Wisp parade")

    # ── declare a run param: a colour, from the wisps' option source, required ──
    page.get_by_role("button", name="Add a run param").click()
    expect(page.locator("#notice")).to_contain_text("Added run param 1")
    page.locator("#rp0-name").fill("colour")
    page.locator("#rp0-label").fill("Colour")
    page.select_option("#rp0-source", "wisps.options.colours")  # the form updates itself
    expect(page.locator("#rp0-default")).to_contain_text("South")
    page.get_by_label("Required: a run cannot start without it").check()

    # ── a step whose message is the run's param, chosen from its picker ──
    page.select_option("#p0-new-action", "core.announce")
    page.get_by_role("button", name="Add step to phase 1").click()
    page.select_option("#p0-s0-param-leg", "core.log")
    page.get_by_label("message comes from").select_option("colour")
    expect(page.locator("#p0-s0-param-message")).to_have_count(0)
    _axe(page, found)
    page.locator("#run-params").screenshot(path=_shot_path("editor-params"))
    page.get_by_role("button", name="Save").first.click()
    expect(page.locator("#notice")).to_contain_text("Saved.")
    expect(page.get_by_label("message comes from")).to_have_value("colour")
    expect(page.locator("#rp0-name")).to_have_value("colour")

    # ── publish, and start a run choosing the colour from the source's values ──
    page.get_by_role("button", name="Publish").click()
    expect(page.locator("#notice")).to_contain_text("Published as version 1")
    start = page.locator('form[action$="/start"]')
    expect(start.get_by_label("Colour (required)")).to_contain_text("South (south)")
    _axe(page, found)
    start.get_by_label("Colour (required)").select_option("south")
    page.locator("section.lifecycle").first.screenshot(path=_shot_path("start-params"))
    start.get_by_role("button", name="Start a run now").click()
    page.wait_for_url(f"{base}/runs/*")
    expect(page.locator("#run-params")).to_have_text("colour=south")
    expect(page.locator(".status").first).to_have_text("completed")
    expect(page.locator("body")).to_contain_text('"message": "south"')
    _axe(page, found)

    # ── fan the schedule out: one run for each of two colours every Friday ──
    page.goto(f"{base}/events")
    page.get_by_role("link", name="Wisp parade").click()
    page.select_option("#schedule-kind", "weekly")
    page.get_by_label("Friday").check()
    page.fill("#schedule-time", "20:00")
    page.get_by_role("button", name="Add a run to each occurrence").click()
    page.get_by_role("button", name="Add a run to each occurrence").click()
    page.select_option("#fan0-colour", "north")
    page.select_option("#fan1-colour", "south")
    _axe(page, found)
    page.locator("#fan-out").screenshot(path=_shot_path("editor-fan-out"))
    page.get_by_role("button", name="Save").first.click()
    expect(page.locator("#notice")).to_contain_text("Saved.")
    expect(page.locator("#fan1-colour")).to_have_value("south")
    page.get_by_role("button", name="Publish").click()
    expect(page.locator("#notice")).to_contain_text("Published as version 2")

    # ── the calendar: each Friday holds one run of each colour ──
    today = datetime.now(UTC).date()
    months = [today.strftime("%Y-%m")]
    months.append(f"{today.year + today.month // 12}-{today.month % 12 + 1:02d}")
    shown = []
    for month in months:
        page.goto(f"{base}/calendar?view=agenda&month={month}")
        _axe(page, found)
        if month == months[0]:
            _shot(page, "calendar-fan-out", full=False)
        shown += page.locator(".occ").filter(has_text="Wisp parade").all_inner_texts()
    # (the run started by hand above is on the calendar too, at its own time)
    fridays = [s for s in shown if s.startswith("20:00 ")]
    north = [s for s in fridays if "colour north" in s]
    south = [s for s in fridays if "colour south" in s]
    assert north and len(north) == len(south) and len(fridays) == 2 * len(north), shown
    event_url = f"{base}/events"
    context.close()

    # ── the same pages at a phone's width in the dark scheme ──
    phone = browser.new_context(
        viewport={"width": 390, "height": 844}, color_scheme="dark", is_mobile=True
    )
    phone.add_init_script(script=_axe_script())
    page = _sign_in(phone, base, tokens["admin"])
    page.goto(event_url)
    page.get_by_role("link", name="Wisp parade").click()
    expect(page.locator("#fan0-colour")).to_have_value("north")
    _axe(page, found)
    _no_horizontal_scroll(page)
    page.goto(f"{base}/calendar?view=agenda&month={months[0]}")
    _axe(page, found)
    _no_horizontal_scroll(page)
    phone.close()
    minor = {url: counts for url, counts in found.items() if counts}
    FIGURES.append(
        f"run params in Chromium: axe-core on {len(found)} pages (desktop and phone), "
        f"violations of lesser impact: {minor or 'none'}"
    )
