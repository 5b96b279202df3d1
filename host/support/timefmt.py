"""Instants in JSON: ISO 8601 with an offset, UTC written as ``Z``."""

from __future__ import annotations

from datetime import UTC, datetime

#: The instants pageant accepts from outside (a query's window, a schedule's dates):
#: from 1970 up to (not including) the year 3000. Near the ends of Python's calendar
#: (year 1 and 9999) adding a window or a zone's offset overflows; nothing a game server
#: schedules is near either end.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(3000, 1, 1, tzinfo=UTC)
SUPPORTED = "from 1970-01-01T00:00:00Z up to 3000-01-01T00:00:00Z"


def iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is not UTC:  # what the database answers is UTC already: no conversion
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: every instant must be timezone-aware")
        value = value.astimezone(UTC)
    return value.isoformat()[:-6] + "Z"


def parse_instant(text: str) -> datetime:
    """Parse an ISO 8601 instant that carries an offset (``Z`` accepted); raise ValueError,
    also for one outside :data:`SUPPORTED`."""
    value = datetime.fromisoformat(text.strip().replace("z", "Z"))
    if value.tzinfo is None:
        raise ValueError(f"{text!r} has no offset; expected e.g. 2027-03-26T19:00:00Z")
    try:
        value = value.astimezone(UTC)
    except OverflowError as exc:
        raise OutOfRange(f"{text!r} is outside the supported range ({SUPPORTED})") from exc
    if not EARLIEST <= value < LATEST:
        raise OutOfRange(f"{text!r} is outside the supported range ({SUPPORTED})")
    return value


class OutOfRange(ValueError):
    """An instant that parses but lies outside :data:`SUPPORTED`."""


def instant_or_none(value: object) -> datetime | None:
    """A datetime as it is, an ISO 8601 instant parsed, anything else (``None``, an unreadable
    text) ``None``: for text that shows a time when it has one and a dash when not."""
    if value is None or isinstance(value, datetime):
        return value
    try:
        return parse_instant(str(value))
    except ValueError:
        return None
