"""The calendar: occurrences in a window, materialised and projected, and each event's next one.

Inside the horizon an occurrence is a row (``materialised``), whatever became of it; beyond
what is materialised the calendar forecasts from the same arithmetic the expansion uses
(``projected``), from now on, never into the past. One occurrence is never shown twice: a
projection is dropped when a row of its definition already holds its instant or its authored
slot — the same identity the expansion matches rows on, so a person's cancel inside the
horizon shows as that cancelled row and not as a forecast beside it.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from itertools import chain
from typing import Any

from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db import occurrences, schedules
from pageant.errors import Invalid
from pageant.runs import requires
from pageant.runs.params import scope_of
from pageant.schedules import blackouts, catchup, fan_out, recurrence, stagger
from pageant.schedules.reconcile import NEVER, calendars_of
from pageant.states import RunStatus, WaitingReason

log = logging.getLogger("pageant.schedules.calendar")

#: The widest window one request may ask for.
MAX_WINDOW = timedelta(days=400)
#: The most items one answer holds; a window holding more is refused, not cut short.
MAX_ITEMS = 10_000
# A row whose instant moved (a new zone, a tzdata update) still holds its slot; rows this far
# either side of the projected span are read so such a slot is recognised at the window's edge.
_SLOT_MARGIN = timedelta(days=2)


def local_time(instant: datetime, tz: str) -> str:
    """``instant`` as an ISO time in zone ``tz`` (the instant itself for an unknown zone)."""
    try:
        return instant.astimezone(recurrence.zone(tz)).isoformat()
    except ValueError:  # a zone the installed tzdata no longer knows: show the instant
        return instant.isoformat()


def _materialised(row: Row, specs: Mapping[int, Any]) -> dict[str, Any]:
    return {
        "definition_id": row.definition_id,
        "title": row.title,
        "scheduled_for": row.scheduled_for,
        "local_time": local_time(row.scheduled_for, row.timezone),
        "timezone": row.timezone,
        "kind": "materialised",
        "scope": row.scope,
        "params": dict(row.params or {}),
        "run_id": row.id,
        "status": row.status,
        "dst_adjusted": row.dst_adjusted,
        "moved_from": row.moved_from,
        "reason": staff_reason(row),
        # The name of the blackout that holds it: a blacked-out occurrence is shown, named.
        "blackout": row.cancel_reason if row.status == RunStatus.BLACKED_OUT else None,
        "requires": _requires(specs.get(row.version_id)),
    }


def _requires(spec: Any) -> dict[str, Any] | None:
    # The chain, as the version the occurrence is pinned to (or forecast from) says it.
    requirement = requires.of_spec(spec)
    return requirement.as_json() if requirement is not None else None


async def _materialise(
    conn: AsyncConnection, rows: Sequence[Row], now: datetime
) -> list[dict[str, Any]]:
    """The items of ``rows``: each with the requirement of its version, and a run held for
    it with the reason (what it waits for now, read as the engine reads it)."""
    specs = await occurrences.version_specs(conn, sorted({row.version_id for row in rows}))
    items = []
    for row in rows:
        item = _materialised(row, specs)
        if row.status == RunStatus.SCHEDULED and row.waiting_reason == WaitingReason.REQUIRES:
            item["reason"] = await _held_for(conn, row, specs.get(row.version_id), now)
        items.append(item)
    return items


async def _held_for(conn: AsyncConnection, row: Row, spec: Any, now: datetime) -> str | None:
    requirement = requires.of_spec(spec)
    if requirement is None:
        return None
    decision = await requires.read_decision(conn, requirement, row._mapping, now)
    if decision.verdict is not requires.Verdict.HOLD:
        return None  # decided at the engine's next look
    return f"held: {decision.note}"


def staff_reason(row: Row) -> str | None:
    """Why a run is as the calendar shows it, for staff: a catch-up's words (how late it
    started, once it has), a missed or failed run's reason, a cancelled or skipped run's
    (an overlap's names the run that replaced it, or says the previous run was still
    going); None for any other."""
    if row.catch_up:
        if row.started_at is None:
            return f"to start late, {row.catch_up}"
        return catchup.started_late(row.catch_up, row.scheduled_for, row.started_at)
    if row.status in _ERROR_IS_REASON:
        return str(row.last_error) if row.last_error else None
    if row.status in _CANCEL_IS_REASON:
        return str(row.cancel_reason) if row.cancel_reason else None
    return None


#: The ended statuses whose reason is their ``last_error``, and those whose is the reason
#: they were cancelled or skipped (an overlap's, a person's, the schedule's ``superseded``).
_ERROR_IS_REASON = (RunStatus.MISSED, RunStatus.FAILED)
_CANCEL_IS_REASON = (RunStatus.CANCELLED, RunStatus.SKIPPED)


def _projected(
    definition: Row,
    occ: recurrence.Occurrence,
    values: dict[str, Any],
    calendars: Sequence[blackouts.Calendar] = (),
    *,
    zone: str | None = None,
) -> dict[str, Any]:
    covered = blackouts.covering(calendars, occ.at)
    return {
        "definition_id": definition.id,
        "title": definition.title,
        "scheduled_for": occ.at,
        "local_time": occ.local.isoformat(),
        "timezone": zone or definition.timezone,
        "kind": "projected",
        "scope": scope_of(values),
        "params": dict(values),
        "run_id": None,
        "status": None,
        "dst_adjusted": occ.dst_adjusted,
        "moved_from": None,
        "reason": None,
        # Forecast as its run will be marked once the horizon reaches it.
        "blackout": covered.name if covered is not None else None,
        "requires": _requires(definition.spec),
    }


def _too_many() -> Invalid:
    return Invalid(
        f"the window holds more than {MAX_ITEMS} occurrences",
        details=[
            f"query.to: the window holds more than {MAX_ITEMS} occurrences; "
            "ask for a shorter window, or filter by series or definition"
        ],
    )


async def calendar_items(
    conn: AsyncConnection,
    *,
    start: datetime,
    end: datetime,
    now: datetime,
    definition_ids: list[int] | None = None,
    statuses: tuple[str, ...] = (),
    scope: str | None = None,
) -> list[dict[str, Any]]:
    """Every occurrence with ``start <= scheduled_for < end``, sorted by instant: the runs
    (any status, any scope) and the projections of ready definitions from ``now`` on.

    ``definition_ids`` (a series' definitions, or one) narrows both halves; None is every
    definition. ``statuses`` keeps only runs in those statuses (a projection has no status,
    so none is shown); ``scope`` keeps only runs of that scope (a projection is an
    occurrence of the empty scope). Raises :class:`Invalid` (on ``query.to``) past
    :data:`MAX_ITEMS`.
    """
    if definition_ids is not None and not definition_ids:
        return []
    rows = await occurrences.calendar_rows(
        conn,
        start,
        end,
        definition_ids=definition_ids,
        limit=MAX_ITEMS + 1,
        statuses=statuses,
        scope=scope,
    )
    if len(rows) > MAX_ITEMS:
        raise _too_many()
    items = await _materialise(conn, rows, now)
    if not statuses and scope in (None, ""):
        await _project(conn, items, rows, start=start, end=end, now=now, ids=definition_ids)
    items.sort(key=_order)
    return items


def _order(item: dict[str, Any]) -> tuple[Any, ...]:
    return (item["scheduled_for"], item["definition_id"], item["run_id"] or 0)


async def _project(
    conn: AsyncConnection,
    items: list[dict[str, Any]],
    rows: Sequence[Row],
    *,
    start: datetime,
    end: datetime,
    now: datetime,
    ids: list[int] | None,
) -> None:
    """Add to ``items`` the projections from ``max(start, now)`` to ``end`` that no row in
    ``rows`` (or just past the window's edges) already holds."""
    projected_from = max(start, now)
    if projected_from >= end:
        return
    definitions = await schedules.published_schedules(conn, definition_ids=ids)
    held = await _held(conn, rows, projected_from, end, ids)
    for definition in definitions:
        schedule = definition.spec.get("schedule") if isinstance(definition.spec, dict) else None
        # A fan-out over an option source is read only when expanded: one row forecast.
        sets = fan_out.listed_sets(schedule)
        window = stagger.window_of(schedule)
        calendars = await calendars_of(conn, definition.spec or {})
        if stagger.is_local(schedule):
            items += _local_projections(
                definition, sets, held[definition.id], projected_from, end, calendars
            )
            if len(items) > MAX_ITEMS:
                raise _too_many()
            continue
        for occ in _projection(definition, projected_from, end):
            if (occ.at, "") in held[definition.id] or ("", occ.slot) in held[definition.id]:
                continue
            # A fan-out's occurrence is one row per param set, as its runs will be: each at
            # its stagger offset, when the schedule staggers.
            for values in sets:
                at = stagger.shifted(occ, stagger.offset(scope_of(values), window))
                items.append(_projected(definition, at, values, calendars))
            if len(items) > MAX_ITEMS:
                raise _too_many()


def _local_projections(
    definition: Row,
    sets: list[dict[str, Any]],
    held: set[tuple[Any, str]],
    start: datetime,
    end: datetime,
    calendars: Sequence[blackouts.Calendar],
) -> list[dict[str, Any]]:
    """A ``"local"`` fan-out's projections: each set's occurrences in its own zone, less
    those its own rows hold (each set's occurrence has its own instant)."""
    found = []
    for values in sets:
        scope = scope_of(values)
        zone = stagger.zone_of(definition.spec.get("schedule"), scope, definition.timezone)
        for occ in _projection(definition, start, end, zone):
            if (occ.at, scope) in held or (scope, occ.slot) in held:
                continue
            found.append(_projected(definition, occ, values, calendars, zone=zone))
            if len(found) > MAX_ITEMS:
                raise _too_many()
    return found


async def calendar_outline(
    conn: AsyncConnection,
    *,
    start: datetime,
    end: datetime,
    now: datetime,
    definition_ids: list[int] | None = None,
) -> list[dict[str, Any]]:
    """:func:`calendar_items`' occurrences (no status or scope filter), in the same order, but
    a run's item holds only what places it — ``definition_id``, ``scheduled_for``,
    ``local_time``, ``run_id`` and ``outline: True`` — read without its title or anything
    else. A page showing a few of many occurrences places and counts them all with this and
    completes the ones it shows with :func:`complete`. Raises as :func:`calendar_items`."""
    if definition_ids is not None and not definition_ids:
        return []
    rows = await occurrences.calendar_places(
        conn, start, end, definition_ids=definition_ids, limit=MAX_ITEMS + 1
    )
    if len(rows) > MAX_ITEMS:
        raise _too_many()
    zones = await occurrences.version_timezones(conn, sorted({row.version_id for row in rows}))
    items: list[dict[str, Any]] = [
        {
            "definition_id": row.definition_id,
            "scheduled_for": row.scheduled_for,
            "local_time": local_time(row.scheduled_for, zones.get(row.version_id, "UTC")),
            "kind": "materialised",
            "run_id": row.id,
            "outline": True,
        }
        for row in rows
    ]
    await _project(conn, items, rows, start=start, end=end, now=now, ids=definition_ids)
    items.sort(key=_order)
    return items


async def complete(
    conn: AsyncConnection, items: list[dict[str, Any]], *, now: datetime
) -> list[dict[str, Any]]:
    """``items`` from :func:`calendar_outline` with each run's outline made its whole item
    (as :func:`calendar_items` has it), in one query; a run gone since is left out."""
    wanted = [item["run_id"] for item in items if item.get("outline")]
    rows = await occurrences.calendar_rows_of(conn, wanted)
    whole = {item["run_id"]: item for item in await _materialise(conn, rows, now)}
    return [
        whole[item["run_id"]] if item.get("outline") else item
        for item in items
        if not item.get("outline") or item["run_id"] in whole
    ]


async def _held(
    conn: AsyncConnection,
    rows: Sequence[Row],
    start: datetime,
    end: datetime,
    definition_ids: list[int] | None,
) -> dict[int, set[tuple[Any, str]]]:
    """Per definition, the instants and the slots its empty-scope rows hold around
    ``[start, end)``: what a projection must not repeat."""
    edges: list[Row] = []
    for lo, hi in ((start - _SLOT_MARGIN, start), (end, end + _SLOT_MARGIN)):
        edges += await occurrences.calendar_rows(
            conn, lo, hi, definition_ids=definition_ids, limit=MAX_ITEMS
        )
    held: dict[int, set[tuple[Any, str]]] = defaultdict(set)
    for row in chain(rows, edges):
        # A schedule's rows hold their occurrence whatever their scope (a fan-out's are
        # scoped by their params); a person's scoped start holds nothing of the schedule.
        if row.scope != "" and row.source != "schedule":
            continue
        held[row.definition_id].add((row.scheduled_for, ""))
        if row.occurrence_local:
            held[row.definition_id].add(("", row.occurrence_local))
        if row.scope:
            # A "local" fan-out's sets each hold their own instants and slots.
            held[row.definition_id].add((row.scheduled_for, row.scope))
            if row.occurrence_local:
                held[row.definition_id].add((row.scope, row.occurrence_local))
    return held


def _projection(
    definition: Row, start: datetime, end: datetime, zone: str | None = None
) -> list[recurrence.Occurrence]:
    try:
        return recurrence.occurrences(
            definition.spec.get("schedule"), zone or definition.timezone, start, end
        )
    except (ValueError, AttributeError):
        log.warning("event %s has a schedule that cannot be projected", definition.id)
        return []


async def next_occurrences(
    conn: AsyncConnection, definition_ids: list[int], *, now: datetime
) -> dict[int, datetime | None]:
    """Each definition's next occurrence at or after ``now``: its earliest scheduled run from
    the schedule, else the first occurrence past what is materialised (``expanded_until``).
    None for a definition that is not ready, is manual, or has nothing ahead. Two queries."""
    found: dict[int, datetime | None] = dict.fromkeys(definition_ids)
    if not definition_ids:
        return found
    ready = await schedules.published_schedules(conn, definition_ids=definition_ids)
    scheduled = await occurrences.next_scheduled(conn, [row.id for row in ready], now)
    for row in ready:
        if row.id in scheduled:
            found[row.id] = scheduled[row.id]
            continue
        if row.expanded_until is not None and row.expanded_until >= NEVER:
            continue
        after = max(now, row.expanded_until) if row.expanded_until is not None else now
        try:
            found[row.id] = _next_at(row.spec.get("schedule"), row.timezone, after)
        except (ValueError, AttributeError):
            continue
    return found


def _next_at(schedule: Any, timezone: str, after: datetime) -> datetime | None:
    """The schedule's next occurrence at or after ``after``: under ``"local"``, the first
    of its sets' next occurrences, each in its own zone."""
    zones = {timezone}
    if stagger.is_local(schedule):
        zones = {
            stagger.zone_of(schedule, scope_of(values), timezone)
            for values in schedule.get("params") or [{}]
        }
    ats = [
        occ.at
        for zone in sorted(zones)
        if (occ := recurrence.next_occurrence(schedule, zone, after)) is not None
    ]
    return min(ats, default=None)
