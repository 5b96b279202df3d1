"""The event authoring API: create, edit, publish, archive and versions, through the real
app on a real database (SQLite and MariaDB)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from sqlalchemy import event as sa_event
from sqlalchemy import insert, select

from pageant.api.app import make_app
from pageant.api.routes.events import EventOut, VersionOut
from pageant.db import definitions
from pageant.db.tables import (
    event_action_settings,
    event_action_settings_history,
    event_definitions,
    event_run_steps,
    event_runs,
    event_series,
    event_versions,
)
from pageant.events.authoring.validator import empty_spec
from pageant.events.slugs import MAX_SLUG, slugify
from pageant.hosting import Host
from tests.conftest import bearer

EVENTS = "/api/v1/admin/events"

ANNOUNCE = {"action": "core.announce", "params": {"leg": "core.log", "message": "Wisps gather"}}
WAIT = {"action": "core.wait", "params": {"seconds": 60}}
SUMMON = {"action": "wisps.summon", "params": {"colour": "north", "count": 3}}


def spec_of(*steps: dict[str, Any], phases: list[dict[str, Any]] | None = None) -> dict:
    """A manual spec; one phase ``main`` holding ``steps`` unless ``phases`` are given."""
    return {
        "schedule": {"kind": "manual"},
        "phases": phases or [{"key": "main", "label": "Main", "steps": list(steps)}],
    }


async def snapshot(db: Any) -> dict[str, list[dict[str, Any]]]:
    """Every authoring row, to prove a refused request wrote nothing."""
    out = {}
    async with db.connect() as conn:
        for table in (
            event_definitions,
            event_versions,
            event_series,
            event_action_settings,
            event_action_settings_history,
        ):
            rows = await conn.execute(select(table).order_by(*table.primary_key.columns))
            out[table.name] = [dict(r._mapping) for r in rows]
        await conn.rollback()
    return out


async def call(client: Any, method: str, path: str, token: str | None, body: Any = None) -> Any:
    headers = bearer(token) if token else {}
    kwargs: dict[str, Any] = {"headers": headers}
    if isinstance(body, bytes):
        kwargs["data"] = body
        headers["Content-Type"] = "application/json"
    elif body is not None:
        kwargs["json"] = body
    response = await client.request(method, path, **kwargs)
    return response.status, await response.json()


async def create(client: Any, token: str, **body: Any) -> dict[str, Any]:
    body.setdefault("title", "Friday Muster")
    status, data = await call(client, "POST", EVENTS, token, body)
    assert status == 201, data
    return data


# ── create ──────────────────────────────────────────────────────────────────────────────────


async def test_create_needs_only_a_title_and_takes_the_defaults(client, tokens, db, clock):
    event = await create(client, tokens["editor"], title="  Friday Muster!  ")
    assert event == {
        "id": event["id"],
        "title": "Friday Muster!",
        "slug": "friday-muster",
        "description": "",
        "timezone": "UTC",
        "grace_seconds": 300,
        "concurrency_key": None,
        "overlap": "hold",
        "series_id": None,
        "visibility": "staff",
        "state": "draft",
        "spec": empty_spec(),
        "current_version": None,
        "version_verified": False,
        "version_drift": [],
        "next_occurrence": None,
        "runs_waiting": 0,
        "warnings": [],
    }
    # The response is the documented shape, field for field.
    assert set(event) == set(EventOut.model_fields)
    EventOut.model_validate(event)
    rows = (await snapshot(db))["event_definitions"]
    assert len(rows) == 1
    assert rows[0]["created_by"] == "editor:test-editor"
    assert rows[0]["created_at"] == clock.now()


async def test_create_takes_every_field(client, tokens):
    status, series = await call(
        client, "POST", "/api/v1/admin/series", tokens["admin"], {"title": "Winter"}
    )
    assert status == 201
    event = await create(
        client,
        tokens["admin"],
        title="Muster",
        slug="the-muster",
        description="Champions gather.",
        timezone="Europe/Berlin",
        grace_seconds=600,
        concurrency_key="yew",
        series_id=series["id"],
        visibility="public",
        spec=spec_of(ANNOUNCE, SUMMON),
    )
    assert event["slug"] == "the-muster"
    assert event["timezone"] == "Europe/Berlin"
    assert event["grace_seconds"] == 600
    assert event["concurrency_key"] == "yew"
    assert event["series_id"] == series["id"]
    assert event["visibility"] == "public"
    steps = event["spec"]["phases"][0]["steps"]
    # The spec is stored normalised by the validator.
    assert [s["action"] for s in steps] == ["core.announce", "wisps.summon"]
    assert steps[1]["on_failure"] == "pause" and steps[1]["action_version"] == 1


@pytest.mark.parametrize(
    ("field", "ok", "refused"),
    [
        ("grace_seconds", [0, 86_400], [-1, 86_401]),
        ("title", ["x", "t" * 200], ["", "   ", "t" * 201]),
        ("concurrency_key", ["k", "k" * 100], ["", "k" * 101]),
        ("description", ["", "d" * 10_000], ["d" * 10_001]),
    ],
)
async def test_create_bounds_hold_on_both_sides(client, tokens, db, field, ok, refused):
    for n, value in enumerate(ok):
        body = {"title": f"ok {n}", field: value}
        status, data = await call(client, "POST", EVENTS, tokens["admin"], body)
        assert status == 201, (value, data)
    before = await snapshot(db)
    for value in refused:
        body = {"title": "refused", field: value}
        status, data = await call(client, "POST", EVENTS, tokens["admin"], body)
        assert status == 400, value
        assert data["error"]["code"] == "invalid"
        assert any(d.startswith(f"body.{field}:") for d in data["error"]["details"]), data
    assert await snapshot(db) == before


# ── malformed bodies ────────────────────────────────────────────────────────────────────────

BAD_BODIES: list[tuple[Any, list[str]]] = [
    (b"{", ["body:"]),
    (b"", ["body:"]),
    (b"[]", ["body:"]),
    (b'"title"', ["body:"]),
    (b"null", ["body:"]),
    ({"title": 5}, ["body.title:"]),
    ({"title": None}, ["body.title:"]),
    ({"title": "x", "grace_seconds": "300"}, ["body.grace_seconds:"]),
    ({"title": "x", "grace_seconds": True}, ["body.grace_seconds:"]),
    ({"title": "x", "grace_seconds": 300.0}, ["body.grace_seconds:"]),
    ({"title": "x", "visibility": "secret"}, ["body.visibility:"]),
    ({"title": "x", "timezone": "Mars/Olympus_Mons"}, ['body.timezone: "Mars/Olympus_Mons"']),
    ({"title": "x", "timezone": "../etc/passwd"}, ["body.timezone:"]),
    ({"title": "x", "timezone": "/UTC"}, ["body.timezone:"]),
    ({"title": "x", "timezone": ""}, ["body.timezone:"]),
    ({"title": "x", "timezone": "localtime"}, ["body.timezone:"]),
    ({"title": "x", "series_id": 999}, ["body.series_id: no series 999"]),
    ({"title": "x", "series_id": "1"}, ["body.series_id:"]),
    ({"title": "x", "series_id": 2**64}, ["body.series_id:"]),
    ({"title": "x", "slug": "Bad Slug"}, ["body.slug:"]),
    ({"title": "x", "slug": "trailing-"}, ["body.slug:"]),
    ({"title": "x", "slug": "s" * 101}, ["body.slug:"]),
    ({"title": "x", "id": 4}, ["body.id:"]),
    ({"title": "x", "state": "ready"}, ["body.state:"]),
    ({"title": "x", "current_version": None}, ["body.current_version:"]),
    ({"title": "x", "colour": "north"}, ["body.colour:"]),
    ({"title": "x", "spec": []}, ["spec:"]),
    ({"title": "x", "spec": None}, ["spec:"]),
    ({"title": "x", "spec": {"phases": []}}, ["spec.phases:"]),
    ({"title": "x", "spec": spec_of({"action": "nobody.here"})}, ["spec.phases[0].steps[0]"]),
    # Every problem at once, from the model and the spec alike.
    (
        {"title": "", "grace_seconds": -5, "spec": spec_of({"action": "wisps.summon"})},
        ["body.title:", "body.grace_seconds:", 'spec.phases[0].steps[0].params: "colour"'],
    ),
]


@pytest.mark.parametrize(
    ("body", "expected"),
    BAD_BODIES,
    ids=lambda v: json.dumps(v)[:40] if not isinstance(v, bytes) else repr(v),
)
async def test_a_malformed_create_is_400_with_every_problem_and_writes_nothing(
    client, tokens, db, body, expected
):
    before = await snapshot(db)
    status, data = await call(client, "POST", EVENTS, tokens["admin"], body)
    assert status == 400, data
    assert data["error"]["code"] == "invalid"
    details = data["error"]["details"]
    for prefix in expected:
        assert any(d.startswith(prefix) for d in details), (prefix, details)
    assert await snapshot(db) == before


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        *[case for case in BAD_BODIES if case[0] != {"title": None}],
        ({"title": None}, ["body.title:"]),
        ({"description": None}, ["body.description:"]),
        ({"slug": None}, ["body.slug:"]),
        ({"spec": {"phases": [{"key": "main", "label": "M", "steps": []}], "x": 1}}, ["spec:"]),
    ],
    ids=lambda v: json.dumps(v)[:40] if not isinstance(v, bytes) else repr(v),
)
async def test_a_malformed_edit_is_400_with_every_problem_and_writes_nothing(
    client, tokens, db, body, expected
):
    event = await create(client, tokens["admin"])
    before = await snapshot(db)
    status, data = await call(client, "PUT", f"{EVENTS}/{event['id']}", tokens["admin"], body)
    assert status == 400, data
    for prefix in expected:
        assert any(d.startswith(prefix) for d in data["error"]["details"]), (prefix, data)
    assert await snapshot(db) == before


async def test_read_only_fields_are_named_in_the_refusal(client, tokens):
    event = await create(client, tokens["admin"])
    body = {"id": 9, "state": "ready", "current_version": {"number": 3}, "runs_waiting": 0}
    status, data = await call(client, "PUT", f"{EVENTS}/{event['id']}", tokens["admin"], body)
    assert status == 400
    details = data["error"]["details"]
    for key in body:
        assert any(d.startswith(f"body.{key}: ") and "cannot be written" in d for d in details)


@pytest.mark.parametrize("raw", ["99999999999999999999", "9223372036854775808", "²", "٣", "-1"])
async def test_an_id_that_is_not_an_id_is_404_never_500(client, tokens, raw):
    for path in (f"{EVENTS}/{raw}", f"{EVENTS}/{raw}/versions", f"{EVENTS}/1/versions/{raw}"):
        status, data = await call(client, "GET", path, tokens["admin"])
        assert (status, data["error"]["code"]) == (404, "not_found"), path


@pytest.mark.parametrize("text", ["id:99999999999999999999", "id:²", "id:-1", "run:3"])
async def test_a_forged_cursor_is_400_never_500(client, tokens, text):
    import base64

    cursor = base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")
    status, data = await call(client, "GET", f"{EVENTS}?cursor={cursor}", tokens["admin"])
    assert (status, data["error"]["details"][0].split(":")[0]) == (400, "query.cursor")
    status, data = await call(client, "GET", f"{EVENTS}?limit=²", tokens["admin"])
    assert (status, data["error"]["details"][0].split(":")[0]) == (400, "query.limit")


async def test_a_missing_event_is_404_before_its_body_is_read(client, tokens):
    status, data = await call(client, "PUT", f"{EVENTS}/999", tokens["admin"], b"{")
    assert (status, data["error"]["code"]) == (404, "not_found")
    assert data["error"]["message"] == "no event 999"
    for path in (f"{EVENTS}/999", f"{EVENTS}/abc", f"{EVENTS}/999/versions"):
        status, data = await call(client, "GET", path, tokens["moderator"])
        assert status == 404, path
    for action in ("publish", "archive"):
        status, _ = await call(client, "POST", f"{EVENTS}/999/{action}", tokens["admin"])
        assert status == 404


# ── slugs ───────────────────────────────────────────────────────────────────────────────────


def test_slugify_folds_accents_and_collapses_the_rest():
    assert slugify("Fête de la Lune — Part 2!") == "fete-de-la-lune-part-2"
    assert slugify("  --Hello__World--  ") == "hello-world"
    assert slugify("!!!") == "event"
    assert slugify("日本") == "event"
    long = slugify("word " * 60)
    assert len(long) <= MAX_SLUG and not long.endswith("-")


async def test_a_derived_slug_that_is_taken_gets_the_next_free_suffix(client, tokens):
    slugs = [(await create(client, tokens["admin"], title="Muster"))["slug"] for _ in range(3)]
    assert slugs == ["muster", "muster-2", "muster-3"]
    # An explicit slug shaped like a suffix does not confuse the derivation.
    await create(client, tokens["admin"], title="other", slug="muster-5")
    assert (await create(client, tokens["admin"], title="Muster"))["slug"] == "muster-4"


async def test_a_suffixed_long_slug_stays_within_the_bound(client, tokens):
    title = "a" * 150
    first = await create(client, tokens["admin"], title=title)
    second = await create(client, tokens["admin"], title=title)
    assert first["slug"] == "a" * MAX_SLUG
    assert second["slug"] == "a" * (MAX_SLUG - 2) + "-2"


async def test_an_explicit_duplicate_slug_is_a_conflict_and_writes_nothing(client, tokens, db):
    first = await create(client, tokens["admin"], title="Muster", slug="muster")
    other = await create(client, tokens["admin"], title="Other")
    before = await snapshot(db)
    status, data = await call(
        client, "POST", EVENTS, tokens["admin"], {"title": "Again", "slug": "muster"}
    )
    assert (status, data["error"]["code"]) == (409, "conflict")
    assert f"event {first['id']}" in data["error"]["message"]
    status, data = await call(
        client, "PUT", f"{EVENTS}/{other['id']}", tokens["admin"], {"slug": "muster"}
    )
    assert (status, data["error"]["code"]) == (409, "conflict")
    assert await snapshot(db) == before
    # Keeping its own slug is not a conflict with itself.
    status, _ = await call(
        client, "PUT", f"{EVENTS}/{first['id']}", tokens["admin"], {"slug": "muster"}
    )
    assert status == 200


async def test_retitling_keeps_the_slug(client, tokens):
    event = await create(client, tokens["admin"], title="Muster")
    status, data = await call(
        client, "PUT", f"{EVENTS}/{event['id']}", tokens["admin"], {"title": "Grand Muster"}
    )
    assert status == 200
    assert (data["title"], data["slug"]) == ("Grand Muster", "muster")


# ── the lifecycle ───────────────────────────────────────────────────────────────────────────


async def test_create_edit_publish_edit_keeps_version_one_frozen(client, tokens, db, clock):
    admin = tokens["admin"]
    event = await create(client, tokens["editor"], title="Muster")
    path = f"{EVENTS}/{event['id']}"
    first_spec = spec_of(ANNOUNCE, WAIT)
    status, edited = await call(
        client, "PUT", path, admin, {"spec": first_spec, "timezone": "Europe/Berlin"}
    )
    assert status == 200 and edited["state"] == "draft"

    clock.advance(60)
    published_at = clock.now()
    status, published = await call(client, "POST", f"{path}/publish", admin)
    assert status == 200, published
    assert published["state"] == "ready"
    version = published["current_version"]
    assert version["number"] == 1
    assert version["published_by"] == "admin:test-admin"
    assert version["published_at"] == published_at.isoformat().replace("+00:00", "Z")

    status, v1 = await call(client, "GET", f"{path}/versions/1", tokens["moderator"])
    assert status == 200
    assert v1["spec"] == edited["spec"]
    assert set(v1) == set(VersionOut.model_fields)
    frozen = v1["spec"]

    # The working copy moves on; version 1 does not.
    clock.advance(60)
    second_spec = spec_of(ANNOUNCE, SUMMON, ANNOUNCE)
    status, moved = await call(
        client, "PUT", path, admin, {"spec": second_spec, "timezone": "Asia/Tokyo"}
    )
    assert status == 200
    assert len(moved["spec"]["phases"][0]["steps"]) == 3
    assert moved["state"] == "ready" and moved["current_version"]["number"] == 1
    status, again = await call(client, "GET", f"{path}/versions/1", admin)
    assert again == v1 and again["spec"] == frozen

    status, republished = await call(client, "POST", f"{path}/publish", admin)
    assert republished["current_version"]["number"] == 2
    status, listing = await call(client, "GET", f"{path}/versions", tokens["editor"])
    assert [v["number"] for v in listing["items"]] == [1, 2]
    assert listing["items"][0]["spec"] == frozen
    assert listing["items"][1]["spec"] == moved["spec"]
    assert listing["next_cursor"] is None

    # Each version keeps the zone the event had when it was published.
    versions = (await snapshot(db))["event_versions"]
    assert [v["timezone"] for v in versions] == ["Europe/Berlin", "Asia/Tokyo"]


async def test_an_unknown_version_is_404_naming_it(client, tokens):
    event = await create(client, tokens["admin"])
    status, data = await call(client, "GET", f"{EVENTS}/{event['id']}/versions/1", tokens["admin"])
    assert status == 404
    assert data["error"]["message"] == f"event {event['id']} has no version 1"
    status, data = await call(client, "GET", f"{EVENTS}/{event['id']}/versions", tokens["admin"])
    assert (status, data) == (200, {"items": [], "next_cursor": None})


async def test_versions_page_in_number_order(client, tokens):
    event = await create(client, tokens["admin"])
    path = f"{EVENTS}/{event['id']}"
    for _ in range(3):
        status, _data = await call(client, "POST", f"{path}/publish", tokens["admin"])
        assert status == 200
    status, page = await call(client, "GET", f"{path}/versions?limit=2", tokens["admin"])
    assert [v["number"] for v in page["items"]] == [1, 2]
    status, rest = await call(
        client, "GET", f"{path}/versions?limit=2&cursor={page['next_cursor']}", tokens["admin"]
    )
    assert [v["number"] for v in rest["items"]] == [3] and rest["next_cursor"] is None


async def test_publishing_an_invalid_working_copy_is_refused_and_writes_nothing(client, tokens, db):
    event = await create(client, tokens["admin"], spec=spec_of(ANNOUNCE))
    # A plugin changed under the stored spec: simulate it by writing an older shape.
    broken = spec_of({"action": "core.announce", "params": {"leg": "core.log", "msg": "x"}})
    async with db.begin() as conn:
        await conn.execute(
            event_definitions.update()
            .where(event_definitions.c.id == event["id"])
            .values(spec=broken)
        )
    before = await snapshot(db)
    status, data = await call(client, "POST", f"{EVENTS}/{event['id']}/publish", tokens["admin"])
    assert (status, data["error"]["code"]) == (400, "invalid")
    assert "no longer valid" in data["error"]["message"]
    assert any(d.startswith("spec.phases[0].steps[0].params:") for d in data["error"]["details"])
    assert await snapshot(db) == before


# ── archive ─────────────────────────────────────────────────────────────────────────────────


async def test_archive_stops_edits_and_publishes(client, tokens, db):
    event = await create(client, tokens["admin"])
    path = f"{EVENTS}/{event['id']}"
    status, archived = await call(client, "POST", f"{path}/archive", tokens["admin"])
    assert (status, archived["state"]) == (200, "archived")
    before = await snapshot(db)
    for method, suffix, body in [
        ("POST", "/archive", None),
        ("POST", "/publish", None),
        ("PUT", "", {"title": "Revived"}),
    ]:
        status, data = await call(client, method, path + suffix, tokens["admin"], body)
        assert (status, data["error"]["code"]) == (409, "conflict"), suffix
        assert "archived" in data["error"]["message"]
    assert await snapshot(db) == before


async def test_a_published_event_can_be_archived(client, tokens):
    event = await create(client, tokens["admin"])
    path = f"{EVENTS}/{event['id']}"
    await call(client, "POST", f"{path}/publish", tokens["admin"])
    status, archived = await call(client, "POST", f"{path}/archive", tokens["admin"])
    assert (status, archived["state"]) == (200, "archived")
    assert archived["current_version"]["number"] == 1


# ── the list ────────────────────────────────────────────────────────────────────────────────


async def test_the_list_pages_in_id_order_and_filters_by_state(client, tokens):
    ids = [(await create(client, tokens["admin"], title=f"E{n}"))["id"] for n in range(5)]
    await call(client, "POST", f"{EVENTS}/{ids[1]}/publish", tokens["admin"])
    await call(client, "POST", f"{EVENTS}/{ids[3]}/publish", tokens["admin"])
    seen, cursor = [], None
    while True:
        query = f"?limit=2&cursor={cursor}" if cursor else "?limit=2"
        status, page = await call(client, "GET", EVENTS + query, tokens["moderator"])
        assert status == 200 and len(page["items"]) <= 2
        seen += [item["id"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == ids
    status, ready = await call(client, "GET", f"{EVENTS}?state=ready", tokens["admin"])
    assert [e["id"] for e in ready["items"]] == [ids[1], ids[3]]
    assert all(e["current_version"]["number"] == 1 for e in ready["items"])


async def test_a_bad_list_query_names_every_problem(client, tokens):
    status, data = await call(
        client, "GET", f"{EVENTS}?state=live&limit=500&cursor=zzz", tokens["admin"]
    )
    assert status == 400
    details = data["error"]["details"]
    assert [d.split(":")[0] for d in details] == ["query.limit", "query.cursor", "query.state"]
    for limit, ok in [("1", True), ("200", True), ("0", False), ("201", False)]:
        status, _ = await call(client, "GET", f"{EVENTS}?limit={limit}", tokens["admin"])
        assert (status == 200) is ok, limit


async def _run(conn: Any, definition_id: int, version_id: int, status: str, n: int) -> int:
    from datetime import UTC, datetime, timedelta

    at = datetime(2027, 3, 1, 12, tzinfo=UTC) + timedelta(minutes=n)
    result = await conn.execute(
        insert(event_runs).values(
            definition_id=definition_id,
            version_id=version_id,
            scope="",
            scheduled_for=at,
            source="manual",
            status=status,
            created_at=at,
        )
    )
    return int(result.inserted_primary_key[0])


async def _step(conn: Any, run_id: int, seq: int, status: str, leased: bool) -> None:
    from datetime import UTC, datetime

    await conn.execute(
        insert(event_run_steps).values(
            run_id=run_id,
            phase="main",
            seq=seq,
            label="Cue",
            action="core.cue",
            action_version=1,
            params={},
            on_failure="skip",
            status=status,
            idempotency_key=f"k-{run_id}-{seq}",
            lease_until=datetime(2027, 3, 1, 13, tzinfo=UTC) if leased else None,
        )
    )


async def test_runs_waiting_counts_paused_runs_and_parked_steps(client, tokens, db):
    a = await create(client, tokens["admin"], title="A")
    b = await create(client, tokens["admin"], title="B")
    c = await create(client, tokens["admin"], title="C")
    for event in (a, b):
        await call(client, "POST", f"{EVENTS}/{event['id']}/publish", tokens["admin"])
    va = (await call(client, "GET", f"{EVENTS}/{a['id']}", tokens["admin"]))[1]
    vb = (await call(client, "GET", f"{EVENTS}/{b['id']}", tokens["admin"]))[1]
    va_id, vb_id = va["current_version"]["id"], vb["current_version"]["id"]
    async with db.begin() as conn:
        # A: paused (1), running with a parked step (1), running with two parked steps
        # (still one run), running with a leased step (0), scheduled (0).
        await _run(conn, a["id"], va_id, "paused", 1)
        parked = await _run(conn, a["id"], va_id, "running", 2)
        await _step(conn, parked, 0, "running", leased=False)
        twice = await _run(conn, a["id"], va_id, "running", 3)
        await _step(conn, twice, 0, "running", leased=False)
        await _step(conn, twice, 1, "running", leased=False)
        leased = await _run(conn, a["id"], va_id, "running", 4)
        await _step(conn, leased, 0, "running", leased=True)
        await _run(conn, a["id"], va_id, "scheduled", 5)
        # B: a finished run whose step was left parked is not waiting on anyone.
        done = await _run(conn, b["id"], vb_id, "completed", 1)
        await _step(conn, done, 0, "running", leased=False)
        ending = await _run(conn, b["id"], vb_id, "ending", 2)
        await _step(conn, ending, 0, "running", leased=False)
    status, page = await call(client, "GET", EVENTS, tokens["moderator"])
    waiting = {e["id"]: e["runs_waiting"] for e in page["items"]}
    assert waiting == {a["id"]: 3, b["id"]: 1, c["id"]: 0}
    status, one = await call(client, "GET", f"{EVENTS}/{a['id']}", tokens["moderator"])
    assert (status, one["runs_waiting"]) == (200, 3)


async def test_the_list_costs_the_same_queries_for_one_event_or_many(client, tokens, db):
    statements: list[str] = []

    def count(_conn, _cursor, statement, *_args):  # type: ignore[no-untyped-def]  # a SQLAlchemy event listener's loose signature
        statements.append(statement)

    await create(client, tokens["admin"], title="first")
    sa_event.listen(db.sync_engine, "before_cursor_execute", count)
    try:
        await call(client, "GET", EVENTS, tokens["admin"])
        one = len(statements)
        for n in range(6):
            await create(client, tokens["admin"], title=f"more {n}")
        statements.clear()
        await call(client, "GET", EVENTS, tokens["admin"])
        many = len(statements)
    finally:
        sa_event.remove(db.sync_engine, "before_cursor_execute", count)
    assert many == one


# ── dormant: the plugin was uninstalled ─────────────────────────────────────────────────────


@pytest.fixture
async def bare_client(settings, db, clock, aiohttp_client):
    """The app over a second host on the same database, without the wisps plugin."""
    host = Host(settings, discover=False, clock=clock, db=db)
    assert "wisps.summon" not in host.registry.actions
    try:
        yield await aiohttp_client(make_app(host, run_engine=False))
    finally:
        await host.close()


async def test_an_uninstalled_plugins_step_saves_dormant_and_refuses_to_publish(
    client, bare_client, tokens, db
):
    event = await create(client, tokens["admin"], spec=spec_of(ANNOUNCE, SUMMON))
    path = f"{EVENTS}/{event['id']}"
    admin = tokens["admin"]

    # Without wisps: the stored step is kept, marked dormant, on every save.
    status, edited = await call(bare_client, "PUT", path, admin, {"title": "Renamed"})
    assert (status, edited["title"]) == (200, "Renamed")
    status, saved = await call(bare_client, "PUT", path, admin, {"spec": event["spec"]})
    assert status == 200, saved
    steps = saved["spec"]["phases"][0]["steps"]
    assert [s["dormant"] for s in steps] == [False, True]
    assert steps[1]["params"] == SUMMON["params"]

    # A new step naming it is refused: dormancy is for what was already there.
    status, data = await call(bare_client, "PUT", path, admin, {"spec": spec_of(SUMMON)})
    assert status == 200  # the same action, already stored: kept
    again = spec_of(ANNOUNCE, {"action": "nobody.here"})
    status, data = await call(bare_client, "PUT", path, admin, {"spec": again})
    assert status == 400
    assert any("nobody.here" in d for d in data["error"]["details"])

    # Publishing is refused, naming each dormant item with its path; nothing is written.
    before = await snapshot(db)
    status, data = await call(bare_client, "POST", f"{path}/publish", admin)
    assert (status, data["error"]["code"]) == (409, "dormant")
    assert data["error"]["details"] == ["spec.phases[0].steps[0]: wisps.summon"]
    assert await snapshot(db) == before

    # With the plugin back, the same working copy publishes, no longer dormant.
    status, published = await call(client, "POST", f"{path}/publish", admin)
    assert status == 200, published
    status, v1 = await call(client, "GET", f"{path}/versions/1", admin)
    assert [s["dormant"] for s in v1["spec"]["phases"][0]["steps"]] == [False]


async def test_an_uninstalled_plugins_steps_and_gates_read_dormant_without_a_save(
    client, bare_client, tokens, db
):
    """Dormancy is the registry's of the moment: read without wisps, its step and its gate
    say dormant (the event list too); read with it, they do not; the stored spec is as saved."""
    phases = [
        {
            "key": "main",
            "label": "Main",
            "steps": [ANNOUNCE, SUMMON],
            "advance": {"on": "wisps.caught", "count": 2},
        }
    ]
    event = await create(client, tokens["admin"], spec=spec_of(phases=phases))
    path = f"{EVENTS}/{event['id']}"
    stored = await snapshot(db)

    def flags(view: dict[str, Any]) -> tuple[list[bool], bool]:
        main = view["spec"]["phases"][0]
        return [s["dormant"] for s in main["steps"]], main["advance"]["dormant"]

    status, without = await call(bare_client, "GET", path, tokens["editor"])
    assert status == 200, without
    assert flags(without) == ([False, True], True)
    status, listed = await call(bare_client, "GET", EVENTS, tokens["editor"])
    assert [flags(e) for e in listed["items"]] == [([False, True], True)]
    status, with_it = await call(client, "GET", path, tokens["editor"])
    assert flags(with_it) == ([False, False], False)
    assert await snapshot(db) == stored


# ── concurrency ─────────────────────────────────────────────────────────────────────────────


async def test_concurrent_publishes_take_distinct_numbers(client, tokens, db):
    event = await create(client, tokens["admin"])
    path = f"{EVENTS}/{event['id']}/publish"
    answers = await asyncio.gather(*(call(client, "POST", path, tokens["admin"]) for _ in range(6)))
    assert all(status == 200 for status, _ in answers), answers
    rows = (await snapshot(db))["event_versions"]
    assert sorted(r["number"] for r in rows) == [1, 2, 3, 4, 5, 6]
    status, data = await call(client, "GET", f"{EVENTS}/{event['id']}", tokens["admin"])
    assert (status, data["current_version"]["number"]) == (200, 6)


async def test_without_the_row_lock_a_publish_race_is_a_409_never_a_500(
    client, tokens, db, monkeypatch
):
    # The lock is what makes every concurrent publish succeed; without it (on MariaDB) two
    # read the same highest number, and the unique index must turn the loser into a 409.
    monkeypatch.setattr(definitions, "_GET_LOCKED", definitions._GET)
    event = await create(client, tokens["admin"])
    path = f"{EVENTS}/{event['id']}/publish"
    answers = await asyncio.gather(*(call(client, "POST", path, tokens["admin"]) for _ in range(6)))
    statuses = [status for status, _ in answers]
    assert set(statuses) <= {200, 409}, answers
    rows = (await snapshot(db))["event_versions"]
    numbers = sorted(r["number"] for r in rows)
    assert numbers == list(range(1, statuses.count(200) + 1))


async def test_concurrent_creates_of_one_title_get_distinct_slugs(client, tokens, db):
    body = {"title": "Muster"}
    answers = await asyncio.gather(
        *(call(client, "POST", EVENTS, tokens["admin"], body) for _ in range(5))
    )
    assert [status for status, _ in answers] == [201] * 5, answers
    slugs = sorted(data["slug"] for _, data in answers)
    assert slugs == ["muster", "muster-2", "muster-3", "muster-4", "muster-5"]


async def test_concurrent_creates_of_one_explicit_slug_let_one_through(client, tokens, db):
    body = {"title": "Muster", "slug": "muster"}
    answers = await asyncio.gather(
        *(call(client, "POST", EVENTS, tokens["admin"], body) for _ in range(5))
    )
    statuses = sorted(status for status, _ in answers)
    assert statuses == [201, 409, 409, 409, 409], answers
    assert len((await snapshot(db))["event_definitions"]) == 1
