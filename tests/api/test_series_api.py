"""Series: create, read, edit, and attaching events to them."""

from __future__ import annotations

import pytest

from tests.api.test_events_api import EVENTS, call, create, snapshot

SERIES = "/api/v1/admin/series"


async def test_create_needs_only_a_title(client, tokens):
    status, series = await call(client, "POST", SERIES, tokens["editor"], {"title": "Winter Arc"})
    assert status == 201
    assert series == {
        "id": series["id"],
        "title": "Winter Arc",
        "slug": "winter-arc",
        "description": "",
        "visibility": "staff",
    }
    status, one = await call(client, "GET", f"{SERIES}/{series['id']}", tokens["moderator"])
    assert (status, one) == (200, series)


async def test_slug_rules_match_the_events(client, tokens, db):
    admin = tokens["admin"]
    slugs = []
    for _ in range(3):
        status, series = await call(client, "POST", SERIES, admin, {"title": "Arc"})
        slugs.append(series["slug"])
    assert slugs == ["arc", "arc-2", "arc-3"]
    status, series = await call(client, "POST", SERIES, admin, {"title": "?!"})
    assert series["slug"] == "series"
    before = await snapshot(db)
    status, data = await call(client, "POST", SERIES, admin, {"title": "x", "slug": "arc"})
    assert (status, data["error"]["code"]) == (409, "conflict")
    status, data = await call(client, "PUT", f"{SERIES}/{series['id']}", admin, {"slug": "arc-2"})
    assert (status, data["error"]["code"]) == (409, "conflict")
    assert await snapshot(db) == before


async def test_an_edit_is_partial(client, tokens):
    _, series = await call(
        client, "POST", SERIES, tokens["admin"], {"title": "Arc", "description": "Cold."}
    )
    path = f"{SERIES}/{series['id']}"
    status, edited = await call(client, "PUT", path, tokens["editor"], {"visibility": "public"})
    assert status == 200
    assert edited == {**series, "visibility": "public"}
    status, edited = await call(
        client, "PUT", path, tokens["editor"], {"title": "Arc II", "slug": "arc-two"}
    )
    assert (edited["title"], edited["slug"], edited["description"]) == (
        "Arc II",
        "arc-two",
        "Cold.",
    )


@pytest.mark.parametrize(
    ("body", "prefix"),
    [
        (b"{", "body:"),
        (b"[1]", "body:"),
        ({"title": ""}, "body.title:"),
        ({"title": "t" * 201}, "body.title:"),
        ({"title": None}, "body.title:"),
        ({"visibility": "hidden"}, "body.visibility:"),
        ({"slug": "Not A Slug"}, "body.slug:"),
        ({"description": 3}, "body.description:"),
        ({"id": 3}, "body.id:"),
        ({"colour": "north"}, "body.colour:"),
    ],
)
@pytest.mark.parametrize("method", ["POST", "PUT"])
async def test_a_malformed_body_is_400_and_writes_nothing(client, tokens, db, body, prefix, method):
    _, series = await call(client, "POST", SERIES, tokens["admin"], {"title": "Arc"})
    path = SERIES if method == "POST" else f"{SERIES}/{series['id']}"
    before = await snapshot(db)
    status, data = await call(client, method, path, tokens["admin"], body)
    assert (status, data["error"]["code"]) == (400, "invalid"), data
    assert any(d.startswith(prefix) for d in data["error"]["details"]), data
    assert await snapshot(db) == before


async def test_a_missing_series_is_404(client, tokens):
    for method, body in (("GET", None), ("PUT", {"title": "x"})):
        status, data = await call(client, method, f"{SERIES}/77", tokens["admin"], body)
        assert (status, data["error"]["message"]) == (404, "no series 77")


async def test_the_list_pages_in_id_order(client, tokens):
    ids = []
    for n in range(3):
        _, series = await call(client, "POST", SERIES, tokens["admin"], {"title": f"S{n}"})
        ids.append(series["id"])
    status, page = await call(client, "GET", f"{SERIES}?limit=2", tokens["moderator"])
    assert [s["id"] for s in page["items"]] == ids[:2]
    status, rest = await call(
        client, "GET", f"{SERIES}?limit=2&cursor={page['next_cursor']}", tokens["moderator"]
    )
    assert status == 200
    assert ([s["id"] for s in rest["items"]], rest["next_cursor"]) == (ids[2:], None)


async def test_an_event_joins_and_leaves_a_series(client, tokens, db):
    _, series = await call(client, "POST", SERIES, tokens["admin"], {"title": "Arc"})
    event = await create(client, tokens["editor"])
    path = f"{EVENTS}/{event['id']}"
    status, joined = await call(client, "PUT", path, tokens["editor"], {"series_id": series["id"]})
    assert (status, joined["series_id"]) == (200, series["id"])
    before = await snapshot(db)
    status, data = await call(client, "PUT", path, tokens["editor"], {"series_id": 999})
    assert (status, data["error"]["details"]) == (400, ["body.series_id: no series 999"])
    assert await snapshot(db) == before
    status, left = await call(client, "PUT", path, tokens["editor"], {"series_id": None})
    assert (status, left["series_id"]) == (200, None)
