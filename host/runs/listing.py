"""What is running now: runs across every event, filtered, newest first, with a summary.

One function answers, and both ``GET /api/v1/admin/runs`` and ``pageant runs list`` render
it; one function reads the filters, so the two refuse a bad one in the same words (the API
names its query parameters ``query.<name>``, the CLI its options ``--<name>``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pageant.db import definitions as definition_rows
from pageant.db import runs as run_rows
from pageant.db import series as series_rows
from pageant.errors import Invalid, NotFound
from pageant.runs.console import run_views
from pageant.runs.waiting import REASONS
from pageant.support.timefmt import parse_instant

if TYPE_CHECKING:
    from pageant.hosting import Host

STATUSES = run_rows.STATUSES
HEALTHS = run_rows.HEALTH_RANK
#: The largest id a filter may name (past it SQLite cannot compare).
MAX_ID = 2**63 - 1
#: The filters, by the name they are given under.
FILTERS = ("status", "health", "waiting", "definition", "series", "scope", "from", "to")


@dataclass(frozen=True)
class RunFilter:
    """Which runs to list; each field narrows when it is set."""

    statuses: tuple[str, ...] = ()
    health: tuple[str, ...] = ()
    waiting: tuple[str, ...] = ()
    definition_id: int | None = None
    series_id: int | None = None
    scope: str | None = None
    start: datetime | None = None
    end: datetime | None = None


def choices(
    raw: Sequence[str], allowed: Sequence[str], name: str, problems: list[str]
) -> tuple[str, ...]:
    """The values of a filter given repeated or comma-separated, each checked against
    ``allowed``; a problem per value that is not, naming the filter ``name``."""
    found: list[str] = []
    for value in (part.strip() for item in raw for part in item.split(",")):
        if not value:
            continue
        if value not in allowed:
            problems.append(f"{name}: {value!r} is not one of {', '.join(allowed)}")
        elif value not in found:
            found.append(value)
    return tuple(found)


def _id(raw: str | None, name: str, problems: list[str]) -> int | None:
    if raw is None:
        return None
    text = raw.strip()
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= MAX_ID:
        problems.append(f"{name}: expected an id (a positive whole number); got {raw!r}")
        return None
    return int(text)


def _instant(raw: str | None, name: str, problems: list[str]) -> datetime | None:
    if raw is None or not raw.strip():
        return None
    try:
        return parse_instant(raw)
    except ValueError:
        problems.append(
            f"{name}: {raw!r} is not an instant with an offset; expected e.g. 2027-03-26T19:00:00Z"
        )
        return None


def read_filter(get: Callable[[str], list[str]], *, label: Callable[[str], str]) -> RunFilter:
    """Read the filters: ``get(name)`` answers every value given for ``name`` (a filter of
    several values may also be given comma-separated); ``label(name)`` is how the caller
    names that filter in an error. Raises :class:`Invalid` naming every bad one."""
    problems: list[str] = []

    def one(name: str) -> str | None:
        values = get(name)
        if len(values) > 1:
            problems.append(f"{label(name)}: given {len(values)} times; expected at most once")
        return values[-1] if values else None

    statuses = choices(get("status"), STATUSES, label("status"), problems)
    health = choices(get("health"), HEALTHS, label("health"), problems)
    waiting = choices(get("waiting"), REASONS, label("waiting"), problems)
    definition_id = _id(one("definition"), label("definition"), problems)
    series_id = _id(one("series"), label("series"), problems)
    scope = one("scope")
    if scope is not None and len(scope) > 100:
        problems.append(f"{label('scope')}: at most 100 characters")
    start = _instant(one("from"), label("from"), problems)
    end = _instant(one("to"), label("to"), problems)
    if start is not None and end is not None and end <= start:
        problems.append(f"{label('to')}: must be later than {label('from')}")
    if problems:
        raise Invalid("invalid filter", details=problems)
    return RunFilter(statuses, health, waiting, definition_id, series_id, scope, start, end)


async def list_runs(
    host: Host, where: RunFilter, *, before_id: int | None, limit: int
) -> dict[str, Any]:
    """``{items, next_before, summary}``: up to ``limit`` runs matching ``where``, newest
    (highest id) first, below ``before_id``; each in the run shape of the console (with
    ``waiting_on`` and the event's title). ``next_before`` is the id to pass as
    ``before_id`` for the next page, or None on the last. ``summary`` counts every run
    that has not ended, whatever the filters (see :func:`pageant.db.runs.live_summary`).

    A filter naming an event or a series that does not exist is :class:`NotFound`.
    """
    now = host.clock.now()
    async with host.db.connect() as conn:
        if (
            where.definition_id is not None
            and await definition_rows.get_definition(conn, where.definition_id) is None
        ):
            raise NotFound(f"no such event: {where.definition_id}")
        if (
            where.series_id is not None
            and await series_rows.get_series(conn, where.series_id) is None
        ):
            raise NotFound(f"no such series: {where.series_id}")
        rows = await run_rows.runs_across(
            conn,
            statuses=where.statuses,
            health=where.health,
            waiting=where.waiting,
            definition_id=where.definition_id,
            series_id=where.series_id,
            scope=where.scope,
            start=where.start,
            end=where.end,
            before_id=before_id,
            limit=limit + 1,
        )
        items = await run_views(conn, host, rows[:limit], now=now)
        summary = await run_rows.live_summary(conn)
    next_before = rows[limit - 1].id if len(rows) > limit else None
    return {"items": items, "next_before": next_before, "summary": summary}
