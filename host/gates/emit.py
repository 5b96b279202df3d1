"""The emit path: a trigger firing, counted against every open gate that waits on it.

A game server fires through ``POST /api/v1/triggers/{trigger_id}/fire``; a plugin through
its context's ``emit``. Both arrive at :func:`fire`.

**The emit path writes, the tick reads.** A gate waiting on three firings counts things that
happen *between* two ticks; by the next tick there is nothing left to see, and a tally kept in
a process's memory is one a restart silently zeroes. So each firing is a database write: the
matching gates' tallies are raised by a conditional increment in the firing's own
transaction, and the engine is woken only to act on a gate that closed.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db import phase_gates as gate_rows
from pageant.db import runlog
from pageant.db.log_kinds import LogKind
from pageant.errors import Invalid, NotFound
from pageant.gates import phase as gates
from pageant.gates.conditions import check_payload, evaluate, named_values

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from pageant.plugins.registry import Registry


def payload_from_text(registry: Any, trigger_id: str, pairs: Sequence[str]) -> dict[str, Any]:
    """A payload from ``key=value`` words (a command line's), each value read as the type
    its variable is declared with; a key the trigger does not declare is kept as text, for
    :func:`fire` to refuse with the same words as any payload. Raises :class:`NotFound`
    for an unknown trigger and :class:`Invalid` naming each word it cannot read."""
    trigger = registry.triggers.get(trigger_id)
    if trigger is None:
        raise NotFound(f"no such trigger: {trigger_id!r} (no installed plugin registers it)")
    types = {variable.name: variable.type for variable in trigger.variables}
    payload: dict[str, Any] = {}
    problems = []
    for word in pairs:
        key, sep, text = word.partition("=")
        if not sep or not key:
            problems.append(f"{word!r}: expected KEY=VALUE")
            continue
        kind = types.get(key, "string")
        try:
            payload[key] = _read(kind, text)
        except ValueError:
            problems.append(f"payload.{key}: {text!r} is not a {kind}")
    if problems:
        raise Invalid(f"the payload does not fit {trigger_id}'s variables", details=problems)
    return payload


def _read(kind: str, text: str) -> Any:
    if kind == "integer":
        return int(text)
    if kind == "number":
        value = float(text)
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(text)
        return value
    if kind == "boolean":
        if text.lower() in ("true", "yes", "1"):
            return True
        if text.lower() in ("false", "no", "0"):
            return False
        raise ValueError(text)
    return text


async def fire(
    registry: Registry,
    db: AsyncEngine,
    now: datetime,
    trigger_id: str,
    payload: Any,
    *,
    actor: str | None,
) -> dict[str, int]:
    """Count one firing of ``trigger_id`` at ``now`` against every open ``on`` gate waiting
    on it. The caller wakes the engine when a gate closed
    (:meth:`pageant.hosting.Host.emit`).

    Raises :class:`NotFound` for a trigger no plugin registers, and :class:`Invalid` naming
    each variable when the payload carries an undeclared key or a value of the wrong type;
    nothing is written then. Answers ``{gates_matched, gates_closed}``: how many gates this
    firing counted for, and how many of those it satisfied.
    """
    trigger = registry.triggers.get(trigger_id)
    if trigger is None:
        raise NotFound(f"no such trigger: {trigger_id!r} (no installed plugin registers it)")
    checked, errors = check_payload(trigger, payload)
    if errors:
        raise Invalid(f"the payload does not fit {trigger_id}'s variables", details=errors)
    matched = closed = 0
    # Most firings concern no gate (core's lifecycle fires on every transition): a read
    # tells, and the writer's lock is left alone. A gate committed after this look misses the
    # firing, as one committed after the write's own read always did; a gate found is read
    # again in the write below.
    async with db.connect() as conn:
        if not await gate_rows.open_on_gates(conn, trigger_id):
            return {"gates_matched": 0, "gates_closed": 0}
    # One transaction for the whole firing: every gate it concerns sees it, or none does.
    async with db.begin() as conn:
        for row in await gate_rows.open_on_gates(conn, trigger_id):
            outcome = await _observe(conn, row._mapping, checked, now=now, actor=actor)
            matched += outcome in ("counted", "closed")
            closed += outcome == "closed"
    return {"gates_matched": matched, "gates_closed": closed}


async def _observe(
    conn: AsyncConnection,
    gate: gates.Gate,
    payload: dict[str, Any],
    *,
    now: datetime,
    actor: str | None,
) -> str:
    """Judge one firing for one gate and record it: ``counted``, ``closed``, ``missed`` (a
    near miss), or ``gone`` (the gate closed under this firing; nothing written)."""
    condition = gate["condition"]
    is_match = evaluate(condition, payload)
    if is_match:
        if not await gate_rows.count_firing(conn, gate["id"], now):
            return "gone"
        # Read back rather than assumed: a concurrent firing may have counted in between.
        gate = await gate_rows.gate_by_id(conn, gate["id"])
    elif not await gate_rows.note_near_miss(conn, gate["id"], now):
        return "gone"
    # Only the variables the condition names are kept: the log is read onto an admin screen,
    # and a game's payload may carry far more than the gate tests.
    await runlog.write(
        conn,
        gate["run_id"],
        LogKind.CONDITION_EVALUATED,
        at=now,
        phase=gate["phase"],
        detail={
            "trigger_id": gate["trigger_id"],
            "matched": is_match,
            "condition": gates.condition_text(gate),
            "values": named_values(condition, payload),
            "tally": gate["tally"],
            "needed": gate["needed"],
        },
        actor=actor,
    )
    if not is_match:
        return "missed"
    if gate["satisfied_by"] == "tally":
        await gates.log_closed(conn, gate, now=now, actor=actor)
        return "closed"
    return "counted"
