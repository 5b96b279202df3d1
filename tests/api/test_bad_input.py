"""Bad input never makes a 500: each hand-made attack that once did is answered in the error
envelope, naming what was wrong and where, and writes nothing."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import Any

import pytest
from sqlalchemy import func, select

from pageant.access.tokens import create_token
from pageant.api.app import all_routes
from pageant.api.routing import MAX_JSON_DEPTH, json_depth_exceeds, parse_id
from pageant.db.tables import trigger_firing_keys, trigger_last_firings
from pageant.engine import Engine
from tests.api.test_events_api import EVENTS, WAIT, call, create, snapshot, spec_of
from tests.conftest import bearer

SERIES = "/api/v1/admin/series"
BODY_ROUTES = sorted((r.method, r.path) for r in all_routes() if r.body is not None)


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def envelope(data: Any) -> dict[str, Any]:
    assert set(data) == {"error"}, data
    assert set(data["error"]) == {"code", "message", "details"}
    return data["error"]


@pytest.fixture
async def ids(
    client: Any, tokens: dict[str, str], host: Any, db: Any, clock: Any
) -> dict[str, Any]:
    """Real ids for every path parameter: an event with a run whose step ran, a series, a
    blackout, and a game link's server with a game token that may speak for it."""
    admin = tokens["admin"]
    event = await create(client, admin, title="Probe", spec=spec_of(WAIT))
    status, _ = await call(client, "POST", f"{EVENTS}/{event['id']}/publish", admin)
    assert status == 200
    status, run = await call(client, "POST", f"{EVENTS}/{event['id']}/runs", admin)
    assert status == 201, run
    await Engine(host).tick()
    _, console = await call(client, "GET", f"/api/v1/admin/runs/{run['id']}", admin)
    _, series = await call(client, "POST", SERIES, admin, {"title": "Probe"})
    night = {"kind": "weekly", "days": ["friday"], "start": "18:00", "end": "23:00"}
    blackout = {"slug": "probe", "name": "Probe", "periods": [night]}
    _, made = await call(client, "POST", "/api/v1/admin/blackouts", admin, blackout)
    return {
        "series": series["id"],
        "blackout": made["blackout"]["id"],
        "id": event["id"],
        "run_id": run["id"],
        "step_id": console["steps"][0]["id"],
        "number": 1,
        # A game's trigger: core's are the host's alone, refused before any body is read.
        "trigger_id": next(t for t in sorted(host.registry.triggers) if not t.startswith("core.")),
        "action_id": "core.announce",
        "server": "probe",
        "link_token": await create_token(
            db, role="game", name="probe-link", now=clock.now(), servers=["probe"]
        ),
    }


def caller(template: str, ids: dict[str, Any], tokens: dict[str, str]) -> str:
    """The token a route takes: a game link's route answers only its server's game token."""
    return ids["link_token"] if template.startswith("/api/v1/link/") else tokens["admin"]


def fill(template: str, ids: dict[str, Any], **raw: str) -> str:
    """``template`` with real ids (``{id}`` is a series' under /series, a blackout's under
    /blackouts, else an event's),
    and ``raw`` text for the parameters it names."""
    if template.startswith(SERIES):
        ids = {**ids, "id": ids["series"]}
    if template.startswith("/api/v1/admin/blackouts"):
        ids = {**ids, "id": ids["blackout"]}
    ids = {**ids, **raw}
    return re.sub(r"{(\w+)}", lambda m: str(ids[m.group(1)]), template)


# ── JSON nested deep ──────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("method", "template"), BODY_ROUTES, ids=[f"{m} {p}" for m, p in BODY_ROUTES]
)
async def test_json_nested_past_the_bound_is_a_400_on_every_body_route(
    client, tokens, ids, db, method, template
):
    before = await snapshot(db)
    token = caller(template, ids, tokens)
    status, data = await call(client, method, fill(template, ids), token, nested(10_000))
    assert status == 400, data
    assert envelope(data)["details"] == [
        f"body: arrays and objects may nest at most {MAX_JSON_DEPTH} deep"
    ]
    assert await snapshot(db) == before


def test_the_depth_bound_holds_on_both_sides() -> None:
    assert not json_depth_exceeds(nested(MAX_JSON_DEPTH))
    assert json_depth_exceeds(nested(MAX_JSON_DEPTH + 1))
    # Brackets inside strings do not nest, escaped quotes do not end the string.
    text = b'{"a": "' + b"[" * 500 + b'\\"' + b"{" * 500 + b'"}'
    assert not json_depth_exceeds(text)


async def test_a_body_at_the_depth_bound_is_parsed(client, tokens) -> None:
    # The bound refuses nothing legitimate: a body exactly MAX_JSON_DEPTH deep reaches the
    # model, which says what is wrong with its field (not with its depth).
    body = b'{"title": "x", "description": ' + nested(MAX_JSON_DEPTH - 1) + b"}"
    status, data = await call(client, "POST", SERIES, tokens["admin"], body)
    assert status == 400
    assert envelope(data)["details"][0].startswith("body.description: ")


# ── ids in the path ───────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    "raw", ["\u00b2", "\u0664", "0", "00", "-1", "+4", " 4", "9223372036854775808", "1e3"]
)
async def test_an_id_that_is_not_one_is_a_404_everywhere(client, tokens, db, ids, raw) -> None:
    before = await snapshot(db)
    for route in all_routes():
        if "{" not in route.path or route.path.endswith(("{slug}", "{trigger_id}/fire")):
            continue
        if "{source_id}" in route.path or "{server}" in route.path:
            # A server id is a name the game chose, not a number: any text may be one.
            continue
        for name in re.findall(r"{(\w+)}", route.path):
            path = fill(route.path, ids, **{name: raw})
            response = await client.request(
                route.method, path, json={}, headers=bearer(tokens["admin"])
            )
            assert response.status == 404, (route.method, path, await response.text())
            envelope(await response.json())
    assert await snapshot(db) == before


async def test_a_non_ascii_digit_never_names_an_event(client, tokens, db, ids) -> None:
    # "٤" is the Arabic-Indic four: int() reads it as 4, and once started a run of event 4.
    arabic = "".join(chr(0x0660 + int(d)) for d in str(ids["id"]))
    response = await client.post(f"{EVENTS}/{arabic}/runs", headers=bearer(tokens["admin"]))
    assert response.status == 404


def test_the_id_range_holds_on_both_sides() -> None:
    assert parse_id("1") == 1
    assert parse_id("0") is None
    assert parse_id(str(2**63 - 1)) == 2**63 - 1
    assert parse_id(str(2**63)) is None


# ── instants ──────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("from=9999-12-31T23:59:59Z", "from"),
        ("from=0001-01-01T00:00:00Z", "from"),
        ("from=2027-01-01T00:00:00Z&to=9999-12-31T23:59:59Z", "to"),
    ],
)
async def test_an_instant_out_of_range_on_the_public_calendar_is_a_400(client, query, field):
    response = await client.get(f"/api/v1/public/events?{query}")
    assert response.status == 400
    details = envelope(await response.json())["details"]
    assert len(details) == 1 and details[0].startswith(f"query.{field}: ")
    assert "outside the supported range" in details[0]


async def test_the_instant_range_holds_on_both_sides(client) -> None:
    inside = "from=2999-12-01T00:00:00Z&to=2999-12-31T23:59:59Z"
    assert (await client.get(f"/api/v1/public/events?{inside}")).status == 200
    assert (await client.get("/api/v1/public/events?from=1970-01-01T00:00:00Z")).status == 200
    outside = "from=2999-12-01T00:00:00Z&to=3000-01-01T00:00:00Z"
    assert (await client.get(f"/api/v1/public/events?{outside}")).status == 400
    assert (await client.get("/api/v1/public/events?from=1969-12-31T23:59:59Z")).status == 400


async def test_an_instant_out_of_range_on_the_staff_calendar_is_a_400(client, tokens) -> None:
    query = "from=9999-12-31T00:00:00Z&to=9999-12-31T23:59:59Z"
    response = await client.get(f"/api/v1/admin/calendar?{query}", headers=bearer(tokens["admin"]))
    assert response.status == 400
    details = envelope(await response.json())["details"]
    assert [d.split(":")[0] for d in details] == ["query.from", "query.to"]


async def test_a_once_schedule_out_of_range_is_a_400_naming_it(client, tokens, db) -> None:
    before = await snapshot(db)
    spec = {
        "schedule": {"kind": "once", "at": "9999-12-31T23:59"},
        "phases": spec_of(WAIT)["phases"],
    }
    status, data = await call(client, "POST", EVENTS, tokens["admin"], {"title": "X", "spec": spec})
    assert status == 400, data
    assert any("schedule.at" in d and "supported range" in d for d in envelope(data)["details"])
    assert await snapshot(db) == before


# ── control characters ────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        (SERIES, {"title": "Wisps\u0000"}, "body.title"),
        (EVENTS, {"title": "ok", "description": "a\u001bb"}, "body.description"),
        (
            EVENTS,
            {
                "title": "ok",
                "spec": spec_of(
                    {"action": "core.wait", "params": {"seconds": 1}, "label": "x\u0007"}
                ),
            },
            "body.spec.phases[0].steps[0].label",
        ),
    ],
)
async def test_control_characters_in_text_are_a_400_naming_the_field(
    client, tokens, db, path, body, field
) -> None:
    before = await snapshot(db)
    status, data = await call(client, "POST", path, tokens["admin"], body)
    assert status == 400, data
    details = envelope(data)["details"]
    assert len(details) == 1 and details[0].startswith(f"{field}: contains the control character")
    assert await snapshot(db) == before


async def test_a_nul_in_a_run_scope_is_a_400(client, tokens, ids) -> None:
    status, data = await call(
        client, "POST", f"{EVENTS}/{ids['id']}/runs", tokens["admin"], {"scope": "shard\u00001"}
    )
    assert status == 400
    assert envelope(data)["details"][0].startswith(
        "body.scope: contains the control character U+0000"
    )


async def test_tabs_and_line_breaks_are_text(client, tokens) -> None:
    status, data = await call(
        client,
        "POST",
        SERIES,
        tokens["admin"],
        {"title": "Arc", "description": "one\ttwo\r\nthree"},
    )
    assert status == 201, data
    assert data["description"] == "one\ttwo\r\nthree"


# ── content type ──────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    "kind", ["text/plain", "application/x-www-form-urlencoded", "application/octet-stream"]
)
async def test_a_body_that_is_not_json_is_a_415(client, tokens, db, kind) -> None:
    before = await snapshot(db)
    response = await client.post(
        SERIES, data=b'{"title": "Arc"}', headers={**bearer(tokens["admin"]), "Content-Type": kind}
    )
    assert response.status == 415
    error = envelope(await response.json())
    assert error["code"] == "unsupported_media_type"
    assert error["details"] == ["header.Content-Type: expected application/json"]
    assert await snapshot(db) == before


OPTIONAL_BODY_ROUTES = sorted(r.path for r in all_routes() if r.body_optional)


@pytest.mark.parametrize("template", OPTIONAL_BODY_ROUTES)
async def test_an_optional_body_of_only_blanks_is_a_400_and_none_at_all_is_accepted(
    client, tokens, db, ids, template
) -> None:
    path = fill(template, ids)
    headers = {**bearer(caller(template, ids, tokens)), "Content-Type": "application/json"}
    before = await snapshot(db)
    response = await client.post(path, data=b" \n", headers=headers)
    assert response.status == 400, await response.text()
    assert envelope(await response.json())["code"] == "invalid"
    assert await snapshot(db) == before
    # No bytes at all is no body: the route goes on to its own answer (some refuse the
    # run's state with a 409), never to a complaint about the body.
    response = await client.post(path, data=b"", headers=headers)
    assert response.status in (200, 201, 409), await response.text()


async def test_json_with_a_charset_or_a_json_suffix_is_json(client, tokens) -> None:
    for kind in ("application/json; charset=utf-8", "application/merge-patch+json"):
        response = await client.post(
            SERIES,
            data=b'{"title": "Arc"}',
            headers={**bearer(tokens["admin"]), "Content-Type": kind},
        )
        assert response.status == 201, kind


async def test_the_token_role_and_resource_come_before_the_content_type(client, tokens) -> None:
    response = await client.post(SERIES, data=b"x", headers={"Content-Type": "text/plain"})
    assert response.status == 401
    response = await client.post(
        SERIES, data=b"x", headers={**bearer(tokens["moderator"]), "Content-Type": "text/plain"}
    )
    assert response.status == 403
    response = await client.put(
        f"{SERIES}/999999",
        data=b"x",
        headers={**bearer(tokens["admin"]), "Content-Type": "text/plain"},
    )
    assert response.status == 404


# ── tokens on routes that need none ───────────────────────────────────────────


@pytest.mark.parametrize("header", ["Bearer pgt_not-a-token", "Basic abc", "Bearer", "junk"])
@pytest.mark.parametrize("path", ["/healthz", "/api/v1/openapi.json", "/api/v1/public/events"])
async def test_a_bad_token_on_a_route_that_needs_none_is_anonymous(client, header, path) -> None:
    response = await client.get(path, headers={"Authorization": header})
    assert response.status == 200, await response.text()


async def test_a_bad_token_on_a_route_that_needs_one_still_says_why(client) -> None:
    response = await client.get(EVENTS, headers={"Authorization": "Basic abc"})
    assert response.status == 401
    assert envelope(await response.json())["message"] == (
        "malformed Authorization header; expected: Bearer <token>"
    )


# ── methods ───────────────────────────────────────────────────────────────────


async def test_a_405_names_the_allowed_methods_in_allow(client, tokens) -> None:
    response = await client.delete("/healthz")
    assert response.status == 405
    assert response.headers["Allow"] == "GET"
    response = await client.delete(SERIES, headers=bearer(tokens["admin"]))
    assert response.status == 405
    assert set(response.headers["Allow"].split(", ")) == {"GET", "POST"}
    envelope(await response.json())


async def test_a_revoked_or_expired_token_on_a_route_that_needs_none_is_anonymous(
    client, db, clock
) -> None:
    from datetime import timedelta

    from pageant.access.tokens import find_token, issue_token, revoke_token

    revoked = await issue_token(db, role="admin", name="gone", now=clock.now(), actor="test")
    await revoke_token(db, await find_token(db, "gone"), actor="admin:test", now=clock.now())
    expired = await issue_token(
        db,
        role="admin",
        name="old",
        now=clock.now() - timedelta(days=2),
        expires_in=timedelta(days=1),
        actor="test",
    )
    for issued, why in ((revoked, "revoked"), (expired, "expired")):
        headers = bearer(issued["token"])
        for path in ("/healthz", "/api/v1/public/events", "/api/v1/openapi.json"):
            assert (await client.get(path, headers=headers)).status == 200, (why, path)
        response = await client.get(EVENTS, headers=headers)
        assert response.status == 401
        assert why in envelope(await response.json())["message"]


# ── bytes a header cannot decode ──────────────────────────────────────────────


async def _raw_get(client: Any, path: str, header: bytes) -> tuple[int, bytes]:
    """GET ``path`` with one raw header line, sent byte for byte (a client library would
    refuse to send what is not text)."""
    reader, writer = await asyncio.open_connection(client.server.host, client.server.port)
    try:
        writer.write(
            b"GET " + path.encode("utf-8", "surrogateescape") + b" HTTP/1.1\r\nHost: localhost\r\n"
            b"Connection: close\r\n" + header + b"\r\n\r\n"
        )
        await writer.drain()
        answer = await reader.read()
    finally:
        writer.close()
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split()[1]), rest


def _loud(caplog: Any) -> list[str]:
    """What was logged above DEBUG by pageant, and any warning or error at all (the access
    log's INFO line is every request's)."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING or (r.name.startswith("pageant") and r.levelno > 10)
    ]


PUBLIC_PATHS = ["/healthz", "/api/v1/public/events", "/api/v1/openapi.json", "/sign-in"]


@pytest.mark.parametrize("path", [*PUBLIC_PATHS, "/metrics", "/api/v1/admin/events"])
async def test_a_bearer_token_of_undecodable_bytes_is_a_bad_token(client, path, caplog):
    """``Bearer caf\\xe9`` is a token no one was issued: a route that needs a token answers
    401, a public one serves the caller as anonymous, and nothing is logged above DEBUG."""
    caplog.set_level(logging.DEBUG)
    status, _ = await _raw_get(client, path, b"Authorization: Bearer caf\xe9")
    expected = 401 if path in ("/metrics", "/api/v1/admin/events") else 200
    assert status == expected
    assert _loud(caplog) == []


async def test_a_static_file_ignores_an_undecodable_header(client, caplog):
    static = client.app.router["static"].url_for(filename="console.css")
    status, _ = await _raw_get(client, str(static), b"Authorization: Bearer caf\xe9")
    assert status == 200
    assert _loud(caplog) == []


@pytest.mark.parametrize("path", ["/", "/events", "/sign-in"])
async def test_a_session_cookie_of_undecodable_bytes_is_no_session(client, path, caplog):
    """A session cookie that is not text signs no one in: a page sends the caller to sign
    in (or shows the sign-in page), never a 500."""
    status, _ = await _raw_get(client, path, b"Cookie: pageant_session=caf\xe9")
    assert status in (200, 303)
    assert _loud(caplog) == []


async def test_a_sign_in_post_with_text_that_is_not_ascii_is_refused_not_a_500(client, caplog):
    """The sign-in form's nonce and a page's CSRF field are compared in constant time, which
    takes only ASCII: other text is a form out of date (403), never a 500."""
    page = await client.get("/sign-in")
    nonce = page.cookies["pageant_signin"].value
    refused = await client.post(
        "/sign-in", data={"csrf_token": "café", "token": "x"}, cookies={"pageant_signin": nonce}
    )
    assert refused.status == 403
    assert _loud(caplog) == []


# ── keys and text that are not UTF-8 ──────────────────────────────────────────

FIRE = "/api/v1/triggers/wisps.caught/fire"


async def _raw_post(client: Any, path: str, headers: list[bytes], body: bytes) -> tuple[int, Any]:
    """POST ``body`` to ``path`` with ``headers`` sent byte for byte; the status and the
    answer's JSON (None when aiohttp's parser answered in plain text)."""
    reader, writer = await asyncio.open_connection(client.server.host, client.server.port)
    try:
        writer.write(
            b"POST " + path.encode() + b" HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
            b"Content-Type: application/json\r\nContent-Length: "
            + str(len(body)).encode()
            + b"\r\n"
            + b"".join(h + b"\r\n" for h in headers)
            + b"\r\n"
            + body
        )
        await writer.drain()
        answer = await reader.read()
    finally:
        writer.close()
    head, _, payload = answer.partition(b"\r\n\r\n")
    status = int(head.split(b"\r\n")[0].split()[1])
    try:
        return status, json.loads(payload)
    except ValueError:
        return status, None


async def _firing_rows(db: Any) -> list[int]:
    """How many firing keys and last firings are kept: what a refused firing must not add."""
    async with db.connect() as conn:
        return [
            (await conn.execute(select(func.count()).select_from(table))).scalar_one()
            for table in (trigger_firing_keys, trigger_last_firings)
        ]


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b"caf\xe9", "is not UTF-8 text: character 4 is U+DCE9"),
        (b"\xff\xfe", "is not UTF-8 text: character 1 is U+DCFF"),
        # A surrogate spelt in UTF-8's pattern is not UTF-8 either.
        (b"k\xed\xa0\x80", "is not UTF-8 text: character 2 is U+DCED"),
        (b"a\tb", "character 2 is U+0009, which is not printable"),
    ],
)
async def test_an_idempotency_key_that_is_not_printable_utf8_is_a_400_naming_the_header(
    client, tokens, db, caplog, raw, problem
) -> None:
    before = await _firing_rows(db)
    auth = b"Authorization: Bearer " + tokens["game"].encode()
    status, data = await _raw_post(
        client, FIRE, [auth, b"Idempotency-Key: " + raw], b'{"colour": "eu-1"}'
    )
    assert status == 400, data
    (detail,) = envelope(data)["details"]
    assert detail.startswith(f"headers.Idempotency-Key: {problem}"), detail
    assert await _firing_rows(db) == before
    assert _loud(caplog) == []


@pytest.mark.parametrize("key", ["café-41", "🐉" * 200, "k" * 200, "a b"])
async def test_a_key_of_printable_utf8_up_to_the_bound_is_kept(client, tokens, db, key) -> None:
    auth = b"Authorization: Bearer " + tokens["game"].encode()
    header = b"Idempotency-Key: " + key.encode()
    for _ in range(2):  # the second is the first's replay
        status, data = await _raw_post(client, FIRE, [auth, header], b'{"colour": "eu-1"}')
        assert status == 200, data
    async with db.connect() as conn:
        kept = (await conn.execute(select(trigger_firing_keys.c.key))).scalars().all()
    assert kept == [key]


async def test_a_key_past_the_bound_is_a_400(client, tokens, db) -> None:
    auth = b"Authorization: Bearer " + tokens["game"].encode()
    header = b"Idempotency-Key: " + ("🐉" * 201).encode()
    status, data = await _raw_post(client, FIRE, [auth, header], b'{"colour": "eu-1"}')
    assert status == 400
    assert envelope(data)["details"] == [
        "headers.Idempotency-Key: expected 1 to 200 characters; got 201"
    ]
    assert await _firing_rows(db) == [0, 0]


async def test_a_lone_surrogate_in_a_batch_firings_id_is_a_400_naming_it(client, tokens, db):
    before = await _firing_rows(db)
    auth = b"Authorization: Bearer " + tokens["game"].encode()
    body = (
        b'[{"trigger": "wisps.caught", "payload": {"colour": "eu-1"}, "id": "ok"},'
        b' {"trigger": "wisps.caught", "payload": {"colour": "eu-1"}, "id": "k\\ud800"}]'
    )
    status, data = await _raw_post(client, "/api/v1/triggers/fire", [auth], body)
    assert status == 400, data
    assert envelope(data)["details"] == [
        "body[1].id: contains U+D800, half of a surrogate pair alone, which is not text"
    ]
    assert await _firing_rows(db) == before


async def test_a_plugins_firing_with_a_key_that_is_not_text_is_refused(host, db) -> None:
    from pageant.errors import Invalid

    for key in ("caf\udce9", "a\x00b"):
        with pytest.raises(Invalid) as refused:
            await host.emit("wisps.caught", {"colour": "eu-1"}, key=key, issuer="plugin:wisps")
        assert refused.value.details[0].startswith("body.id: ")
    assert await _firing_rows(db) == [0, 0]


@pytest.mark.parametrize(
    ("method", "template"), BODY_ROUTES, ids=[f"{m} {p}" for m, p in BODY_ROUTES]
)
async def test_a_lone_surrogate_is_a_400_on_every_body_route(
    client, tokens, ids, db, method, template
):
    before = await snapshot(db)
    body = b'{"title": "Arc\\udc00", "x\\ud83d": 1}'
    token = caller(template, ids, tokens)
    status, data = await call(client, method, fill(template, ids), token, body)
    assert status == 400, data
    assert envelope(data)["details"] == [
        "body.title: contains U+DC00, half of a surrogate pair alone, which is not text",
        "body: a key holds half of a surrogate pair alone: 'x\\ud83d'",
    ]
    assert await snapshot(db) == before


@pytest.mark.parametrize(
    "line",
    [b"Idempotency-Key: ca\x00f", b"X-Probe: \x00"],
    ids=["a NUL in a header", "a header of only a NUL"],
)
async def test_a_request_the_parser_refuses_is_a_400_and_one_warning_line(
    client, tokens, caplog, line
) -> None:
    caplog.set_level(logging.DEBUG)
    auth = b"Authorization: Bearer " + tokens["game"].encode()
    status, _ = await _raw_post(client, FIRE, [auth, line], b'{"colour": "eu-1"}')
    assert status == 400
    said = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [(r.levelname, r.exc_info) for r in said] == [("WARNING", None)]
    assert said[0].getMessage() == (
        "refused a malformed request from 127.0.0.1 (400): Invalid header value char"
    )


async def test_a_url_the_parser_refuses_is_one_warning_line(client, caplog) -> None:
    status, _ = await _raw_get(client, "/api/v1/public/events/caf\udce9", b"X: y")
    assert status == 400
    said = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [(r.levelname, r.exc_info) for r in said] == [("WARNING", None)]


@pytest.mark.parametrize("path", ["/sign-in", "/events", "/tokens"])
async def test_a_console_form_of_bytes_that_are_not_utf8_is_a_400(client, caplog, path) -> None:
    """A form body aiohttp cannot decode answered 500 with a traceback: it is the console's
    own 400 page, before any session or CSRF check reads the form."""
    reader, writer = await asyncio.open_connection(client.server.host, client.server.port)
    body = b"csrf_token=\xff&token=caf\xe9"
    try:
        writer.write(
            b"POST " + path.encode() + b" HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
            b"Content-Type: application/x-www-form-urlencoded\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        )
        await writer.drain()
        answer = await reader.read()
    finally:
        writer.close()
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
    assert b"bytes that are not UTF-8 text" in answer
    assert _loud(caplog) == []


async def test_a_plugins_firing_with_a_payload_that_is_not_text_is_refused(host, db) -> None:
    """A plugin's (or the command line's) text may hold bytes that are not UTF-8 as
    surrogates, which no database stores: refused naming the variable, with nothing kept."""
    from pageant.errors import Invalid

    with pytest.raises(Invalid) as refused:
        await host.emit("wisps.caught", {"colour": "caf\udce9"}, key="k1", issuer="plugin:wisps")
    assert refused.value.details == [
        'body.colour: expected text for "colour", got "caf\\udce9", which holds half of a '
        "surrogate pair alone (a byte that is not UTF-8)"
    ]
    assert await _firing_rows(db) == [0, 0]
    # Text beyond ASCII is text.
    await host.emit("wisps.caught", {"colour": "café"}, key="k2", issuer="plugin:wisps")
    assert (await _firing_rows(db))[0] == 1
