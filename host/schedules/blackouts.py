"""Blackouts: named, shared calendars of periods during which no subscribed event may run
("Tournament night", every Friday 18:00-23:00 Europe/Berlin; "Maintenance", 2026-12-24 all
day).

Pure arithmetic, no database. A blackout's periods are wall-clock times in the blackout's own
zone, read with the rules :mod:`pageant.schedules.recurrence` reads a schedule's slots by (a
wall time in a spring-forward gap is the first instant after it, one in a repeated hour the
first of the two), so a period edge and an occurrence authored for the same wall time agree.
A period is half-open: an occurrence at its end runs.

Three kinds of period:

- ``{"kind": "weekly", "days": ["friday"], "start": "18:00", "end": "23:00"}``: every named
  weekday; an ``end`` at or before ``start`` runs past midnight into the next day;
- ``{"kind": "dates", "start": "2026-12-24", "end": "2026-12-26"}``: whole local days, both
  inclusive (``end`` may be left out for one day);
- ``{"kind": "range", "start": "2026-12-24T10:00", "end": "2026-12-26T08:00"}``: from one
  local date and time to another.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from pageant.schedules import recurrence
from pageant.support.refusals import bounded_list
from pageant.support.timefmt import EARLIEST, LATEST, SUPPORTED

#: The kinds of period, in the order the docs name them.
PERIOD_KINDS = ("weekly", "dates", "range")
#: Each kind's keys besides ``kind``; ``dates`` may leave out ``end``.
PERIOD_KEYS: dict[str, tuple[str, ...]] = {
    "weekly": ("days", "start", "end"),
    "dates": ("start", "end"),
    "range": ("start", "end"),
}
#: More than any calendar needs; a bound, so one blackout stays cheap to read every tick.
MAX_PERIODS = 100
MAX_NAME = 200
#: The longest a dated period may run: a year (a longer one is a typo that would black out
#: an event for ever).
MAX_PERIOD_DAYS = 366

_TIME = re.compile(r"(?:[01][0-9]|2[0-3]):[0-5][0-9]")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_LOCAL = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T(?:[01][0-9]|2[0-3]):[0-5][0-9]")
# A weekly window lasts under a day and a gap or fold moves an edge by at most a day, so
# the local days this far either side of an instant hold every window that covers it.
_MARGIN_DAYS = 2


@dataclass(frozen=True)
class Calendar:
    """A blackout as the schedule reads it: its slug, name, zone and (checked) periods."""

    slug: str
    name: str
    timezone: str
    periods: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class Window:
    """One period's stretch of time, ``start <= t < end`` (aware UTC instants)."""

    start: datetime
    end: datetime
    name: str


# ── checking what an author wrote ─────────────────────────────────────────────────────────


def _show(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else repr(value)


def check_periods(raw: Any, path: str, errors: list[str]) -> list[dict[str, Any]]:
    """The normalised periods, each problem added to ``errors`` with its path
    (``body.periods[1].end: ...``)."""
    what = "expected a non-empty list of periods"
    raw = bounded_list(raw, path, errors, what, MAX_PERIODS, "periods", "this has", quote=False)
    return [
        period
        for i, item in enumerate(raw or [])
        if (period := _check_period(item, f"{path}[{i}]", errors)) is not None
    ]


def _check_period(raw: Any, path: str, errors: list[str]) -> dict[str, Any] | None:
    if not isinstance(raw, dict):
        errors.append(f"{path}: expected an object with a kind")
        return None
    kind = raw.get("kind")
    if kind not in PERIOD_KINDS:
        errors.append(f"{path}.kind: expected one of {', '.join(PERIOD_KINDS)}; got {_show(kind)}")
        return None
    allowed = ("kind", *PERIOD_KEYS[kind])
    unknown = sorted(str(key) for key in raw if key not in allowed)
    for key in unknown:
        errors.append(f'{path}.{key}: not a field of a "{kind}" period')
    before = len(errors)
    if kind == "weekly":
        period = _check_weekly(raw, path, errors)
    elif kind == "dates":
        period = _check_dates(raw, path, errors)
    else:
        period = _check_range(raw, path, errors)
    return period if len(errors) == before and not unknown else None


def _check_weekly(raw: dict[str, Any], path: str, errors: list[str]) -> dict[str, Any]:
    days = raw.get("days")
    named: list[str] = []
    if not isinstance(days, list) or not days:
        errors.append(f"{path}.days: expected a non-empty list of weekday names")
    else:
        for i, day in enumerate(days):
            name = day.lower() if isinstance(day, str) else None
            if name in recurrence.WEEKDAYS:
                named.append(name)
            else:
                errors.append(
                    f"{path}.days[{i}]: {_show(day)} is not a weekday; expected one of "
                    f"{', '.join(recurrence.WEEKDAYS)}"
                )
    for key in ("start", "end"):
        value = raw.get(key)
        if not (isinstance(value, str) and _TIME.fullmatch(value)):
            errors.append(f'{path}.{key}: expected a 24-hour time as "HH:MM"; got {_show(value)}')
    if raw.get("start") == raw.get("end") and isinstance(raw.get("start"), str):
        errors.append(f"{path}.end: must differ from start (a period of no time)")
    days_in_order = [day for day in recurrence.WEEKDAYS if day in named]
    return {
        "kind": "weekly",
        "days": days_in_order,
        "start": raw.get("start"),
        "end": raw.get("end"),
    }


def _date(value: Any, where: str, errors: list[str]) -> date | None:
    if not (isinstance(value, str) and _DATE.fullmatch(value)):
        errors.append(f'{where}: expected a date as "YYYY-MM-DD"; got {_show(value)}')
        return None
    try:
        day = date.fromisoformat(value)
    except ValueError:
        errors.append(f"{where}: {_show(value)} is not a real date")
        return None
    if not EARLIEST.year <= day.year < LATEST.year:
        errors.append(f"{where}: {_show(value)} is outside the supported range ({SUPPORTED})")
        return None
    return day


def _check_dates(raw: dict[str, Any], path: str, errors: list[str]) -> dict[str, Any]:
    first = _date(raw.get("start"), f"{path}.start", errors)
    last = first if raw.get("end") is None else _date(raw.get("end"), f"{path}.end", errors)
    if first is not None and last is not None:
        if last < first:
            errors.append(f"{path}.end: {_show(raw.get('end'))} is before the start")
        elif (last - first).days >= MAX_PERIOD_DAYS:
            errors.append(f"{path}.end: a period may last at most {MAX_PERIOD_DAYS} days")
    out = {"kind": "dates", "start": raw.get("start")}
    return {**out, "end": raw.get("end") if raw.get("end") is not None else raw.get("start")}


def _local(value: Any, where: str, errors: list[str]) -> datetime | None:
    if not (isinstance(value, str) and _LOCAL.fullmatch(value)):
        errors.append(
            f'{where}: expected a local date and time as "YYYY-MM-DDTHH:MM"; got {_show(value)}'
        )
        return None
    day = _date(value[:10], where, errors)
    if day is None:
        return None
    return datetime.fromisoformat(value)


def _check_range(raw: dict[str, Any], path: str, errors: list[str]) -> dict[str, Any]:
    start = _local(raw.get("start"), f"{path}.start", errors)
    end = _local(raw.get("end"), f"{path}.end", errors)
    if start is not None and end is not None:
        if end <= start:
            errors.append(f"{path}.end: {_show(raw.get('end'))} is not after the start")
        elif (end - start).days >= MAX_PERIOD_DAYS:
            errors.append(f"{path}.end: a period may last at most {MAX_PERIOD_DAYS} days")
    return {"kind": "range", "start": raw.get("start"), "end": raw.get("end")}


# ── periods into instants ─────────────────────────────────────────────────────────────────


def _instant(day: date, at: str, tz: str) -> datetime:
    return recurrence.resolve_slot(f"{day.isoformat()}T{at}", tz).at


def _period_windows(
    period: dict[str, Any], tz: str, name: str, first: date, last: date
) -> Iterator[Window]:
    """The windows of one period whose local start day lies in ``first..last`` (a dated
    period: its one window, whatever the days)."""
    kind = period["kind"]
    if kind == "dates":
        start, end = date.fromisoformat(period["start"]), date.fromisoformat(period["end"])
        yield Window(
            _instant(start, "00:00", tz), _instant(end + timedelta(days=1), "00:00", tz), name
        )
        return
    if kind == "range":
        start_slot, end_slot = period["start"], period["end"]
        yield Window(
            recurrence.resolve_slot(start_slot, tz).at,
            recurrence.resolve_slot(end_slot, tz).at,
            name,
        )
        return
    weekdays = {recurrence.WEEKDAYS.index(day) for day in period["days"]}
    overnight = period["end"] <= period["start"]
    day = first
    while day <= last:
        if day.weekday() in weekdays:
            end_day = day + timedelta(days=1) if overnight else day
            yield Window(
                _instant(day, period["start"], tz), _instant(end_day, period["end"], tz), name
            )
        day += timedelta(days=1)


def windows(calendar: Calendar, start: datetime, end: datetime) -> list[Window]:
    """Every window of ``calendar`` that overlaps ``start <= t < end``, in start order."""
    tz = recurrence.zone(calendar.timezone)
    first = (start.astimezone(tz) - timedelta(days=_MARGIN_DAYS)).date()
    last = (end.astimezone(tz) + timedelta(days=_MARGIN_DAYS)).date()
    found = [
        window
        for period in calendar.periods
        for window in _period_windows(period, calendar.timezone, calendar.name, first, last)
        if window.start < end and window.end > start
    ]
    return sorted(found, key=lambda window: (window.start, window.end))


def covering(calendars: Iterable[Calendar], instant: datetime) -> Calendar | None:
    """The first of ``calendars`` (in the order given) with a window holding ``instant``, or
    None: what an occurrence at that instant is blacked out by."""
    for calendar in calendars:
        if windows(calendar, instant, instant + timedelta(microseconds=1)):
            return calendar
    return None


def subscribed(spec: Any) -> list[str]:
    """The blackout slugs a spec subscribes to (its top-level ``blackouts``), in its order."""
    slugs = spec.get("blackouts") if isinstance(spec, dict) else None
    return [slug for slug in slugs if isinstance(slug, str)] if isinstance(slugs, list) else []


def in_order(calendars: Sequence[Calendar], slugs: Sequence[str]) -> list[Calendar]:
    """``calendars`` in the order a spec names their slugs (the first that covers an
    occurrence names it)."""
    by_slug = {calendar.slug: calendar for calendar in calendars}
    return [by_slug[slug] for slug in slugs if slug in by_slug]
