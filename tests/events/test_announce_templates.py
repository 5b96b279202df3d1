"""An event's announcement template: checked at save with its place, rendered for every leg
with the time in the event's zone and the public page's link, and previewed through the API."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from aiohttp import web
from pydantic import SecretStr
from sqlalchemy import event as sa_event
from sqlalchemy import select, update

from pageant.api.app import make_app
from pageant.builtin_plugins.announce_chat import discord_payload, slack_payload
from pageant.db.tables import event_definitions, event_runs
from pageant.engine import Engine
from pageant.errors import Invalid
from pageant.events.authoring import announce as templates
from pageant.events.authoring.validator import validate
from pageant.hosting import Host
from pageant.runs.create import start_now
from tests.conftest import bearer
from tests.factories import (
    announce,
    log_lines,
    make_host,
    phase,
    publish_event,
    spec,
    step_rows,
    wait,
)

EVENTS = "/api/v1/admin/events"
MESSAGE_STEP = {"action": "core.announce", "params": {"leg": "core.log", "message": "Wisps gather"}}


def _spec(template: Any = None, steps: Any = (MESSAGE_STEP,), **schedule: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "schedule": schedule or {"kind": "manual"},
        "phases": [{"key": "main", "label": "Main", "steps": list(steps)}],
    }
    if template is not None:
        out["announcement"] = template
    return out


# ── the grammar ────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("template", "error"),
    [
        (
            {"body": "{starts}"},
            "spec.announcement.body: {starts} is not a placeholder; expected one of",
        ),
        ({"title": "{title.upper}"}, "spec.announcement.title: {title.upper} is not a placeholder"),
        ({"title": "{0}"}, "spec.announcement.title: {0} is not a placeholder"),
        ({"title": "{title!r}"}, "spec.announcement.title: {title} has a conversion or a format"),
        ({"body": "{when:>40}"}, "spec.announcement.body: {when} has a conversion or a format"),
        ({"body": "a { b"}, "spec.announcement.body: expected '}' before end of string"),
        ({"body": "a } b"}, "spec.announcement.body: Single '}' encountered"),
        ({"title": "one\ntwo"}, "spec.announcement.title: a title is one line"),
        ({"title": ""}, "spec.announcement.title: must not be empty"),
        ({"title": 5}, "spec.announcement.title: expected a string; got 5"),
        ({"subject": "x"}, 'spec.announcement: unknown key "subject"; expected title, body'),
        ("{title}", "spec.announcement: expected an object with title and/or body"),
        ({"title": "t" * 201}, "spec.announcement.title: at most 200 characters; got 201"),
        ({"body": "b" * 2001}, "spec.announcement.body: at most 2000 characters; got 2001"),
    ],
)
def test_a_bad_template_is_refused_with_its_place(template, error):
    from pageant.plugins.registry import Registry

    with pytest.raises(Invalid) as caught:
        validate(_spec(template, steps=()), Registry(), stored=None)
    assert any(d.startswith(error) for d in caught.value.details), caught.value.details


def test_the_bounds_hold_on_both_sides_and_a_template_survives_validation_again():
    from pageant.plugins.registry import Registry

    registry = Registry()
    template = {"title": "t" * 200, "body": "{{literal}} " + "b" * 1988}
    once = validate(_spec(template, steps=()), registry, stored=None)
    assert once["announcement"] == template
    assert validate(once, registry, stored=once) == once
    # An empty template is no template: the default, saved as nothing.
    assert "announcement" not in validate(_spec({}, steps=()), registry, stored=None)


def test_a_value_is_never_read_as_a_template():
    facts = templates.Facts(
        title="Muster {link}", slug="m", timezone="UTC", scheduled_for=None, public=True
    )
    shown = templates.announcement(
        {"title": "{message}", "body": "{title}: {message}"},
        "Use {title}\nand {{ this",
        facts,
        link_pattern="https://example.org/{slug}",
    )
    assert shown.body == "Muster {link}: Use {title}\nand {{ this"
    assert shown.title == "Use {title} and {{ this"  # one line: it becomes a Subject


@pytest.mark.parametrize(
    ("instant", "zone", "written"),
    [
        (datetime(2027, 3, 1, 19, tzinfo=UTC), "Europe/Berlin", "Mon 1 Mar 2027, 20:00 CET"),
        (datetime(2027, 7, 2, 18, tzinfo=UTC), "Europe/Berlin", "Fri 2 Jul 2027, 20:00 CEST"),
        (datetime(2027, 1, 1, 3, 30, tzinfo=UTC), "Asia/Kolkata", "Fri 1 Jan 2027, 09:00 IST"),
    ],
)
def test_when_is_written_in_the_event_zone(instant, zone, written):
    assert templates.when_text(instant, zone) == written


# ── every leg is handed the rendering ──────────────────────────────────────────


async def test_the_run_log_and_the_webhook_are_handed_the_rendered_body(
    settings, db, clock, aiohttp_server
):
    got: list[dict[str, Any]] = []

    async def hook(request: web.Request) -> web.Response:
        got.append(await request.json())
        return web.json_response({})

    app = web.Application()
    app.router.add_post("/hook", hook)
    server = await aiohttp_server(app)
    changed = settings.model_copy(
        update={
            "webhook_urls": (str(server.make_url("/hook")),),
            "public_page_url": "https://example.org/events/{slug}",
        }
    )
    host = make_host(changed, db, clock)
    event_spec = {
        **spec(phase("p", announce("Boss up"), announce("Boss up", leg="core.webhook"))),
        "announcement": {"body": "[{phase}] {message} at {when} {link}"},
    }
    event = await publish_event(db, clock.now(), event_spec, visibility="public")
    try:
        run_id, _ = await start_now(host, event.id, scope="", actor="admin:test")
        async with Engine(host) as engine:
            await engine.tick()
        assert [s.status for s in await step_rows(db, run_id)] == ["done", "done"]
        rendered = (
            f"[p] Boss up at Mon 1 Mar 2027, 12:00 UTC https://example.org/events/{event.slug}"
        )
        (line,) = await log_lines(db, run_id, "announce")
        assert line.detail == {"leg": "core.log", "message": rendered}
        assert got[0]["message"] == rendered
    finally:
        await host.close()


async def test_a_run_announces_with_the_template_it_was_published_with(probe_host):
    event = await publish_event(
        probe_host.db,
        probe_host.clock.now(),
        {**spec(phase("p", announce("Boss up"))), "announcement": {"body": "v1: {message}"}},
    )
    run_id, _ = await start_now(probe_host, event.id, scope="", actor="admin:test")
    async with Engine(probe_host) as engine:
        await engine.tick()
    (line,) = await log_lines(probe_host.db, run_id, "announce")
    assert line.detail["message"] == "v1: Boss up"


async def _version_reads_of_a_run(host: Host, engine: Engine, *steps: Any) -> tuple[int, int]:
    """Start a run of ``steps`` and tick once: its id, and the statements that read a
    version's spec meanwhile."""
    event = await publish_event(
        host.db,
        host.clock.now(),
        {
            **spec(phase("p", *steps, wait(60)), phase("q", announce("last"))),
            "announcement": {"body": "{title} ({scope}): {message}"},
        },
        title="Wisp tide",
    )
    run_id, _ = await start_now(host, event.id, scope="eu-2", actor="admin:test")
    reads: list[str] = []

    def seen(_conn, _cursor, statement, *_args):  # type: ignore[no-untyped-def]  # a SQLAlchemy event listener's loose signature
        if "event_versions.spec" in statement:
            reads.append(statement)

    sa_event.listen(host.db.sync_engine, "before_cursor_execute", seen)
    try:
        await engine.tick()
    finally:
        sa_event.remove(host.db.sync_engine, "before_cursor_execute", seen)
    return run_id, len(reads)


async def test_a_run_of_announcements_reads_its_version_once_and_the_title_each_pass(
    probe_host,
):
    # Each announcement is rendered from what the step holds (the run's row as its pass read
    # it, the pinned version from the engine's cache): six announce steps read the version
    # as often as one does, and an event renamed between two passes is named anew.
    async with Engine(probe_host) as engine:
        _, one = await _version_reads_of_a_run(probe_host, engine, announce("wave"))
        run_id, six = await _version_reads_of_a_run(
            probe_host, engine, *(announce(f"wave {i}") for i in range(6))
        )
        assert six == one, f"six announcements read a version {six} times, one {one}"
        said = [
            line.detail["message"] for line in await log_lines(probe_host.db, run_id, "announce")
        ]
        assert said == [f"Wisp tide (eu-2): wave {i}" for i in range(6)]
        async with probe_host.db.begin() as conn:
            definition_id = (
                await conn.execute(
                    select(event_runs.c.definition_id).where(event_runs.c.id == run_id)
                )
            ).scalar_one()
            await conn.execute(
                update(event_definitions)
                .where(event_definitions.c.id == definition_id)
                .values(title="Wisp flood")
            )
        probe_host.clock.advance(61)
        await engine.tick()
    lines = await log_lines(probe_host.db, run_id, "announce")
    assert lines[-1].detail["message"] == "Wisp flood (eu-2): last"


# ── the API: saved with its place, and previewed ───────────────────────────────


@pytest.fixture
async def page_client(settings, db, clock, aiohttp_client):
    changed = settings.model_copy(
        update={
            "public_page_url": "https://example.org/events/{slug}",
            "smtp_from": "events@example.org",
            "discord_webhook_url": SecretStr("https://discord.example/api/webhooks/1/secret"),
        }
    )
    host = Host(changed, clock=clock, db=db)
    try:
        yield await aiohttp_client(make_app(host, run_engine=False))
    finally:
        await host.close()


async def _create(client, token, **body):
    response = await client.post(EVENTS, json=body, headers=bearer(token))
    return response.status, await response.json()


async def test_a_bad_template_is_refused_at_save_and_nothing_is_written(page_client, tokens):
    status, event = await _create(page_client, tokens["editor"], title="Wisp Night", spec=_spec())
    assert status == 201
    response = await page_client.put(
        f"{EVENTS}/{event['id']}",
        json={"spec": _spec({"title": "{title}", "body": "Starts {starts}"})},
        headers=bearer(tokens["editor"]),
    )
    assert response.status == 400
    (detail,) = (await response.json())["error"]["details"]
    assert detail.startswith("spec.announcement.body: {starts} is not a placeholder")
    again = await page_client.get(f"{EVENTS}/{event['id']}", headers=bearer(tokens["editor"]))
    assert "announcement" not in (await again.json())["spec"]


async def test_the_preview_renders_the_saved_template_for_the_next_occurrence(page_client, tokens):
    template = {"title": "{title} tonight", "body": "{message}! {when}"}
    status, event = await _create(
        page_client,
        tokens["editor"],
        title="Wisp Night",
        timezone="Europe/Berlin",
        visibility="public",
        spec=_spec(template, kind="weekly", days=["friday"], time="20:00"),
    )
    assert status == 201, event
    response = await page_client.post(
        f"{EVENTS}/{event['id']}/announce-preview", headers=bearer(tokens["moderator"])
    )
    assert response.status == 200
    got = await response.json()
    # The clock stands at Monday 2027-03-01 12:00 UTC; the next Friday 20:00 in Berlin.
    assert got["occurrence"] == "next"
    assert got["when"] == "2027-03-05T19:00:00Z"
    assert got["title"] == "Wisp Night tonight"
    assert got["body"] == "Wisps gather! Fri 5 Mar 2027, 20:00 CET"
    assert got["link"] == f"https://example.org/events/{event['slug']}"
    # Each leg's payload is what the leg itself builds.
    shown = templates.announcement(
        template,
        "Wisps gather",
        templates.Facts(
            title="Wisp Night",
            slug=event["slug"],
            timezone="Europe/Berlin",
            scheduled_for=datetime(2027, 3, 5, 19, tzinfo=UTC),
            public=True,
        ),
        link_pattern="https://example.org/events/{slug}",
    )
    assert got["legs"]["core.discord"] == discord_payload(shown)
    assert got["legs"]["core.slack"] == slack_payload(shown)
    assert got["legs"]["core.email"]["subject"] == "Wisp Night tonight"
    assert got["legs"]["core.email"]["text"] == (
        f"Wisps gather! Fri 5 Mar 2027, 20:00 CET\n\nFri 5 Mar 2027, 20:00 CET\n{got['link']}\n"
    )
    # The webhook URL is a secret; a preview never shows it.
    assert "secret" not in await response.text()


async def test_the_preview_tries_an_unsaved_template_and_refuses_a_bad_one(page_client, tokens):
    _status, event = await _create(page_client, tokens["editor"], title="Wisp Night", spec=_spec())
    url = f"{EVENTS}/{event['id']}/announce-preview"
    response = await page_client.post(
        url,
        json={"announcement": {"body": "{message} ({scope})"}, "message": "Hi"},
        headers=bearer(tokens["editor"]),
    )
    got = await response.json()
    assert (response.status, got["body"], got["occurrence"], got["link"]) == (
        200,
        "Hi ()",
        "now",
        "",  # a staff-only event has no public page
    )
    response = await page_client.post(
        url, json={"announcement": {"body": "{nope}"}}, headers=bearer(tokens["editor"])
    )
    assert response.status == 400
    (detail,) = (await response.json())["error"]["details"]
    assert detail.startswith("body.announcement.body: {nope} is not a placeholder")
    missing = await page_client.post(
        f"{EVENTS}/999999/announce-preview", headers=bearer(tokens["editor"])
    )
    assert missing.status == 404


async def test_the_preview_shows_every_leg_that_offers_one_a_plugins_too(crier_client, tokens):
    _status, event = await _create(
        crier_client,
        tokens["editor"],
        title="Wisp Night",
        timezone="Europe/Berlin",
        spec=_spec({"title": "{title} tonight"}, kind="weekly", days=["friday"], time="20:00"),
    )
    response = await crier_client.post(
        f"{EVENTS}/{event['id']}/announce-preview", headers=bearer(tokens["editor"])
    )
    assert response.status == 200
    legs = (await response.json())["legs"]
    # Asked through the registry: the built-ins' previews and the plugin's, by id; a leg
    # without one (core.log, core.webhook, crier.mute) is left out.
    assert sorted(legs) == [
        "core.discord",
        "core.email",
        "core.slack",
        "crier.bell",
        "crier.clock",
        "crier.cracked",
        "crier.full",
        "crier.hoard",
        "crier.list",
    ]
    assert legs["crier.bell"] == {
        "line": "Hear ye! Wisp Night tonight: Wisps gather",
        "when": "Fri 5 Mar 2027, 20:00 CET",
    }
    # A plugin's preview failing is its own entry, and the others still show.
    assert legs["crier.cracked"] == {
        "error": "crier.cracked's preview raised ValueError: the bell is cracked"
    }
    assert legs["crier.list"] == {"error": "crier.list's preview answered list, not a mapping"}
    assert legs["crier.clock"] == {
        "error": "crier.clock's preview answered something not JSON: Object of type datetime "
        "is not JSON serializable"
    }
    # At most 64 KiB of JSON: exactly that is shown, one byte more is refused.
    assert legs["crier.full"] == {"line": "x" * (64 * 1024 - 12)}
    assert legs["crier.hoard"] == {
        "error": "crier.hoard's preview answered more than 65536 bytes of JSON"
    }
    assert legs["core.email"]["subject"] == "Wisp Night tonight"
