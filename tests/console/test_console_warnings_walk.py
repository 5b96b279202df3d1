"""An event's warnings in a real browser: Debian's Chromium driven by Playwright against a
real ``pageant serve`` (the browser walk's own set-up). A moderator's read-only event page
lists the warning; an editor finds it in the editor, ticks "I know; don't warn me again" by
its label, saves, and the warning is acknowledged (the API gives it no more); then the same
editor at a phone's width in the dark scheme. axe-core runs on every page (no serious or
critical violation), and nothing scrolls sideways on the phone."""

from __future__ import annotations

from typing import Any

from tests.conftest import FIGURES
from tests.console.test_console_walk import (  # noqa: F401 - fixtures used by name
    WAIT_MS,
    _api,
    _axe,
    _axe_script,
    _no_horizontal_scroll,
    _sign_in,
    browser,
    server,
)
from tests.console.test_console_warnings import WARNING_ID, hunt


def test_an_editor_reads_a_warning_and_acknowledges_it_with_its_box_in_chromium(
    server: dict[str, Any],  # noqa: F811 - the fixture imported above
    browser: Any,  # noqa: F811 - the fixture imported above
) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=WAIT_MS)
    base, tokens = server["base"], server["tokens"]
    event = _api(base, tokens["admin"], "POST", "/events", {"title": "Wisp hunt", "spec": hunt()})
    assert [w["id"] for w in event["warnings"]] == [WARNING_ID]
    found: dict[str, dict[str, int]] = {}

    # ── a moderator's read-only page lists it ──
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.add_init_script(script=_axe_script())
    page = _sign_in(context, base, tokens["moderator"])
    page.goto(f"{base}/events/{event['id']}")
    warnings = page.get_by_role("region", name="Warnings")
    expect(warnings).to_contain_text("this gate counts wisps.caught from every colour")
    expect(warnings.get_by_role("checkbox")).to_have_count(0)
    _axe(page, found)
    context.close()

    # ── an editor ticks its box and saves ──
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.add_init_script(script=_axe_script())
    page = _sign_in(context, base, tokens["editor"])
    page.goto(f"{base}/events/{event['id']}")
    warnings = page.get_by_role("group", name="Warnings")
    expect(warnings).to_contain_text("Phase 1, gate: this gate counts wisps.caught")
    _axe(page, found)
    box = warnings.get_by_label("I know; don't warn me again")
    expect(box).not_to_be_checked()
    box.check()
    page.get_by_role("button", name="Save").first.click()
    expect(page.locator("#notice")).to_have_text("Saved.")
    expect(page.get_by_text("Acknowledged warnings (1)")).to_be_visible()
    _axe(page, found)
    assert _api(base, tokens["admin"], "GET", f"/events/{event['id']}")["warnings"] == []
    context.close()

    # ── the same editor at a phone's width in the dark scheme ──
    phone = browser.new_context(
        viewport={"width": 390, "height": 844}, color_scheme="dark", is_mobile=True
    )
    phone.add_init_script(script=_axe_script())
    page = _sign_in(phone, base, tokens["editor"])
    page.goto(f"{base}/events/{event['id']}")
    page.get_by_text("Acknowledged warnings (1)").click()
    expect(page.get_by_label("I know; don't warn me again")).to_be_checked()
    _axe(page, found)
    _no_horizontal_scroll(page)
    phone.close()
    minor = {url: counts for url, counts in found.items() if counts}
    FIGURES.append(
        f"warnings in Chromium: axe-core on {len(found)} pages (desktop and phone), "
        f"violations of lesser impact: {minor or 'none'}"
    )
