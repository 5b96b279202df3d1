"""The web console over the real app and a real database (both dialects): sign-in and the
session, CSRF, the roles' pages and buttons, controls answering with the server's sentence,
the editor's form round trip and its errors at their fields, the schedule preview, and the
HTML error pages. The browser walk is in ``test_console_walk.py``."""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from pageant.console import editor
from pageant.console.events import preview
from pageant.console.session import COOKIE, Sessions
from tests.factories import announce, phase, publish_event, spec

STATIC = Path(__file__).parents[2] / "host" / "console" / "static"


class Form(HTMLParser):
    """What a browser would post for one form of a page: its fields, as rendered."""

    def __init__(self, form_id: str) -> None:
        super().__init__()
        self.form_id = form_id
        self.inside = False
        self.fields: list[tuple[str, str]] = []
        self._select: str | None = None
        self._first: str | None = None
        self._chosen: str | None = None
        self._textarea: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form" and a.get("id") == self.form_id:
            self.inside = True
        if not self.inside:
            return
        if tag == "input" and a.get("name"):
            kind = a.get("type", "text")
            if kind == "checkbox" and "checked" not in a:
                return
            self.fields.append((a["name"], a.get("value", "")))
        elif tag == "select":
            self._select, self._first, self._chosen = a.get("name"), None, None
        elif tag == "option" and self._select is not None:
            if self._first is None:
                self._first = a.get("value", "")
            if "selected" in a:
                self._chosen = a.get("value", "")
        elif tag == "textarea":
            self._textarea = a.get("name")
            self.fields.append((self._textarea or "", ""))

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            name, value = self.fields[-1]
            self.fields[-1] = (name, value + data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "form" and self.inside:
            self.inside = False
        elif tag == "select" and self._select is not None:
            chosen = self._chosen if self._chosen is not None else self._first
            self.fields.append((self._select, chosen or ""))
            self._select = None
        elif tag == "textarea":
            self._textarea = None


def form_of(html: str, form_id: str = "editor") -> list[tuple[str, str]]:
    parser = Form(form_id)
    parser.feed(html)
    return parser.fields


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found, "the page has no CSRF field"
    return found.group(1)


async def sign_in(client: Any, token: str) -> None:
    page = await client.get("/sign-in")
    nonce = csrf_of(await page.text())
    answer = await client.post(
        "/sign-in",
        data={"csrf_token": nonce, "token": token, "next": "/now"},
        allow_redirects=False,
    )
    assert answer.status == 303, await answer.text()


async def page_csrf(client: Any, path: str = "/now") -> str:
    page = await client.get(path)
    assert page.status == 200, await page.text()
    return csrf_of(await page.text())


# ── sign-in and the session ────────────────────────────────────────────────────


async def test_a_page_without_a_session_sends_you_to_sign_in(client):
    answer = await client.get("/runs/1", allow_redirects=False)
    assert answer.status == 303
    assert answer.headers["Location"] == "/sign-in?next=/runs/1"


async def test_sign_in_sets_a_signed_httponly_strict_cookie_without_the_token(client, tokens):
    page = await client.get("/sign-in")
    nonce = csrf_of(await page.text())
    answer = await client.post(
        "/sign-in",
        data={"csrf_token": nonce, "token": tokens["admin"], "next": "/events"},
        allow_redirects=False,
    )
    assert answer.status == 303 and answer.headers["Location"] == "/events"
    header = next(h for h in answer.headers.getall("Set-Cookie") if h.startswith(COOKIE))
    assert "HttpOnly" in header and "SameSite=Strict" in header and "Path=/" in header
    assert tokens["admin"] not in header
    assert (await client.get("/events")).status == 200


async def test_a_bad_token_is_refused_with_a_sentence(client):
    page = await client.get("/sign-in")
    answer = await client.post(
        "/sign-in", data={"csrf_token": csrf_of(await page.text()), "token": "pgt_nope"}
    )
    assert answer.status == 401
    assert "That token is not valid." in await answer.text()


async def test_sign_in_without_its_csrf_field_is_refused(client, tokens):
    await client.get("/sign-in")
    answer = await client.post("/sign-in", data={"token": tokens["admin"]})
    assert answer.status == 403
    assert COOKIE not in answer.cookies


async def test_an_offsite_next_is_ignored(client, tokens):
    page = await client.get("/sign-in")
    answer = await client.post(
        "/sign-in",
        data={
            "csrf_token": csrf_of(await page.text()),
            "token": tokens["admin"],
            "next": "//evil.example/x",
        },
        allow_redirects=False,
    )
    assert answer.headers["Location"] == "/now"


async def test_revoking_the_token_ends_its_session(client, tokens, db, clock):
    from pageant.access.tokens import find_token, revoke_token

    await sign_in(client, tokens["moderator"])
    assert (await client.get("/now")).status == 200
    token_id = await find_token(db, "test-moderator")
    await revoke_token(db, token_id, actor="admin:test", now=clock.now())
    answer = await client.get("/now", allow_redirects=False)
    assert answer.status == 303 and answer.headers["Location"].startswith("/sign-in")


async def test_a_token_that_expires_ends_its_session_and_cannot_sign_in(client, db, clock):
    from datetime import timedelta

    from pageant.access.tokens import create_token

    token = await create_token(
        db, role="admin", name="brief", now=clock.now(), expires_in=timedelta(hours=1)
    )
    await sign_in(client, token)
    assert (await client.get("/now")).status == 200
    clock.advance(hours=2)
    answer = await client.get("/now", allow_redirects=False)
    assert answer.status == 303 and answer.headers["Location"].startswith("/sign-in")
    page = await client.get("/sign-in")
    refused = await client.post(
        "/sign-in", data={"csrf_token": csrf_of(await page.text()), "token": token}
    )
    assert refused.status == 401
    assert "the bearer token has expired" in await refused.text()


async def test_a_game_token_may_sign_in_but_sees_no_staff_page(client, tokens):
    await sign_in(client, tokens["game"])
    for path in ("/now", "/runs", "/events/1", "/tokens"):
        answer = await client.get(path)
        assert answer.status == 403
        html = await answer.text()
        # a page that says what the token is for, not a bare refusal
        assert "This is a game server's token" in html
        assert "POST /api/v1/triggers/{trigger}/fire" in html
        assert "Sign out" in html and '<nav aria-label="Console">' in html


def test_an_expired_or_forged_cookie_is_no_session():
    sessions = Sessions("secret", max_age_seconds=3600)
    value = sessions.issue("pgt_x")
    assert sessions.read(value) is not None
    assert Sessions("other", max_age_seconds=3600).read(value) is None
    assert Sessions("secret", max_age_seconds=-1).read(value) is None
    assert sessions.read(value[:-2] + "xx") is None


async def test_sign_out_clears_the_cookie(client, tokens):
    await sign_in(client, tokens["admin"])
    csrf = await page_csrf(client)
    answer = await client.post("/sign-out", data={"csrf_token": csrf}, allow_redirects=False)
    assert answer.status == 303
    assert answer.cookies[COOKIE].value == ""
    assert (await client.get("/now", allow_redirects=False)).status == 303


# ── CSRF and roles on every action ────────────────────────────────────────────


async def test_a_form_post_without_the_csrf_field_is_403_and_changes_nothing(client, tokens, host):
    event = await publish_event(host.db, host.clock.now(), published=False)
    await sign_in(client, tokens["admin"])
    for data in ({}, {"csrf_token": "guessed"}):
        answer = await client.post(f"/events/{event.id}/publish", data=data)
        assert answer.status == 403
        assert "security token" in await answer.text()
    listing = await client.get(f"/events/{event.id}")
    assert "published v1" not in await listing.text()


async def test_an_editor_sees_no_publish_button_and_may_not_publish(client, tokens, host):
    event = await publish_event(host.db, host.clock.now(), published=False)
    await sign_in(client, tokens["editor"])
    page = await client.get(f"/events/{event.id}")
    html = await page.text()
    assert 'id="editor"' in html and ">Publish</button>" not in html
    answer = await client.post(f"/events/{event.id}/publish", data={"csrf_token": csrf_of(html)})
    assert answer.status == 403
    assert "needs the role admin" in await answer.text()


async def test_a_moderator_sees_no_editor_and_may_not_save(client, tokens, host):
    event = await publish_event(host.db, host.clock.now())
    await sign_in(client, tokens["moderator"])
    page = await client.get(f"/events/{event.id}")
    html = await page.text()
    assert 'id="editor"' not in html and "Read-only" in html
    answer = await client.post(
        f"/events/{event.id}", data={"csrf_token": csrf_of(html), "title": "x", "op": "save"}
    )
    assert answer.status == 403


async def test_an_editor_sees_no_run_controls_and_may_not_pause(client, tokens, host):
    from pageant.runs.create import start_now

    event = await publish_event(host.db, host.clock.now())
    run_id, _ = await start_now(host, event.id, scope="", actor="admin:test")
    await sign_in(client, tokens["editor"])
    html = await (await client.get(f"/runs/{run_id}")).text()
    assert ">Pause</button>" not in html and "Cancel the run" not in html
    answer = await client.post(f"/runs/{run_id}/pause", data={"csrf_token": csrf_of(html)})
    assert answer.status == 403


# ── the run console ────────────────────────────────────────────────────────────


async def test_a_refused_control_shows_the_servers_sentence(client, tokens, host):
    from pageant.runs.create import start_now

    event = await publish_event(host.db, host.clock.now())
    run_id, _ = await start_now(host, event.id, scope="", actor="admin:test")
    await sign_in(client, tokens["moderator"])
    csrf = await page_csrf(client, f"/runs/{run_id}")
    answer = await client.post(f"/runs/{run_id}/resume", data={"csrf_token": csrf})
    assert answer.status == 409
    assert f"run {run_id} is scheduled; resume acts on a paused run" in await answer.text()


async def test_cancel_needs_a_reason_and_then_cancels(client, tokens, host):
    from pageant.runs.create import start_now

    event = await publish_event(host.db, host.clock.now())
    run_id, _ = await start_now(host, event.id, scope="", actor="admin:test")
    await sign_in(client, tokens["admin"])
    csrf = await page_csrf(client, f"/runs/{run_id}")
    answer = await client.post(f"/runs/{run_id}/cancel", data={"csrf_token": csrf})
    assert answer.status == 400
    assert "A reason is required to cancel" in await answer.text()
    answer = await client.post(
        f"/runs/{run_id}/cancel", data={"csrf_token": csrf, "reason": "wrong shard"}
    )
    assert answer.status == 200  # followed the 303 back to the console
    html = await answer.text()
    assert 'id="run-status">cancelled<' in html and "wrong shard" in html
    assert "hx-get" not in html.split('id="run-live"')[1].split(">")[0]  # polling stopped


async def test_the_live_fragment_is_the_console_without_the_frame(client, tokens, host):
    from pageant.runs.create import start_now

    event = await publish_event(host.db, host.clock.now())
    run_id, _ = await start_now(host, event.id, scope="", actor="admin:test")
    await sign_in(client, tokens["moderator"])
    html = await (await client.get(f"/runs/{run_id}/live")).text()
    assert html.lstrip().startswith('<div id="run-live"')
    assert f'hx-get="/runs/{run_id}/live"' in html and "<html" not in html


async def test_now_lists_live_runs_across_events_with_why_they_wait(host, client, tokens):
    from pageant.engine import Engine
    from pageant.runs.create import start_now

    cue = spec(phase("main", {"action": "core.cue", "params": {"message": "GM: go"}}))
    for title in ("One", "Two"):
        event = await publish_event(host.db, host.clock.now(), cue, title=title)
        await start_now(host, event.id, scope="", actor="admin:test")
    await sign_in(client, tokens["moderator"])
    html = await (await client.get("/now")).text()
    assert "No run is under way." in html  # scheduled: not under way yet
    async with Engine(host) as engine:
        await engine.tick()
    html = await (await client.get("/now/live")).text()
    banner = html.split('class="banner"')[1].split("</section>")[0]
    assert "Waiting on a person (2)" in banner
    assert banner.count("waiting for a person to confirm") == 2
    assert "One" in banner and "Two" in banner
    assert "<strong>2</strong> waiting on a person" in html


# ── the editor ─────────────────────────────────────────────────────────────────


WISP_SPEC = spec(
    phase("gather", announce("The wisps gather")),
    phase(
        "hunt",
        {"action": "core.cue", "params": {"message": "GM: go"}},
        advance={
            "on": "wisps.caught",
            "where": {
                "all": [
                    {"var": "colour", "op": "in", "value": ["north", "south"]},
                    {"var": "weight", "op": "gte", "value": 1.5},
                ]
            },
            "count": 2,
        },
    ),
    phase("wind-down", advance={"after": "90m"}),
)
WISP_SPEC["schedule"] = {"kind": "weekly", "days": ["monday", "friday"], "time": "20:00"}


async def test_the_editors_form_posts_back_the_spec_it_shows(client, tokens, host):
    from pageant.events.authoring.validator import validate

    stored = validate(WISP_SPEC, host.registry)
    event = await publish_event(host.db, host.clock.now(), stored, published=False)
    await sign_in(client, tokens["admin"])
    html = await (await client.get(f"/events/{event.id}")).text()
    fields = [*form_of(html), ("op", "save")]
    answer = await client.post(f"/events/{event.id}", data=fields, allow_redirects=False)
    assert answer.status == 303, await answer.text()
    async with host.db.connect() as conn:
        from pageant.events.definitions import get_definition

        row = await get_definition(conn, event.id)
    assert row.spec == stored


async def test_editor_buttons_add_a_step_and_a_condition_without_saving(client, tokens, host):
    event = await publish_event(host.db, host.clock.now(), published=False)
    await sign_in(client, tokens["editor"])
    html = await (await client.get(f"/events/{event.id}")).text()
    fields = [f for f in form_of(html) if f[0] != "p0-new-action"]
    answer = await client.post(
        f"/events/{event.id}",
        data=[*fields, ("p0-new-action", "wisps.summon"), ("op", "add-step:0")],
    )
    html = await answer.text()
    assert answer.status == 200
    # The form for the action's declared params: its option source as a dropdown, its risk.
    assert '<select id="p0-s1-param-colour"' in html
    assert '<option value="north"' in html and 'type="number"' in html
    assert "risk change" in html
    async with host.db.connect() as conn:
        from pageant.events.definitions import get_definition

        assert len((await get_definition(conn, event.id)).spec["phases"][0]["steps"]) == 1


async def test_validation_errors_are_shown_at_their_fields(client, tokens, host):
    event = await publish_event(host.db, host.clock.now(), published=False)
    await sign_in(client, tokens["admin"])
    html = await (await client.get(f"/events/{event.id}")).text()
    fields = [f for f in form_of(html) if f[0] not in ("p0-key", "p0-new-action", "timezone")]
    answer = await client.post(
        f"/events/{event.id}",
        data=[
            *fields,
            ("p0-key", "Bad Key"),
            ("timezone", "Mars/Olympus"),
            ("p0-new-action", "wisps.summon"),
            ("op", "add-step:0"),
        ],
    )
    fields = [f for f in form_of(await answer.text()) if f[0] != "p0-s1-param-count"]
    answer = await client.post(
        f"/events/{event.id}", data=[*fields, ("p0-s1-param-count", "lots"), ("op", "save")]
    )
    html = await answer.text()
    assert answer.status == 400
    assert re.search(r'id="p0-key"[^>]*aria-invalid="true"', html)
    assert re.search(r'id="timezone"[^>]*aria-invalid="true"|Mars/Olympus', html)
    assert "must be an integer" in html
    assert re.search(r'id="p0-s1-param-count"[^>]*aria-invalid="true"', html)


def test_place_errors_puts_each_message_at_its_path():
    placed = editor.place_errors(
        [
            'spec.phases[1].steps[0].params: "count" is required',
            "spec.phases[0].key: not a key",
            "timezone: unknown",
            "a sentence without a path",
        ]
    )
    assert placed["spec.phases[1].steps[0].params.count"] == ['"count" is required']
    assert placed["spec.phases[0].key"] == ["not a key"]
    assert placed["timezone"] == ["unknown"]
    assert placed[""] == ["a sentence without a path"]


def test_the_schedule_preview_flags_a_dst_gap():
    schedule = {"kind": "monthly", "nth": -1, "weekday": "sunday", "time": "02:30"}
    found = preview(schedule, "Europe/Berlin", datetime(2027, 3, 1, tzinfo=UTC))
    assert len(found) == 5
    first = found[0]
    assert first["local"].strftime("%Y-%m-%d %H:%M") == "2027-03-28 03:00"
    assert first["dst_adjusted"] == {"kind": "gap", "shift_minutes": 30}
    assert all(o["dst_adjusted"] is None for o in found[1:-1])


async def test_the_editor_previews_five_occurrences_in_local_time(client, tokens, host):
    weekly = spec(phase("main", announce("hi")))
    weekly["schedule"] = {"kind": "weekly", "days": ["friday"], "time": "20:00"}
    event = await publish_event(host.db, host.clock.now(), weekly, published=False)
    await sign_in(client, tokens["admin"])
    html = await (await client.get(f"/events/{event.id}")).text()
    preview_html = html.split('id="preview-h"')[1].split("</section>")[0]
    assert preview_html.count("<li>") == 5
    assert "Fri 2027-03-05 20:00 UTC" in preview_html


# ── pages, errors and assets ───────────────────────────────────────────────────


@pytest.mark.parametrize(
    "path",
    [
        "/now",
        "/events",
        "/events/new",
        "/calendar",
        "/calendar?view=agenda&month=2027-10",
        "/plugins",
    ],
)
async def test_every_page_answers_for_an_admin(client, tokens, path):
    await sign_in(client, tokens["admin"])
    answer = await client.get(path)
    assert answer.status == 200, await answer.text()
    assert answer.headers["Content-Security-Policy"].startswith("default-src 'self'")


async def test_bad_input_is_an_html_page_naming_it_never_a_500(client, tokens):
    await sign_in(client, tokens["admin"])
    for path, status, words in [
        ("/nowhere", 404, "There is no page at /nowhere"),
        ("/runs/99", 404, "no such run: 99"),
        ("/runs/x1", 404, "There is no run"),
        ("/events/99", 404, "no event 99"),
        ("/calendar?month=2027-13", 400, "is not a month"),
        ("/calendar?view=week", 400, "There is no view"),
        ("/calendar?series=77", 404, "There is no series 77"),
        ("/events?state=lost", 400, "There is no state"),
    ]:
        answer = await client.get(path)
        assert answer.status == status, path
        assert answer.content_type == "text/html"
        assert words in await answer.text(), path


async def test_the_api_still_answers_json(client):
    answer = await client.get("/api/v1/nowhere")
    assert answer.status == 404
    assert (await answer.json())["error"]["code"] == "not_found"


async def test_the_vendored_htmx_is_served_and_recorded(client):
    answer = await client.get("/static/htmx.min.js")
    assert answer.status == 200
    body = await answer.read()
    recorded = (STATIC / "VENDORED.md").read_text()
    assert hashlib.sha256(body).hexdigest() in recorded
    assert "2.0.11" in recorded and (STATIC / "htmx.LICENSE.txt").exists()


async def test_the_calendar_marks_projected_occurrences_and_dst(client, tokens):
    from tests.conftest import bearer

    schedule = {"kind": "monthly", "nth": -1, "weekday": "sunday", "time": "02:30"}
    created = await client.post(
        "/api/v1/admin/events",
        headers=bearer(tokens["admin"]),
        json={
            "title": "Night hunt",
            "timezone": "Europe/Berlin",
            "spec": {
                "schedule": schedule,
                "phases": [{"key": "main", "label": "Main", "steps": []}],
            },
        },
    )
    event_id = (await created.json())["id"]
    published = await client.post(
        f"/api/v1/admin/events/{event_id}/publish", headers=bearer(tokens["admin"])
    )
    assert published.status == 200, await published.text()
    await sign_in(client, tokens["moderator"])
    html = await (await client.get("/calendar?month=2027-03")).text()
    cell = html.split('<span class="day">28')[1].split("</td>")[0]
    assert "Night hunt" in cell and "projected" in cell
    assert "⚠ DST" in cell and "runs 30 min later" in cell
    agenda = await (await client.get("/calendar?view=agenda&month=2027-04")).text()
    assert "2027-04-25" in agenda and "Night hunt" in agenda
    other = await client.post(
        "/api/v1/admin/series", headers=bearer(tokens["admin"]), json={"title": "Other"}
    )
    series_id = (await other.json())["id"]
    filtered = await (await client.get(f"/calendar?month=2027-03&series={series_id}")).text()
    assert "Night hunt" not in filtered


async def test_the_events_list_says_whether_the_published_version_is_verified(client, tokens, host):
    from tests.conftest import bearer

    created = await client.post(
        "/api/v1/admin/events", headers=bearer(tokens["admin"]), json={"title": "Muster"}
    )
    event_id = (await created.json())["id"]
    published = await client.post(
        f"/api/v1/admin/events/{event_id}/publish", headers=bearer(tokens["admin"])
    )
    assert (await published.json())["version_verified"] is False
    await sign_in(client, tokens["editor"])
    html = await (await client.get("/events")).text()
    row = html.split("Muster")[1].split("</tr>")[0]
    assert 'data-label="Verified">✗ no<' in row
    verified = await client.post(
        f"/api/v1/admin/events/{event_id}/verify", headers=bearer(tokens["admin"])
    )
    assert verified.status == 200, await verified.text()
    html = await (await client.get("/events")).text()
    assert 'data-label="Verified">✓ yes<' in html.split("Muster")[1].split("</tr>")[0]


async def test_a_calendar_day_shows_six_and_counts_the_rest_and_the_agenda_is_paged(
    client, tokens, host, monkeypatch
):
    from pageant.console import calendar as calendar_page
    from pageant.runs.create import start_now

    event = await publish_event(host.db, host.clock.now(), title="Crowded")
    for n in range(8):
        await start_now(host, event.id, scope=f"s{n}", actor="admin:test")
    await sign_in(client, tokens["moderator"])
    html = await (await client.get("/calendar?month=2027-03")).text()
    cell = html.split('<span class="day">1 <span class="visually-hidden">(today)')[1]
    cell = cell.split("</td>")[0]
    assert cell.count("Crowded") == 6
    assert "day=2027-03-01" in cell and ">and 2 more</a>" in cell
    agenda = await (await client.get("/calendar?view=agenda&month=2027-03&day=2027-03-01")).text()
    assert agenda.count("Crowded") == 8
    # The agenda is paged; the eight share one instant, and a page boundary falls among
    # them: following "later" shows the rest, each run exactly once, in the same order.
    monkeypatch.setattr(calendar_page, "AGENDA_PAGE", 5)
    agenda = await (await client.get("/calendar?view=agenda&month=2027-03")).text()
    first = re.findall(r'href="/runs/(\d+)"', agenda)
    assert len(first) == 5 and agenda.count("Crowded") == 5
    later = re.search(r'href="([^"]+)" rel="next"', agenda).group(1).replace("&amp;", "&")
    assert "after=" in later
    rest = await (await client.get(later)).text()
    second = re.findall(r'href="/runs/(\d+)"', rest)
    assert len(second) == 3 and 'rel="next"' not in rest
    assert "Continued from" in rest and "From the start of the month" in rest
    everything = [int(n) for n in first + second]
    assert everything == sorted(everything) and len(set(everything)) == 8
    # exactly one page: no "later" link
    monkeypatch.setattr(calendar_page, "AGENDA_PAGE", 8)
    agenda = await (await client.get("/calendar?view=agenda&month=2027-03")).text()
    assert agenda.count("Crowded") == 8 and 'rel="next"' not in agenda
    # a cursor that is not one is a clear 400, never a 500
    for bad in ("yesterday", "2027-03-01T10:00:00,1", "2027-03-01T10:00:00,1,2", "x,y,z"):
        answer = await client.get(f"/calendar?view=agenda&month=2027-03&after={bad}")
        assert answer.status == 400, bad
        assert "is not a place in the agenda" in await answer.text()


async def test_a_database_conflict_is_a_409_page_to_try_again_never_an_error_line(
    client, tokens, monkeypatch, caplog
):
    """A deadlock, or a Galera cluster's certification conflict, rolled back whole."""
    import logging

    import pymysql
    from sqlalchemy.exc import OperationalError

    from pageant.console import now

    await sign_in(client, tokens["admin"])

    async def collides(*args: Any, **kwargs: Any) -> Any:
        raise OperationalError(
            "UPDATE ...", {}, pymysql.err.OperationalError(1213, "Deadlock found")
        )

    monkeypatch.setattr(now, "list_runs", collides)
    with caplog.at_level(logging.DEBUG):
        answer = await client.get("/now")
    assert answer.status == 409
    assert "nothing was written. Try again." in await answer.text()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
