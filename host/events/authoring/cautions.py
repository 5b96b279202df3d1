"""What an author is warned of at save, and may acknowledge: a spec that is valid and
probably not what was meant.

One warning today: **a gate that counts every server's firings on an event whose steps
target the server a run param chooses.** The Frenzy on a server, run for ``arena1`` and
``arena2`` at once, with ``{"on": "openarena.frag", "count": 5}`` and no ``where``, ends
both runs at the fifth frag across the two servers. Generically: a gate's trigger has a
variable that stands for a run param — the variable has the param's name, or the name of a
step param that takes the run param (``"server": {"param": "server"}``) — and the gate's
``where`` does not name that variable.

Each warning has an ``id`` (``gate-unscoped:<phase key>:<variable>``, stable across edits
that do not touch that gate) and a sentence with its path. The spec's ``acknowledge`` lists
the ids its author has read and meant: an acknowledged warning is no longer given. Warnings
never refuse a save, a publish or a start.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pageant.runs.params import SCOPE, is_reference
from pageant.support.refusals import show

if TYPE_CHECKING:
    from pageant.plugins.registry import Registry

#: The most ids one spec may acknowledge, and the longest id.
MAX_ACKNOWLEDGED = 100
MAX_ACKNOWLEDGED_ID = 200
#: The kind of warning an id starts with.
GATE_UNSCOPED = "gate-unscoped"


def validate_acknowledged(raw: Any, path: str, errors: list[str]) -> list[str]:
    """``spec.acknowledge``: the warning ids the author has acknowledged, sorted, each
    once. An id no warning has (the gate was since fixed) is kept: it says nothing."""
    if raw is None:
        return []
    if not isinstance(raw, list) or len(raw) > MAX_ACKNOWLEDGED:
        errors.append(
            f"{path}: expected a list of at most {MAX_ACKNOWLEDGED} warning ids; got {show(raw)}"
        )
        return []
    bad = [
        f"{path}[{i}]: expected a warning id such as "
        f'"{GATE_UNSCOPED}:hunt:server"; got {show(item)}'
        for i, item in enumerate(raw)
        if not isinstance(item, str) or not 0 < len(item) <= MAX_ACKNOWLEDGED_ID
    ]
    errors.extend(bad)
    return [] if bad else sorted(set(raw))


def _named(condition: Any) -> set[str]:
    """Every variable a condition names, under ``all``, ``any`` and ``not`` too."""
    if isinstance(condition, list):
        return set().union(*(_named(part) for part in condition)) if condition else set()
    if not isinstance(condition, dict):
        return set()
    found = {condition["var"]} if isinstance(condition.get("var"), str) else set()
    for key in ("all", "any", "not"):
        if key in condition:
            found |= _named(condition[key])
    return found


def _standing_for(spec: Mapping[str, Any]) -> dict[str, set[str]]:
    """For each run param a step takes: the names that stand for it (its own, and each
    step param's that takes it)."""
    names: dict[str, set[str]] = {}
    for phase in spec.get("phases") or []:
        for step in phase.get("steps") or [] if isinstance(phase, dict) else []:
            params = step.get("params") if isinstance(step, dict) else None
            for key, value in (params or {}).items() if isinstance(params, dict) else []:
                if is_reference(value) and isinstance(value["param"], str):
                    names.setdefault(value["param"], {value["param"]}).add(key)
    names.pop(SCOPE, None)
    return names


def spec_warnings(spec: Any, registry: Registry) -> list[dict[str, str]]:
    """The warnings of ``spec`` (a validated one) not acknowledged in it, in phase order:
    each ``{"id", "path", "message"}``."""
    if not isinstance(spec, dict):
        return []
    standing = _standing_for(spec)
    if not standing:
        return []
    acknowledged = set(spec.get("acknowledge") or [])
    found: list[dict[str, str]] = []
    for i, phase in enumerate(spec.get("phases") or []):
        advance = phase.get("advance") if isinstance(phase, dict) else None
        if not isinstance(advance, dict) or advance.get("dormant") or "on" not in advance:
            continue
        trigger = registry.triggers.get(advance["on"])
        if trigger is None:
            continue
        named = _named(advance.get("where"))
        for variable in trigger.variables:
            if variable.name in named:
                continue
            for param, names in sorted(standing.items()):
                if variable.name not in names:
                    continue
                ident = f"{GATE_UNSCOPED}:{phase.get('key')}:{variable.name}"
                if ident in acknowledged:
                    break
                condition = {"var": variable.name, "op": "eq", "value": {"param": param}}
                found.append(
                    {
                        "id": ident,
                        "path": f"spec.phases[{i}].advance",
                        "message": (
                            f"spec.phases[{i}].advance: this gate counts {trigger.id} from "
                            f"every {variable.name}: the steps take the {variable.name} the "
                            f"run's param \"{param}\" chooses, and the gate's where does not "
                            f'name "{variable.name}"; add {json.dumps(condition)} to count only '
                            f'the run\'s own, or acknowledge "{ident}"'
                        ),
                    }
                )
                break
    return found


__all__ = [
    "GATE_UNSCOPED",
    "MAX_ACKNOWLEDGED",
    "spec_warnings",
    "validate_acknowledged",
]
