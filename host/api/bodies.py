"""Request bodies checked in full: every problem at once, each with its path.

:func:`pageant.api.routing.read_body` stops at the model. Authoring bodies need more checks
than a model can make (a spec against the registry, a zone against the IANA list, a series
against the database), and an author fixing one problem per round trip is an author making
six. So a body is checked field by field here: the model's problems are collected, the
fields that passed are handed on for the deeper checks, and the caller raises everything
together.

The body is read before the caller opens its transaction (a slow client must not hold a
database lock) and judged after the resource was found, so a bad body on a missing event
is still a 404: the documented order is token, role, resource, body, role floor.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Generic, Literal, TypeVar

from aiohttp import web
from pydantic import BaseModel, Field, StringConstraints, ValidationError
from pydantic.json_schema import JsonDict

from pageant.api.routing import MAX_ID, parse_json, read_raw, validation_details
from pageant.errors import Invalid
from pageant.events.slugs import MAX_SLUG, SLUG_RE

M = TypeVar("M", bound=BaseModel)

MAX_TITLE = 200
#: Bounded so it fits a MariaDB TEXT column (64 KiB) at four bytes a character.
MAX_DESCRIPTION = 10_000

Title = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_TITLE)]
Description = Annotated[str, StringConstraints(max_length=MAX_DESCRIPTION)]
Visibility = Literal["public", "staff"]
#: A reference to another row by id (bounded: past MAX_ID SQLite cannot compare it).
Id = Annotated[int, Field(ge=1, le=MAX_ID)]


#: The ``slug`` field's documented shape (checked by :func:`check_slug`, whose message is
#: kinder than a regular expression's).
SLUG_SCHEMA: JsonDict = {"pattern": SLUG_RE.pattern, "maxLength": MAX_SLUG}


def no_defaults(schema: dict[str, Any]) -> None:
    """Drop the ``default: null`` a partial update's fields carry only so that an absent
    field can be told from a sent one; documented, it would read as "null is accepted"."""
    for prop in schema.get("properties", {}).values():
        prop.pop("default", None)


def check_slug(value: str | None) -> str | None:
    """An explicit slug must already be one (a field validator for ``slug``)."""
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_SLUG or not SLUG_RE.match(value):
        raise ValueError(
            f"expected 1 to {MAX_SLUG} lowercase letters and digits in words joined by "
            'single hyphens, such as "friday-muster"'
        )
    return value


#: Output fields a client may send back by mistake, and why they cannot be written.
READ_ONLY = {
    "id": "is assigned by the server and cannot be written",
    "state": "cannot be written; publish and archive change it",
    "current_version": "cannot be written; publish changes it",
    "next_occurrence": "cannot be written; the schedule decides it",
    "runs_waiting": "cannot be written; it is counted from the runs",
    "version_verified": "cannot be written; POST .../verify records it",
    "version_drift": "cannot be written; it is measured against the installed plugins",
}


async def prefetch(request: web.Request) -> bytes:
    """Read the whole body now (aiohttp keeps it for the later parse), with its media type."""
    return await read_raw(request)


@dataclass
class Checked(Generic[M]):
    """A body checked against its model.

    ``body`` is the model (None if any field failed); ``given`` maps each field the client
    sent *and that passed its own check* to its validated value, for the deeper checks;
    ``details`` holds every problem so far. ``sent`` is every key sent, valid or not.
    """

    body: M | None
    given: dict[str, Any]
    sent: set[str]
    raw: dict[str, Any]
    details: list[str] = field(default_factory=list)

    def fail(self, detail: str) -> None:
        self.details.append(detail)

    def raise_if_invalid(self) -> None:
        if self.details:
            raise Invalid("invalid request body", details=self.details)


def _message_for(exc: ValidationError) -> list[str]:
    details = []
    for error, line in zip(exc.errors(), validation_details(exc), strict=True):
        loc = error["loc"]
        if error["type"] == "extra_forbidden" and len(loc) == 1 and loc[0] in READ_ONLY:
            line = f"body.{loc[0]}: {READ_ONLY[str(loc[0])]}"
        details.append(line)
    return details


def check_body(model: type[M], raw: bytes) -> Checked[M]:
    """Parse ``raw`` and check it against ``model`` field by field.

    Malformed JSON or a body that is not an object is raised at once (nothing else can be
    checked); field problems are collected in the answer's ``details``.
    """
    data = parse_json(raw)
    if not isinstance(data, dict):
        raise Invalid(
            "the body must be a JSON object",
            details=[f"body: expected an object; got {type(data).__name__}"],
        )
    try:
        body = model.model_validate(data)
    except ValidationError as exc:
        failed = {e["loc"][0] for e in exc.errors() if e["loc"]}
        # The raw values of the fields that passed: the deeper checks read only fields the
        # model leaves untransformed (zone, series id, spec), so raw and validated agree.
        given = {name: data[name] for name in data.keys() & model.model_fields.keys() - failed}
        return Checked(None, given, set(data), data, _message_for(exc))
    given = {name: getattr(body, name) for name in body.model_fields_set}
    return Checked(body, given, set(data), data)
