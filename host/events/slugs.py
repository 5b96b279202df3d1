"""Slugs: the URL names of events and series.

One grammar for both: lowercase ASCII letters and digits in runs joined by single hyphens,
at most :data:`MAX_SLUG` characters. A slug given explicitly must already be one (and a
taken one is a conflict); a slug derived from a title is made unique by a ``-2``, ``-3``...
suffix, because the author never chose it and should not have to.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db import slugs as rows
from pageant.db.slugs import SluggedTable
from pageant.errors import Conflict

MAX_SLUG = 100
SLUG_PATTERN = r"^[a-z0-9]+(?:-[a-z0-9]+)*$"
SLUG_RE = re.compile(SLUG_PATTERN)
#: What a title with no letters or digits at all ("!!!") derives to.
FALLBACK = "event"
#: How many times a derived slug is re-derived after losing a race for it.
_INSERT_ATTEMPTS = 5


def slugify(title: str, *, fallback: str = FALLBACK, max_length: int = MAX_SLUG) -> str:
    """The slug a title derives to: accents folded, everything else non-alphanumeric made a
    hyphen, trimmed to ``max_length`` without a trailing hyphen."""
    # NFKD splits "é" into "e" and a combining accent, which the ASCII filter then drops,
    # so "Fête" reads as "fete" rather than "f-te".
    folded = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", folded.lower()).strip("-")
    slug = slug[:max_length].rstrip("-")
    return slug or fallback


def with_suffix(base: str, n: int) -> str:
    """``base-n``, shortening ``base`` so the whole stays within :data:`MAX_SLUG`."""
    tail = f"-{n}"
    return base[: MAX_SLUG - len(tail)].rstrip("-") + tail


async def free_slug(conn: AsyncConnection, table: SluggedTable, base: str) -> str:
    """``base`` if no row of ``table`` holds it, else the lowest free ``base-n``
    (n >= 2). One query: every slug that could collide is read at once."""
    # Short enough to be a prefix of every suffixed form with_suffix can make.
    stem = base[: MAX_SLUG - 12]
    taken = await rows.slugs_like(conn, table, base, stem)
    if base not in taken:
        return base
    n = 2
    while with_suffix(base, n) in taken:
        n += 1
    return with_suffix(base, n)


# ── Writing a row that carries a slug ───────────────────────────────────────────────────────


async def slug_owner(conn: AsyncConnection, table: SluggedTable, slug: str) -> int | None:
    """The id of the row of ``table`` holding ``slug``, or None."""
    return await rows.slug_owner(conn, table, slug)


def slug_conflict(noun: str, slug: str, owner: int | None) -> Conflict:
    """The 409 for an explicit slug another row holds, naming that row."""
    held = f"{noun} {owner}" if owner is not None else f"another {noun}"
    return Conflict(f'the slug "{slug}" is taken by {held}', details=[f"body.slug: {slug!r}"])


async def insert_with_slug(
    conn: AsyncConnection,
    table: SluggedTable,
    values: dict[str, Any],
    *,
    slug: str | None,
    derived_slug: str,
    noun: str,
) -> int:
    """Insert ``values`` into ``table`` with a slug and answer the new id.

    An explicit ``slug`` that is taken is a :class:`Conflict` naming its holder. Without
    one, ``derived_slug`` is suffixed ``-2``, ``-3``... until free - including when a
    concurrent insert takes it between the look and the insert: the unique index decides,
    and the insert runs in a savepoint so that losing leaves the transaction usable for
    the next try.
    """
    for _attempt in range(_INSERT_ATTEMPTS):
        if slug is not None:
            owner = await slug_owner(conn, table, slug)
            if owner is not None:
                raise slug_conflict(noun, slug, owner)
            chosen = slug
        else:
            chosen = await free_slug(conn, table, derived_slug)
        new_id = await rows.insert_claiming_slug(conn, table, values, chosen)
        if new_id is not None:
            return new_id
        if slug is not None:
            raise slug_conflict(noun, slug, await slug_owner(conn, table, slug))
    raise Conflict(
        f'could not find a free slug for "{derived_slug}"; give one explicitly',
        details=[f"body.slug: required while other {noun} rows keep taking the derived one"],
    )


async def update_with_slug(
    conn: AsyncConnection, table: SluggedTable, row_id: int, changes: dict[str, Any], *, noun: str
) -> None:
    """UPDATE one row of ``table`` with ``changes``; a ``slug`` among them that another row
    holds (now, or by the time the index sees it) is a :class:`Conflict`."""
    slug = changes.get("slug")
    if slug is not None:
        owner = await slug_owner(conn, table, slug)
        if owner is not None and owner != row_id:
            raise slug_conflict(noun, slug, owner)
    if not await rows.update_claiming_slug(conn, table, row_id, changes):
        assert slug is not None  # only a slug's race is answered with False
        raise slug_conflict(noun, slug, await slug_owner(conn, table, slug))
