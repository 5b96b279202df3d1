"""The spec's countdown ladder: ``countdown`` on the first phase, checked when it is saved.

::

    "countdown": {"before": ["30m", "15m", "5m", "1m"], "legs": ["core.discord"],
                  "message": "The Frenzy starts in {remaining}"}

:func:`validate_countdown` is called by :func:`pageant.events.authoring.validator.validate`
for every phase; what a run makes of it is :mod:`pageant.runs.countdown`. Only the first
phase may carry one: a rung is placed before a known start, and a later phase's start is
decided by the steps and gates before it as the run goes.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pageant.gates.durations import format_after, parse_duration
from pageant.runs.countdown import PLACEHOLDERS
from pageant.support.refusals import an_object, bounded_list, refuse_unknown, show

if TYPE_CHECKING:
    from pageant.plugins.registry import Registry

COUNTDOWN_KEYS = ("before", "legs", "message")
#: A ladder of more rungs than this is a chat channel spammed, not counted down.
MAX_RUNGS = 10
MAX_LEGS = 5
#: The furthest ahead a rung may be: inside the schedule's horizon (14 days by default), so
#: a scheduled run exists when its first rung is due.
MIN_BEFORE_SECONDS = 60
MAX_BEFORE_SECONDS = 7 * 86_400
MAX_MESSAGE = 2000


def validate_countdown(
    raw: Any, path: str, registry: Registry, errors: list[str], *, index: int, key: str | None
) -> dict[str, Any] | None:
    """A phase's countdown, normalised (``before`` in canonical spelling, longest first);
    ``None`` when absent or refused, with each problem appended to ``errors`` prefixed by
    ``path`` (``spec.phases[0].countdown.before[1]: ...``). ``index`` and ``key`` are the
    phase's place and key."""
    if raw is None:
        return None
    if index != 0:
        name = f'"{key}"' if key else f"spec.phases[{index}]"
        errors.append(
            f"{path}: only the first phase may carry a countdown; phase {name} begins when the "
            "phases before it end, which is not known in advance"
        )
        return None
    if (raw := an_object(raw, path, errors, "with before, legs and message")) is None:
        return None
    problems: list[str] = []
    refuse_unknown(raw, COUNTDOWN_KEYS, path, problems)
    before = _before(raw.get("before"), f"{path}.before", problems)
    legs = validate_legs(raw.get("legs"), f"{path}.legs", registry, problems)
    message = validate_message(raw.get("message"), f"{path}.message", problems)
    errors.extend(problems)
    if problems:
        return None
    return {"before": before, "legs": legs, "message": message}


def _before(raw: Any, path: str, errors: list[str]) -> list[str]:
    what = 'expected a list of durations such as ["30m", "5m"]'
    raw = bounded_list(raw, path, errors, what, MAX_RUNGS, "durations") or []
    seen: dict[int, int] = {}
    for i, text in enumerate(raw):
        seconds = _duration(text)
        if seconds is None:
            errors.append(
                f'{path}[{i}]: expected a duration such as "15m" (a whole number of s, m, h or '
                f"d) from {format_after(MIN_BEFORE_SECONDS)} to "
                f"{format_after(MAX_BEFORE_SECONDS)}; got {show(text)}"
            )
        elif seconds in seen:
            errors.append(f"{path}[{i}]: {show(text)} is the same time as {path}[{seen[seconds]}]")
        else:
            seen[seconds] = i
    return [format_after(seconds) for seconds in sorted(seen, reverse=True)]


def _duration(text: Any) -> int | None:
    return parse_duration(text, least=MIN_BEFORE_SECONDS, most=MAX_BEFORE_SECONDS)


def validate_legs(raw: Any, path: str, registry: Registry, errors: list[str]) -> list[str]:
    """A list of 1 to :data:`MAX_LEGS` announce legs, each registered and named once (a
    countdown's, a gate's milestones'); each problem goes to ``errors`` with its place."""
    what = 'expected a list of announce legs such as ["core.log"]'
    raw = bounded_list(raw, path, errors, what, MAX_LEGS, "legs") or []
    legs: list[str] = []
    for i, leg in enumerate(raw):
        if not isinstance(leg, str) or leg not in registry.legs:
            known = ", ".join(sorted(registry.legs)) or "none"
            errors.append(
                f"{path}[{i}]: {show(leg)} is not an announce leg; expected one of {known}"
            )
        elif leg in legs:
            errors.append(f"{path}[{i}]: {show(leg)} is named twice")
        else:
            legs.append(leg)
    return legs


def validate_message(
    raw: Any, path: str, errors: list[str], placeholders: Mapping[str, str] = PLACEHOLDERS
) -> str:
    """The text to announce, at most :data:`MAX_MESSAGE` characters, whose only
    placeholders are bare ``placeholders`` (a countdown's ``{remaining}`` by default)."""
    if not isinstance(raw, str) or not raw.strip():
        errors.append(f"{path}: expected the text to announce; got {show(raw)}")
        return ""
    if len(raw) > MAX_MESSAGE:
        errors.append(f"{path}: at most {MAX_MESSAGE} characters; got {len(raw)}")
        return ""
    try:
        pieces = list(string.Formatter().parse(raw))
    except ValueError as exc:
        errors.append(f"{path}: {exc} (write {{{{ or }}}} for a brace)")
        return ""
    for _literal, name, spec, conversion in pieces:
        if name is None:
            continue
        if conversion or spec:
            errors.append(
                f"{path}: {{{name}}} has a conversion or a format; write a bare {{{name}}}"
            )
        elif name not in placeholders:
            expected = ", ".join("{" + known + "}" for known in placeholders)
            errors.append(f"{path}: {{{name}}} is not a placeholder; expected {expected}")
    return raw
