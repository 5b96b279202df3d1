"""Dormancy as read: whether each step's action and each gate's trigger is registered *now*.

A saved spec carries ``dormant`` as the validator found it at the save. Plugins come and go
between saves (an uninstall, a refused plugin after an upgrade), so a reader is shown the
registry of the moment: :func:`as_registered` recomputes every flag at read time and leaves
the stored spec as it was.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pageant.plugins.registry import Registry


def as_registered(spec: Any, registry: Registry) -> Any:
    """A copy of ``spec`` whose steps and ``on`` gates say ``dormant`` exactly when no
    loaded plugin registers their action or trigger. What is not a phase, a step or a gate
    is passed over as it is (a stored spec may predate the current validation)."""
    shown = copy.deepcopy(spec)
    phases = shown.get("phases") if isinstance(shown, dict) else None
    for phase in phases if isinstance(phases, list) else []:
        if not isinstance(phase, dict):
            continue
        steps = phase.get("steps")
        for step in steps if isinstance(steps, list) else []:
            if isinstance(step, dict) and isinstance(step.get("action"), str):
                step["dormant"] = step["action"] not in registry.actions
        advance = phase.get("advance")
        if isinstance(advance, dict) and isinstance(advance.get("on"), str):
            advance["dormant"] = advance["on"] not in registry.triggers
    return shown
