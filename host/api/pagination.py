"""``?limit=&cursor=`` pagination over integer ids: lists answer
``{"items": [...], "next_cursor": null | str}``."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from pageant.api.routing import MAX_ID, query_count, whole_number
from pageant.errors import Invalid

DEFAULT_LIMIT = 50
MAX_LIMIT = 200


@dataclass(frozen=True)
class Page:
    limit: int
    after_id: int | None  # answer ids greater than this (ascending lists)

    def next_cursor(self, ids: list[int]) -> str | None:
        """The cursor for the page after one whose ids were ``ids`` (fetched limit + 1)."""
        if len(ids) <= self.limit:
            return None
        return encode_cursor(ids[self.limit - 1])

    def answer(self, items: list[Any], rows: Sequence[Any]) -> dict[str, Any]:
        """A list's answer: ``items``, rendered from the first ``limit`` of ``rows`` (fetched
        limit + 1, each with its ``id``), and the cursor for the page after them."""
        return {"items": items, "next_cursor": self.next_cursor([r.id for r in rows])}


def encode_cursor(last_id: int) -> str:
    return base64.urlsafe_b64encode(f"id:{last_id}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> int:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        text = base64.urlsafe_b64decode(padded.encode()).decode()
        kind, _, value = text.partition(":")
        last_id = whole_number(value)
        if kind != "id" or last_id is None or last_id > MAX_ID:
            raise ValueError
        return last_id
    except (ValueError, UnicodeDecodeError) as exc:
        raise Invalid(
            "bad cursor", details=[f"query.cursor: {cursor!r} is not a cursor this API issued"]
        ) from exc


def page_from(request: web.Request) -> Page:
    """Read ``limit`` (1..200, default 50) and ``cursor`` from the query string."""
    details: list[str] = []
    limit = query_count(request, "limit", MAX_LIMIT, details) or DEFAULT_LIMIT
    after_id = None
    raw_cursor = request.query.get("cursor")
    if raw_cursor:
        try:
            after_id = decode_cursor(raw_cursor)
        except Invalid as exc:
            details.extend(exc.details)
    if details:
        raise Invalid("invalid query", details=details)
    return Page(limit, after_id)
