"""The editor's cap meter: what the form's steps could spend, against the switchboard's caps,
before anyone presses Verify.

The same arithmetic as verify's and the rehearsal's worst case
(:mod:`pageant.switchboard.pricing`): each step's action prices its params with its ``cost``,
the amounts add up per budget dimension, and each dimension's cap is the tightest any of its
spending actions sets. The form's params are not validated yet, so a step its action cannot
price is named instead of counted.
"""

from __future__ import annotations

from typing import Any

from pageant.db import switchboard as board_rows
from pageant.hosting import Host
from pageant.switchboard.pricing import plan_dimensions, price, steps_of, tightest


async def meter(host: Host, spec: dict[str, Any]) -> dict[str, Any]:
    """``{dimensions, unpriced}``: for each dimension the spec's steps can spend, its label,
    unit, worst-case total, cap (or None), the action the cap is set on and whether the
    total is over it; and a sentence per step that could not be priced."""
    registry = host.registry
    steps = steps_of(spec)
    async with host.db.connect() as conn:
        switch = await board_rows.settings_for(conn, [str(st.get("action", "")) for _, st in steps])
    caps = {ident: dict(row.caps or {}) for ident, row in switch.items()}
    totals: dict[str, int] = {}
    unpriced: list[str] = []
    for path, step in steps:
        action = registry.actions.get(str(step.get("action", "")))
        if action is None or action.cost is None:
            continue
        priced = price(action, step.get("params") or {}, registry)
        if priced.problem:
            unpriced.append(f"{path}: {priced.problem}")
        for dimension, amount in priced.amounts.items():
            totals[dimension] = totals.get(dimension, 0) + amount
    dimensions = []
    for dimension, spenders in sorted(plan_dimensions(spec, registry).items()):
        cap, source = tightest(dimension, spenders, caps)
        budget = registry.budgets.get(dimension)
        total = totals.get(dimension, 0)
        dimensions.append(
            {
                "dimension": dimension,
                "label": budget.label if budget else dimension,
                "unit": budget.unit if budget else "",
                "worst_case": total,
                "cap": cap,
                "cap_source_action": source,
                "over_cap": cap is not None and total > cap,
            }
        )
    return {"dimensions": dimensions, "unpriced": unpriced}
