"""The switchboard: whether each action may run, and the caps on what it spends.

With no row for an action, ``notify`` and ``inspect`` are on and ``change`` and
``irreversible`` are off, so a deployment that never opened the switchboard behaves. An
admin's row overrides the default and carries the action's caps, ``{dimension: integer >=
0 | null}``. The dimensions an action spends are discovered by pricing its declared example
params with its ``cost``.

Caps reach runs through their budget rows (:mod:`pageant.db.budgets`): pinned when a run is
created, as the tightest cap across the actions of its version that spend the dimension,
and re-derived for every run that has not ended whenever an admin changes a cap — so
raising a cap is what lets a paused run's refused step be retried.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db import budgets
from pageant.db import switchboard as rows
from pageant.errors import Invalid, NotFound
from pageant.switchboard.pricing import MAX_AMOUNT, budget_rows, default_enabled, tightest

if TYPE_CHECKING:
    from pageant.hookspecs import Action
    from pageant.plugins.registry import Registry


def example_params(action: Action) -> dict[str, Any]:
    return {param.name: param.example for param in action.params}


def spent_dimensions(action: Action, registry: Registry) -> list[dict[str, Any]]:
    """The dimensions ``action`` spends, found by pricing its example params: each with the
    budget's label and unit, or ``usable: false`` and the reason."""
    if action.cost is None:
        return []
    try:
        answer = action.cost(example_params(action))
    except Exception as exc:  # reported, not raised: the board must render
        return [
            {
                "dimension": None,
                "usable": False,
                "reason": f"cost raised {type(exc).__name__} on the example params: {exc}",
            }
        ]
    if not isinstance(answer, Mapping):
        return [
            {
                "dimension": None,
                "usable": False,
                "reason": f"cost answered {type(answer).__name__}, not a mapping",
            }
        ]
    out = []
    for dimension in sorted(str(d) for d in answer):
        budget = registry.budgets.get(dimension)
        if budget is None:
            out.append(
                {
                    "dimension": dimension,
                    "usable": False,
                    "reason": "no plugin declares this budget dimension; a step spending it "
                    "is refused (code undeclared)",
                }
            )
        else:
            out.append(
                {
                    "dimension": dimension,
                    "label": budget.label,
                    "unit": budget.unit,
                    "usable": True,
                }
            )
    return out


def action_object(action: Action, registry: Registry, row: Any | None) -> dict[str, Any]:
    """One action as the switchboard shows it."""
    return {
        "id": action.id,
        "label": action.label,
        "owner": action.id.split(".", 1)[0],
        "plugin": registry.owner_of("actions", action.id),
        "risk": action.risk,
        "reversible": action.reversible,
        "enabled": bool(row.enabled) if row is not None else default_enabled(action),
        "configured": row is not None,
        "caps": dict(row.caps or {}) if row is not None else {},
        "dimensions": spent_dimensions(action, registry),
        "updated_by": row.updated_by if row is not None else None,
        "updated_at": row.updated_at if row is not None else None,
    }


async def listing(conn: AsyncConnection, registry: Registry) -> list[dict[str, Any]]:
    """Every registered action, sorted by id, with its switchboard state."""
    settings = await rows.all_settings(conn)
    return [
        action_object(registry.actions[ident], registry, settings.get(ident))
        for ident in sorted(registry.actions)
    ]


async def catalog_with_enablement(conn: AsyncConnection, registry: Registry) -> dict[str, Any]:
    """The catalog, each action with ``enabled`` and ``configured`` from the switchboard."""
    out = registry.catalog()
    settings = await rows.all_settings(conn)
    for item in out["actions"]:
        row = settings.get(item["id"])
        item["enabled"] = enablement(registry.actions[item["id"]], row)
        item["configured"] = row is not None
    return out


def enablement(action: Action, row: Any | None) -> bool:
    return bool(row.enabled) if row is not None else default_enabled(action)


def require_action(registry: Registry, action_id: str) -> Action:
    action = registry.actions.get(action_id)
    if action is None:
        raise NotFound(f"no loaded plugin registers the action {action_id!r}")
    return action


def check_caps(action: Action, registry: Registry, caps: Mapping[str, Any]) -> list[str]:
    """Every problem with ``caps`` for ``action``, each with its path."""
    spends = [d["dimension"] for d in spent_dimensions(action, registry) if d["usable"]]
    problems = []
    for dimension, cap in caps.items():
        path = f"body.caps.{dimension}"
        if dimension not in registry.budgets:
            problems.append(f'{path}: "{dimension}" is not a budget dimension any plugin declares')
        elif dimension not in spends:
            spent = ", ".join(f'"{d}"' for d in spends) or "nothing"
            problems.append(f'{path}: {action.id} does not spend "{dimension}"; it spends {spent}')
        if cap is not None and (
            isinstance(cap, bool) or not isinstance(cap, int) or not 0 <= cap <= MAX_AMOUNT
        ):
            problems.append(
                f"{path}: expected a whole number from 0 to {MAX_AMOUNT}, or null; got {cap!r}"
            )
    return problems


async def set_action(
    conn: AsyncConnection,
    registry: Registry,
    action_id: str,
    *,
    enabled: bool | None = None,
    caps: Mapping[str, int | None] | None = None,
    merge_caps: bool = False,
    actor: str | None,
    now: datetime,
) -> dict[str, Any]:
    """Set an action's enablement and/or caps, write the history line, and re-derive the
    caps of every run that has not ended. ``merge_caps`` changes only the dimensions given
    (the CLI's ``cap``); otherwise ``caps`` replaces the map. Raises NotFound for an
    unregistered action and Invalid naming each bad cap; nothing is written then."""
    action = require_action(registry, action_id)
    if enabled is None and caps is None:
        raise Invalid(
            "nothing to change; send enabled, caps or both", details=["body: empty change"]
        )
    problems = check_caps(action, registry, caps or {})
    if problems:
        raise Invalid(f"invalid caps for {action_id}", details=problems)
    before = await rows.get_setting(conn, action_id, lock=True)
    old_caps: dict[str, Any] = dict(before.caps or {}) if before is not None else {}
    new_caps = dict(old_caps)
    if caps is not None:
        new_caps = {**old_caps, **caps} if merge_caps else dict(caps)
    new_enabled = enabled if enabled is not None else enablement(action, before)
    await rows.write_setting(
        conn, action_id, enabled=new_enabled, caps=new_caps, before=before, actor=actor, now=now
    )
    await recap_live_runs(conn, set(old_caps) | set(new_caps))
    row = await rows.get_setting(conn, action_id)
    return action_object(action, registry, row)


async def recap_live_runs(conn: AsyncConnection, dimensions: set[str]) -> int:
    """Re-derive the tightest cap of every budget row of a run that has not ended, for
    ``dimensions``; answers how many rows changed."""
    live = await budgets.live_rows(conn, dimensions)
    if not live:
        return 0
    spenders = {a for row in live for a in (row.actions or [])}
    settings = await rows.settings_for(conn, sorted(spenders))
    caps = {ident: dict(row.caps or {}) for ident, row in settings.items()}
    changed = 0
    for row in live:
        cap, source = tightest(row.dimension, row.actions or [], caps)
        if (cap, source) != (row.cap, row.cap_source_action):
            await budgets.set_cap(conn, row.id, cap, source)
            changed += 1
    return changed


async def pin_run_budget(
    conn: AsyncConnection, run_id: int, spec: Mapping[str, Any], registry: Registry | None
) -> None:
    """Pin a new run's budget: one row per dimension its version can spend (nothing at all,
    and no query, for a version that spends nothing)."""
    if registry is None:
        return
    planned = budget_rows(spec, registry, {})
    if not planned:
        return
    spenders = sorted({a for row in planned for a in row["actions"]})
    settings = await rows.settings_for(conn, spenders)
    caps = {ident: dict(row.caps or {}) for ident, row in settings.items()}
    for row in planned:
        row["cap"], row["cap_source_action"] = tightest(row["dimension"], row["actions"], caps)
    await budgets.pin_budget(conn, run_id, planned)


async def history(conn: AsyncConnection, registry: Registry, action_id: str) -> list[dict]:
    """Every change to an action's switchboard row, oldest first. An action no plugin
    registers any more still has its history, as long as it has one."""
    lines = await rows.history_of(conn, action_id)
    if not lines:
        require_action(registry, action_id)
    return [
        {
            "id": line.id,
            "action_id": line.action_id,
            "enabled": bool(line.enabled),
            "caps": dict(line.caps or {}),
            "before": line.before,
            "actor": line.actor,
            "at": line.at,
        }
        for line in lines
    ]


async def run_budget(
    conn: AsyncConnection, run_id: int, registry: Registry
) -> list[dict[str, Any]]:
    """The run console's ``budget``: one meter per pinned dimension."""
    out = []
    for row in await budgets.budget_of(conn, run_id):
        declared = registry.budgets.get(row.dimension)
        out.append(
            {
                "dimension": row.dimension,
                "label": declared.label if declared is not None else None,
                "unit": declared.unit if declared is not None else None,
                "cap": row.cap,
                "consumed": row.consumed,
                "cap_source_action": row.cap_source_action,
            }
        )
    return out
