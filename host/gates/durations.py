"""The duration grammar of an ``after`` gate: ``"30m"``, ``"2h"``, ``"1d"``.

The spec validator (:mod:`pageant.events.authoring.advance`) checks a duration through
:func:`parse_after`, the gates read one through it every tick, and the console writes one
through :func:`format_after`, so no reader grows an opinion of its own.
"""

from __future__ import annotations

import re
from typing import Any

MIN_AFTER_SECONDS = 1
#: Longer than any event this is for; a ten-year gate is a typo that would hold a run, and
#: its concurrency key, for ever.
MAX_AFTER_SECONDS = 30 * 86_400
#: One whole number and one unit, nothing else: an operator proofreads a duration, and a
#: grammar with two spellings of ninety minutes (``1h30m``) is one they must parse.
AFTER = re.compile(r"([0-9]{1,6})([smhd])")
AFTER_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}


def parse_duration(text: Any, *, least: int, most: int) -> int | None:
    """A duration in the ``after`` grammar (one whole number and one unit of s, m, h or d)
    in seconds, when it lies from ``least`` to ``most``; ``None`` otherwise. The one reader
    of the grammar: a gate's ``after``, a stagger, a countdown's rungs, a catch-up's window."""
    if not isinstance(text, str):
        return None
    match = AFTER.fullmatch(text)
    if match is None:
        return None
    seconds = int(match.group(1)) * AFTER_UNIT_SECONDS[match.group(2)]
    return seconds if least <= seconds <= most else None


def parse_after(text: Any) -> int | None:
    """``"30m"`` -> 1800; ``None`` for anything outside the grammar or the bounds."""
    return parse_duration(text, least=MIN_AFTER_SECONDS, most=MAX_AFTER_SECONDS)


def format_after(seconds: int) -> str:
    """Seconds in the largest unit that is exact: 7200 -> ``"2h"``, 90 -> ``"90s"``."""
    for unit in ("d", "h", "m"):
        size = AFTER_UNIT_SECONDS[unit]
        if seconds > 0 and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
