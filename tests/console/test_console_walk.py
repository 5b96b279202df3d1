"""The web console in a real browser: Debian's Chromium driven by Playwright, against a real
``pageant serve`` on SQLite started here.

One walk, as staff would do it: an admin signs in, authors a three-phase event without
typing any JSON (an announce, a cue, an ``on`` gate with a condition on the wisps plugin's
trigger, an ``after`` gate), publishes, verifies (and rehearses) and starts it, sees the cue
park and the banner appear, confirms it, the trigger is fired through the API, and the run
console shows the run complete without a reload, drawn on its timeline. The admin reorders
two steps in place and saves, is warned before leaving unsaved work, reads a rehearsal
above the editor, caps an action on the switchboard, follows verify's link from a refusal
to that action's row, finds the run that failed from *Now* through the run history, and
makes a token. Then an editor (no publish button, no switchboard form) and a moderator (no
editor, no tokens page), the cookie's flags, CSRF, a phone's width, that every request the
browser made went to the host, and axe-core (vendored in ``tests/vendor/axe-core``) on
every page at a desktop's width and at a phone's in the dark scheme: no serious or critical
violation.

Chromium is never downloaded: the test uses ``/usr/bin/chromium`` (``.ci/run`` installs it
with apt when missing) and fails, never skips, when it is absent. With
``PAGEANT_CONSOLE_SCREENSHOTS=docs/console`` the walk writes the screenshots the console's
guide shows.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
SHOTS = os.environ.get("PAGEANT_CONSOLE_SCREENSHOTS")
AXE = Path(__file__).parents[1] / "vendor" / "axe-core"
#: The impacts axe-core reports that fail the walk.
BLOCKING = ("serious", "critical")
#: The longest any one expectation waits (the run moves on a real engine, woken at once).
WAIT_MS = 15_000


def _pageant(*args: str, env: dict[str, str]) -> str:
    exe = Path(sys.executable).with_name("pageant")
    done = subprocess.run(
        [str(exe), *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A real ``pageant serve`` on a fresh SQLite file, with a token per staff role."""
    workdir = tmp_path_factory.mktemp("console")
    port = _free_port()
    env = {
        **os.environ,
        "PAGEANT_DATABASE_URL": f"sqlite+aiosqlite:///{workdir / 'pageant.db'}",
        "PAGEANT_PORT": str(port),
        "PAGEANT_POLL_SECONDS": "1",
    }
    _pageant("db", "upgrade", env=env)
    tokens = {
        role: _pageant("token", "create", "--role", role, "--name", f"walk-{role}", env=env)
        .splitlines()[-1]
        .strip()
        for role in ("admin", "editor", "moderator", "game")
    }
    exe = Path(sys.executable).with_name("pageant")
    log = open(workdir / "serve.log", "w")
    proc = subprocess.Popen([str(exe), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{base}/sign-in", timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(
                        "pageant serve did not come up:\n" + (workdir / "serve.log").read_text()
                    ) from None
                time.sleep(0.2)
        yield {"base": base, "tokens": tokens}
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    assert Path(CHROMIUM).exists(), (
        f"{CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium); "
        ".ci/run does this when it is missing"
    )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield b
        finally:
            b.close()


def _shot(page: Any, name: str, *, full: bool = True) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=full)


def _sign_in(context: Any, base: str, token: str) -> Any:
    page = context.new_page()
    page.goto(f"{base}/now")
    assert page.url.startswith(f"{base}/sign-in"), page.url
    page.get_by_label("API token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{base}/now")
    return page


def _fire(base: str, token: str, payload: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{base}/api/v1/triggers/wisps.caught/fire",
        data=json.dumps(payload).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())


def _api(base: str, token: str, method: str, path: str, body: Any = None) -> Any:
    request = urllib.request.Request(
        f"{base}/api/v1/admin{path}",
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method=method,
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())


def _no_horizontal_scroll(page: Any) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    inner = page.evaluate("window.innerWidth")
    assert width <= inner + 1, f"{page.url} scrolls sideways at {inner}px: {width}px wide"


def _axe_script() -> str:
    """The vendored axe-core, checked against the sha256 its VENDORED.md records."""
    source = (AXE / "axe.min.js").read_bytes()
    recorded = re.search(
        r"\| `axe.min.js` \|[^\n]*`([0-9a-f]{64})` \|", (AXE / "VENDORED.md").read_text()
    )
    assert recorded, "tests/vendor/axe-core/VENDORED.md records no sha256 for axe.min.js"
    assert hashlib.sha256(source).hexdigest() == recorded.group(1), "axe.min.js was changed"
    return source.decode()


def _axe(page: Any, found: dict[str, dict[str, int]]) -> None:
    """Run axe-core on the page as it stands and keep the count of violations by impact
    (per rule); the walk fails on any serious or critical one, naming the rule and nodes."""
    violations = page.evaluate(
        """async () => (await axe.run(document, {resultTypes: ["violations"]})).violations
            .map(v => ({id: v.id, impact: v.impact,
                        nodes: v.nodes.map(n => n.target.join(" "))}))"""
    )
    key = page.url.split("//", 1)[-1].split("/", 1)[-1]
    counts = found.setdefault("/" + key, {})
    for v in violations:
        counts[v["impact"] or "unknown"] = counts.get(v["impact"] or "unknown", 0) + 1
    blocking = [v for v in violations if v["impact"] in BLOCKING]
    assert blocking == [], f"axe-core on {page.url}: {blocking}"


# The console's whole walk, every role and the keyboard: about 65 s alone, more than the
# suite's 120 s on a machine busy with the rest of the suite.
@pytest.mark.timeout(300)
def test_staff_author_start_and_watch_an_event_in_chromium(
    server: dict[str, Any], browser: Any
) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=WAIT_MS)
    base, tokens = server["base"], server["tokens"]
    requested: list[str] = []
    context = browser.new_context(
        viewport={"width": 1280, "height": 800}, timezone_id="America/New_York"
    )
    context.on("request", lambda r: requested.append(r.url))
    axe_source = _axe_script()
    # An init script runs before the page's own and is not subject to its CSP.
    context.add_init_script(script=axe_source)
    axe_found: dict[str, dict[str, int]] = {}

    # ── sign in; the cookie is HttpOnly and SameSite=Strict ──
    page = context.new_page()
    page.goto(f"{base}/now")
    _shot(page, "sign-in")
    page.close()
    page = _sign_in(context, base, tokens["admin"])
    (cookie,) = [c for c in context.cookies() if c["name"] == "pageant_session"]
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict"
    assert tokens["admin"] not in cookie["value"]

    # ── author a three-phase event, without typing JSON ──
    page.get_by_role("navigation", name="Console").get_by_role("link", name="Events").click()
    page.get_by_role("link", name="New event").click()
    page.get_by_label("Title").fill("Wisp night")
    page.get_by_label("Time zone (IANA name)").fill("Europe/Berlin")
    page.get_by_role("button", name="Create the draft").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Wisp night")

    page.select_option("#schedule-kind", "monthly")  # the form updates itself
    page.select_option("#schedule-nth", "-1")
    page.select_option("#schedule-weekday", "sunday")
    page.fill("#schedule-time", "02:30")

    page.get_by_label("Label", exact=True).first.fill("Gather")
    page.locator("#p0-key").fill("gather")
    page.select_option("#p0-new-action", "core.announce")
    page.get_by_role("button", name="Add step to phase 1").click()
    page.select_option("#p0-s0-param-leg", "core.log")
    page.fill("#p0-s0-param-message", "Second: the wisps are gathering over Yew")
    page.select_option("#p0-new-action", "core.announce")
    page.get_by_role("button", name="Add step to phase 1").click()
    page.select_option("#p0-s1-param-leg", "core.log")
    page.fill("#p0-s1-param-message", "First: the hunt is called")
    # ── reorder the two steps in place: htmx swaps the form, the page never reloads ──
    navigations: list[str] = []
    page.on("framenavigated", lambda frame: navigations.append(frame.url))
    page.get_by_role("button", name="Move step 2 of phase 1 up").click()
    expect(page.locator("#notice")).to_contain_text("Moved step 2 of phase 1 to place 1")
    expect(page.locator("#p0-s0-param-message")).to_have_value("First: the hunt is called")
    expect(page.locator("#p0-s1-param-message")).to_have_value(
        "Second: the wisps are gathering over Yew"
    )
    assert navigations == [], f"moving a step reloaded the page: {navigations}"
    # the button is gone (the step is first now): the focus is on the sentence saying so
    expect(page.locator("#notice")).to_be_focused()

    page.get_by_role("button", name="Add a phase").click()
    page.fill("#p1-label", "Hunt")
    page.fill("#p1-key", "hunt")
    page.select_option("#p1-new-action", "core.cue")
    page.get_by_role("button", name="Add step to phase 2").click()
    page.fill("#p1-s0-param-message", "GM: release the wisps")
    page.select_option("#p1-gate", "on")  # the form updates itself
    page.select_option("#p1-on", "wisps.caught")
    page.get_by_role("button", name="Add a condition").click()
    page.select_option("#p1-c0-var", "colour")
    page.select_option("#p1-c0-op", "eq")
    page.fill("#p1-c0-value", "north")

    page.get_by_role("button", name="Add a phase").click()
    page.fill("#p2-label", "Wind down")
    page.fill("#p2-key", "wind-down")
    page.select_option("#p2-new-action", "core.announce")
    page.get_by_role("button", name="Add step to phase 3").click()
    page.select_option("#p2-s0-param-leg", "core.log")
    page.fill("#p2-s0-param-message", "Thanks for hunting")
    page.select_option("#p2-gate", "after")
    page.fill("#p2-after-n", "1")
    page.select_option("#p2-after-unit", "s")

    # A mistake is shown at its field, by the path the validator named.
    page.fill("#p1-key", "Not A Key")
    page.get_by_role("button", name="Save").first.click()
    expect(page.locator("#p1-key")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#p1-key ~ .field-error")).to_contain_text("is not a phase key")
    page.fill("#p1-key", "hunt")
    page.get_by_role("button", name="Save").first.click()
    expect(page.locator("#notice")).to_have_text("Saved.")
    expect(page.locator(".preview li")).to_have_count(5)  # the next five, in local time
    expect(page.locator("#preview-h")).to_contain_text("Europe/Berlin")
    # the reordered steps were saved in their new order
    expect(page.locator("#p0-s0-param-message")).to_have_value("First: the hunt is called")
    _shot(page, "editor")
    _axe(page, axe_found)

    # ── leaving with unsaved changes asks first; staying keeps the edit ──
    page.locator("#description").click()
    page.keyboard.type("Bring lanterns.")
    asked: list[str] = []

    def answer_leave(dialog: Any) -> None:
        asked.append(dialog.type)
        dialog.dismiss()

    page.once("dialog", answer_leave)
    page.get_by_role("navigation", name="Console").get_by_role("link", name="Events").click()
    expect(page.locator("#description")).to_have_value("Bring lanterns.")
    assert asked == ["beforeunload"], asked
    page.get_by_role("button", name="Save").first.click()
    expect(page.locator("#notice")).to_have_text("Saved.")

    page.get_by_role("button", name="Publish").click()
    expect(page.locator("#notice")).to_contain_text("Published as version 1")
    expect(page.locator("h1")).to_contain_text("✗ not verified")

    # ── verify it through the button; rehearse it and see the timeline drawn ──
    page.get_by_role("button", name="Verify v1").click()
    expect(page.locator("#notice")).to_contain_text("Version 1 passed verification")
    expect(page.locator("h1")).to_contain_text("✓ verified")
    page.get_by_role("button", name="Rehearse v1").click()
    rehearsal = page.locator("#rehearsal")
    expect(rehearsal.locator(".tl-phase")).to_have_count(2)  # it stalls at the hunt's gate
    expect(rehearsal.locator("#stalls")).to_contain_text("waiting for wisps.caught")
    # a stall is a warning, and the result is above the editor: read without scrolling past it
    expect(page.locator("#notice")).to_have_attribute("data-tone", "warn")
    result_box = rehearsal.bounding_box()
    editor_box = page.locator("form#editor").bounding_box()
    assert result_box and editor_box and result_box["y"] < editor_box["y"]
    assert page.evaluate("window.scrollY") == 0
    _axe(page, axe_found)
    if SHOTS:
        page.locator("#check-result").screenshot(path=str(Path(SHOTS) / "rehearsal.png"))

    # ── start it; the cue parks and the Now page leads with the banner ──
    page.get_by_role("button", name="Start a run now").click()
    page.wait_for_url(f"{base}/runs/*")
    run_url = page.url
    expect(page.locator("#waiting-on")).to_contain_text("waiting for a person to confirm")
    page.get_by_role("navigation", name="Console").get_by_role("link", name="Now").click()
    banner = page.locator(".banner")
    expect(banner).to_contain_text("Waiting on a person (1)")
    expect(banner).to_contain_text("Wisp night")
    _shot(page, "now")
    _axe(page, axe_found)
    banner.get_by_role("link").first.click()
    page.wait_for_url(run_url)
    # one numbering: the waiting sentence names the step as its row does
    step_no = re.search(r"confirm “[^”]+” \(step (\d+)\)", page.locator("#waiting-on").inner_text())
    assert step_no, page.locator("#waiting-on").inner_text()
    expect(page.locator(f'td[data-label="Step"]:text-is("step {step_no[1]}")')).to_have_count(1)
    _shot(page, "run-parked")
    _axe(page, axe_found)

    # ── confirm; fire the trigger through the API; watch it complete without a reload ──
    page.get_by_role("button", name="Confirm “Cue a person”").click()
    page.wait_for_url(run_url)
    expect(page.locator("#waiting-on")).to_contain_text("wisps.caught")
    navigations: list[str] = []
    page.on("framenavigated", lambda frame: navigations.append(frame.url))
    assert _fire(base, tokens["admin"], {"colour": "south", "weight": 1.0})["gates_closed"] == 0
    expect(page.locator("#gate-tally")).to_have_text("0 of 1")
    assert _fire(base, tokens["admin"], {"colour": "north", "weight": 2.5})["gates_closed"] == 1
    expect(page.locator("#run-status")).to_have_text("completed")
    assert navigations == [], f"the page reloaded: {navigations}"
    expect(page.locator("#run-live")).not_to_have_attribute("hx-get", "/runs/1/live")
    _shot(page, "run-completed")
    _axe(page, axe_found)

    # ── read the run's timeline: three phases, the hunt's wait at its gate ──
    page.reload()
    drawn = page.locator("#timeline")
    expect(drawn.locator(".tlr-phase")).to_have_count(3)
    expect(drawn.locator(".tlr-step")).to_have_count(4)
    expect(drawn.locator(".tlr-phase").nth(1)).to_contain_text("gate: on wisps.caught, 1 of 1")
    expect(drawn.locator(".tlr-phase").nth(1).locator("rect.tlr-wait")).to_have_count(1)
    expect(drawn.locator(".tlr-phase").nth(2)).to_contain_text("gate: after 1 s")
    first_time = page.locator("#timeline ~ section time").first
    assert (first_time.get_attribute("title") or "").endswith(("CET", "CEST"))
    assert first_time.inner_text().endswith(("CET", "CEST"))  # the event's zone
    shown = first_time.inner_text()
    log_time = page.locator("table.log time").first
    log_shown = log_time.inner_text()
    page.get_by_role("button", name="Show times in my zone").click()  # the browser's: New York
    expect(first_time).to_contain_text("EST")
    expect(log_time).not_to_have_text(log_shown)  # 6 h earlier than Berlin's clock
    page.get_by_role("button", name="Show times in the event's zone").click()
    expect(first_time).to_have_text(shown)
    if SHOTS:
        drawn.screenshot(path=str(Path(SHOTS) / "run-timeline.png"))

    # ── the other pages ──
    page.get_by_role("navigation", name="Console").get_by_role("link", name="Events").click()
    expect(page.get_by_role("link", name="Wisp night")).to_be_visible()
    _shot(page, "events")
    page.get_by_role("navigation", name="Console").get_by_role("link", name="Calendar").click()
    expect(page.locator("table.month .occ-materialised").first).to_contain_text("Wisp night")
    _shot(page, "calendar")
    page.get_by_role("navigation", name="Console").get_by_role("link", name="Plugins").click()
    expect(page.get_by_role("cell", name="wisps", exact=False).first).to_be_visible()
    _shot(page, "plugins")

    # ── the switchboard: enable and cap an action; a bad cap is shown at its field ──
    page.get_by_role("navigation", name="Console").get_by_role("link", name="Switchboard").click()
    expect(page.locator('tr[data-action="wisps.summon"]')).to_contain_text("✗ disabled")
    _shot(page, "switchboard")
    page.get_by_role("link", name="Summon wisps").click()
    page.get_by_label("Enabled").select_option("yes")
    cap = page.get_by_label("Cap on Wisps summoned (wisps) per run")
    cap.fill("many")
    page.get_by_role("button", name="Save").click()
    expect(cap).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#err-cap-wisps\\.wisps-1")).to_contain_text("Expected a whole number")
    cap.fill("30")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#notice")).to_have_text("Saved.")
    expect(page.locator("#history")).to_contain_text("admin:walk-admin")
    _shot(page, "switchboard-action")
    _axe(page, axe_found)

    # ── verify refuses an event over the cap and links to the switchboard row that sets it ──
    admin = tokens["admin"]
    over = _api(
        base,
        admin,
        "POST",
        "/events",
        {
            "title": "Overreach",
            "spec": {
                "schedule": {"kind": "manual"},
                "phases": [
                    {
                        "key": "swarm",
                        "label": "Swarm",
                        "steps": [
                            {
                                "action": "wisps.summon",
                                "params": {"colour": "north", "count": 40},
                                "on_failure": "abort_run",
                            }
                        ],
                    }
                ],
            },
        },
    )
    _api(base, admin, "POST", f"/events/{over['id']}/publish")
    page.goto(f"{base}/events/{over['id']}")
    expect(page.locator("#cap-meter")).to_contain_text("40 of 30 wisps")
    expect(page.locator("#cap-meter")).to_contain_text("over the cap")
    page.get_by_role("button", name="Verify v1").click()
    expect(page.locator("#notice")).to_contain_text("did not pass verification")
    expect(page.locator("#notice .error-summary")).to_contain_text("The event: asks for 40")
    page.locator("#notice").get_by_role("link", name="Change it on the switchboard").click()
    page.wait_for_url(f"{base}/switchboard/wisps.summon")
    expect(page.get_by_label("Cap on Wisps summoned (wisps) per run")).to_have_value("30")

    # ── the run that failed: from Now's count through the history to its page ──
    failed = _api(base, admin, "POST", f"/events/{over['id']}/runs")
    deadline = time.monotonic() + WAIT_MS / 1000
    while _api(base, admin, "GET", f"/runs/{failed['id']}")["run"]["status"] != "failed":
        assert time.monotonic() < deadline, "the over-cap run did not fail"
        time.sleep(0.2)
    page.get_by_role("navigation", name="Console").get_by_role("link", name="Now").click()
    page.locator("#now-trouble").get_by_role("link", name="1 run failed").click()
    page.wait_for_url(re.compile(r".*/runs\?status=failed&from=.*"))
    expect(page.locator("#runs tbody tr")).to_have_count(1)
    expect(page.locator("#runs")).to_contain_text("Overreach")
    expect(page.locator("#f-status")).to_have_value("failed")
    _shot(page, "runs")
    _axe(page, axe_found)
    page.locator("#runs").get_by_role("link", name=f"Run {failed['id']}").click()
    page.wait_for_url(f"{base}/runs/{failed['id']}")
    expect(page.locator("#run-status")).to_have_text("failed")
    expect(page.locator(".log")).to_contain_text("refused")
    _axe(page, axe_found)

    # ── what a run holds in the world: wisps and a borrowed sky, given back on cancel ──
    _api(base, admin, "PUT", "/actions/core.lease", {"enabled": True})
    storm = _api(
        base,
        admin,
        "POST",
        "/events",
        {
            "title": "Storm over Yew",
            "spec": {
                "schedule": {"kind": "manual"},
                "phases": [
                    {
                        "key": "storm",
                        "label": "Storm",
                        "steps": [
                            {"action": "wisps.summon", "params": {"colour": "north", "count": 3}},
                            {
                                "action": "core.lease",
                                "params": {
                                    "lease": "wisps.weather",
                                    "target": "north",
                                    "value": "storm",
                                    "minutes": 30,
                                },
                            },
                            {"action": "core.wait", "params": {"seconds": 600}},
                        ],
                    }
                ],
            },
        },
    )
    _api(base, admin, "POST", f"/events/{storm['id']}/publish")
    _api(base, admin, "POST", f"/events/{storm['id']}/verify")
    held_run = _api(base, admin, "POST", f"/events/{storm['id']}/runs")
    page.goto(f"{base}/runs/{held_run['id']}")
    resources = page.locator("#resource-list tbody tr")
    expect(resources).to_have_count(4)
    expect(page.locator('#resource-list tr[data-status="confirmed"]')).to_have_count(4)
    expect(page.locator("#resource-list")).to_contain_text("lease wisps.weather on north")
    expect(page.locator("#resource-list")).to_contain_text("given back by")
    expect(page.locator("#cleanup-summary")).to_contain_text("4 held while the run goes on")
    _shot(page, "run-resources")
    _axe(page, axe_found)
    page.locator("#cancel-reason").fill("the storm is called off")
    page.get_by_role("button", name="Cancel the run").click()
    expect(page.locator("#run-status")).to_have_text("cancelled")
    expect(page.locator('#resource-list tr[data-status="reverted"]')).to_have_count(4)
    expect(page.locator("#cleanup-state")).to_contain_text("complete")
    expect(page.get_by_role("button", name="Try cleanup again")).to_have_count(0)

    # ── tokens: make one (shown once) ──
    page.get_by_role("navigation", name="Console").get_by_role("link", name="Tokens").click()
    page.get_by_label("Name").fill("night-shift")
    page.get_by_label("Role").select_option("moderator")
    page.get_by_label("Expires after (optional)").fill("12h")
    page.get_by_role("button", name="Make the token").click()
    expect(page.locator("#issued")).to_contain_text("shown this once")
    expect(page.locator('tr:has-text("night-shift")')).to_contain_text("active")
    _shot(page, "tokens")
    _axe(page, axe_found)

    # ── axe-core on every other page at a desktop's width ──
    pages = (
        "/now",
        "/runs",
        "/events",
        "/events/new",
        "/events/1",
        "/calendar",
        "/calendar?view=agenda",
        "/plugins",
        "/switchboard",
        "/no-such-page",
    )
    for path in pages:
        page.goto(base + path)
        _axe(page, axe_found)

    # ── a phone's width: nothing scrolls sideways ──
    phone = context.new_page()
    phone.set_viewport_size({"width": 390, "height": 844})
    phone.emulate_media(color_scheme="dark")  # and the dark scheme, contrast included
    for path in (
        "/now",
        "/runs",
        "/runs?status=failed",
        f"/runs/{failed['id']}",
        f"/events/{over['id']}",
        "/events/new",
        "/calendar?view=agenda",
        "/no-such-page",
        "/events",
        "/events/1",
        "/calendar",
        "/plugins",
        "/switchboard",
        "/switchboard/wisps.summon",
        "/tokens",
        f"/runs/{held_run['id']}",
        run_url.removeprefix(base),
    ):
        phone.goto(base + path)
        _no_horizontal_scroll(phone)
        _axe(phone, axe_found)
    assert phone.evaluate("matchMedia('(prefers-color-scheme: dark)').matches")
    phone.goto(run_url)
    tall = phone.evaluate("document.documentElement.scrollHeight")
    print(f"\nthe finished run's page at 390 px: {tall} px tall")
    _shot(phone, "run-phone", full=False)
    phone.close()

    # ── CSRF: a form post without the session's token is refused and changes nothing ──
    run_path = run_url.removeprefix(base)
    refused = context.request.post(f"{base}{run_path}/cancel", form={"reason": "no token"})
    assert refused.status == 403
    forged = context.request.post(
        f"{base}/events/1/publish", form={"csrf_token": "guessed", "reason": "x"}
    )
    assert forged.status == 403
    page.goto(run_url)
    expect(page.locator("#run-status")).to_have_text("completed")

    # ── sign out ends the session ──
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(f"{base}/sign-in")
    page.goto(f"{base}/events")
    assert page.url.startswith(f"{base}/sign-in")
    context.close()

    # ── an editor edits but sees no publish button; a moderator sees no editor ──
    editor_ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    editor_ctx.on("request", lambda r: requested.append(r.url))
    page = _sign_in(editor_ctx, base, tokens["editor"])
    page.goto(f"{base}/events/1")
    expect(page.locator("form#editor")).to_be_visible()
    expect(page.get_by_role("button", name="Publish")).to_have_count(0)
    expect(page.get_by_role("button", name="Start a run now")).to_have_count(0)
    expect(page.get_by_role("button", name="Verify v1")).to_be_visible()
    page.goto(f"{base}/switchboard/wisps.summon")
    expect(page.locator("#dimensions")).to_contain_text("at most 30 wisps")
    expect(page.locator("form#switch")).to_have_count(0)
    expect(page.get_by_role("button", name="Save")).to_have_count(0)
    editor_ctx.close()

    moderator_ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    moderator_ctx.on("request", lambda r: requested.append(r.url))
    page = _sign_in(moderator_ctx, base, tokens["moderator"])
    page.goto(f"{base}/events/1")
    expect(page.get_by_text("Read-only")).to_be_visible()
    expect(page.locator("form#editor")).to_have_count(0)
    expect(page.get_by_role("link", name="New event")).to_have_count(0)
    page.goto(f"{base}/events/new")
    expect(page.get_by_role("heading", level=1)).to_contain_text("Not allowed")
    expect(page.get_by_role("link", name="Tokens")).to_have_count(0)
    page.goto(f"{base}/tokens")
    expect(page.get_by_role("heading", level=1)).to_contain_text("Not allowed")
    expect(page.locator("#tokens")).to_have_count(0)
    moderator_ctx.close()

    # ── the keyboard alone: the skip link first, then into the page ──
    keyboard_ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    keyboard_ctx.on("request", lambda r: requested.append(r.url))
    page = _sign_in(keyboard_ctx, base, tokens["moderator"])
    page.goto(f"{base}/events")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to the content"
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "state"  # the page's first control
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")  # the Filter button
    page.wait_for_url(f"{base}/events?state=")
    keyboard_ctx.close()

    # ── the sign-in page, and a game token's page ──
    plain = browser.new_context(viewport={"width": 1280, "height": 800})
    plain.add_init_script(script=axe_source)
    plain.on("request", lambda r: requested.append(r.url))
    page = plain.new_page()
    page.goto(f"{base}/sign-in")
    _axe(page, axe_found)
    page.get_by_label("API token").fill(tokens["game"])
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{base}/now")
    expect(page.get_by_role("heading", level=1)).to_have_text("This is a game server's token")
    _axe(page, axe_found)
    plain.close()

    total: dict[str, int] = {}
    for counts in axe_found.values():
        for impact, n in counts.items():
            total[impact] = total.get(impact, 0) + n
    # What was found below serious (the walk has failed above on anything serious or worse).
    print(f"\naxe-core: {len(axe_found)} pages checked; violations by impact: {total or 'none'}")
    for path, counts in sorted(axe_found.items()):
        if counts:
            print(f"  {path}: {counts}")

    # ── nothing was fetched from anywhere but the host ──
    assert requested, "the browser made no requests"
    strangers = [url for url in requested if not url.startswith(base + "/")]
    assert strangers == [], strangers


def test_a_poll_answered_304_leaves_the_page_as_it_was_in_chromium(
    server: dict[str, Any], browser: Any
) -> None:
    """Chromium revalidates htmx's poll of ``/now/live`` by itself (``If-None-Match``); the
    wire answer is a 304 with no body, the XHR is handed the 200 the browser kept, and the
    page is as it was (htmx never swaps an empty body in)."""
    context = browser.new_context()
    page = _sign_in(context, server["base"], server["tokens"]["admin"])
    cdp = context.new_cdp_session(page)
    cdp.send("Network.enable")
    wire: dict[str, int] = {}
    polls: dict[str, str] = {}
    cdp.on(
        "Network.requestWillBeSent",
        lambda e: polls.update({e["requestId"]: e["request"]["url"]}),
    )
    cdp.on(
        "Network.responseReceivedExtraInfo",
        lambda e: wire.update({e["requestId"]: e["statusCode"]}),
    )
    seen: list[int] = []
    page.on("response", lambda r: seen.append(r.status) if r.url.endswith("/now/live") else None)
    # The fragment names times to the minute, so a minute turning inside the ten seconds
    # below changes it (a 200, rightly): begin with at least 15 s left in the minute.
    seconds = time.time() % 60
    if seconds > 45:
        time.sleep(60.5 - seconds)
    page.goto(f"{server['base']}/now")
    before = page.inner_html("#now-live")
    page.wait_for_timeout(10_000)  # three polls, every 3 s
    live = [wire[rid] for rid, url in polls.items() if url.endswith("/now/live") and rid in wire]
    assert 304 in live, live
    assert seen and set(seen) == {200}, seen  # what htmx was handed
    assert page.inner_html("#now-live") == before
    context.close()


def test_a_long_title_on_a_sunday_stays_in_its_cell_at_a_phones_width(
    server: dict[str, Any], browser: Any
) -> None:
    """The month's last column is the page's right edge: a title wider than its day's cell
    wraps inside the cell instead of pushing the page sideways."""
    base, admin = server["base"], server["tokens"]["admin"]
    title = "Wispwatchersgathering"  # one word, wider than a day at 390 px
    made = _api(
        base,
        admin,
        "POST",
        "/events",
        {
            "title": title,
            "spec": {
                "schedule": {"kind": "weekly", "days": ["sunday"], "time": "20:00"},
                "phases": [
                    {
                        "key": "p",
                        "label": "P",
                        "steps": [{"action": "core.wait", "params": {"seconds": 1}}],
                    }
                ],
            },
        },
    )
    _api(base, admin, "POST", f"/events/{made['id']}/publish")
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = _sign_in(context, base, admin)
    page.goto(f"{base}/calendar?view=month&month=2027-02")
    sundays = page.locator("table.month tbody tr td:last-child .occ a", has_text=title)
    assert sundays.count() == 4  # 7, 14, 21 and 28 February 2027
    _no_horizontal_scroll(page)
    context.close()
