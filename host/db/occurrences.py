"""SQL over ``event_runs`` as the schedule sees them: occurrences.

The expansion, a republish and an archive compare a definition's runs with what its schedule
produces and move, re-pin, cancel or revive them; the calendar and the events list read them.
Every change is a compare-and-set from the status it acts on, so a run that started in the
meantime is never moved, re-pinned or cancelled by the schedule.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Select, bindparam, case, func, literal, select, update
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db.log_kinds import LogKind
from pageant.db.runs import ENDED_VALUES, d, r
from pageant.db.tables import (
    RUN_STATUSES,
    by_primary_key,
    changed_one,
    event_definitions,
    event_run_log,
    event_runs,
    event_versions,
)
from pageant.states import RUN_LIVE, RunStatus

#: A run as an occurrence of its schedule: its instant, its wall time and how it stands.
_AS_OCCURRENCE = (
    r.scheduled_for,
    r.occurrence_local,
    r.dst_adjusted,
    r.source,
    r.status,
    r.version_id,
    r.cancel_reason,
)

#: What the schedule reconciliation reads of a row.
OCCURRENCE_COLUMNS = (r.id, *_AS_OCCURRENCE, r.started_at, r.moved_from)

# Served by the occurrence key's unique index (definition_id, scope, scheduled_for).
_OCCURRENCES_FROM = (
    select(*OCCURRENCE_COLUMNS)
    .where(
        r.definition_id == bindparam("definition_id"),
        r.scope == bindparam("scope"),
        r.scheduled_for >= bindparam("since"),
    )
    .order_by(r.scheduled_for)
)

# The scopes a schedule made runs at that have not started: a fan-out's param sets.
_SCHEDULED_SCOPES = (
    select(r.scope)
    .where(
        r.definition_id == bindparam("definition_id"),
        r.source == "schedule",
        r.status == RunStatus.SCHEDULED,
        r.scheduled_for >= bindparam("since"),
    )
    .distinct()
)

# The params of those runs, newest first: a fan-out's last known param sets.
_SCHEDULED_SETS = (
    select(r.scope, r.params)
    .where(
        r.definition_id == bindparam("definition_id"),
        r.source == "schedule",
        r.status == RunStatus.SCHEDULED,
        r.scheduled_for >= bindparam("since"),
    )
    .order_by(r.scheduled_for.desc(), r.id.desc())
)

_MOVE = by_primary_key(
    update(event_runs)
    .where(
        r.id == bindparam("run_id"),
        r.status == RunStatus.SCHEDULED,
        r.scheduled_for == bindparam("old_at"),
    )
    .values(
        scheduled_for=bindparam("new_at"),
        occurrence_local=bindparam("slot"),
        dst_adjusted=bindparam("dst"),
    )
)

_CANCEL_UNSTARTED = by_primary_key(
    update(event_runs)
    .where(r.id == bindparam("run_id"), r.status == RunStatus.SCHEDULED)
    .values(status=RunStatus.CANCELLED, cancel_reason=bindparam("why"), **ENDED_VALUES)
)

#: The reason a republish writes on an occurrence its schedule no longer produces.
SUPERSEDED = "superseded"

# Only a row the schedule itself cancelled, that never started, and that no person
# cancelled (a person's reason is free text and could read "superseded" too, so the
# control's log line is what tells them apart).
_REVIVE = by_primary_key(
    update(event_runs)
    .where(
        r.id == bindparam("run_id"),
        r.status == RunStatus.CANCELLED,
        r.cancel_reason == SUPERSEDED,
        r.started_at.is_(None),
        ~select(literal(1))
        .select_from(event_run_log)
        .where(event_run_log.c.run_id == r.id, event_run_log.c.kind == LogKind.CONTROL_CANCEL)
        .correlate(event_runs)
        .exists(),
    )
    .values(
        status=RunStatus.SCHEDULED,
        cancel_reason=None,
        ended_at=None,
        last_error=None,
        version_id=bindparam("version_id"),
        occurrence_local=bindparam("slot"),
        dst_adjusted=bindparam("dst"),
    )
)

_UNSTARTED_OF_DEFINITION = (
    select(r.id, r.scheduled_for)
    .where(
        r.definition_id == bindparam("definition_id"),
        r.status == RunStatus.SCHEDULED,
        r.source == "schedule",
    )
    .order_by(r.scheduled_for, r.id)
)

# Every empty-scope row from ``now`` on (a horizon's worth per definition), the status left
# to the caller: with the status in the WHERE clause SQLite prefers the (status,
# scheduled_for) index and walks every scheduled run ahead of ``now``, for every definition.
_AHEAD = select(r.definition_id, r.scheduled_for, r.status, r.source).where(
    r.definition_id.in_(bindparam("ids", expanding=True)),
    r.scope == "",
    r.scheduled_for >= bindparam("now"),
)

#: What the calendar shows of a materialised run, with the zone it was scheduled in.
CALENDAR_COLUMNS = (
    r.id,
    r.definition_id,
    r.scope,
    r.params,
    r.source,
    r.scheduled_for,
    r.occurrence_local,
    r.status,
    r.dst_adjusted,
    r.moved_from,
    r.last_error,
    r.catch_up,
    r.started_at,
    r.cancel_reason,
    r.version_id,
    r.waiting_reason,
    d.title,
    event_versions.c.timezone,
)
_CALENDAR_FROM = event_runs.join(event_definitions, d.id == r.definition_id).join(
    event_versions, event_versions.c.id == r.version_id
)


# A moved run is read by the instant it was moved from too: moved earlier, it still holds
# the slot the schedule would otherwise make again.
_MOVED_FROM = select(*OCCURRENCE_COLUMNS).where(
    r.definition_id == bindparam("definition_id"),
    r.scope == bindparam("scope"),
    r.moved_from >= bindparam("since"),
    r.scheduled_for < bindparam("since"),
)


async def occurrence_rows(
    conn: AsyncConnection, definition_id: int, since: datetime, scope: str = ""
) -> list[Row]:
    """The definition's runs at ``scope`` from ``since`` on (by their instant, or by the
    instant a person moved them from), in instant order."""
    params = {"definition_id": definition_id, "since": since, "scope": scope}
    rows = list((await conn.execute(_OCCURRENCES_FROM, params)).all())
    moved = list((await conn.execute(_MOVED_FROM, params)).all())
    return sorted(moved, key=lambda row: row.scheduled_for) + rows if moved else rows


async def scheduled_scopes(conn: AsyncConnection, definition_id: int, since: datetime) -> set[str]:
    """The scopes of the definition's scheduled runs, made by its schedule, from ``since``."""
    params = {"definition_id": definition_id, "since": since}
    return {row.scope for row in await conn.execute(_SCHEDULED_SCOPES, params)}


async def scheduled_param_sets(
    conn: AsyncConnection, definition_id: int, since: datetime
) -> list[dict[str, Any]]:
    """The param sets of the definition's scheduled runs, made by its schedule, from
    ``since``: one a scope, as its latest run has it, in scope order."""
    params = {"definition_id": definition_id, "since": since}
    found: dict[str, dict[str, Any]] = {}
    for row in await conn.execute(_SCHEDULED_SETS, params):
        found.setdefault(row.scope, dict(row.params or {}))
    return [found[scope] for scope in sorted(found)]


async def move_occurrence(
    conn: AsyncConnection,
    run_id: int,
    *,
    old_at: datetime,
    new_at: datetime,
    slot: str,
    dst_adjusted: dict[str, Any] | None,
) -> bool:
    """CAS a scheduled run from ``old_at`` to ``new_at`` (and its slot); True if it moved.

    The caller knows no row holds ``new_at``; the occurrence key would refuse a second."""
    params = {
        "run_id": run_id,
        "old_at": old_at,
        "new_at": new_at,
        "slot": slot,
        "dst": dst_adjusted,
    }
    return await changed_one(conn, _MOVE, params)


async def cancel_unstarted(
    conn: AsyncConnection, run_id: int, *, reason: str, now: datetime
) -> bool:
    """CAS scheduled -> cancelled with ``reason`` (the schedule's own cancels: superseded,
    archived). A run that started meanwhile is left alone."""
    return await changed_one(conn, _CANCEL_UNSTARTED, {"run_id": run_id, "why": reason, "now": now})


async def revive_superseded(
    conn: AsyncConnection,
    run_id: int,
    *,
    version_id: int,
    slot: str,
    dst_adjusted: dict[str, Any] | None,
) -> bool:
    """CAS a superseded, never-started run back to ``scheduled`` on ``version_id``.

    The one way back from ``cancelled``: when a later version produces the occurrence
    again, the row that holds its key must carry it, or the occurrence would vanish."""
    params = {"run_id": run_id, "version_id": version_id, "slot": slot, "dst": dst_adjusted}
    return await changed_one(conn, _REVIVE, params)


# A blackout's mark: only a run that has not started, so one that began meanwhile runs on.
_BLACK_OUT = by_primary_key(
    update(event_runs)
    .where(r.id == bindparam("run_id"), r.status == RunStatus.SCHEDULED)
    .values(status=RunStatus.BLACKED_OUT, cancel_reason=bindparam("name"), **ENDED_VALUES)
)
# A blacked-out run's blackout renamed, or another of its event's blackouts covering it now.
_RENAME_BLACKOUT = by_primary_key(
    update(event_runs)
    .where(r.id == bindparam("run_id"), r.status == RunStatus.BLACKED_OUT)
    .values(cancel_reason=bindparam("name"))
)
_LIFT = by_primary_key(
    update(event_runs)
    .where(r.id == bindparam("run_id"), r.status == RunStatus.BLACKED_OUT)
    .values(
        status=RunStatus.SCHEDULED,
        cancel_reason=None,
        ended_at=None,
        version_id=bindparam("version_id"),
        occurrence_local=bindparam("slot"),
        dst_adjusted=bindparam("dst"),
    )
)


# Its ending was written when it was blacked out; only the status and the reason change.
_WITHDRAW_BLACKED_OUT = by_primary_key(
    update(event_runs)
    .where(r.id == bindparam("run_id"), r.status == RunStatus.BLACKED_OUT)
    .values(status=RunStatus.CANCELLED, cancel_reason=bindparam("why"))
)


async def withdraw_blacked_out(conn: AsyncConnection, run_id: int, *, reason: str) -> bool:
    """CAS blacked_out -> cancelled with ``reason`` (a republish's ``superseded``)."""
    return await changed_one(conn, _WITHDRAW_BLACKED_OUT, {"run_id": run_id, "why": reason})


async def black_out(conn: AsyncConnection, run_id: int, *, name: str, now: datetime) -> bool:
    """CAS scheduled -> blacked_out, the blackout's ``name`` as its reason; True if it moved."""
    return await changed_one(conn, _BLACK_OUT, {"run_id": run_id, "name": name, "now": now})


async def rename_blackout(conn: AsyncConnection, run_id: int, *, name: str) -> bool:
    """Write the name of the blackout that now covers a blacked-out run."""
    return await changed_one(conn, _RENAME_BLACKOUT, {"run_id": run_id, "name": name})


async def lift_blackout(
    conn: AsyncConnection,
    run_id: int,
    *,
    version_id: int,
    slot: str,
    dst_adjusted: dict[str, Any] | None,
) -> bool:
    """CAS a blacked-out run back to ``scheduled`` on ``version_id``: no blackout covers its
    occurrence any more, and the row that holds its key must carry it again."""
    params = {"run_id": run_id, "version_id": version_id, "slot": slot, "dst": dst_adjusted}
    return await changed_one(conn, _LIFT, params)


async def unstarted_schedule_runs(conn: AsyncConnection, definition_id: int) -> list[Row]:
    """A definition's scheduled runs that came from its schedule, earliest first."""
    return list(
        (await conn.execute(_UNSTARTED_OF_DEFINITION, {"definition_id": definition_id})).all()
    )


async def next_scheduled(
    conn: AsyncConnection, definition_ids: list[int], now: datetime
) -> dict[int, datetime]:
    """The earliest scheduled run from the schedule at or after ``now``, per definition."""
    found: dict[int, datetime] = {}
    if not definition_ids:
        return found
    for row in await conn.execute(_AHEAD, {"ids": definition_ids, "now": now}):
        if row.status == RunStatus.SCHEDULED and row.source == "schedule":
            earliest = found.get(row.definition_id)
            if earliest is None or row.scheduled_for < earliest:
                found[row.definition_id] = row.scheduled_for
    return found


#: What the calendar needs to place a run on a day and count it: no title, no join.
_PLACE_COLUMNS = (
    r.id,
    r.definition_id,
    r.scope,
    r.source,
    r.scheduled_for,
    r.occurrence_local,
    r.version_id,
)


def _in_window(
    statement: Select[Any],
    start: datetime,
    end: datetime,
    definition_ids: list[int] | None,
    statuses: tuple[str, ...] = (),
) -> Select[Any]:
    """``statement`` narrowed to the runs with ``start <= scheduled_for < end`` of
    ``definition_ids`` (None: of every event) and, when given, in ``statuses``. Of every event
    it names every status: the (status, scheduled_for) index then serves the range as one
    short range per status instead of a scan of the whole history."""
    statement = statement.where(r.scheduled_for >= start, r.scheduled_for < end)
    if definition_ids is None:
        return statement.where(r.status.in_(statuses or RUN_STATUSES))
    statement = statement.where(r.definition_id.in_(definition_ids))
    return statement.where(r.status.in_(statuses)) if statuses else statement


async def calendar_places(
    conn: AsyncConnection,
    start: datetime,
    end: datetime,
    *,
    definition_ids: list[int] | None,
    limit: int,
) -> list[Row]:
    """Like :func:`calendar_rows` (no status or scope filter), with only the columns that
    place a run in time: a page that shows some of a window's runs reads this for all of
    them and :func:`calendar_rows_of` for the ones it shows."""
    statement = select(*_PLACE_COLUMNS).order_by(r.scheduled_for, r.id).limit(limit)
    return list((await conn.execute(_in_window(statement, start, end, definition_ids))).all())


async def nth_instant(
    conn: AsyncConnection,
    start: datetime,
    end: datetime,
    *,
    definition_ids: list[int] | None,
    n: int,
) -> datetime | None:
    """The instant of the ``n``-th run (1-based, in instant order) with ``start <=
    scheduled_for < end`` under :func:`calendar_places`' filter; None when there are fewer:
    where a page of ``n - 1`` runs from ``start`` ends, read from the index alone."""
    statement = select(r.scheduled_for).order_by(r.scheduled_for).limit(1).offset(n - 1)
    return (await conn.execute(_in_window(statement, start, end, definition_ids))).scalar()


def _day_of(bounds: Sequence[datetime], lo: int, hi: int) -> Any:
    """The index ``i`` in ``lo..hi - 1`` with ``bounds[i] <= scheduled_for < bounds[i + 1]``
    as a CASE that halves the span at each level: a handful of comparisons a row, not one
    per day."""
    if hi - lo == 1:
        return literal(lo)
    mid = (lo + hi) // 2
    return case(
        (r.scheduled_for < bounds[mid], _day_of(bounds, lo, mid)),
        else_=_day_of(bounds, mid, hi),
    )


def _days_query(bounds: Sequence[datetime], definition_ids: list[int] | None) -> Any:
    return _in_window(
        select(*_PLACE_COLUMNS, _day_of(bounds, 0, len(bounds) - 1).label("day")),
        bounds[0],
        bounds[-1],
        definition_ids,
    )


async def calendar_days(
    conn: AsyncConnection,
    bounds: Sequence[datetime],
    *,
    definition_ids: list[int] | None,
    first: int,
) -> tuple[dict[int, int], list[Row]]:
    """The runs with ``bounds[0] <= scheduled_for < bounds[-1]`` (under
    :func:`calendar_places`' filter), by day ``i`` (``bounds[i] <= scheduled_for <
    bounds[i + 1]``: the local days of the zone a page is drawn in): how many fall
    on each, and the place columns (:func:`calendar_places`', and ``day``) of each day's
    ``first`` in the calendar's order (instant, event, run). Counted and chosen in the
    database, in one pass: the rows of a crowded month never reach Python."""
    days = _days_query(bounds, definition_ids).subquery()
    order = (days.c.scheduled_for, days.c.definition_id, days.c.id)
    ranked = select(
        days,
        func.row_number().over(partition_by=days.c.day, order_by=order).label("nth"),
        func.count().over(partition_by=days.c.day).label("n"),
    ).subquery()
    chosen = (
        select(ranked)
        .where(ranked.c.nth <= first)
        .order_by(ranked.c.scheduled_for, ranked.c.definition_id, ranked.c.id)
    )
    rows = list((await conn.execute(chosen)).all())
    return {row.day: row.n for row in rows}, rows


async def version_timezones(conn: AsyncConnection, version_ids: list[int]) -> dict[int, str]:
    """Each version's time zone, by version id."""
    if not version_ids:
        return {}
    v = event_versions.c
    rows = await conn.execute(select(v.id, v.timezone).where(v.id.in_(version_ids)))
    return {row.id: row.timezone for row in rows}


async def version_specs(conn: AsyncConnection, version_ids: list[int]) -> dict[int, Any]:
    """Each version's spec, by version id."""
    if not version_ids:
        return {}
    v = event_versions.c
    rows = await conn.execute(select(v.id, v.spec).where(v.id.in_(version_ids)))
    return {row.id: row.spec for row in rows}


async def calendar_rows_of(conn: AsyncConnection, run_ids: list[int]) -> list[Row]:
    """The calendar's rows (:data:`CALENDAR_COLUMNS`) of ``run_ids``, in instant order."""
    if not run_ids:
        return []
    statement = (
        select(*CALENDAR_COLUMNS)
        .select_from(_CALENDAR_FROM)
        .where(r.id.in_(run_ids))
        .order_by(r.scheduled_for, r.id)
    )
    return list((await conn.execute(statement)).all())


async def calendar_rows(
    conn: AsyncConnection,
    start: datetime,
    end: datetime,
    *,
    definition_ids: list[int] | None,
    limit: int,
    statuses: tuple[str, ...] = (),
    scope: str | None = None,
) -> list[Row]:
    """Runs with ``start <= scheduled_for < end`` in instant order, optionally only of
    ``definition_ids``, only in ``statuses`` and only of ``scope``; at most ``limit``."""
    statement = (
        select(*CALENDAR_COLUMNS)
        .select_from(_CALENDAR_FROM)
        .order_by(r.scheduled_for, r.id)
        .limit(limit)
    )
    if scope is not None:
        statement = statement.where(r.scope == scope)
    return list(
        (await conn.execute(_in_window(statement, start, end, definition_ids, statuses))).all()
    )


# ── A publish's preview ─────────────────────────────────────────────────────────────────────

#: What a publish preview compares of a run, before the publish and after it.
PREVIEW_COLUMNS = (r.id, r.scope, *_AS_OCCURRENCE)

# Every row a publish's reconcile may touch (from ``since`` on) and every run under way,
# whatever its instant: those a publish keeps on their version.
_PREVIEW_ROWS = (
    select(*PREVIEW_COLUMNS)
    .where(
        r.definition_id == bindparam("definition_id"),
        (r.scheduled_for >= bindparam("since")) | r.status.in_([s.value for s in RUN_LIVE]),
    )
    .order_by(r.scheduled_for, r.scope, r.id)
)


async def preview_rows(conn: AsyncConnection, definition_id: int, since: datetime) -> list[Row]:
    """The definition's runs from ``since`` on, and its runs under way (started, not
    ended), in instant order: what a publish preview reads before and after the publish."""
    params = {"definition_id": definition_id, "since": since}
    return list((await conn.execute(_PREVIEW_ROWS, params)).all())


async def version_numbers(conn: AsyncConnection, version_ids: list[int]) -> dict[int, int]:
    """Each version's number, by version id."""
    if not version_ids:
        return {}
    v = event_versions.c
    rows = await conn.execute(select(v.id, v.number).where(v.id.in_(version_ids)))
    return {row.id: row.number for row in rows}
