"""Declared routes: each knows its method, path, the roles that may call it, and the shapes
it takes and answers. The app is built from these, and so is the OpenAPI document, so the
two cannot disagree."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from pageant.errors import Forbidden, Invalid, Unauthenticated
from pageant.timefmt import iso

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# aiohttp 3.14 warns on a plain string request key (an error under filterwarnings=error,
# which made every authenticated request a 500); a typed key where the version has one.
PRINCIPAL_KEY: Any = (
    web.RequestKey("principal", object) if hasattr(web, "RequestKey") else "pageant.principal"
)
M = TypeVar("M", bound=BaseModel)


@dataclass
class Route:
    method: str
    path: str
    handler: Handler
    summary: str
    roles: tuple[str, ...] | None  # None: anyone
    body: type[BaseModel] | dict[str, Any] | None = None
    #: True where the handler accepts an empty body (every field of ``body`` is optional).
    body_optional: bool = False
    response: type[BaseModel] | dict[str, Any] | None = None
    status: int = 200
    tag: str = "admin"
    query: dict[str, str] = field(default_factory=dict)  # name -> description


class RouteTable:
    """A module's routes. ``@routes.get(path, roles=..., summary=...)`` declares one."""

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.routes: list[Route] = []

    def route(self, method: str, path: str, **kwargs: Any) -> Callable[[Handler], Handler]:
        def decorate(handler: Handler) -> Handler:
            kwargs.setdefault("tag", self.tag)
            self.routes.append(Route(method, path, guarded(handler, kwargs.get("roles")), **kwargs))
            return handler

        return decorate

    def get(self, path: str, **kwargs: Any) -> Callable[[Handler], Handler]:
        return self.route("GET", path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> Callable[[Handler], Handler]:
        return self.route("POST", path, **kwargs)

    def put(self, path: str, **kwargs: Any) -> Callable[[Handler], Handler]:
        return self.route("PUT", path, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> Callable[[Handler], Handler]:
        return self.route("DELETE", path, **kwargs)


def requires(roles: tuple[str, ...]) -> str:
    return "requires role " + " or ".join(roles)


def guarded(handler: Handler, roles: tuple[str, ...] | None) -> Handler:
    """Check the token and the route's role before anything else (401, then 403)."""
    if roles is None:
        return handler

    async def wrapper(request: web.Request) -> web.StreamResponse:
        principal = request.get(PRINCIPAL_KEY)
        if principal is None:
            raise Unauthenticated("a bearer token is required (Authorization: Bearer <token>)")
        if principal.role not in roles:
            raise Forbidden(requires(roles))
        return await handler(request)

    wrapper.__name__ = handler.__name__
    wrapper.__doc__ = handler.__doc__
    return wrapper


def principal(request: web.Request) -> Any:
    return request.get(PRINCIPAL_KEY)


def _default(value: Any) -> Any:
    from datetime import datetime

    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def dumps(data: Any) -> str:
    return json.dumps(data, default=_default, ensure_ascii=False)


def respond(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status, dumps=dumps)


async def read_json(request: web.Request) -> Any:
    """The body as JSON, or :class:`Invalid` naming what is wrong with it."""
    return parse_json(await request.read())


def parse_json(raw: bytes) -> Any:
    """Raw body bytes as JSON, or :class:`Invalid` naming what is wrong with them."""
    if not raw.strip():
        raise Invalid(
            "the request body is empty; expected a JSON object", details=["body: required"]
        )
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise Invalid("malformed JSON", details=[f"body: {exc}"]) from exc


def validation_details(exc: ValidationError, root: str = "body") -> list[str]:
    """Every pydantic error as ``path: message``."""
    details = []
    for e in exc.errors():
        path = root
        for part in e["loc"]:
            path += f"[{part}]" if isinstance(part, int) else f".{part}"
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = "is not a known field"
        details.append(f"{path}: {msg}")
    return details


async def read_body(request: web.Request, model: type[M], *, optional: bool = False) -> M:
    """Parse and validate the body into ``model``; every problem reported with its path."""
    if optional and not (await request.read()).strip():
        data: Any = {}
    else:
        data = await read_json(request)
    if not isinstance(data, dict):
        raise Invalid("the body must be a JSON object", details=["body: expected an object"])
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise Invalid("invalid request body", details=validation_details(exc)) from exc


#: The largest id a path or a cursor may name: past it SQLite cannot even compare (a 500).
MAX_ID = 2**63 - 1


def whole_number(text: str) -> int | None:
    """``text`` as an int if it is ASCII digits only, else None. (``str.isdigit`` alone also
    admits "²", which ``int`` then refuses with a ValueError - a 500.)"""
    return int(text) if text.isascii() and text.isdigit() else None


def int_param(request: web.Request, name: str) -> int:
    """A path parameter that must be an integer id; anything else is a 404."""
    from pageant.errors import NotFound

    raw = request.match_info[name]
    value = whole_number(raw)
    if value is None or value > MAX_ID:
        raise NotFound(f"no such {name.removesuffix('_id')}: {raw!r}")
    return value
