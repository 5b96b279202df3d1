"""The system and plugin routes through the real app: health, who may read the plugins and
the catalog, option sources that fail, and errors in one envelope."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncEngine

from pageant import hookimpl
from pageant.api.app import make_app
from pageant.db.engine import create_engine
from pageant.db.migrate import head_revision
from pageant.db.tables import api_tokens
from pageant.hookspecs import PluginInfo
from pageant.hosting import Host
from pageant.plugins.loader import candidate_for, plugin_listing
from pageant.plugins.registry import KINDS
from pageant.support.clock import FakeClock
from pageant.support.settings import Settings
from tests.conftest import bearer
from tests.databases import empty_database
from tests.fixture_plugins import lantern

STAFF_ROUTES = [
    "/api/v1/admin/plugins",
    "/api/v1/admin/catalog",
    "/api/v1/admin/catalog/options/core.options.legs",
]
CALLABLE_NAMES = {"perform", "revert", "cost", "read", "apply", "restore", "resolve", "send"}
HEAD = head_revision()


# ── /healthz ──────────────────────────────────────────────────────────────────


async def test_healthz_answers_ok_with_the_schema_state_and_needs_no_token(client: Any) -> None:
    response = await client.get("/healthz")
    assert response.status == 200
    assert await response.json() == {
        "status": "ok",
        "schema": {"current": HEAD, "head": HEAD, "up_to_date": True},
        "engine": {"running": False},
    }


async def test_healthz_reads_the_migrations_once_a_process_not_once_a_request(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Loading alembic's script directory compiles every migration: ~10 ms a probe.
    from alembic.script import ScriptDirectory

    head_revision()  # what the process has read once already
    loads: list[str] = []
    real = ScriptDirectory.from_config

    def counted(*args: Any, **kwargs: Any) -> Any:
        loads.append("load")
        return real(*args, **kwargs)

    monkeypatch.setattr(ScriptDirectory, "from_config", counted)
    for _ in range(3):
        response = await client.get("/healthz")
        assert response.status == 200
        assert (await response.json())["schema"]["head"] == HEAD
    assert loads == []


@pytest.fixture
def empty_url(dialect: str, tmp_path: Path) -> Iterator[str]:
    with empty_database(dialect, tmp_path) as url:
        yield url


async def test_healthz_is_unhealthy_on_an_unmigrated_database(
    empty_url: str, clock: FakeClock, aiohttp_client: Any
) -> None:
    engine = create_engine(empty_url)
    host = Host(Settings(database_url=empty_url), clock=clock, db=engine)
    try:
        client = await aiohttp_client(make_app(host, run_engine=False))
        response = await client.get("/healthz")
        assert response.status == 503
        unhealthy = {
            "schema": {"current": None, "head": HEAD, "up_to_date": False},
            "engine": {"running": False},
            "problems": [f"schema: at nothing, this pageant needs {HEAD}"],
        }
        assert await response.json() == {"status": "unhealthy", **unhealthy}
        # The state without the verdict, for a person reading it.
        response = await client.get("/healthz?verbose")
        assert response.status == 200
        assert await response.json() == {"status": "degraded", **unhealthy}
    finally:
        await engine.dispose()


# ── who may read ──────────────────────────────────────────────────────────────


async def error_of(response: Any) -> dict[str, Any]:
    body = await response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "details"}
    return body["error"]


@pytest.mark.parametrize("path", STAFF_ROUTES)
async def test_staff_routes_need_a_token(client: Any, path: str) -> None:
    response = await client.get(path)
    assert response.status == 401
    assert await error_of(response) == {
        "code": "unauthenticated",
        "message": "a bearer token is required (Authorization: Bearer <token>)",
        "details": [],
    }


@pytest.mark.parametrize("path", STAFF_ROUTES)
async def test_staff_routes_refuse_a_bad_token(
    client: Any, tokens: dict[str, str], path: str
) -> None:
    for headers in (
        bearer("pgt_not-a-token"),
        bearer(tokens["admin"] + "x"),
        {"Authorization": f"Basic {tokens['admin']}"},
        {"Authorization": "Bearer "},
    ):
        response = await client.get(path, headers=headers)
        assert response.status == 401, headers
        assert (await error_of(response))["code"] == "unauthenticated"


async def test_a_revoked_token_is_refused(
    client: Any, tokens: dict[str, str], db: AsyncEngine, clock: FakeClock
) -> None:
    assert (await client.get(STAFF_ROUTES[0], headers=bearer(tokens["admin"]))).status == 200
    async with db.begin() as conn:
        await conn.execute(
            update(api_tokens).where(api_tokens.c.role == "admin").values(revoked_at=clock.now())
        )
    response = await client.get(STAFF_ROUTES[0], headers=bearer(tokens["admin"]))
    assert response.status == 401
    assert await error_of(response) == {
        "code": "unauthenticated",
        "message": "the bearer token was revoked",
        "details": [],
    }


@pytest.mark.parametrize("role", ["admin", "editor", "moderator"])
async def test_every_staff_role_may_read(client: Any, tokens: dict[str, str], role: str) -> None:
    for path in STAFF_ROUTES:
        response = await client.get(path, headers=bearer(tokens[role]))
        assert response.status == 200, (role, path)


@pytest.mark.parametrize("path", STAFF_ROUTES)
async def test_a_game_token_may_not_read(client: Any, tokens: dict[str, str], path: str) -> None:
    response = await client.get(path, headers=bearer(tokens["game"]))
    assert response.status == 403
    assert await error_of(response) == {
        "code": "forbidden",
        "message": "requires role admin or editor or moderator",
        "details": [],
    }


# ── plugins and the catalog ───────────────────────────────────────────────────


async def test_the_plugin_list_is_the_one_listing(
    client: Any, host: Host, tokens: dict[str, str]
) -> None:
    response = await client.get("/api/v1/admin/plugins", headers=bearer(tokens["admin"]))
    items = (await response.json())["items"]
    assert items == plugin_listing(host.plugins, unavailable=host.plugin_unavailable)
    fields = {
        "name",
        "distribution",
        "version",
        "entry_point",
        "owner",
        "contract",
        "status",
        "reason",
        "traceback",
        "settings",
        "dropped",
        "warnings",
        "unavailable",
        "problems",
    }
    assert all(set(item) == fields for item in items)
    loaded = {f"{i['distribution']}[{i['name']}]" for i in items if i["status"] == "loaded"}
    assert {"pageant[core]", "pageant-wisps[wisps]"} <= loaded


class Troubled:
    """Option sources that fail in every way a resolve can."""

    PLUGIN_INFO = PluginInfo(owner="troubled", contract="^1.0")

    @hookimpl
    def pageant_option_sources(self) -> list[dict[str, Any]]:
        async def raises() -> Any:
            raise ConnectionError("shard is down")

        async def hangs() -> Any:
            await asyncio.sleep(3600)

        async def mapping() -> Any:
            return {"north": "North"}

        async def unlabelled() -> Any:
            return [{"value": "north", "label": "North"}, {"value": "south"}]

        async def nested() -> Any:
            return [{"value": ["a", "b"], "label": "Both"}]

        return [
            {"id": f"troubled.{fn.__name__}", "label": fn.__name__, "resolve": fn}
            for fn in (raises, hangs, mapping, unlabelled, nested)
        ]


@pytest.fixture
async def rich_host(settings: Settings, db: AsyncEngine, clock: FakeClock) -> AsyncIterator[Host]:
    """Installed plugins plus one declaring every kind and one whose sources fail."""
    h = Host(
        settings,
        clock=clock,
        db=db,
        plugins=[candidate_for(lantern, "lantern"), candidate_for(Troubled(), "troubled")],
    )
    try:
        yield h
    finally:
        await h.close()


@pytest.fixture
async def rich(rich_host: Host, aiohttp_client: Any) -> Any:
    return await aiohttp_client(make_app(rich_host, run_engine=False))


def callables_in(value: Any, path: str = "") -> list[str]:
    if isinstance(value, dict):
        return [
            found
            for key, item in value.items()
            for found in ([f"{path}.{key}"] if key in CALLABLE_NAMES else [])
            + callables_in(item, f"{path}.{key}")
        ]
    if isinstance(value, list):
        return [
            found for i, item in enumerate(value) for found in callables_in(item, f"{path}[{i}]")
        ]
    return []


async def test_the_catalog_has_every_kind_and_no_callables(
    rich: Any, rich_host: Host, tokens: dict[str, str]
) -> None:
    response = await rich.get("/api/v1/admin/catalog", headers=bearer(tokens["editor"]))
    catalog = await response.json()
    assert set(catalog) == {key for *_, key in KINDS}
    assert all(catalog[key] for key in catalog), "each kind is declared by some plugin here"
    assert callables_in(catalog) == []
    # The registry's catalog, each action with its switchboard state added (no row yet:
    # the default by risk, not configured).
    expected = rich_host.registry.catalog()
    for action in expected["actions"]:
        action["enabled"] = action["risk"] in ("notify", "inspect")
        action["configured"] = False
    assert catalog == expected
    for key, items in catalog.items():
        ids = [item.get("id", item.get("dimension")) for item in items]
        assert ids == sorted(ids), key


async def test_the_catalog_describes_an_action_whole(rich: Any, tokens: dict[str, str]) -> None:
    response = await rich.get("/api/v1/admin/catalog", headers=bearer(tokens["moderator"]))
    actions = {a["id"]: a for a in (await response.json())["actions"]}
    assert actions["lantern.light"] == {
        "id": "lantern.light",
        "label": "Light the lantern",
        "version": 1,
        "risk": "change",
        "reversible": "full",
        "budget_ms": 2000,
        "params": [
            {
                "name": "wick",
                "type": "string",
                "required": True,
                "description": "Which wick to light.",
                "example": "long",
                "option_source": "lantern.options.wicks",
                # Declared none (contract 1.3): every bound is shown, null.
                "minimum": None,
                "maximum": None,
                "min_length": None,
                "max_length": None,
                "pattern": None,
                "enum": None,
            }
        ],
        "description": "",
        "has_cost": True,
        "has_revert": True,
        # Declared none (contract 1.2): the default of its risk, change.
        "on_failure": None,
        "default_on_failure": "pause",
        "plugin": "inline[lantern]",
        "enabled": False,  # a change action, and no admin has enabled it
        "configured": False,
    }
    assert actions["core.wait"]["has_cost"] is False
    assert actions["core.wait"]["has_revert"] is False


# ── option sources ────────────────────────────────────────────────────────────


async def options(client: Any, token: str, source: str) -> tuple[int, Any]:
    response = await client.get(f"/api/v1/admin/catalog/options/{source}", headers=bearer(token))
    return response.status, await response.json()


async def test_an_option_source_answers_its_items(rich: Any, tokens: dict[str, str]) -> None:
    assert await options(rich, tokens["admin"], "lantern.options.wicks") == (
        200,
        {
            "ok": True,
            "items": [
                {"value": "long", "label": "Long wick"},
                {"value": "short", "label": "Short wick"},
            ],
        },
    )


async def test_the_legs_source_lists_every_registered_leg(
    rich: Any, tokens: dict[str, str]
) -> None:
    status, body = await options(rich, tokens["admin"], "core.options.legs")
    assert status == 200
    assert body == {
        "ok": True,
        "items": [
            {"value": "core.discord", "label": "Discord channel"},
            {"value": "core.email", "label": "Email (SMTP)"},
            {"value": "core.log", "label": "Run log"},
            {"value": "core.slack", "label": "Slack channel"},
            {"value": "core.webhook", "label": "Webhook (JSON POST)"},
            {"value": "lantern.beacon", "label": "Beacon"},
        ],
    }


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("troubled.raises", "troubled.raises raised ConnectionError: shard is down"),
        ("troubled.hangs", "troubled.hangs did not answer within 0.05 s"),
        ("troubled.mapping", "troubled.mapping answered dict; expected a list"),
        ("troubled.unlabelled", "troubled.unlabelled item [1] is invalid: Field required"),
        ("troubled.nested", "troubled.nested item [0] is invalid: "),
    ],
)
async def test_a_failing_option_source_answers_ok_false_never_500(
    rich: Any, tokens: dict[str, str], monkeypatch: pytest.MonkeyPatch, source: str, reason: str
) -> None:
    monkeypatch.setattr("pageant.plugins.options.RESOLVE_TIMEOUT_SECONDS", 0.05)
    status, body = await options(rich, tokens["admin"], source)
    assert status == 200
    assert set(body) == {"ok", "reason"} and body["ok"] is False
    assert body["reason"].startswith(reason)
    # The host is still answering.
    assert (await options(rich, tokens["admin"], "lantern.options.wicks"))[1]["ok"] is True


async def test_an_unknown_option_source_is_404(client: Any, tokens: dict[str, str]) -> None:
    status, body = await options(client, tokens["admin"], "nobody.options.nothing")
    assert status == 404
    assert body == {
        "error": {
            "code": "not_found",
            "message": "no plugin declares the option source 'nobody.options.nothing'",
            "details": [],
        }
    }


# ── errors in one envelope ────────────────────────────────────────────────────


async def test_an_unknown_route_answers_the_error_envelope(
    client: Any, tokens: dict[str, str]
) -> None:
    for headers in ({}, bearer(tokens["admin"])):
        response = await client.get("/api/v1/admin/nothing-here", headers=headers)
        assert response.status == 404
        assert response.content_type == "application/json"
        assert await error_of(response) == {
            "code": "not_found",
            "message": "no route for GET /api/v1/admin/nothing-here",
            "details": [],
        }


async def test_a_wrong_method_answers_the_error_envelope(
    client: Any, tokens: dict[str, str]
) -> None:
    for path in ("/api/v1/admin/plugins", "/healthz"):
        response = await client.delete(path, headers=bearer(tokens["admin"]))
        assert response.status == 405
        error = await error_of(response)
        assert error["code"] == "method_not_allowed"
        assert error["message"].startswith(f"DELETE is not allowed on {path}; allowed: ")
        assert "GET" in error["message"]


async def test_the_openapi_document_describes_these_routes(client: Any) -> None:
    response = await client.get("/api/v1/openapi.json")
    assert response.status == 200
    document = await response.json()
    assert document["openapi"].startswith("3.")
    paths = document["paths"]
    assert "security" not in paths["/healthz"]["get"]
    for path in (
        "/api/v1/admin/plugins",
        "/api/v1/admin/catalog",
        "/api/v1/admin/catalog/options/{source_id}",
    ):
        operation = paths[path]["get"]
        assert operation["security"] == [{"bearer": []}]
        assert operation["description"] == "requires role admin or editor or moderator"
