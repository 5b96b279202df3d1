"""Declared routes: each knows its method, path, the roles that may call it, and the shapes
it takes and answers. The app is built from these, and so is the OpenAPI document, so the
two cannot disagree."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ConfigDict, ValidationError

from pageant.errors import Forbidden, Invalid, Unauthenticated, UnsupportedMediaType
from pageant.support import jsoncodec
from pageant.support.timefmt import iso

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# aiohttp 3.14 warns on a plain string request key (an error under filterwarnings=error,
# which made every authenticated request a 500); a typed key where the version has one.
PRINCIPAL_KEY: Any = (
    web.RequestKey("principal", object) if hasattr(web, "RequestKey") else "pageant.principal"
)
#: Why the Authorization header named nobody (malformed, or an unknown token), if it did not.
AUTH_PROBLEM_KEY: Any = (
    web.RequestKey("auth_problem", str) if hasattr(web, "RequestKey") else "pageant.auth_problem"
)
M = TypeVar("M", bound=BaseModel)


def _none_promised(schema: dict[str, Any]) -> None:
    schema.pop("required", None)


#: The config of an answer's model whose fields the answer may leave out (which ones depends
#: on the row: a waiting reason, a gate's kind): each is documented, none is promised.
SOME_FIELDS = ConfigDict(json_schema_extra=_none_promised)


@dataclass
class Route:
    method: str
    path: str
    handler: Handler
    summary: str
    roles: tuple[str, ...] | None  # None: anyone
    #: The body's model, its JSON schema, or a function of the registry answering the schema
    #: (a body whose shape the installed plugins decide).
    body: type[BaseModel] | dict[str, Any] | Callable[[Any], dict[str, Any]] | None = None
    #: True where the handler accepts an empty body (every field of ``body`` is optional).
    body_optional: bool = False
    #: The model of the success answer (documentation only: a route answers its domain
    #: function's dict as it is); None where the route answers no declared shape.
    response: type[BaseModel] | None = None
    status: int = 200
    #: The success answer's media type (every error is JSON).
    media_type: str = "application/json"
    #: Other answers the route gives with a body of their own shape (status -> its model).
    also: dict[int, type[BaseModel]] = field(default_factory=dict)
    #: True where the route answers with :func:`pageant.support.revalidation.tagged`: its success
    #: answer carries an ``ETag`` and ``Cache-Control: no-cache``, and a request whose
    #: ``If-None-Match`` names the tag answers 304 with no body.
    revalidated: bool = False
    tag: str = "admin"
    #: name -> its description, or a :class:`Query` where it is more than an optional string.
    query: dict[str, str | Query] = field(default_factory=dict)


@dataclass(frozen=True)
class Query:
    """A query parameter as the document declares it."""

    description: str
    schema: dict[str, Any] = field(default_factory=lambda: {"type": "string"})
    required: bool = False


#: The page size of every list, as :func:`pageant.api.pagination.page_from` reads it.
LIMIT = Query("page size, 1 to 200 (default 50)", {"type": "integer", "minimum": 1, "maximum": 200})
CURSOR = Query("the next_cursor of the previous page")
#: A query parameter naming a row by id, and an instant with an offset.
ID = {"type": "integer", "minimum": 1, "maximum": 2**63 - 1}
INSTANT = {"type": "string", "format": "date-time"}


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
            problem = request.get(AUTH_PROBLEM_KEY)
            raise Unauthenticated(
                problem or "a bearer token is required (Authorization: Bearer <token>)"
            )
        if principal.role not in roles:
            raise Forbidden(requires(roles))
        return await handler(request)

    wrapper.__name__ = handler.__name__
    wrapper.__doc__ = handler.__doc__
    return wrapper


class RawBody(bytes):
    """A body's bytes with the media type it was sent as (judged with the body, after the
    resource was found: the documented order is token, role, resource, body)."""

    media_type: str = "application/json"


def raw_body(raw: bytes, media_type: str) -> RawBody:
    body = RawBody(raw)
    body.media_type = media_type
    return body


def require_json(raw: bytes) -> None:
    """A body route takes JSON: a body sent as anything else is a 415. An empty body is
    judged by the route (some take none)."""
    kind = getattr(raw, "media_type", "application/json")
    if raw.strip() and kind != "application/json" and not kind.endswith("+json"):
        raise UnsupportedMediaType(
            f"the body was sent as {kind}; this route takes application/json",
            details=["header.Content-Type: expected application/json"],
        )


async def read_raw(request: web.Request) -> RawBody:
    """The whole body, with its media type, unjudged."""
    return raw_body(await request.read(), request.content_type)


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
    return jsoncodec.dumps(data, _default)


def respond(data: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=encoded(data),
        status=status,
        content_type="application/json",
        charset="utf-8",
    )


def encoded(data: Any) -> bytes:
    """``data`` as the bytes :func:`respond` sends."""
    return jsoncodec.dumps_bytes(data, _default)


async def read_json(request: web.Request) -> Any:
    """The body as JSON, or :class:`Invalid` naming what is wrong with it."""
    return parse_json(await read_raw(request))


#: How deep arrays and objects may nest in a body. The deepest legitimate body (a spec with
#: a condition at its group limit) is about a dozen levels; Python's parser recurses, so a
#: body nested thousands deep would otherwise end in a RecursionError (a 500).
MAX_JSON_DEPTH = 64

#: Control characters a text field may hold: tab, line feed and carriage return. The rest
#: (NUL above all) are refused: stored, they break the consoles, logs and games that show them.
ALLOWED_CONTROLS = frozenset("\t\n\r")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
#: Half of a surrogate pair, alone: JSON may spell it (``"\\ud800"``) and Python's parser
#: keeps it, but it is not text - no database, log or game can encode it (a 500 on save).
_SURROGATE = re.compile("[\ud800-\udfff]")


def json_depth_exceeds(raw: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when arrays and objects in ``raw`` nest deeper than ``limit``, read without
    parsing (brackets inside strings do not count)."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False  # too few brackets to nest that deep: the common case, no scan
    depth = 0
    in_string = escaped = False
    for byte in raw:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > limit:
                return True
        elif byte in (0x5D, 0x7D):  # ] }
            depth -= 1
    return False


def control_character_problems(data: Any, path: str = "body") -> list[str]:
    """Every string (key or value) in ``data`` holding a refused control character or a lone
    surrogate, by path."""
    problems: list[str] = []
    if isinstance(data, str):
        found = _CONTROL.search(data)
        if found:
            problems.append(
                f"{path}: contains the control character U+{ord(found.group()):04X}; "
                "text may hold no control characters but tab and line breaks"
            )
        lone = _SURROGATE.search(data)
        if lone:
            problems.append(
                f"{path}: contains U+{ord(lone.group()):04X}, half of a surrogate pair "
                "alone, which is not text"
            )
    elif isinstance(data, dict):
        for key, value in data.items():
            child = f"{path}.{key}"
            if _CONTROL.search(key):
                problems.append(f"{path}: a key contains a control character: {key!r}")
                continue
            if _SURROGATE.search(key):
                problems.append(f"{path}: a key holds half of a surrogate pair alone: {key!r}")
                continue
            problems.extend(control_character_problems(value, child))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            problems.extend(control_character_problems(value, f"{path}[{index}]"))
    return problems


def parse_json(raw: bytes) -> Any:
    """Raw body bytes as JSON, or :class:`Invalid` naming what is wrong with them (a
    :class:`RawBody` sent as anything but JSON is an :class:`UnsupportedMediaType`).

    Refused before anything reads them: nesting past :data:`MAX_JSON_DEPTH`, and strings
    holding control characters other than tab and line breaks, or half of a surrogate pair
    alone (named by their path).
    """
    if not raw.strip():
        raise Invalid(
            "the request body is empty; expected a JSON object", details=["body: required"]
        )
    require_json(raw)
    if json_depth_exceeds(raw):
        raise Invalid(
            "the JSON body nests too deep",
            details=[f"body: arrays and objects may nest at most {MAX_JSON_DEPTH} deep"],
        )
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise Invalid("malformed JSON", details=[f"body: {exc}"]) from exc
    problems = control_character_problems(data)
    if problems:
        raise Invalid("control characters in the body", details=problems)
    return data


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
    """Parse and validate the body into ``model``; every problem reported with its path.

    An ``optional`` body may be absent (no bytes at all); a body of only blanks is present
    and is not JSON, so it is refused like any other text that is not."""
    if optional and not await request.read():
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


def query_count(
    request: web.Request, name: str, most: int, problems: list[str], *, joined: str = ", not"
) -> int | None:
    """The query parameter ``name`` as a whole number from 1 to ``most``; None when it is
    absent, or refused with ``query.{name}: expected a whole number from 1 to {most}{joined}
    {raw!r}`` appended to ``problems`` (``joined``: how each route has always worded it)."""
    raw = request.query.get(name)
    if raw is None:
        return None
    number = whole_number(raw)
    if number is None or not 1 <= number <= most:
        problems.append(f"query.{name}: expected a whole number from 1 to {most}{joined} {raw!r}")
        return None
    return number


def parse_id(text: str) -> int | None:
    """``text`` as an id - ASCII digits only, 1 to :data:`MAX_ID` - else None.

    The one reading of every id in a path: "²" and "٤" pass ``str.isdigit`` (the second
    even converts to 4), and past :data:`MAX_ID` SQLite cannot compare the value.
    """
    if not 0 < len(text) <= 19:
        return None
    value = whole_number(text)
    if value is None or not 1 <= value <= MAX_ID:
        return None
    return value


def int_param(request: web.Request, name: str, noun: str | None = None) -> int:
    """A path parameter that must be an id (:func:`parse_id`); anything else is a 404."""
    from pageant.errors import NotFound

    raw = request.match_info[name]
    value = parse_id(raw)
    if value is None:
        raise NotFound(f"no such {noun or name.removesuffix('_id')}: {raw!r}")
    return value
