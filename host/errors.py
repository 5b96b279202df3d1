"""One exception family. Each carries the HTTP code it maps to and, where there is one, the
plugin it concerns; messages name the offending thing and say what was expected."""

from __future__ import annotations


class PageantError(Exception):
    """The root of pageant's own errors."""

    code = "error"
    status = 500

    def __init__(
        self, message: str, *, details: list[str] | None = None, plugin: str | None = None
    ):
        super().__init__(message)
        self.message = message
        self.details = list(details or [])
        self.plugin = plugin


class Invalid(PageantError):
    """Bad input: every problem in ``details``, each prefixed by its path."""

    code = "invalid"
    status = 400


class Unauthenticated(PageantError):
    code = "unauthenticated"
    status = 401


class Forbidden(PageantError):
    code = "forbidden"
    status = 403


class NotFound(PageantError):
    code = "not_found"
    status = 404


class UnsupportedMediaType(PageantError):
    """A body sent as something other than JSON."""

    code = "unsupported_media_type"
    status = 415


class Conflict(PageantError):
    """The resource is not in a state that allows this; the message names the actual one."""

    code = "conflict"
    status = 409


class Dormant(PageantError):
    """Publishing refused: something in the spec names what no plugin registers."""

    code = "dormant"
    status = 409


class SchemaOutOfDate(PageantError):
    code = "schema_out_of_date"
