"""Recurrence: when a schedule's occurrences fall, in the event's own IANA zone.

Pure arithmetic, no database. A schedule (already shape-checked by
:mod:`pageant.events.authoring.validator`) names local wall slots — "every Friday at 20:00", "the
last Sunday of the month at 02:30" — and this module turns each slot into exactly one UTC
instant:

- a slot that exists once is that instant;
- a slot swallowed by a spring-forward gap moves forward to the first wall time that exists
  (02:30 in a 02:00->03:00 gap runs at 03:00), reported as ``{"kind": "gap", "shift_minutes":
  30}``;
- a slot in a repeated (fold) hour takes the first of its two instants, reported as
  ``{"kind": "fold", "shift_minutes": 0}`` (zero: it runs when authored, the first time).

Both rules are one rule: a slot runs at the earliest instant whose wall clock reads at or past
it. That mapping is monotonic, so slots in order give instants in order, no slot is dropped
and none yields two instants — which is what lets the engine re-expand any overlapping window
and get the same rows back.
"""

from __future__ import annotations

import calendar
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from functools import cache
from importlib.resources import files
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from pageant.support.timefmt import EARLIEST, LATEST, SUPPORTED

#: Weekday names as a spec writes them, in week order from Monday.
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")

_WEEKDAY_INDEX = {name: index for index, name in enumerate(WEEKDAYS)}

# A gap or fold moves an instant off its slot's own date by at most a day (Samoa skipped
# 2011-12-30 whole), so a window is widened by this many local days before filtering.
_MARGIN_DAYS = 2

# How many local days next_occurrence reads before giving up: a weekly slot recurs within 7
# days and a monthly one within 5 weeks of wall time; each bound adds the margin on both sides.
_NEXT_WEEKLY_DAYS = 7 + 2 * _MARGIN_DAYS + 1
_NEXT_MONTHLY_DAYS = 2 * 31 + 2 * _MARGIN_DAYS + 1


@dataclass(frozen=True)
class Occurrence:
    """One occurrence of a schedule.

    ``at`` is the aware UTC instant it runs. ``slot`` is the authored local wall slot
    (``YYYY-MM-DDTHH:MM`` in the definition's zone) and is the occurrence's identity: a
    gap-shifted occurrence keeps the slot it was authored for, not the wall time it runs at.
    ``local`` is the real local time it runs (aware, in the zone). ``dst_adjusted`` is None,
    or ``{"kind": "gap" | "fold", "shift_minutes": n}`` when a DST rule applied.
    """

    at: datetime
    slot: str
    local: datetime
    dst_adjusted: dict[str, Any] | None = field(default=None, hash=False)


# ── Zones ──────────────────────────────────────────────────────────────────────────────────


@cache
def _known_zones() -> frozenset[str]:
    # The tzdata distribution's list is the IANA database as this project ships it, so a
    # zone accepted on one host is accepted on every host. The system directory is not used
    # as the list: it also holds `localtime` (this machine's zone), which is not an IANA name.
    try:
        return frozenset(files("tzdata").joinpath("zones").read_text(encoding="utf-8").split())
    except (ModuleNotFoundError, FileNotFoundError):  # pragma: no cover - tzdata is a dependency
        return frozenset(available_timezones() - {"localtime"})


def is_zone(name: str) -> bool:
    """Whether ``name`` is a known IANA time zone name (case-sensitive, e.g. ``Europe/Berlin``)."""
    if not isinstance(name, str) or not name or name.startswith("/") or ".." in name:
        return False
    return name in _known_zones()


def zone(name: str) -> ZoneInfo:
    """The ZoneInfo for an IANA zone name; raise ValueError naming it if it is not one.

    ZoneInfo alone would accept names that are not IANA zones (``localtime``, ``posixrules``,
    ``posix/...`` from the system directory), so the name is checked against the IANA list first.
    """
    if not is_zone(name):
        raise ValueError(f'"{name}" is not a known IANA time zone')
    try:
        return ZoneInfo(name)  # ZoneInfo keeps its own cache of loaded zones
    except (ZoneInfoNotFoundError, ValueError) as err:  # pragma: no cover - listed but unloadable
        raise ValueError(f'"{name}" is not a known IANA time zone') from err


# ── One slot -> one instant ────────────────────────────────────────────────────────────────


def _slot_text(day: date, at: time) -> str:
    return f"{day.isoformat()}T{at.hour:02d}:{at.minute:02d}"


def _wall(instant: datetime, tz: ZoneInfo) -> datetime:
    return instant.astimezone(tz).replace(tzinfo=None)


def _first_instant_at_or_after(
    wall: datetime, lo: datetime, hi: datetime, tz: ZoneInfo
) -> datetime:
    """The earliest UTC instant in (lo, hi] whose wall clock reads ``wall`` or later.

    Called only for a slot inside a gap, with ``lo`` before the gap (its wall clock reads
    earlier than the slot) and ``hi`` after it, so the answer is the transition instant.
    zoneinfo does not expose transitions, hence the bisection; transitions fall on whole
    seconds, and a gap happens about once a year per zone, so its cost does not matter.
    """
    low = math.floor(lo.timestamp())
    high = math.ceil(hi.timestamp())
    while high - low > 1:
        middle = (low + high) // 2
        if _wall(datetime.fromtimestamp(middle, UTC), tz) >= wall:
            high = middle
        else:
            low = middle
    return datetime.fromtimestamp(high, UTC)


def _resolve(day: date, at: time, tz: ZoneInfo) -> Occurrence:
    wall = datetime.combine(day, at)
    first = wall.replace(tzinfo=tz)
    first_utc = first.astimezone(UTC)
    second_utc = first.replace(fold=1).astimezone(UTC)
    slot = _slot_text(day, at)
    if first_utc == second_utc:
        return Occurrence(first_utc, slot, first)

    # fold=0 and fold=1 disagree: the wall time is either repeated or missing. A missing one
    # does not round-trip (fold=0 reads it with the pre-gap offset and lands past the gap).
    if _wall(first_utc, tz) == wall:
        # PEP 495: fold=0 is the earlier of the two instants. min() keeps that true even for
        # a zone whose transition runs the other way.
        instant = min(first_utc, second_utc)
        return Occurrence(
            instant, slot, instant.astimezone(tz), {"kind": "fold", "shift_minutes": 0}
        )

    lo, hi = min(first_utc, second_utc), max(first_utc, second_utc)
    if _wall(lo, tz) >= wall:  # pragma: no cover - no zone in tzdata has such a gap
        lo = hi - timedelta(days=2)
    instant = _first_instant_at_or_after(wall, lo, hi, tz)
    local = instant.astimezone(tz)
    shift = math.ceil((local.replace(tzinfo=None) - wall).total_seconds() / 60)
    return Occurrence(instant, slot, local, {"kind": "gap", "shift_minutes": shift})


def resolve_slot(slot: str, tz: str) -> Occurrence:
    """The occurrence an authored local slot (``YYYY-MM-DDTHH:MM``) maps to in zone ``tz``."""
    day, at = _parse_local(slot, "slot")
    return _resolve(day, at, zone(tz))


def local_slot(dt_utc: datetime, tz: str) -> str:
    """The wall clock reading of an instant in ``tz`` as ``YYYY-MM-DDTHH:MM``.

    This is what the clock on the wall says, which differs from an occurrence's authored
    ``slot`` when a gap moved it (a 02:30 slot that ran at 03:00 reads ``...T03:00`` here).
    """
    local = _aware(dt_utc, "dt_utc").astimezone(zone(tz))
    return _slot_text(local.date(), local.time())


# ── Schedules ─────────────────────────────────────────────────────────────────────────────


def _aware(value: datetime, name: str) -> datetime:
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise ValueError(f"{name} must be a timezone-aware datetime, got {value!r}")
    return value


def _parse_time(text: Any, where: str) -> time:
    try:
        hours, minutes = str(text).split(":")
        if not all(
            len(part) == 2 and part.isascii() and part.isdigit() for part in (hours, minutes)
        ):
            raise ValueError
        return time(int(hours), int(minutes))
    except ValueError:
        raise ValueError(f'{where}: expected a time "HH:MM", got {text!r}') from None


def _parse_local(text: Any, where: str) -> tuple[date, time]:
    try:
        day, clock = str(text).split("T")
        parsed = date.fromisoformat(day), _parse_time(clock, where)
    except ValueError:
        raise ValueError(
            f'{where}: expected a local time "YYYY-MM-DDTHH:MM", got {text!r}'
        ) from None
    # Resolved in a zone, a date at either end of Python's calendar overflows.
    if not EARLIEST.year <= parsed[0].year < LATEST.year:
        raise ValueError(f"{where}: {text!r} is outside the supported range ({SUPPORTED})")
    return parsed


def _weekday(name: Any, where: str) -> int:
    try:
        return _WEEKDAY_INDEX[name]
    except (KeyError, TypeError):
        raise ValueError(f"{where}: {name!r} is not one of {', '.join(WEEKDAYS)}") from None


def _clamp_ordinal(ordinal: int) -> int:
    return max(date.min.toordinal(), min(date.max.toordinal(), ordinal))


def _weekly_days(schedule: dict[str, Any], first: int, last: int) -> Iterator[date]:
    names = schedule.get("days")
    if not isinstance(names, list | tuple) or not names:
        raise ValueError(f"schedule.days: expected a non-empty list of weekdays, got {names!r}")
    weekdays = {_weekday(name, "schedule.days") for name in names}
    for ordinal in range(first, last + 1):
        # date.fromordinal(1) is a Monday, so (ordinal - 1) % 7 is the weekday index.
        if (ordinal - 1) % 7 in weekdays:
            yield date.fromordinal(ordinal)


def _nth_weekday(year: int, month: int, weekday: int, nth: int) -> date:
    if nth == -1:
        last = date(year, month, calendar.monthrange(year, month)[1])
        return last - timedelta(days=(last.weekday() - weekday) % 7)
    first = date(year, month, 1)
    return first + timedelta(days=(weekday - first.weekday()) % 7 + 7 * (nth - 1))


def _monthly_days(schedule: dict[str, Any], first: int, last: int) -> Iterator[date]:
    weekday = _weekday(schedule.get("weekday"), "schedule.weekday")
    nth = schedule.get("nth")
    if nth not in (1, 2, 3, 4, -1) or isinstance(nth, bool):
        raise ValueError(f"schedule.nth: expected 1, 2, 3, 4 or -1 (last), got {nth!r}")
    start, end = date.fromordinal(first), date.fromordinal(last)
    year, month = start.year, start.month
    while (year, month) <= (end.year, end.month):
        day = _nth_weekday(year, month, weekday, nth)
        if start <= day <= end:
            yield day
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)


def _slots(schedule: dict[str, Any], first: int, last: int) -> tuple[Iterator[date], time]:
    """The authored slot dates between two date ordinals (inclusive), in order, and the time."""
    if not isinstance(schedule, dict):
        raise ValueError(f"schedule: expected an object, got {schedule!r}")
    kind = schedule.get("kind")
    if kind == "manual":
        return iter(()), time()
    if kind == "once":
        day, at = _parse_local(schedule.get("at"), "schedule.at")
        return iter([day] if first <= day.toordinal() <= last else []), at
    if kind not in ("weekly", "monthly"):
        raise ValueError(f"schedule.kind: {kind!r} is not one of manual, once, weekly, monthly")
    at = _parse_time(schedule.get("time"), "schedule.time")
    if kind == "weekly":
        return _weekly_days(schedule, first, last), at
    return _monthly_days(schedule, first, last), at


def occurrences(
    schedule: dict[str, Any], tz: str, start: datetime, end: datetime
) -> list[Occurrence]:
    """Every occurrence of ``schedule`` in zone ``tz`` with ``start <= at < end``, ascending.

    ``start`` and ``end`` are aware datetimes (any offset). A ``manual`` schedule has none.
    Raises ValueError for an unknown zone, a naive bound or a malformed schedule.
    """
    tzinfo = zone(tz)
    start = _aware(start, "start").astimezone(UTC)
    end = _aware(end, "end").astimezone(UTC)
    if end <= start:
        return []
    first = _clamp_ordinal(start.astimezone(tzinfo).toordinal() - _MARGIN_DAYS)
    last = _clamp_ordinal(end.astimezone(tzinfo).toordinal() + _MARGIN_DAYS)
    days, at = _slots(schedule, first, last)
    found = []
    for day in days:
        occurrence = _resolve(day, at, tzinfo)
        if start <= occurrence.at < end:
            found.append(occurrence)
    # No sort: slots come out in order and the slot->instant mapping is monotonic.
    return found


def next_occurrence(schedule: dict[str, Any], tz: str, after: datetime) -> Occurrence | None:
    """The first occurrence of ``schedule`` in zone ``tz`` with ``at >= after``, or None.

    None for ``manual`` and for a ``once`` already past. The search is bounded (a weekly
    schedule recurs within a week, a monthly one within five weeks, plus DST margins).
    """
    tzinfo = zone(tz)
    after = _aware(after, "after").astimezone(UTC)
    first = _clamp_ordinal(after.astimezone(tzinfo).toordinal() - _MARGIN_DAYS)
    kind = schedule.get("kind") if isinstance(schedule, dict) else None
    # A once slot may lie any distance ahead, so its window is unbounded.
    span = {"once": date.max.toordinal(), "monthly": _NEXT_MONTHLY_DAYS}.get(
        kind if isinstance(kind, str) else "", _NEXT_WEEKLY_DAYS
    )
    days, at = _slots(schedule, first, _clamp_ordinal(first + span))
    for day in days:
        occurrence = _resolve(day, at, tzinfo)
        if occurrence.at >= after:
            return occurrence
    return None
