"""The OpenAPI document, built from the declared routes (never written by hand)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel

from pageant.api.routing import Route, requires

ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message", "details"],
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "details": {"type": "array", "items": {"type": "string"}},
            },
        }
    },
}


def _schema(shape: type[BaseModel] | dict[str, Any] | None) -> dict[str, Any]:
    if shape is None:
        return {"type": "object"}
    if isinstance(shape, dict):
        return shape
    return shape.model_json_schema(ref_template="#/components/schemas/{model}")


def _hoist(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    for name, definition in schema.pop("$defs", {}).items():
        components[name] = definition
    return schema


def document(routes: list[Route], version: str) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    components: dict[str, Any] = {"Error": ERROR_SCHEMA}
    for route in sorted(routes, key=lambda r: (r.path, r.method)):
        operation: dict[str, Any] = {
            "summary": route.summary,
            "tags": [route.tag],
            "responses": {
                str(route.status): {
                    "description": "success",
                    "content": {
                        "application/json": {"schema": _hoist(_schema(route.response), components)}
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
        if route.roles is not None:
            operation["security"] = [{"bearer": []}]
            operation["description"] = requires(route.roles)
        params = [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
            for name in re.findall(r"{(\w+)}", route.path)
        ]
        params += [
            {
                "name": name,
                "in": "query",
                "required": False,
                "description": text,
                "schema": {"type": "string"},
            }
            for name, text in route.query.items()
        ]
        if params:
            operation["parameters"] = params
        if route.body is not None:
            operation["requestBody"] = {
                "required": not route.body_optional,
                "content": {
                    "application/json": {"schema": _hoist(_schema(route.body), components)}
                },
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
