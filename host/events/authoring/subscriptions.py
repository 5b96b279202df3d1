"""A spec's ``blackouts`` and its schedule's ``stagger`` (with the ``zones`` a ``"local"``
stagger reads): the collision policies an event opts into (docs/schedules.md, "Blackouts"
and "Stagger").

Shape only: whether each slug names a blackout is a question for the database, asked where
the spec is saved (:func:`pageant.events.blackouts.unknown_blackouts`).
"""

from __future__ import annotations

from typing import Any

from pageant.events.slugs import MAX_SLUG, SLUG_RE
from pageant.runs.params import scope_of
from pageant.schedules.recurrence import is_zone
from pageant.schedules.stagger import LOCAL, parse_stagger
from pageant.support.refusals import bounded_list, show

#: More blackouts than any event needs; a bound, so an occurrence's check stays cheap.
MAX_BLACKOUTS = 20


def validate_blackouts(raw: Any, path: str, errors: list[str]) -> list[str]:
    """The slugs of the blackouts a spec subscribes to, in its order, duplicates dropped."""
    what = "expected a list of blackout slugs"
    raw = bounded_list(raw, path, errors, what, MAX_BLACKOUTS, "blackouts", "this has", empty=True)
    slugs: list[str] = []
    for i, slug in enumerate(raw or []):
        if not isinstance(slug, str) or len(slug) > MAX_SLUG or not SLUG_RE.match(slug):
            errors.append(f"{path}[{i}]: {show(slug)} is not a blackout slug")
        elif slug not in slugs:
            slugs.append(slug)
    return slugs


def validate_stagger(
    raw_schedule: Any,
    fan_out: list[dict[str, Any]] | dict[str, Any] | None,
    errors: list[str],
    *,
    declared: list[dict[str, Any]] | None = None,
) -> str | None:
    """A schedule's ``stagger`` (``"5m"`` or ``"local"``), or None when it has none. A
    stagger spreads a fan-out's runs (listed sets, or a ``for_each`` over an option source's
    values), so a schedule without ``params`` may not carry one; ``"local"`` also needs
    listed sets whose param takes its values from an option source (in ``declared``, the
    spec's params), which is where a set's zone is read from at save."""
    if not isinstance(raw_schedule, dict) or raw_schedule.get("stagger") is None:
        return None
    path = "spec.schedule.stagger"
    text = raw_schedule["stagger"]
    if text != LOCAL and parse_stagger(text) is None:
        errors.append(
            f'{path}: expected a duration from "1s" to "1d" (one whole number and one unit '
            f'of s, m, h or d), such as "5m", or "local"; got {show(text)}'
        )
        return None
    if not fan_out:
        errors.append(
            f"{path}: a stagger spreads the runs of a fan-out; this schedule has no params "
            "(spec.schedule.params)"
        )
        return None
    if text == LOCAL and isinstance(fan_out, dict):
        errors.append(
            f'{path}: "local" reads each server\'s zone when the event is saved, from its listed '
            "param sets; a fan-out over an option source (for_each) makes its sets only when "
            'expanded: list the sets, or stagger by a duration such as "5m"'
        )
        return None
    if (
        text == LOCAL
        and not isinstance(fan_out, dict)
        and not zoned_params(fan_out, declared or [])
    ):
        errors.append(
            f'{path}: "local" starts each param set at the schedule\'s time in its own zone, '
            "read from the option source of a param the set names; no param of "
            "spec.schedule.params takes its values from an option source"
        )
        return None
    return str(text)


def zoned_params(fan_out: list[dict[str, Any]], declared: list[dict[str, Any]]) -> list[str]:
    """The params a fan-out's sets name that take their values from an option source, in
    the spec's order: where ``"stagger": "local"`` reads a set's zone."""
    named = {name for values in fan_out for name in values}
    return [
        param["name"]
        for param in declared
        if param.get("name") in named and param.get("option_source")
    ]


def validate_zones(
    raw_schedule: Any, schedule: dict[str, Any], errors: list[str]
) -> dict[str, str] | None:
    """A schedule's ``zones`` (scope -> IANA zone), kept only under ``"stagger": "local"``
    and only for the scopes its sets make. The host writes them at save, from the option
    sources (:mod:`pageant.events.zones`); they are checked here so a publish re-reading the
    working copy keeps them, and so a hand-written one cannot carry a zone that is not one."""
    raw = raw_schedule.get("zones") if isinstance(raw_schedule, dict) else None
    if raw is None or schedule.get("stagger") != LOCAL:
        return None
    path = "spec.schedule.zones"
    if not isinstance(raw, dict):
        errors.append(f"{path}: expected an object of scope -> time zone; got {show(raw)}")
        return None
    scopes = {scope_of(values) for values in schedule.get("params") or []}
    zones: dict[str, str] = {}
    for scope, name in raw.items():
        if not isinstance(name, str) or not is_zone(name):
            errors.append(f"{path}.{scope}: {show(name)} is not an IANA time zone")
        elif scope in scopes:
            zones[scope] = name
    return zones or None
