"""A spec's ``blackouts`` and its schedule's ``stagger``: the collision policies an event
opts into (docs/schedules.md, "Blackouts" and "Stagger").

Shape only: whether each slug names a blackout is a question for the database, asked where
the spec is saved (:func:`pageant.events.blackouts.unknown_blackouts`).
"""

from __future__ import annotations

from typing import Any

from pageant.events.authoring.messages import show
from pageant.events.slugs import MAX_SLUG, SLUG_RE
from pageant.schedules.stagger import parse_stagger

#: More blackouts than any event needs; a bound, so an occurrence's check stays cheap.
MAX_BLACKOUTS = 20


def validate_blackouts(raw: Any, path: str, errors: list[str]) -> list[str]:
    """The slugs of the blackouts a spec subscribes to, in its order, duplicates dropped."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        errors.append(f"{path}: expected a list of blackout slugs; got {show(raw)}")
        return []
    if len(raw) > MAX_BLACKOUTS:
        errors.append(f"{path}: at most {MAX_BLACKOUTS} blackouts; this has {len(raw)}")
        return []
    slugs: list[str] = []
    for i, slug in enumerate(raw):
        if not isinstance(slug, str) or len(slug) > MAX_SLUG or not SLUG_RE.match(slug):
            errors.append(f"{path}[{i}]: {show(slug)} is not a blackout slug")
        elif slug not in slugs:
            slugs.append(slug)
    return slugs


def validate_stagger(
    raw_schedule: Any, fan_out: list[dict[str, Any]] | dict[str, Any] | None, errors: list[str]
) -> str | None:
    """A schedule's ``stagger`` (``"5m"``), or None when it has none. A stagger spreads a
    fan-out's runs (listed sets, or a ``for_each`` over an option source's values), so a
    schedule without ``params`` may not carry one."""
    if not isinstance(raw_schedule, dict) or raw_schedule.get("stagger") is None:
        return None
    path = "spec.schedule.stagger"
    text = raw_schedule["stagger"]
    if parse_stagger(text) is None:
        errors.append(
            f'{path}: expected a duration from "1s" to "1d" (one whole number and one unit '
            f'of s, m, h or d), such as "5m"; got {show(text)}'
        )
        return None
    if not fan_out:
        errors.append(
            f"{path}: a stagger spreads the runs of a fan-out; this schedule has no params "
            "(spec.schedule.params)"
        )
        return None
    return str(text)
