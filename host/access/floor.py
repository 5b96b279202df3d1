"""Who may author what: the role floor on a spec's steps.

The route gates decide who may call an authoring route at all (admin and editor). What an
editor may *put in* a spec depends on the body, so it cannot live on the route: a step whose
action changes the world (risk ``change`` or ``irreversible``) may be added or altered by an
admin only. The floor refuses an editor only what they add or alter; an editor may still
retitle, reschedule or reorder an event an admin filled with such steps.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

from pageant.access.roles import FLOOR_EXEMPT_ROLES
from pageant.errors import Forbidden
from pageant.hookspecs.models import changes_world
from pageant.plugins.registry import Registry

# What makes two steps "the same step" for the floor. The output-only keys the validator
# recomputes (action_version, dormant) are left out: a plugin bumping its action's version
# must not make an editor's untouched step read as an edit.
_AUTHORED_KEYS = ("action", "label", "params", "on_failure")


def _steps(spec: dict[str, Any] | None) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(path, phase key, step) for every step of a normalised spec."""
    for pi, phase in enumerate((spec or {}).get("phases") or []):
        for si, step in enumerate(phase.get("steps") or []):
            yield f"spec.phases[{pi}].steps[{si}]", phase.get("key", ""), step


def _risky(step: dict[str, Any], registry: Registry) -> bool:
    declaration = registry.actions.get(step.get("action", ""))
    # A dormant step's action is registered by nobody, so its risk is unknown; it is
    # treated as world-changing, since the plugin that left may well have been the one
    # that changed the world.
    return declaration is None or changes_world(declaration.risk)


def _identity(phase: str, step: dict[str, Any]) -> tuple[str, str]:
    authored = {k: step.get(k) for k in _AUTHORED_KEYS}
    return phase, json.dumps(authored, sort_keys=True, separators=(",", ":"))


def risky_changes(
    old_spec: dict[str, Any] | None, new_spec: dict[str, Any], registry: Registry
) -> list[str]:
    """The paths of the steps in ``new_spec`` that add or alter an admin-only step.

    Both specs are normalised (the validator's output); ``old_spec`` is None for a new
    event. Risky steps are compared as a multiset of (phase key, authored step): each risky
    step of the new spec must be matched by an identical, not yet matched one in the same
    phase of the old spec. Moving a step within its phase or removing one is neither an
    addition nor an alteration; moving it to another phase is (it runs at another time).
    """
    kept = Counter(
        _identity(phase, step) for _path, phase, step in _steps(old_spec) if _risky(step, registry)
    )
    found = []
    for path, phase, step in _steps(new_spec):
        if not _risky(step, registry):
            continue
        identity = _identity(phase, step)
        if kept[identity] > 0:
            kept[identity] -= 1
        else:
            found.append(path)
    return found


def check_role_floor(
    role: str,
    old_spec: dict[str, Any] | None,
    new_spec: dict[str, Any],
    registry: Registry,
) -> None:
    """Raise :class:`Forbidden` (``requires role admin``) if ``role`` may not save
    ``new_spec`` over ``old_spec``, naming each offending step's path and action."""
    if role in FLOOR_EXEMPT_ROLES:
        return
    paths = risky_changes(old_spec, new_spec, registry)
    if not paths:
        return
    steps = {path: step for path, _phase, step in _steps(new_spec)}
    details = []
    for path in paths:
        action = steps[path].get("action", "")
        declaration = registry.actions.get(action)
        if declaration is None:
            why = "is registered by no installed plugin, so its risk is unknown"
        else:
            why = f"is a {declaration.risk} action"
        details.append(f"{path}: {action} {why}; only an admin may add or alter it")
    raise Forbidden("requires role admin", details=details)
