"""Stagger: a fan-out's runs spread over a window instead of all starting at one instant,
or each at the same local time in its own zone.

A schedule that fans out across servers (``schedule.params``) makes one run per param set
at each occurrence. With ``"stagger": "5m"`` each set's run starts later than the occurrence
by its own offset inside that window. The offset is a fraction of the window taken from a
hash of the set's scope (:func:`pageant.runs.params.scope_of`), never from the order of the
sets, the clock or the host: the same server starts at the same offset every week, on every
host, and after any re-expansion, so the rows the reconciliation matches are the rows it
made. An occurrence keeps its authored slot as its identity; only its instant moves.

With ``"stagger": "local"`` each set's occurrences are the schedule's wall times read in the
set's own zone instead of the event's: 20:00 on a Berlin server and 20:00 on a Tokyo one. The
zone is the one the set's option source gave its value when the spec was saved
(:mod:`pageant.events.zones`), kept in the spec as ``schedule.zones`` (scope -> zone), because
the reconciliation runs inside a transaction and never asks a plugin. A set without a zone
there keeps the event's. The recurrence's rules (a slot in a gap moves forward, a repeated
hour takes its first instant) apply in each set's zone.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import replace
from datetime import timedelta
from typing import Any

from pageant.gates.durations import parse_duration
from pageant.schedules.recurrence import Occurrence

#: The widest window a stagger may spread runs over: a day. Wider would carry one
#: occurrence's runs past the next day's occurrence of a daily rhythm.
MAX_STAGGER_SECONDS = 86_400
MIN_STAGGER_SECONDS = 1


def parse_stagger(text: Any) -> int | None:
    """``"5m"`` -> 300 (the ``after`` gates' grammar: one whole number and one unit);
    ``None`` for anything outside the grammar or the bounds."""
    return parse_duration(text, least=MIN_STAGGER_SECONDS, most=MAX_STAGGER_SECONDS)


#: The stagger that starts each set at the schedule's wall time in its own zone.
LOCAL = "local"


def is_local(schedule: Any) -> bool:
    """Whether a (validated) schedule starts each set at its own local time."""
    return isinstance(schedule, Mapping) and schedule.get("stagger") == LOCAL


def zone_of(schedule: Any, scope: str, event_zone: str) -> str:
    """The zone the occurrences of ``scope`` are read in: under ``"local"``, the zone saved
    for it in ``schedule.zones``; otherwise, or without one, the event's."""
    if not is_local(schedule):
        return event_zone
    zones = schedule.get("zones")
    found = zones.get(scope) if isinstance(zones, Mapping) else None
    return found if isinstance(found, str) and found else event_zone


def window_of(schedule: Any) -> int:
    """The stagger window of a (validated) schedule in seconds; 0 for none."""
    if not isinstance(schedule, dict):
        return 0
    return parse_stagger(schedule.get("stagger")) or 0


def offset(scope: str, window_seconds: int) -> timedelta:
    """Where in a window of ``window_seconds`` the run of ``scope`` starts: whole seconds in
    ``[0, window)``, from the first eight bytes of the SHA-256 of the scope."""
    if window_seconds <= 0:
        return timedelta(0)
    fraction = int.from_bytes(hashlib.sha256(scope.encode()).digest()[:8], "big") / 2**64
    return timedelta(seconds=int(fraction * window_seconds))


def shifted(occurrence: Occurrence, by: timedelta) -> Occurrence:
    """``occurrence`` run ``by`` later: the same slot, a later instant and local time."""
    if not by:
        return occurrence
    at = occurrence.at + by
    return replace(occurrence, at=at, local=at.astimezone(occurrence.local.tzinfo))
