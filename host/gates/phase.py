"""Phase gates: what a phase waits on besides its steps (``advance`` in the spec).

A gate is an **additional** condition, never a replacement: a phase advances when every step
is terminal *and* its gate is satisfied. Two kinds:

- ``{"after": "30m"}`` — satisfied at a deadline thirty minutes after the phase was entered,
  whatever its steps took. The tick closes it (``satisfied_by: deadline``).
- ``{"on": trigger, "where": condition, "count": n}`` — satisfied by the n-th firing of the
  trigger that matches the condition. The emit path (:mod:`pageant.gates.emit`) closes it
  (``satisfied_by: tally``); the tick only reads.
- ``{"reading": id, "params": {...}, "at_least": n, "wait": "30m", "else": "advance"}`` — a
  quorum: satisfied when the reading reaches ``n`` (``satisfied_by: reading``), which the
  tick's reading-gates stage reads (:mod:`pageant.engine.reading_gates`); when ``wait`` ends
  short, ``else`` decides: ``advance`` satisfies it at its deadline, ``fail`` fails the run.

Both clocks start at phase entry: the row is made in the transaction that makes the phase
current, so no crash can leave a current phase without its gate, and a firing during the
phase's first step already counts. A gate that never opens holds its phase; after
``stall_seconds`` the run's health becomes ``stalled`` (visible, never an automatic
advance), and a person may force it (``satisfied_by: forced``, see
:func:`pageant.runs.controls.advance`).

The engine, the console, the emit path and the advance control ask the functions here
about gates (and write through :mod:`pageant.db.phase_gates`), so they cannot disagree about what a
gate row means.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db import phase_gates as gate_rows
from pageant.db import runlog, runs
from pageant.db.rows import Record
from pageant.db.shared import Batch
from pageant.gates.conditions import named_values, render
from pageant.gates.durations import format_after, parse_after
from pageant.gates.matching import gate_key
from pageant.states import Health

Gate = Record


def _literal(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _advance(phase: Mapping[str, Any]) -> dict[str, Any] | None:
    advance = phase.get("advance")
    return advance if isinstance(advance, dict) and advance else None


# ── reading a gate ────────────────────────────────────────────────────────────


def satisfied(gate: Gate, now: datetime) -> tuple[datetime | None, str | None]:
    """``(satisfied_at, satisfied_by)`` of a gate at ``now``, or ``(None, None)`` if open.

    An ``after`` gate whose deadline has come is satisfied by it even before a tick wrote
    that down: the deadline is the fact, and the tick's write only records it.
    """
    if gate["satisfied_at"] is not None:
        return gate["satisfied_at"], gate["satisfied_by"]
    deadline = gate["deadline"]
    if at_deadline(gate) and deadline is not None and deadline <= now:
        return deadline, "deadline"
    return None, None


#: A reading gate's ``else`` (:func:`satisfied`): what a phase does when the wait ends short.
ELSE_ADVANCE = "advance"
ELSE_FAIL = "fail"
READING_ELSE = (ELSE_ADVANCE, ELSE_FAIL)


def at_deadline(gate: Gate) -> bool:
    """Whether the gate is satisfied by its deadline coming: an ``after`` gate, and a reading
    gate whose ``else`` is ``advance`` (one whose ``else`` is ``fail`` fails its run then)."""
    if gate["kind"] == "after":
        return True
    condition = gate["condition"] if gate["kind"] == "reading" else None
    return isinstance(condition, Mapping) and condition.get("else") == ELSE_ADVANCE


def after_text(gate: Gate) -> str:
    """An ``after`` gate's authored duration, from its clock (``"30m"``)."""
    seconds = round((gate["deadline"] - gate["entered_at"]).total_seconds())
    return format_after(seconds)


def condition_text(gate: Gate) -> str | None:
    """The gate's condition as the console's sentence; None when every firing counts."""
    if gate["kind"] != "on" or gate["condition"] is None:
        return None
    return render(gate["condition"])


def gated(phase: Mapping[str, Any]) -> bool:
    """Whether ``phase`` has a gate (an ``advance``): one without is open, with no row to
    read, so its reader need not take a connection to ask (:func:`holding`)."""
    return _advance(phase) is not None


async def holding(
    conn: AsyncConnection, *, run_id: int, phase: Mapping[str, Any], now: datetime
) -> Gate | None:
    """The gate row holding ``phase`` at ``now``, or None when the gate lets it advance.

    No ``advance`` in the phase, or no row for it, is no gate: open.
    """
    if not gated(phase):
        return None
    row = await gate_rows.gate_of(conn, run_id, phase["key"])
    if row is None or satisfied(row._mapping, now)[0] is not None:
        return None
    return row._mapping


async def is_open(
    conn: AsyncConnection, *, run_id: int, phase: Mapping[str, Any], now: datetime
) -> bool:
    """True when the phase may advance as far as its gate is concerned (no gate: open).

    The due-run query (:mod:`pageant.db.due`) asks the same question in SQL, and the two
    must agree: a gate holds while unsatisfied and, for ``after``, before its deadline.
    """
    return await holding(conn, run_id=run_id, phase=phase, now=now) is None


# ── words ─────────────────────────────────────────────────────────────────────


def clock_time(value: datetime) -> str:
    """``20:01 UTC``: the time of day a person reads beside a duration."""
    return value.astimezone(UTC).strftime("%H:%M UTC")


def elapsed(seconds: float) -> str:
    """A duration as a person says it: ``45 s``, ``6 min``, ``2 h 5 min``, ``3 d 4 h``."""
    whole = max(0, int(seconds))
    if whole < 60:
        return f"{whole} s"
    minutes = whole // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def sentence(gate: Gate, now: datetime) -> str:
    """What a held gate is waiting for, in words.

    *waiting on wisps.caught where colour eq "north" — seen 1 of 2 since 20:01 UTC (6 min)*;
    *waiting until 20:40 UTC (after 30m from 20:10 UTC)*.
    """
    return "".join(
        clock_time(p) if isinstance(p, datetime) else p for p in sentence_parts(gate, now)
    )


def sentence_parts(gate: Gate, now: datetime) -> list[str | datetime]:
    """:func:`sentence` with its instants left as instants, for a surface that draws them on
    its own clock."""
    if gate["kind"] == "reading":
        condition = gate["condition"] or {}
        return [
            f"waiting for {condition.get('reading')} to read at least "
            f"{_literal(condition.get('at_least'))} until ",
            gate["deadline"],
            f" (then {condition.get('else')}), from ",
            gate["entered_at"],
        ]
    if gate["kind"] == "after":
        return [
            "waiting until ",
            gate["deadline"],
            f" (after {after_text(gate)} from ",
            gate["entered_at"],
            ")",
        ]
    text = f"waiting on {gate['trigger_id']}"
    condition = condition_text(gate)
    if condition:
        text += f" where {condition}"
    waited = elapsed((now - gate["entered_at"]).total_seconds())
    parts: list[str | datetime] = [
        f"{text} — seen {gate['tally']} of {gate['needed']} since ",
        gate["entered_at"],
        f" ({waited})",
    ]
    at, counted = last_firing(gate)
    if counted is False and at is not None:
        parts += ["; the last firing, at ", at, ", did not match"]
        values = named_values(gate["condition"], gate.get("trigger_last_payload") or {})
        if values:
            shown = ", ".join(f"{name} {_literal(value)}" for name, value in values.items())
            parts.append(f" ({shown})")
    return parts


def last_firing(gate: Gate) -> tuple[datetime | None, bool | None]:
    """``(at, counted)`` of the last firing of the gate's trigger since the phase began.

    A firing the gate does not count writes nothing to it (the cost of a firing is what it
    matches): the gate keeps its last *counted* firing, and the trigger's own last firing
    (:func:`pageant.db.firings.note_last_firing`, read beside the gate) says whether a later
    one came that it did not count.
    """
    last_at = gate.get("trigger_last_at")
    counted_at = gate["last_event_at"] if gate["last_event_counted"] else None
    if (
        gate["kind"] == "on"
        and last_at is not None
        and last_at >= gate["entered_at"]
        and (counted_at is None or last_at > counted_at)
    ):
        return last_at, False
    return gate["last_event_at"], gate["last_event_counted"]


def waiting_for(gate: Gate, now: datetime) -> dict[str, Any]:
    """The ``waiting_on`` answer (reason ``gate``) for a phase held by ``gate``."""
    found: dict[str, Any] = {"reason": "gate"}
    if gate["kind"] in ("after", "reading"):
        found["until"] = gate["deadline"]
    found["sentence"] = sentence(gate, now)
    found["words"] = sentence_parts(gate, now)
    return found


async def waiting(
    conn: AsyncConnection, *, run_id: int, phase: Mapping[str, Any], now: datetime
) -> dict[str, Any] | None:
    """The ``waiting_on`` payload (reason ``gate``) for a phase held by its gate, or None."""
    gate = await holding(conn, run_id=run_id, phase=phase, now=now)
    return None if gate is None else waiting_for(gate, now)


def view(gate: Gate, now: datetime) -> dict[str, Any]:
    """The run console's ``gate``."""
    at, by = satisfied(gate, now)
    last_at, counted = last_firing(gate)
    return {
        "kind": gate["kind"],
        "phase": gate["phase"],
        "condition": condition_text(gate),
        "trigger_id": gate["trigger_id"],
        "tally": gate["tally"],
        "needed": gate["needed"],
        "entered_at": gate["entered_at"],
        "deadline": gate["deadline"],
        "last_event_at": last_at,
        "last_event_counted": counted,
        "satisfied_at": at,
        "satisfied_by": by,
    }


async def console_gate(
    conn: AsyncConnection,
    *,
    run_id: int,
    phase: Mapping[str, Any],
    now: datetime,
) -> dict[str, Any] | None:
    """The run console's ``gate`` for the current phase, or None when it has none."""
    if _advance(phase) is None:
        return None
    row = await gate_rows.gate_of(conn, run_id, phase["key"])
    return None if row is None else view(row._mapping, now)


def summary(gate: Gate) -> dict[str, Any]:
    """What a log line says about a gate: its kind and what it counts or waits for."""
    if gate["kind"] == "after":
        return {"kind": "after", "after": after_text(gate), "deadline": gate["deadline"]}
    if gate["kind"] == "reading":
        condition = gate["condition"] or {}
        return {
            "kind": "reading",
            "reading": condition.get("reading"),
            "at_least": condition.get("at_least"),
            "else": condition.get("else"),
            "read": gate["tally"] if gate.get("satisfied_by") == "reading" else None,
            "deadline": gate["deadline"],
        }
    return {
        "kind": "on",
        "trigger_id": gate["trigger_id"],
        "condition": condition_text(gate),
        "tally": gate["tally"],
        "needed": gate["needed"],
    }


async def log_advanced(
    conn: AsyncConnection,
    gate: Gate,
    *,
    now: datetime,
    reason: str | None = None,
    actor: str | None = None,
) -> None:
    """``phase.advanced``: why the phase went past its gate, and how long it waited (to
    ``satisfied_at``, so a satisfied gate's clock stops); a person's advance, with their
    reason."""
    at, by = satisfied(gate, now)
    waited = ((at or now) - gate["entered_at"]).total_seconds()
    await runlog.phase_advanced(
        conn,
        gate,
        at=now,
        because=by,
        summary=summary(gate),
        waited_seconds=max(0, round(waited)),
        reason=reason,
        actor=actor,
    )


# ── the engine's writes ───────────────────────────────────────────────────────


def _opening(run_id: int, phase: Mapping[str, Any], now: datetime) -> dict[str, Any] | None:
    advance = _advance(phase)
    if advance is None:
        return None
    base = {"run_id": run_id, "phase": phase["key"], "entered_at": now, "tally": 0}
    if "after" in advance:
        seconds = parse_after(advance["after"])
        if seconds is None:
            # A published version was validated; an unreadable duration is corruption, and
            # guessing a deadline would advance a phase its author meant to hold.
            raise ValueError(f'phase "{phase["key"]}": unreadable after {advance["after"]!r}')
        return {**base, "kind": "after", "needed": 1, "deadline": now + timedelta(seconds=seconds)}
    if "reading" in advance:
        wait = parse_after(advance.get("wait"))
        if wait is None:
            raise ValueError(f'phase "{phase["key"]}": unreadable wait {advance.get("wait")!r}')
        condition = {k: advance.get(k) for k in ("reading", "params", "at_least", "else")}
        return {
            **base,
            "kind": "reading",
            "condition": condition,
            "needed": max(1, math.ceil(advance["at_least"])),
            "deadline": now + timedelta(seconds=wait),
        }
    return {
        **base,
        "kind": "on",
        "trigger_id": advance.get("on"),
        "condition": advance.get("where"),
        "match_key": gate_key(advance.get("where")),
        "needed": int(advance.get("count") or 1),
    }


async def enter_phase(
    conn: AsyncConnection, *, run_id: int, phase: Mapping[str, Any], now: datetime
) -> dict[str, Any] | None:
    """Open the phase's gate, in the transaction that makes the phase current.

    Answers the gate's :func:`summary` for the ``phase.entered`` line, or None for a phase
    without ``advance``. Idempotent: a row already there is kept with its clock and tally.
    """
    values = _opening(run_id, phase, now)
    if values is None:
        return None
    await gate_rows.open_gate(conn, values)
    return summary(values)


def stalls(gate: Gate, now: datetime, stall_seconds: float) -> bool:
    """Whether a held gate has held its phase for ``stall_seconds`` (since phase entry)."""
    return (now - gate["entered_at"]).total_seconds() >= stall_seconds


async def note_stall(conn: AsyncConnection, gate: Gate, *, now: datetime) -> bool:
    """Raise the run's health to ``stalled`` for a gate that stalls; ``run.health`` is
    logged only by the call that changed it (escalation is a compare-and-set)."""
    waited = (now - gate["entered_at"]).total_seconds()
    return await runs.escalate_health(
        conn,
        gate["run_id"],
        Health.STALLED,
        because=f"phase {gate['phase']} has waited {elapsed(waited)} on its gate",
        at=now,
        waited_seconds=round(waited),
        gate=summary(gate),
        phase=gate["phase"],
    )


async def leave_phase(
    conn: AsyncConnection, *, run_id: int, phase: Mapping[str, Any], now: datetime
) -> None:
    """Record the phase going past its gate, in the transaction that leaves the phase.

    An ``after`` gate whose deadline came is closed here (``phase.gate``). ``phase.advanced``
    is written for a gate satisfied by its tally or deadline; a forced one already has its
    line, written by the person's control with the actor and the reason.
    """
    if _advance(phase) is None:
        return
    row = await gate_rows.gate_of(conn, run_id, phase["key"])
    if row is None:
        return
    gate = row._mapping
    if gate["satisfied_at"] is None and at_deadline(gate):
        if await gate_rows.close_at_deadline(conn, gate["id"], now):
            gate = await gate_rows.gate_by_id(conn, gate["id"])
            await log_closed(conn, gate, now=now)
    if gate["satisfied_by"] in ("tally", "deadline", "reading"):
        await log_advanced(conn, gate, now=now)


async def log_closed(
    conn: AsyncConnection,
    gate: Gate,
    *,
    now: datetime,
    actor: str | None = None,
    batch: Batch | None = None,
) -> None:
    """``phase.gate``: the gate was satisfied (by its tally or its deadline); the line is
    kept for ``batch``'s one insert when given."""
    await runlog.phase_gate(conn, gate, at=now, summary=summary(gate), actor=actor, batch=batch)
