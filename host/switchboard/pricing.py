"""Pricing: what a step's ``cost`` asks for, and the tightest cap over the actions of a run.

``cost(params)`` is the plugin's pure, synchronous answer ``{dimension: amount}``. A cap
counts whole units, so a fractional amount is rounded up (1.5 spends 2); a negative or
non-finite amount, one past a budget column's range, or a ``cost`` that raises is a problem
the caller reports (at dispatch a refusal with code ``cost``). A dimension no plugin
declares is code ``undeclared``, decided before any arithmetic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pageant.hookspecs.models import changes_world

if TYPE_CHECKING:
    from pageant.hookspecs import Action
    from pageant.plugins.registry import Registry

#: The largest cap or amount: a budget column is a 32-bit integer on MariaDB.
MAX_AMOUNT = 2**31 - 1


@dataclass(frozen=True)
class Price:
    """What one call of ``cost`` asked for; ``problem`` set when it could not be priced."""

    amounts: dict[str, int] = field(default_factory=dict)
    problem: str | None = None
    code: str | None = None  # "cost" | "undeclared"


def default_enabled(action: Action) -> bool:
    # Off until an admin turns it on: the world-changing risks; notify and inspect are on.
    return not changes_world(action.risk)


def _units(value: Any) -> int | None:
    """An amount as the whole units a cap counts: a fraction is rounded up (a limit must
    never under-count), anything that is not a finite number from 0 up is None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not math.isfinite(value) or value < 0:
        return None
    units = math.ceil(value)
    return units if units <= MAX_AMOUNT else None


def price(action: Action, params: Mapping[str, Any], registry: Registry) -> Price:
    """Call ``action.cost(params)`` and check the answer against the declared dimensions."""
    if action.cost is None:
        return Price()
    try:
        answer = action.cost(dict(params))
    except Exception as exc:  # a plugin's cost failing is its own problem
        return Price(problem=f"{action.id}'s cost raised {type(exc).__name__}: {exc}", code="cost")
    if not isinstance(answer, Mapping):
        return Price(
            problem=f"{action.id}'s cost answered {type(answer).__name__}, not a mapping",
            code="cost",
        )
    undeclared = sorted(str(d) for d in answer if d not in registry.budgets)
    if undeclared:
        names = ", ".join(f'"{d}"' for d in undeclared)
        return Price(
            problem=f"{action.id}'s cost names {names}, which no plugin declares as a budget "
            "dimension",
            code="undeclared",
        )
    amounts: dict[str, int] = {}
    for dimension, value in answer.items():
        units = _units(value)
        if units is None:
            return Price(
                problem=f'{action.id}\'s cost asks for {value!r} of "{dimension}"; expected a '
                f"number from 0 to {MAX_AMOUNT}",
                code="cost",
            )
        amounts[str(dimension)] = units
    return Price(amounts=amounts)


def settled(
    reserved: Mapping[str, int], reported: Mapping[str, float]
) -> tuple[dict[str, int], list[str]]:
    """What a step keeps spent once its perform answered ``spent`` (``reported``): for each
    dimension ``reserved`` at dispatch, the smaller of the two in whole units (a fraction
    rounds up, as a price does); a dimension not reported stays as reserved. Also every
    sentence about what was not taken as reported: an amount above the reservation (cut
    to it) and a dimension nothing reserved (ignored)."""
    keep = dict(reserved)
    problems = []
    for dimension, amount in sorted(reported.items()):
        if dimension not in reserved:
            problems.append(
                f'reports {amount!r} of "{dimension}", which its cost did not reserve; ignored'
            )
            continue
        units = _units(amount)
        if units is None or units > reserved[dimension]:
            problems.append(
                f'reports {amount!r} of "{dimension}", more than the {reserved[dimension]} its '
                f"cost reserved; {reserved[dimension]} stays spent"
            )
            continue
        keep[dimension] = units
    return keep, problems


def tightest(
    dimension: str, actions: set[str] | list[str], caps_by_action: Mapping[str, Mapping[str, Any]]
) -> tuple[int | None, str | None]:
    """The smallest cap any of ``actions`` sets on ``dimension`` and the action it came
    from, or ``(None, None)`` when none of them caps it. Ties go to the first action id."""
    found: tuple[int | None, str | None] = (None, None)
    for action_id in sorted(actions):
        cap = (caps_by_action.get(action_id) or {}).get(dimension)
        if cap is not None and (found[0] is None or cap < found[0]):
            found = (int(cap), action_id)
    return found


def steps_of(spec: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """``(path, step)`` for every step of every phase of a spec."""
    out = []
    for p, phase in enumerate(spec.get("phases") or []):
        for s, step in enumerate(phase.get("steps") or []):
            out.append((f"spec.phases[{p}].steps[{s}]", step))
    return out


def plan_dimensions(spec: Mapping[str, Any], registry: Registry) -> dict[str, set[str]]:
    """Every declared dimension the spec's steps can spend, with the actions spending it.
    Steps that cannot be priced are left out here (dispatch refuses them on their own)."""
    found: dict[str, set[str]] = {}
    for _path, step in steps_of(spec):
        action = registry.actions.get(step.get("action", ""))
        if action is None or action.cost is None:
            continue
        priced = price(action, step.get("params") or {}, registry)
        for dimension in priced.amounts:
            found.setdefault(dimension, set()).add(action.id)
    return found


def budget_rows(
    spec: Mapping[str, Any], registry: Registry, caps_by_action: Mapping[str, Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The budget rows a run of ``spec`` is pinned with."""
    rows = []
    for dimension, actions in sorted(plan_dimensions(spec, registry).items()):
        cap, source = tightest(dimension, actions, caps_by_action)
        rows.append(
            {
                "dimension": dimension,
                "cap": cap,
                "cap_source_action": source,
                "actions": sorted(actions),
            }
        )
    return rows
