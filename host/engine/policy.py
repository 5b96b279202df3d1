"""``may_invoke``: whether a claimed step's action may run now, decided at dispatch.

Called after the step is claimed and before anything reaches the plugin, so a refusal
means nothing was sent. After the claim, because the spend is a conditional increment and
two ticks that both priced a step before either claimed it would otherwise both spend;
before the dispatch, because a refusal means the action does not happen at all. Checking
and spending are one call (``spend``) for the same reason: two calls would race.

The layers, in order, each a refusal code:

* ``unavailable`` — no loaded plugin registers the action, or its plugin says it is
  unavailable (:meth:`pageant.hosting.Host.plugin_unavailable`);
* ``disabled`` — the switchboard has it off (with no row: ``change`` and ``irreversible``
  are off, ``notify`` and ``inspect`` on);
* ``cost`` — its ``cost`` raised or answered something that is not whole amounts;
* ``undeclared`` — its ``cost`` names a dimension no plugin declares (before any arithmetic);
* ``unbudgeted`` — the run has no budget row for a dimension it asks for (its version was
  never priced for it: fail closed);
* ``cap`` — the spend would pass the run's cap, with the numbers.

The spend happens once per step: the step records what it paid in the same transaction, so
a retry, a re-dispatch after a crash or a person's retry never pays twice, and a failure is
never refunded (the attempt may have half-run). What it paid is a reservation: a ``done``
or parked answer that says what the game made (the envelope's ``spent``, contract 1.3) is
settled by :func:`settle_spend` in the answer's own transaction, lowering the charge to
that and giving the rest back for later steps; the charge never rises after dispatch, so
the cap holds as it did when the step paid. A step refused on its second dimension
gives the first back: what it had taken is given back in the same transaction, before
anyone else can see it.

Given the claim's connection (``conn``), the decision rides in the claim's transaction: one
read of the switchboard for a step that spends nothing, and no transaction of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pageant.db import budgets
from pageant.db import switchboard as board_rows
from pageant.states import Refusal
from pageant.switchboard.pricing import default_enabled, price, settled

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

    from pageant.db.shared import Batch
    from pageant.hookspecs import Action, Envelope
    from pageant.hosting import Host

__all__ = ["Decision", "may_invoke"]


@dataclass(frozen=True)
class Decision:
    """``may_invoke``'s answer; unpacks as ``(allowed, code, reason)``. ``detail`` carries
    the numbers of a refusal (for the ``step.refused`` line) or what was spent."""

    allowed: bool
    code: str | None = None
    reason: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def __iter__(self) -> Iterator[Any]:
        return iter((self.allowed, self.code, self.reason))


def _disabled(action: Action, flag: bool | None) -> Decision | None:
    enabled = flag if flag is not None else default_enabled(action)
    if enabled:
        return None
    if flag is None:
        reason = (
            f"{action.id} is a {action.risk} action, and {action.risk} actions are disabled "
            "until an admin enables them on the switchboard"
        )
    else:
        reason = f"{action.id} is disabled on the switchboard"
    return Decision(False, Refusal.DISABLED, reason)


async def _spend(
    conn: AsyncConnection, step: Mapping[str, Any], amounts: Mapping[str, int]
) -> Decision:
    if not await budgets.mark_spent(conn, step["id"], amounts):
        return Decision(True, detail={"already_spent": True})
    taken: list[str] = []
    # Always in one order, so two steps spending the same dimensions never deadlock.
    for dimension in sorted(amounts):
        amount = amounts[dimension]
        if await budgets.spend(conn, step["run_id"], dimension, amount):
            taken.append(dimension)
            continue
        # A step that does not run must not have spent anything: give back what it took.
        for given_back in taken:
            await budgets.give_back(conn, step["run_id"], given_back, amounts[given_back])
        await budgets.unmark_spent(conn, step["id"])
        row = await budgets.budget_row(conn, step["run_id"], dimension)
        if row is None:
            return Decision(
                False,
                Refusal.UNBUDGETED,
                f'asks for {amount} of "{dimension}"; this run has no budget for it (its '
                "version was never priced for that dimension)",
                {"dimension": dimension, "asked": amount},
            )
        return Decision(
            False,
            Refusal.CAP,
            f'asks for {amount} of "{dimension}"; {row.consumed} of {row.cap} is already '
            "spent this run",
            {
                "dimension": dimension,
                "asked": amount,
                "consumed": row.consumed,
                "cap": row.cap,
                "cap_source_action": row.cap_source_action,
            },
        )
    return Decision(True, detail={"spent": dict(amounts)})


async def may_invoke(
    host: Host,
    step: Mapping[str, Any],
    action: Action | None,
    *,
    conn: AsyncConnection | None = None,
    spend: bool = True,
    batch: Batch | None = None,
) -> Decision:
    """Decide whether ``step`` may dispatch ``action`` now, and pay for it (``spend``).

    ``action`` is None when no loaded plugin registers the step's action any more. ``conn``
    is the claim's open transaction (without it, the decision opens its own). With
    ``spend`` false only the checks that write nothing run (enablement, availability, the
    price); the caps are then the caller's to judge. ``batch``: the group commit ``conn``
    records, whose switchboard flags are read once.
    """
    if conn is None:
        async with host.db.begin() as own:
            return await may_invoke(host, step, action, conn=own, spend=spend)
    if action is None:
        return Decision(
            False, Refusal.UNAVAILABLE, f"no loaded plugin registers the action {step['action']!r}"
        )
    down = host.plugin_unavailable(action.id.split(".", 1)[0])
    if down is not None:
        return Decision(False, Refusal.UNAVAILABLE, f"{action.id} is unavailable: {down}")
    refused = _disabled(action, await board_rows.enabled_flag(conn, action.id, batch=batch))
    if refused is not None:
        return refused
    priced = price(action, step.get("params") or {}, host.registry)
    if priced.problem is not None:
        return Decision(False, priced.code, priced.problem)
    if priced.amounts and spend and step.get("spent") is None:
        return await _spend(conn, step, priced.amounts)
    return Decision(True)


async def settle_spend(conn: AsyncConnection, step: Mapping[str, Any], envelope: Envelope) -> None:
    """Settle what ``step`` paid to what its perform's answer says it ``spent``, in the
    answer's transaction: nothing happens without a ``spent`` or when the step paid
    nothing. An amount the host does not take as reported (above what was reserved, or a
    dimension nothing reserved) is logged at WARNING, naming the step and the action."""
    if envelope.spent is None:
        return
    paid = await budgets.spent_of(conn, step["id"])
    if paid is None:
        paid = {}
    keep, problems = settled(paid, envelope.spent)
    for problem in problems:
        log.warning(
            "run %s step %s: %s %s",
            step["run_id"],
            step["id"],
            step["action"],
            problem,
            extra={"run_id": step["run_id"], "step_id": step["id"], "action": step["action"]},
        )
    if keep != paid:
        await budgets.settle(conn, step["run_id"], step["id"], paid, keep)
