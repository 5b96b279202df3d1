"""Verify — the dry run a version must pass before its scheduled occurrences may start.

Every step's params against the current declarations and option sources, the switchboard's
enablement, the **whole plan's** cost per dimension against the caps (three steps of 15
under a cap of 30 fail together, though each passes alone), and each action's
``perform(verify=True)``. Success records ``verified_at``/``verified_by`` on the version;
failure records nothing and answers every problem with its path.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from pageant.db import switchboard as board_rows
from pageant.db import verification
from pageant.errors import Conflict, Invalid
from pageant.events import definitions
from pageant.events.authoring import validator as specs
from pageant.events.option_values import check_option_values
from pageant.hookspecs import ActionContext, Param, Posted
from pageant.plugins.calls import run_with_envelope
from pageant.runs import params as run_params
from pageant.switchboard.board import enablement
from pageant.switchboard.pricing import plan_dimensions, price, tightest

if TYPE_CHECKING:
    from pageant.hosting import Host
    from pageant.plugins.registry import Registry


class DryRunServices:
    """What ``perform(verify=True)`` finds in ``ctx.services`` during a dry run: the real
    registry and settings; the log is a list and ``post_json`` sends nothing and remembers
    the attempt, because a dry run that posts has changed the world."""

    #: The step's phase as a dry run's ``perform`` sees it.
    phase = "verify"
    #: The error ``post_json`` answers: why nothing was sent.
    not_sent = "not sent: a dry run sends nothing"

    def __init__(self, registry: Registry, settings: Any) -> None:
        self.registry = registry
        self.settings = settings
        self.run_id: int | None = None
        self.step_id: int | None = None
        self.logged: list[tuple[str, dict[str, Any]]] = []
        self.posted: list[str] = []

    async def write_log(self, kind: str, detail: dict[str, Any]) -> None:
        self.logged.append((kind, detail))

    async def post_json(self, url: str, body: str | dict[str, Any]) -> Posted:
        self.posted.append(url)
        return Posted(None, self.not_sent, False)


def _refused(param: Param, value: Any) -> bool:
    """Whether the validator refuses ``value`` for ``param`` (left out is its own check):
    such a step is not dry-run, because the validator has named the param already with the
    sentence the step would give, and a dry run would only say it twice."""
    return value is not None and value != "" and not param.check(value)[0]


async def dry_run_steps(
    spec: dict[str, Any], registry: Registry, services: Any, *, now: Any
) -> tuple[list[str], dict[str, int]]:
    """``perform(verify=True)`` and the price of every step: ``(problems, totals)``."""
    problems: list[str] = []
    totals: dict[str, int] = {}
    for path, step in specs.action_steps(spec):
        action = registry.actions.get(step.get("action", ""))
        if action is None:
            continue  # reported as dormant
        params = dict(step.get("params") or {})
        if any(_refused(param, params.get(param.name)) for param in action.params):
            continue
        priced = price(action, params, registry)
        if priced.problem is not None:
            problems.append(f"{path}: {priced.problem} (code {priced.code})")
        for dimension, amount in priced.amounts.items():
            totals[dimension] = totals.get(dimension, 0) + amount
        context = ActionContext(
            params=params,
            idempotency_key=f"verify:{path}",
            run=None,
            verify=True,
            deadline=now + timedelta(milliseconds=action.budget_ms),
            services=services,
        )
        envelope = await run_with_envelope(action.perform, context, timeout=action.budget_ms / 1000)
        if not envelope.ok:
            problems.append(
                f"{path}: {action.id} perform(verify=True) failed: "
                f"{envelope.error or 'no error message'}"
            )
    return problems, totals


async def verify_event(
    host: Host,
    definition_id: int,
    *,
    actor: str | None,
    params: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Dry-run the published version of ``definition_id``; record it verified on success.

    ``params`` are the run params to verify with (each ``{"param": ...}`` in the spec is
    written out from them, as a run's would be; defaults fill the rest). Raises NotFound
    for an unknown event, Conflict when it has no published version, and Invalid naming
    each param that does not fit, or with every problem (each with its path) when the
    version does not pass.
    """
    registry = host.registry
    now = host.clock.now()
    async with host.db.connect() as conn:
        row = await definitions.require_definition(conn, definition_id)
        version = await definitions.published_version(conn, definition_id)
        if version is None:
            raise Conflict(
                f"event {definition_id} has no published version; publish it, then verify"
            )
        spec = version.spec if isinstance(version.spec, dict) else {}
        values = run_params.values_for(spec.get("params"), dict(params or {}))
        # Checked as a run of these values would be dispatched: references written out.
        spec = run_params.resolve(spec, run_params.with_scope(values, run_params.scope_of(values)))
        switch = await board_rows.settings_for(
            conn, [step.get("action", "") for _, step in specs.action_steps(spec)]
        )
    problems: list[str] = []
    warnings: list[str] = []
    try:
        checked = specs.validate(spec, registry, stored=spec)
    except Invalid as exc:
        problems.extend(exc.details)
    else:
        problems.extend(
            f"{item}: no installed plugin registers it" for item in specs.dormant_items(checked)
        )
    for path, step in specs.action_steps(spec):
        action = registry.actions.get(step.get("action", ""))
        if action is not None and not enablement(action, switch.get(action.id)):
            origin = "on the switchboard" if action.id in switch else "by default (its risk)"
            problems.append(f"{path}: {action.id} is a {action.risk} action, disabled {origin}")
    bad_values, unchecked = await check_option_values(spec, registry)
    problems.extend(bad_values)
    warnings.extend(unchecked)
    failures, totals = await dry_run_steps(
        spec, registry, DryRunServices(registry, host.settings), now=now
    )
    problems.extend(failures)
    caps = {ident: dict(r.caps or {}) for ident, r in switch.items()}
    spend = []
    for dimension, spenders in sorted(plan_dimensions(spec, registry).items()):
        cap, source = tightest(dimension, spenders, caps)
        total = totals.get(dimension, 0)
        budget = registry.budgets[dimension]
        spend.append(
            {
                "dimension": dimension,
                "label": budget.label,
                "unit": budget.unit,
                "total": total,
                "cap": cap,
                "cap_source_action": source,
            }
        )
        if cap is not None and total > cap:
            problems.append(
                f'spec: asks for {total} of "{dimension}" across all its steps; the cap is '
                f"{cap} (set on {source})"
            )
    if problems:
        raise Invalid(
            f"version {version.number} of event {definition_id} did not pass verification; "
            "nothing was recorded",
            details=problems,
        )
    async with host.db.begin() as conn:
        await verification.mark_verified(conn, version.id, at=now, by=actor)
    host.wake()  # a held scheduled occurrence may start now
    return {
        "event_id": row.id,
        "version": {"id": version.id, "number": version.number},
        "verified_at": now,
        "verified_by": actor,
        "spend": spend,
        "warnings": warnings,
    }
