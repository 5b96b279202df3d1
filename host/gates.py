"""Phase gates: what a phase waits on besides its steps (``advance`` in the spec).

The engine calls these four functions and nothing else about gates. A phase without
``advance`` has no gate and is open as soon as its steps are terminal; that is the case
implemented here. The gate kinds themselves (``after`` and ``on``, their rows in
``event_run_phase_gates``, the emit path that closes ``on`` gates) extend these functions
without changing their signatures.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db.tables import event_run_phase_gates

gt = event_run_phase_gates.c

_SATISFIED = select(gt.satisfied_at).where(
    gt.run_id == bindparam("run_id"), gt.phase == bindparam("phase")
)


async def enter_phase(
    conn: AsyncConnection, *, run_id: int, phase: dict[str, Any], now: datetime
) -> None:
    """Open the phase's gate, in the transaction that makes the phase current.

    No-op for a phase without ``advance``.
    """
    return None


async def is_open(
    conn: AsyncConnection, *, run_id: int, phase: dict[str, Any], now: datetime
) -> bool:
    """True when the phase may advance as far as its gate is concerned (no gate: open)."""
    if not phase.get("advance"):
        return True
    row = (await conn.execute(_SATISFIED, {"run_id": run_id, "phase": phase["key"]})).first()
    return row is None or row.satisfied_at is not None


async def waiting(
    conn: AsyncConnection, *, run_id: int, phase: dict[str, Any], now: datetime
) -> dict[str, Any] | None:
    """The ``waiting_on`` payload (reason ``gate``) for a phase held by its gate, or None."""
    return None


async def console_gate(
    conn: AsyncConnection, *, run_id: int, phase: dict[str, Any]
) -> dict[str, Any] | None:
    """The run console's ``gate`` for the current phase, or None when it has none."""
    return None
