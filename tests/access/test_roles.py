"""Who may do what on the authoring routes: the 403 walk over every route and role, and the
role floor (an editor may not add or alter a world-changing step)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from pageant.access.floor import risky_changes
from pageant.api.app import make_app
from pageant.events.authoring.validator import validate
from pageant.hosting import Host
from tests.api.test_events_api import ANNOUNCE, EVENTS, SUMMON, call, create, snapshot, spec_of

SERIES = "/api/v1/admin/series"
ACTIONS = "/api/v1/admin/actions"
ROLES = ("admin", "editor", "moderator", "game", None)
STAFF = {"admin", "editor", "moderator"}
AUTHORS = {"admin", "editor"}
ADMIN = {"admin"}

# (method, path template, body, who may, the status they get)
ROUTES: list[tuple[str, str, Any, set[str], int]] = [
    ("GET", EVENTS, None, STAFF, 200),
    ("POST", EVENTS, {"title": "New"}, AUTHORS, 201),
    ("GET", EVENTS + "/{event}", None, STAFF, 200),
    ("PUT", EVENTS + "/{event}", {"title": "Renamed"}, AUTHORS, 200),
    ("POST", EVENTS + "/{event}/publish", None, ADMIN, 200),
    ("POST", EVENTS + "/{event}/archive", None, ADMIN, 200),
    ("GET", EVENTS + "/{event}/versions", None, STAFF, 200),
    ("GET", EVENTS + "/{event}/versions/1", None, STAFF, 200),
    ("GET", SERIES, None, STAFF, 200),
    ("POST", SERIES, {"title": "Arc"}, AUTHORS, 201),
    ("GET", SERIES + "/{series}", None, STAFF, 200),
    ("PUT", SERIES + "/{series}", {"title": "Arc II"}, AUTHORS, 200),
    ("GET", ACTIONS, None, STAFF, 200),
    ("PUT", ACTIONS + "/core.announce", {"enabled": False}, ADMIN, 200),
    ("GET", ACTIONS + "/core.announce/history", None, STAFF, 200),
    ("POST", EVENTS + "/{event}/verify", None, AUTHORS, 200),
    ("POST", EVENTS + "/{event}/rehearse", None, AUTHORS, 200),
    ("POST", EVENTS + "/{event}/announce-preview", {"message": "Hi"}, STAFF, 200),
]


@pytest.mark.parametrize("role", ROLES, ids=lambda r: r or "no-token")
@pytest.mark.parametrize(
    ("method", "template", "body", "allowed", "ok"),
    ROUTES,
    ids=[f"{m} {t}" for m, t, *_ in ROUTES],
)
async def test_the_403_walk(client, tokens, db, role, method, template, body, allowed, ok):
    event = await create(client, tokens["admin"], title="Walk")
    await call(client, "POST", f"{EVENTS}/{event['id']}/publish", tokens["admin"])
    _, series = await call(client, "POST", SERIES, tokens["admin"], {"title": "Walk"})
    path = template.format(event=event["id"], series=series["id"])
    before = await snapshot(db)

    status, data = await call(client, method, path, tokens[role] if role else None, body)

    if role in allowed:
        assert status == ok, data
        return
    if role is None:
        assert (status, data["error"]["code"]) == (401, "unauthenticated")
    else:
        assert (status, data["error"]["code"]) == (403, "forbidden")
        needed = " or ".join(r for r in ("admin", "editor", "moderator") if r in allowed)
        assert data["error"]["message"] == f"requires role {needed}"
    assert await snapshot(db) == before


async def test_a_token_that_is_not_valid_is_401(client):
    status, data = await call(client, "GET", EVENTS, "pgt_not-a-token")
    assert (status, data["error"]["code"]) == (401, "unauthenticated")
    response = await client.get(EVENTS, headers={"Authorization": "Basic abc"})
    assert response.status == 401


async def test_the_route_role_is_checked_before_the_resource_and_the_body(client, tokens):
    # A moderator PUTting malformed JSON at a missing event is told about the role first.
    status, data = await call(client, "PUT", f"{EVENTS}/999", tokens["moderator"], b"{")
    assert (status, data["error"]["message"]) == (403, "requires role admin or editor")
    status, data = await call(client, "POST", f"{EVENTS}/999/publish", tokens["editor"])
    assert (status, data["error"]["message"]) == (403, "requires role admin")


# ── the role floor, through the API ─────────────────────────────────────────────────────────


async def test_an_editor_may_not_add_a_change_step(client, tokens, db):
    before = await snapshot(db)
    body = {"title": "Wisps", "spec": spec_of(ANNOUNCE, SUMMON)}
    status, data = await call(client, "POST", EVENTS, tokens["editor"], body)
    assert (status, data["error"]["code"]) == (403, "forbidden")
    assert data["error"]["message"] == "requires role admin"
    assert data["error"]["details"] == [
        "spec.phases[0].steps[1]: wisps.summon is a change action; only an admin may add or "
        "alter it"
    ]
    assert await snapshot(db) == before
    status, _ = await call(client, "POST", EVENTS, tokens["admin"], body)
    assert status == 201


@pytest.fixture
async def admins_event(client: Any, tokens: dict[str, str]) -> dict[str, Any]:
    """An event an admin filled with a world-changing step (announce, summon)."""
    return await create(client, tokens["admin"], title="Wisps", spec=spec_of(ANNOUNCE, SUMMON))


def _steps(event: dict[str, Any]) -> list[dict[str, Any]]:
    return copy.deepcopy(event["spec"]["phases"][0]["steps"])


async def test_an_editor_may_retitle_reorder_or_remove_around_an_admins_step(
    client, tokens, admins_event
):
    path = f"{EVENTS}/{admins_event['id']}"
    editor = tokens["editor"]
    announce, summon = _steps(admins_event)
    accepted = [
        {"title": "Wisps at dusk", "description": "Bring lanterns."},
        {"spec": admins_event["spec"]},  # saved back as read
        {"spec": spec_of(summon, announce)},  # reordered within its phase
        {"spec": spec_of({"action": "wisps.summon", "params": dict(SUMMON["params"])})},
        {"spec": spec_of(ANNOUNCE, SUMMON, ANNOUNCE)},  # a notify step added
        {"spec": spec_of(ANNOUNCE)},  # the summon removed
    ]
    for body in accepted:
        status, data = await call(client, "PUT", path, editor, body)
        assert status == 200, (body, data)


@pytest.mark.parametrize(
    ("change", "paths"),
    [
        ("alter_count", ["spec.phases[0].steps[1]"]),
        ("alter_on_failure", ["spec.phases[0].steps[1]"]),
        ("alter_label", ["spec.phases[0].steps[1]"]),
        ("add_second", ["spec.phases[0].steps[2]"]),
        ("move_phase", ["spec.phases[1].steps[0]"]),
    ],
)
async def test_an_editor_may_not_alter_or_add_an_admins_step(
    client, tokens, db, admins_event, change, paths
):
    announce, summon = _steps(admins_event)
    if change == "alter_count":
        summon["params"]["count"] = 4
        spec = spec_of(announce, summon)
    elif change == "alter_on_failure":
        summon["on_failure"] = "skip"
        spec = spec_of(announce, summon)
    elif change == "alter_label":
        summon["label"] = "Summon more wisps"
        spec = spec_of(announce, summon)
    elif change == "add_second":
        spec = spec_of(announce, summon, SUMMON)
    else:
        spec = spec_of(
            phases=[
                {"key": "main", "label": "Main", "steps": [announce]},
                {"key": "later", "label": "Later", "steps": [summon]},
            ]
        )
    path = f"{EVENTS}/{admins_event['id']}"
    before = await snapshot(db)
    status, data = await call(client, "PUT", path, tokens["editor"], {"spec": spec})
    assert (status, data["error"]["message"]) == (403, "requires role admin"), data
    assert [d.split(":")[0] for d in data["error"]["details"]] == paths
    assert await snapshot(db) == before
    # The same edit by an admin saves.
    status, _ = await call(client, "PUT", path, tokens["admin"], {"spec": spec})
    assert status == 200


async def test_the_body_is_checked_before_the_role_floor(client, tokens, admins_event):
    announce, summon = _steps(admins_event)
    summon["params"]["count"] = 9
    body = {"title": "", "spec": spec_of(announce, summon)}
    path = f"{EVENTS}/{admins_event['id']}"
    status, data = await call(client, "PUT", path, tokens["editor"], body)
    assert (status, data["error"]["code"]) == (400, "invalid")
    status, data = await call(client, "PUT", f"{EVENTS}/999", tokens["editor"], body)
    assert status == 404


async def test_a_dormant_step_counts_as_admin_only(
    client, tokens, db, settings, clock, aiohttp_client, admins_event
):
    host = Host(settings, discover=False, clock=clock, db=db)
    try:
        bare = await aiohttp_client(make_app(host, run_engine=False))
        path = f"{EVENTS}/{admins_event['id']}"
        editor = tokens["editor"]
        status, _ = await call(bare, "PUT", path, editor, {"title": "Still wisps"})
        assert status == 200
        status, saved = await call(bare, "PUT", path, editor, {"spec": admins_event["spec"]})
        assert status == 200, saved
        announce, summon = _steps(saved)
        summon["params"]["count"] = 40
        status, data = await call(bare, "PUT", path, editor, {"spec": spec_of(announce, summon)})
        assert (status, data["error"]["message"]) == (403, "requires role admin")
        assert "risk is unknown" in data["error"]["details"][0]
    finally:
        await host.close()


# ── risky_changes, the function ─────────────────────────────────────────────────────────────


def _valid(host: Any, *steps: Any, phases: Any = None) -> dict[str, Any]:
    return validate(spec_of(*steps, phases=phases), host.registry)


def test_risky_changes_compares_risky_steps_as_a_multiset(host):
    summon2 = {"action": "wisps.summon", "params": {"colour": "ember", "count": 2}}
    old = _valid(host, SUMMON, ANNOUNCE, summon2)
    assert risky_changes(old, _valid(host, summon2, SUMMON), host.registry) == []
    assert risky_changes(old, _valid(host, SUMMON, SUMMON), host.registry) == [
        "spec.phases[0].steps[1]"
    ]
    assert risky_changes(None, _valid(host, ANNOUNCE), host.registry) == []
    assert risky_changes(None, _valid(host, ANNOUNCE, SUMMON), host.registry) == [
        "spec.phases[0].steps[1]"
    ]


def test_risky_changes_ignores_what_the_validator_recomputes(host):
    old = _valid(host, SUMMON)
    bumped = copy.deepcopy(old)
    bumped["phases"][0]["steps"][0]["action_version"] = 7
    assert risky_changes(bumped, old, host.registry) == []


# ── the staff's routes: what is running, rescheduling, tokens, the public history ─────────

STAFF_ROUTES: list[tuple[str, str, Any, set[str], int]] = [
    ("GET", "/api/v1/admin/runs", None, STAFF, 200),
    ("GET", "/api/v1/admin/runs?waiting=parked", None, STAFF, 200),
    (
        "POST",
        "/api/v1/admin/runs/{run}/reschedule",
        {"scheduled_for": "2027-03-01T13:00:00Z", "reason": "raid night"},
        {"admin", "moderator"},
        200,
    ),
    ("GET", "/api/v1/admin/tokens", None, ADMIN, 200),
    ("POST", "/api/v1/admin/tokens", {"name": "walk", "role": "game"}, ADMIN, 201),
    ("DELETE", "/api/v1/admin/tokens/{token}", None, ADMIN, 200),
    ("GET", "/api/v1/public/events/{slug}/history", None, {*STAFF, "game", None}, 200),
]


@pytest.mark.parametrize("role", ROLES, ids=lambda r: r or "no-token")
@pytest.mark.parametrize(
    ("method", "template", "body", "allowed", "ok"),
    STAFF_ROUTES,
    ids=[f"{m} {t}" for m, t, *_ in STAFF_ROUTES],
)
async def test_the_403_walk_of_the_staff_routes(
    client, tokens, db, clock, role, method, template, body, allowed, ok
):
    from pageant.access.tokens import issue_token as make_token
    from pageant.access.tokens import list_tokens

    event = await create(client, tokens["admin"], title="Walk", visibility="public")
    await call(client, "POST", f"{EVENTS}/{event['id']}/publish", tokens["admin"])
    status, run = await call(client, "POST", f"{EVENTS}/{event['id']}/runs", tokens["admin"])
    assert status == 201, run
    spare = await make_token(db, role="game", name="spare", now=clock.now(), actor="admin:test")
    path = template.format(run=run["id"], token=spare["id"], slug=event["slug"])
    before = (await snapshot(db), await list_tokens(db, now=clock.now(), include_revoked=True))

    status, data = await call(client, method, path, tokens[role] if role else None, body)

    if role in allowed:
        assert status == ok, data
        return
    if role is None:
        assert (status, data["error"]["code"]) == (401, "unauthenticated")
    else:
        assert (status, data["error"]["code"]) == (403, "forbidden")
        needed = " or ".join(r for r in ("admin", "editor", "moderator") if r in allowed)
        assert data["error"]["message"] == f"requires role {needed}"
    after = (await snapshot(db), await list_tokens(db, now=clock.now(), include_revoked=True))
    # Refused requests wrote nothing (a token's last use is the one stamp a request may move).
    for listing in (before[1], after[1]):
        for item in listing:
            item.pop("last_used_at")
    assert after == before


# ── the ledger's cleanup route: admins only ──────────────────────────────────────────────


@pytest.mark.parametrize("role", ROLES, ids=lambda r: r or "no-token")
async def test_the_403_walk_of_the_cleanup_route(client, tokens, db, host, role):
    from sqlalchemy import select

    from pageant.db import resources
    from pageant.db.tables import event_run_resources, event_runs

    event = await create(client, tokens["admin"], title="Walk")
    await call(client, "POST", f"{EVENTS}/{event['id']}/publish", tokens["admin"])
    _, run = await call(client, "POST", f"{EVENTS}/{event['id']}/runs", tokens["admin"])
    now = host.clock.now()
    async with db.begin() as conn:
        await conn.execute(
            event_runs.update().where(event_runs.c.id == run["id"]).values(status="completed")
        )
        await resources.hold(
            conn,
            run_id=run["id"],
            step_id=None,
            owner="wisps",
            kind="wisp",
            ref="w-1",
            status="confirmed",
            payload={"action": "wisps.summon"},
            now=now,
        )

    async def ledger() -> list[dict[str, Any]]:
        async with db.connect() as conn:
            rows = await conn.execute(select(event_run_resources))
            return [dict(r._mapping) for r in rows]

    before = await ledger()
    path = f"/api/v1/admin/runs/{run['id']}/cleanup"
    status, data = await call(client, "POST", path, tokens[role] if role else None)
    if role == "admin":
        assert status == 200, data
        assert data["run"]["id"] == run["id"]
        return
    if role is None:
        assert (status, data["error"]["code"]) == (401, "unauthenticated")
    else:
        assert (status, data["error"]["message"]) == (403, "requires role admin")
    assert await ledger() == before
