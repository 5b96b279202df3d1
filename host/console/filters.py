"""Template filters: times as people read them, and DST notes in words."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import jinja2
from markupsafe import Markup, escape

from pageant.console.timeline import duration, span_words, zone_of
from pageant.runs import sentences
from pageant.schedules.recurrence import zone

_UTC = zone("UTC")


def when(value: datetime | None) -> str:
    """An instant as ``2027-03-01 12:00:05 UTC`` (empty for None)."""
    if value is None:
        return ""
    return value.astimezone(zone("UTC")).strftime("%Y-%m-%d %H:%M:%S UTC")


def local(value: datetime | None, tz: str) -> str:
    """An instant on the wall clock of ``tz``: ``Fri 2027-03-05 20:00 CET``."""
    if value is None:
        return ""
    try:
        return value.astimezone(zone(tz)).strftime("%a %Y-%m-%d %H:%M %Z")
    except ValueError:
        return when(value)


def at(
    value: datetime | None, tz: str = "UTC", *, seconds: bool = True, clock: bool = False
) -> Markup:
    """An instant as a ``<time>`` element on the page's one clock (``tz``): the wall clock
    as its text, the whole date and time on that clock in its title (shown on hover), and
    the instant in ``datetime`` for machines. ``clock``: the time of day alone
    (``20:01:07``, or ``20:01`` without ``seconds``), for a list of lines from one day."""
    if value is None:
        return Markup("")
    utc = value.astimezone(_UTC)
    try:
        there = value.astimezone(zone_of(tz))
    except ValueError:
        there = utc
    if clock:
        text = there.strftime("%H:%M:%S" if seconds else "%H:%M")
    else:
        text = there.strftime("%a %Y-%m-%d %H:%M:%S %Z" if seconds else "%a %Y-%m-%d %H:%M %Z")
    stamp = utc.strftime("%Y-%m-%dT%H:%M:%S")
    title = there.strftime("%Y-%m-%d %H:%M:%S %Z")
    # strftime's digits, day names and zone abbreviations need no escaping; the zone's name
    # is checked against the IANA list above, and escaped all the same.
    return Markup(
        f'<time datetime="{stamp}Z" title="{title}" data-zone="{escape(tz)}"'
        f"{' data-clock' if clock else ''}>{text}</time>"
    )


def parts(values: list[Any], tz: str = "UTC") -> Markup:
    """A sentence's parts (:mod:`pageant.runs.sentences`) for a page: its words escaped and
    each instant a ``<time>`` element on the page's clock (``tz``)."""
    return Markup("").join(
        at(part, tz, clock=True) if isinstance(part, datetime) else escape(part) for part in values
    )


def waiting(found: Any, tz: str = "UTC") -> Markup:
    """A run's ``waiting_on`` as its sentence on the page's clock (empty for None)."""
    return parts(sentences.waiting(found if isinstance(found, dict) else None), tz)


def dst_note(adjusted: Any) -> str:
    """What a DST rule did to an occurrence, in words (empty when nothing)."""
    if not isinstance(adjusted, dict):
        return ""
    if adjusted.get("kind") == "gap":
        return f"DST: the clocks skip this time; runs {adjusted.get('shift_minutes')} min later"
    if adjusted.get("kind") == "fold":
        return "DST: this time happens twice; runs the first time"
    return ""


def install(env: jinja2.Environment) -> None:
    env.filters["when"] = when
    env.filters["local"] = local
    env.filters["at"] = at
    env.filters["dst_note"] = dst_note
    env.filters["waiting"] = waiting
    env.filters["duration"] = duration
    env.filters["span"] = span_words
