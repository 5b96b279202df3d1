"""The console's plugins page shows each plugin's own problems, as its start check found
them (``PLUGIN_INFO["check"]``, contract 1.3), beside the plugin they are about; a plugin
with none shows no problem line."""

from __future__ import annotations

import html
import re

from pageant.api.app import make_app
from tests.console.test_console import sign_in
from tests.factories import make_host
from tests.plugins.test_plugin_check import WRONG, Checked


async def test_the_plugins_page_shows_a_plugins_problems_on_its_own_row(
    settings, db, clock, aiohttp_client, tokens
):
    host = make_host(settings, db, clock, [Checked("game", [WRONG]), Checked("fine", [])])
    try:
        await host.start_plugins()
        client = await aiohttp_client(make_app(host, run_engine=False))
        await sign_in(client, tokens["moderator"])
        answer = await client.get("/plugins")
        assert answer.status == 200
        page = await answer.text()
    finally:
        await host.close()
    rows = {
        owner: row
        for row in re.findall(r"<tr>\s*<td data-label=\"Plugin\">.*?</tr>", page, re.S)
        for owner in re.findall(r'<span class="key">\((\w+)\)</span>', row)
    }
    problems = re.findall(r'<p class="plugin-problem">(.*?)</p>', rows["game"], re.S)
    assert [html.unescape(re.sub(r"<[^>]+>", "", p)) for p in problems] == [f"problem: {WRONG}"]
    assert "plugin-problem" not in rows["fine"]


def _walk(base: str, token: str) -> dict[str, dict[str, int]]:
    """Chromium on the plugins page, at a desktop's and a phone's width (dark scheme):
    axe-core's counts by page; fails on a serious or critical violation or a sideways
    scroll."""
    from playwright.sync_api import expect, sync_playwright

    from tests.console.test_console_walk import (
        ARGS,
        CHROMIUM,
        WAIT_MS,
        _axe,
        _axe_script,
        _no_horizontal_scroll,
        _sign_in,
    )

    expect.set_options(timeout=WAIT_MS)
    found: dict[str, dict[str, int]] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            for viewport, scheme in (((1280, 800), "light"), ((390, 844), "dark")):
                context = browser.new_context(
                    viewport={"width": viewport[0], "height": viewport[1]}, color_scheme=scheme
                )
                context.add_init_script(script=_axe_script())
                page = _sign_in(context, base, token)
                page.goto(f"{base}/plugins")
                expect(page.locator(".plugin-problem")).to_have_text(f"problem: {WRONG}")
                _axe(page, found)
                _no_horizontal_scroll(page)
                context.close()
        finally:
            browser.close()
    return found


async def test_a_plugins_problem_reads_in_chromium_with_axe_clean_and_no_sideways_scroll(
    settings, db, clock, aiohttp_client, tokens
):
    import asyncio

    host = make_host(settings, db, clock, [Checked("game", [WRONG])])
    try:
        await host.start_plugins()
        client = await aiohttp_client(make_app(host, run_engine=False))
        base = str(client.make_url("")).rstrip("/")
        # Playwright's sync API runs its own loop: in a thread, beside the app's.
        await asyncio.to_thread(_walk, base, tokens["moderator"])
    finally:
        await host.close()
