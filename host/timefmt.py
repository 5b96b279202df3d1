"""Instants in JSON: ISO 8601 with an offset, UTC written as ``Z``."""

from __future__ import annotations

from datetime import UTC, datetime


def iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is None:
        raise ValueError(f"naive datetime {value!r}: every instant must be timezone-aware")
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def parse_instant(text: str) -> datetime:
    """Parse an ISO 8601 instant that carries an offset (``Z`` accepted); raise ValueError."""
    value = datetime.fromisoformat(text.strip().replace("z", "Z"))
    if value.tzinfo is None:
        raise ValueError(f"{text!r} has no offset; expected e.g. 2027-03-26T19:00:00Z")
    return value.astimezone(UTC)
