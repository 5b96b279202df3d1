"""The spec's gates: the ``advance`` a phase may carry, and what its duration means.

Three shapes, exactly one per gate::

    {"after": "30m"}
    {"on": "wisps.caught", "where": {...}, "count": 2}
    {"reading": "shard.players_online", "params": {...}, "at_least": 4, "wait": "30m",
     "else": "advance"}

An ``on`` gate may also be shown to players (``"public": true``, and the ``label`` they
read): :mod:`pageant.events.authoring.progress`.

:func:`validate_advance` is called by :func:`pageant.events.authoring.validator.validate` for every
phase; the engine reads a duration through :func:`~pageant.gates.durations.parse_after` and the
console writes one through :func:`~pageant.gates.durations.format_after`, so neither grows an
opinion of its own. There is deliberately no
timeout: a gate that never opens is held and made visible (the run's health goes
``stalled``), never auto-advanced.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pageant.events.authoring.milestones import validate_milestones
from pageant.events.authoring.progress import validate_public

# The duration grammar is the gates' (a phase gate reads it every tick); its names stay
# importable from here, where the spec validator uses them.
from pageant.gates.durations import (  # noqa: F401 - re-exported for the spec validator
    AFTER,
    AFTER_UNIT_SECONDS,
    MAX_AFTER_SECONDS,
    MIN_AFTER_SECONDS,
    format_after,
    parse_after,
)
from pageant.support.refusals import an_object, refuse_unknown, show

if TYPE_CHECKING:
    from pageant.plugins.registry import Registry

ADVANCE_KINDS = ("after", "on", "reading")
AFTER_GATE_KEYS = ("after",)
READING_GATE_KEYS = ("reading", "params", "at_least", "wait", "else")
#: ``dormant`` is output-only: accepted back, then recomputed against the registry.
ON_GATE_KEYS = ("on", "where", "count", "dormant", "public", "label", "milestones")

#: "count: 100000" is a phase that never advances written as one that eventually does.
MAX_ADVANCE_COUNT = 1000


def validate_advance(
    raw: Any,
    path: str,
    registry: Registry,
    errors: list[str],
    *,
    params: Mapping[str, str] | None = None,
) -> dict[str, Any] | None:
    """A phase's gate, normalised; ``None`` for no gate (or a refused one, with its errors
    appended to ``errors``, each prefixed by ``path``).

    ``after`` is stored in its canonical spelling (``"120m"`` -> ``"2h"``). An ``on`` gate
    always has ``where`` (null: every firing counts), ``count`` (default 1) and
    ``dormant``: true when no plugin registers its trigger, in which case ``where`` is kept
    as written, unchecked, until the trigger is registered again.
    """
    if raw is None:
        return None
    if (raw := an_object(raw, path, errors, 'with "after" or "on"')) is None:
        return None
    kinds = [kind for kind in ADVANCE_KINDS if kind in raw]
    if len(kinds) != 1:
        errors.append(f'{path}: expected exactly one of "after", "on" or "reading"')
        return None
    if kinds[0] == "reading":
        # Imported here: the quorum's grammar is shared with start_when, in its own module.
        from pageant.events.authoring.start_when import validate_quorum
        from pageant.gates.phase import READING_ELSE

        extra = refuse_unknown(raw, READING_GATE_KEYS, path, errors, ' for a "reading" gate')
        gate = validate_quorum(
            raw, path, registry, errors, choices=READING_ELSE, types=params or {}
        )
        return None if extra else gate
    if kinds[0] == "after":
        extra = refuse_unknown(raw, AFTER_GATE_KEYS, path, errors, ' for an "after" gate')
        seconds = parse_after(raw["after"])
        if isinstance(raw["after"], str) and not raw["after"].strip():
            errors.append(
                f"{path}.after: give a duration such as 10m (a whole number of s, m, h or d); "
                "it is blank"
            )
            return None
        if seconds is None:
            errors.append(
                f'{path}.after: expected a duration such as "30m" (a whole number of s, m, h '
                f"or d) from {format_after(MIN_AFTER_SECONDS)} to "
                f"{format_after(MAX_AFTER_SECONDS)}; got {show(raw['after'])}"
            )
            return None
        # Only the canonical spelling is stored; the engine derives the seconds again
        # through parse_after rather than reading a second field that could disagree.
        return None if extra else {"after": format_after(seconds)}
    refuse_unknown(raw, ON_GATE_KEYS, path, errors, ' for an "on" gate')
    trigger_id = raw["on"]
    if not isinstance(trigger_id, str) or not trigger_id:
        errors.append(f"{path}.on: expected a trigger id; got {show(trigger_id)}")
        return None
    shown = validate_public(raw, path, errors)
    count = raw.get("count")
    if count is None:
        count = 1
    elif (
        isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_ADVANCE_COUNT
    ):
        errors.append(
            f"{path}.count: expected a whole number from 1 to {MAX_ADVANCE_COUNT}; "
            f"got {show(count)}"
        )
        count = 1
    milestones = validate_milestones(
        raw.get("milestones"),
        f"{path}.milestones",
        registry,
        errors,
        public=bool(shown),
        count=count,
    )
    if milestones is not None:
        shown = {**shown, "milestones": milestones}
    where = raw.get("where")
    trigger = registry.triggers.get(trigger_id)
    if trigger is None:
        # Dormant, like a step's unregistered action. ``where`` is kept as written: there is
        # nothing to check it against, and dropping it would delete the author's predicate
        # the moment a plugin was uninstalled.
        return {"on": trigger_id, "where": where, "count": count, "dormant": True, **shown}
    # Imported here: the grammar is its own module, needed only once a gate names a trigger.
    from pageant.gates.conditions import validate_condition

    where, problems = validate_condition(trigger, where, f"{path}.where", params=params)
    errors.extend(problems)
    # ``where`` is always written, null for "every firing counts", so a gate has one shape.
    return {"on": trigger_id, "where": where, "count": count, "dormant": False, **shown}
