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
