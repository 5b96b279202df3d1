"""The OpenAPI document at /api/v1/openapi.json describes exactly the routes the app serves."""

from __future__ import annotations

import re
from typing import Any

import pytest

from pageant.api.app import all_routes
from pageant.api.routes.events import EventCreate, EventUpdate
from pageant.api.routes.series import SeriesCreate, SeriesUpdate
from tests.api.test_events_api import EVENTS, call, create

DOC = "/api/v1/openapi.json"
METHODS = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}


@pytest.fixture
async def doc(client: Any) -> dict[str, Any]:
    response = await client.get(DOC)
    assert response.status == 200
    return await response.json()


def served(client: Any) -> set[tuple[str, str]]:
    """(method, path) of every API route the running app's router holds (the web console's
    pages and static files are HTML for browsers, not part of the API's document)."""
    found = set()
    for route in client.server.app.router.routes():
        if route.method in ("HEAD", "OPTIONS"):
            continue
        module = getattr(route.handler, "__module__", "") or ""
        if module.startswith("pageant.console") or route.resource.canonical == "/static":
            continue
        found.add((route.method.lower(), route.resource.canonical))
    return found


def documented(doc: dict[str, Any]) -> set[tuple[str, str]]:
    return {
        (method, path)
        for path, operations in doc["paths"].items()
        for method in operations
        if method in METHODS
    }


async def test_the_document_lists_exactly_the_served_routes(client, doc):
    assert doc["openapi"].startswith("3.1")
    assert documented(doc) == served(client)
    # Including this feature's own routes.
    assert {
        ("get", "/api/v1/admin/events"),
        ("post", "/api/v1/admin/events"),
        ("get", "/api/v1/admin/events/{id}"),
        ("put", "/api/v1/admin/events/{id}"),
        ("post", "/api/v1/admin/events/{id}/publish"),
        ("post", "/api/v1/admin/events/{id}/archive"),
        ("get", "/api/v1/admin/events/{id}/versions"),
        ("get", "/api/v1/admin/events/{id}/versions/{number}"),
        ("get", "/api/v1/admin/series"),
        ("post", "/api/v1/admin/series"),
        ("get", "/api/v1/admin/series/{id}"),
        ("put", "/api/v1/admin/series/{id}"),
    } <= served(client)


def _operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method, path, op)
        for path, operations in doc["paths"].items()
        for method, op in operations.items()
        if method in METHODS
    ]


async def test_every_route_with_a_body_documents_it(doc):
    declared = {(r.method.lower(), r.path) for r in all_routes() if r.body is not None}
    with_body = {(method, path) for method, path, op in _operations(doc) if "requestBody" in op}
    assert declared == with_body
    for method, path, op in _operations(doc):
        if (method, path) not in declared:
            continue
        schema = op["requestBody"]["content"]["application/json"]["schema"]
        if (method, path) == ("post", "/api/v1/triggers/fire"):
            # A batch of firings, each refused on its own: the items are described in words.
            assert schema["type"] == "array" and schema["maxItems"] == 500
            assert "idempotency key" in schema["items"]["description"]
            continue
        assert schema.get("type") == "object", (method, path)
        # Either the fields are named, or (a trigger's payload) one closed object per
        # registered trigger.
        assert schema.get("properties") or schema.get("anyOf"), (method, path)
    # Every edit takes a body.
    assert {(m, p) for m, p, _ in _operations(doc) if m == "put"} <= declared


@pytest.mark.parametrize(
    ("method", "path", "model"),
    [
        ("post", "/api/v1/admin/events", EventCreate),
        ("put", "/api/v1/admin/events/{id}", EventUpdate),
        ("post", "/api/v1/admin/series", SeriesCreate),
        ("put", "/api/v1/admin/series/{id}", SeriesUpdate),
    ],
)
async def test_authoring_bodies_document_every_field_and_forbid_others(doc, method, path, model):
    schema = doc["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"]
    assert set(schema["properties"]) == set(model.model_fields)
    assert schema["additionalProperties"] is False
    if method == "post":
        assert schema["required"] == ["title"]


async def test_every_admin_route_requires_a_bearer_token(doc):
    assert doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    guarded = {(r.method.lower(), r.path) for r in all_routes() if r.roles is not None}
    for method, path, op in _operations(doc):
        if path.startswith("/api/v1/admin/"):
            assert (method, path) in guarded, path
        if (method, path) in guarded:
            assert op.get("security") == [{"bearer": []}], path
            assert op["description"].startswith("requires role "), path
        else:
            assert "security" not in op, path


async def test_every_operation_is_well_formed(doc):
    for method, path, op in _operations(doc):
        where = f"{method} {path}"
        assert op.get("summary"), where
        if "101" in op["responses"]:  # a WebSocket (the game link's): no body, then messages
            assert path.endswith("/ws") and "content" not in op["responses"]["101"], where
            continue
        success = [code for code in op["responses"] if code.startswith("2")]
        assert len(success) == 1, where
        # JSON, but for the metrics (the Prometheus text format).
        [(media, content)] = op["responses"][success[0]]["content"].items()
        assert media == ("text/plain" if path == "/metrics" else "application/json"), where
        assert "schema" in content, where
        params = op.get("parameters", [])
        in_path = {p["name"] for p in params if p["in"] == "path"}
        assert in_path == set(re.findall(r"{(\w+)}", path)), where
        assert all(p["required"] for p in params if p["in"] == "path"), where
        assert len({(p["name"], p["in"]) for p in params}) == len(params), where


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [r for value in node.values() for r in _refs(value)]
    if isinstance(node, list):
        return [r for value in node for r in _refs(value)]
    return []


async def test_every_reference_resolves(doc):
    schemas = doc["components"]["schemas"]
    refs = _refs(doc)
    assert refs
    for ref in refs:
        assert ref.startswith("#/components/schemas/"), ref
        assert ref.removeprefix("#/components/schemas/") in schemas, ref


async def test_the_documented_event_is_the_served_event(client, tokens, doc):
    event = await create(client, tokens["admin"])
    await call(client, "POST", f"{EVENTS}/{event['id']}/publish", tokens["admin"])
    status, served_event = await call(client, "GET", f"{EVENTS}/{event['id']}", tokens["admin"])
    schema = doc["paths"]["/api/v1/admin/events/{id}"]["get"]["responses"]["200"]["content"][
        "application/json"
    ]["schema"]
    assert set(schema["properties"]) == set(served_event)
    status, version = await call(
        client, "GET", f"{EVENTS}/{event['id']}/versions/1", tokens["admin"]
    )
    path = "/api/v1/admin/events/{id}/versions/{number}"
    schema = doc["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert status == 200
    assert set(schema["properties"]) == set(version)


async def test_the_document_passes_an_openapi_validator(doc):
    from openapi_spec_validator import validate

    validate(doc)


async def test_a_body_is_required_unless_every_field_is_optional(doc):
    for route in all_routes():
        if route.body is None:
            continue
        op = doc["paths"][route.path][route.method.lower()]
        assert op["requestBody"]["required"] is (not route.body_optional), route.path
    optional = {r.path.rsplit("/", 1)[-1] for r in all_routes() if r.body_optional}
    # A publish's body is only its reason, needed when it moves what people rely on.
    assert {"pause", "resume", "confirm", "skip", "retry", "publish"} <= optional
    assert not {"cancel", "advance", "events"} & optional


async def test_a_triggers_payload_is_documented_closed_as_the_route_checks_it(client, doc, host):
    schema = doc["paths"]["/api/v1/triggers/{trigger_id}/fire"]["post"]["requestBody"]
    variants = schema["content"]["application/json"]["schema"]["anyOf"]
    assert [v["title"] for v in variants] == sorted(host.registry.triggers)
    for variant in variants:
        trigger = host.registry.triggers[variant["title"]]
        assert variant["additionalProperties"] is False
        assert {k: v["type"] for k, v in variant["properties"].items()} == {
            v.name: v.type for v in trigger.variables
        }


async def test_list_and_calendar_parameters_are_typed_and_required_as_read(doc):
    def params(path: str) -> dict[str, Any]:
        return {p["name"]: p for p in doc["paths"][path]["get"]["parameters"]}

    calendar = params("/api/v1/admin/calendar")
    assert calendar["from"]["required"] and calendar["to"]["required"]
    assert calendar["from"]["schema"] == {"type": "string", "format": "date-time"}
    public = params("/api/v1/public/events")
    assert not public["from"]["required"] and not public["to"]["required"]
    for path in ("/api/v1/admin/events", "/api/v1/admin/series", "/api/v1/admin/events/{id}/runs"):
        assert params(path)["limit"]["schema"] == {"type": "integer", "minimum": 1, "maximum": 200}


async def test_the_spec_is_described(doc):
    spec = doc["paths"]["/api/v1/admin/events"]["post"]["requestBody"]["content"][
        "application/json"
    ]["schema"]["properties"]["spec"]
    assert spec["properties"]["phases"]["items"]["properties"]["steps"]
    assert {s["properties"]["kind"]["const"] for s in spec["properties"]["schedule"]["oneOf"]} == {
        "manual",
        "once",
        "weekly",
        "monthly",
    }


async def test_healthz_documents_its_503(doc):
    responses = doc["paths"]["/healthz"]["get"]["responses"]
    assert (
        responses["503"]["content"]["application/json"]["schema"]
        == (responses["200"]["content"]["application/json"]["schema"])
    )


async def test_the_run_console_documents_its_etag_and_304(doc):
    op = doc["paths"]["/api/v1/admin/runs/{run_id}"]["get"]
    ok, not_modified = op["responses"]["200"], op["responses"]["304"]
    for answer in (ok, not_modified):
        assert set(answer["headers"]) == {"ETag", "Cache-Control"}
        assert all(header["required"] for header in answer["headers"].values())
        assert answer["headers"]["Cache-Control"]["schema"]["const"] == "no-cache"
    assert "content" not in not_modified  # a 304 has no body
    [header] = [p for p in op["parameters"] if p["in"] == "header"]
    assert header["name"] == "If-None-Match" and header["required"] is False
    # Only the revalidated route declares them.
    others = [
        (method, path)
        for method, path, other in _operations(doc)
        if "304" in other["responses"]
        or any(p["in"] == "header" for p in other.get("parameters", []))
    ]
    assert others == [("get", "/api/v1/admin/runs/{run_id}")]
