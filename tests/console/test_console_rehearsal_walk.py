"""A rehearsal that reaches its end, in a real browser: an editor rehearses an event whose
phase waits on a trigger, gives the firings its gate waits for in the rehearsal's form, and
reads the run completing on the drawn timeline; axe-core finds no serious or critical
violation on the form or the result. With ``PAGEANT_CONSOLE_SCREENSHOTS=docs/console`` it
writes the screenshot the guide shows."""

from __future__ import annotations

from pathlib import Path

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

HUNT = {
    "schedule": {"kind": "manual"},
    "phases": [
        {
            "key": "muster",
            "label": "Muster",
            "steps": [
                {"action": "core.announce", "params": {"leg": "core.log", "message": "Gather"}}
            ],
            "advance": {"after": "5m"},
        },
        {
            "key": "hunt",
            "label": "Hunt",
            "steps": [],
            "advance": {
                "on": "wisps.caught",
                "where": {"var": "colour", "op": "eq", "value": "north"},
                "count": 3,
            },
        },
        {
            "key": "wind-down",
            "label": "Wind down",
            "steps": [{"action": "core.wait", "params": {"seconds": 60}}],
        },
    ],
}


def test_a_rehearsal_with_simulated_firings_reaches_its_end(server, browser) -> None:  # noqa: F811 - the shared fixtures
    from playwright.sync_api import expect

    expect.set_options(timeout=WAIT_MS)
    base, tokens = server["base"], server["tokens"]
    event = _api(base, tokens["admin"], "POST", "/events", {"title": "Wisp hunt", "spec": HUNT})
    _api(base, tokens["admin"], "POST", f"/events/{event['id']}/publish")
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.add_init_script(script=_axe_script())
    axe_found: dict[str, dict[str, int]] = {}
    page = _sign_in(context, base, tokens["editor"])
    page.goto(f"{base}/events/{event['id']}")

    # The form offers the hunt's gate: its trigger and count filled in.
    expect(page.locator("#firing-1-trigger")).to_have_value("")
    expect(page.locator("#firing-0-trigger")).to_have_value("wisps.caught")
    expect(page.locator("#firing-0-count")).to_have_value("3")
    page.fill("#firing-0-after", "8m")
    page.fill("#firing-0-var-colour", "north")
    _axe(page, axe_found)
    page.get_by_role("button", name="Rehearse v1").click()

    result = page.locator("#rehearsal")
    expect(page.locator("#notice")).to_contain_text("the run ended completed")
    expect(result.locator(".tl-phase")).to_have_count(3)
    expect(result).to_contain_text("wisps.caught fired with colour “north” — 3 of 3")
    _axe(page, axe_found)
    if SHOTS:
        page.locator("#story").evaluate("el => el.open = true")
        result.screenshot(path=str(Path(SHOTS) / "rehearsal-to-the-end.png"))
    context.close()
