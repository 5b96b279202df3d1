"""The OpenAPI document, built from the declared routes (never written by hand)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel

from pageant.api.routing import MAX_ID, Query, Route, requires


class ErrorBody(BaseModel):
    code: str
    message: str
    details: list[str]


class Error(BaseModel):
    """Every error's answer."""

    error: ErrorBody


#: Path parameters that name a row by id (read by :func:`pageant.api.routing.parse_id`).
ID_PARAMETERS = frozenset({"id", "run_id", "step_id", "number"})


def path_schema(name: str) -> dict[str, Any]:
    if name in ID_PARAMETERS:
        return {"type": "integer", "minimum": 1, "maximum": MAX_ID}
    return {"type": "string"}


#: What the body readers refuse in any string (:data:`pageant.api.routing.ALLOWED_CONTROLS`).
TEXT_PATTERN = "^[^\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f]*$"


def _schema(shape: Any, registry: Any = None) -> dict[str, Any]:
    if shape is None:
        return {"type": "object"}
    if isinstance(shape, dict):
        return shape
    if isinstance(shape, type) and issubclass(shape, BaseModel):
        return shape.model_json_schema(ref_template="#/components/schemas/{model}")
    return shape(registry)


def _no_controls(schema: Any) -> Any:
    """Declare the control-character rule on every free string of a request body."""
    if isinstance(schema, dict):
        if schema.get("type") == "string" and not {"enum", "const", "pattern"} & schema.keys():
            schema = {**schema, "pattern": TEXT_PATTERN}
        return {key: _no_controls(value) for key, value in schema.items()}
    if isinstance(schema, list):
        return [_no_controls(item) for item in schema]
    return schema


#: The headers of a revalidated answer (:func:`pageant.support.revalidation.tagged`): on its
#: 200 and on its 304 alike.
REVALIDATED_HEADERS = {
    "ETag": {
        "description": "a strong tag of this answer's body; send it back in If-None-Match",
        "required": True,
        "schema": {"type": "string"},
    },
    "Cache-Control": {
        "description": "no-cache: keep the answer, but ask again (with If-None-Match) before "
        "using it",
        "required": True,
        "schema": {"type": "string", "const": "no-cache"},
    },
}
#: The request header a revalidated route reads.
IF_NONE_MATCH = {
    "name": "If-None-Match",
    "in": "header",
    "required": False,
    "description": "the ETag of an answer kept from before (a list of tags, or *); when it "
    "names the current answer's tag the answer is 304 with no body. A value that names no "
    "tag of the answer is ignored",
    "schema": {"type": "string"},
}


def _revalidated(operation: dict[str, Any], status: int) -> None:
    """Declare a revalidated route's headers on its success answer, its 304, and the
    If-None-Match it reads."""
    responses = operation["responses"]
    responses[str(status)]["headers"] = REVALIDATED_HEADERS
    responses["304"] = {
        "description": "not modified: If-None-Match named the current answer's tag; no body",
        "headers": REVALIDATED_HEADERS,
    }
    operation.setdefault("parameters", []).append(IF_NONE_MATCH)


def _hoist(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    for name, definition in schema.pop("$defs", {}).items():
        components[name] = definition
    return schema


def document(routes: list[Route], version: str, registry: Any = None) -> dict[str, Any]:
    """The document of ``routes``; bodies whose shape the plugins decide are read from
    ``registry``."""
    paths: dict[str, dict[str, Any]] = {}
    components: dict[str, Any] = {}
    components["Error"] = _hoist(_schema(Error), components)
    for route in sorted(routes, key=lambda r: (r.path, r.method)):
        operation: dict[str, Any] = {
            "summary": route.summary,
            "tags": [route.tag],
            "responses": {
                str(route.status): {
                    "description": "success",
                    "content": {
                        route.media_type: {"schema": _hoist(_schema(route.response), components)}
                    },
                },
                "default": {
                    "description": "an error",
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/Error"}}
                    },
                },
            },
        }
        if route.status == 101:  # a WebSocket upgrade: no body, then messages (docs/link.md)
            operation["responses"]["101"] = {"description": "switching to a WebSocket"}
        for status, model in route.also.items():
            operation["responses"][str(status)] = {
                "description": "see the summary",
                "content": {"application/json": {"schema": _hoist(_schema(model), components)}},
            }
        if route.roles is not None:
            operation["security"] = [{"bearer": []}]
            operation["description"] = requires(route.roles)
        params = [
            {"name": name, "in": "path", "required": True, "schema": path_schema(name)}
            for name in re.findall(r"{(\w+)}", route.path)
        ]
        for name, declared in route.query.items():
            query = declared if isinstance(declared, Query) else Query(declared)
            params.append(
                {
                    "name": name,
                    "in": "query",
                    "required": query.required,
                    "description": query.description,
                    "schema": query.schema,
                }
            )
        if params:
            operation["parameters"] = params
        if route.revalidated:
            _revalidated(operation, route.status)
        if route.body is not None:
            body_schema = _hoist(_schema(route.body, registry), components)
            operation["requestBody"] = {
                "required": not route.body_optional,
                "content": {"application/json": {"schema": _no_controls(body_schema)}},
            }
        paths.setdefault(route.path, {})[route.method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": "pageant", "version": version},
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
