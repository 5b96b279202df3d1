"""A run's start and its entry into a phase, written in the caller's transaction: a run's own
task's, or the advance stage's set-wise claim (:mod:`pageant.engine.claiming`)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pageant.db import runlog, runs
from pageant.db.shared import Batch
from pageant.gates import phase as gates
from pageant.runs import params as run_params
from pageant.runs import waiting
from pageant.runs.create import materialise_phase

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

    from pageant.hosting import Host


class Lost(Exception):
    """The run changed underneath a transition (a control won): roll the transaction back."""


def is_late(run: Mapping[Any, Any], now: datetime) -> bool:
    """Whether a scheduled run's grace window has passed: the missed sweep's, not a start's.
    A run its event's catch-up policy let in (``catch_up`` set) is never late: it starts
    when its turn comes (:mod:`pageant.engine.catchup`)."""
    if run.get("catch_up"):
        return False
    return bool(now > run["scheduled_for"] + timedelta(seconds=run["grace_seconds"]))


async def start_in(
    conn: AsyncConnection,
    run: Mapping[str, Any],
    *,
    owner: str,
    lease: datetime,
    now: datetime,
    batch: Batch | None = None,
    because: str | None = None,
) -> bool:
    """``scheduled -> starting`` under ``owner``'s claim lease, in ``conn``; False when another
    claimer got there first. Raises IntegrityError when the run's concurrency key is held
    by another live run. Its log lines are kept for ``batch``'s one insert when given;
    ``because`` is what its ``run.status`` line says of why it starts (a catch-up's)."""
    if not await runs.claim_start(conn, run["id"], owner=owner, lease=lease, now=now):
        return False
    await runlog.run_status(
        conn, run["id"], at=now, from_="scheduled", to="starting", because=because, batch=batch
    )
    if run["waiting_reason"] is not None:
        await waiting.note(conn, run["id"], None, now=now, batch=batch)
    return True


async def enter_phase_in(
    conn: AsyncConnection,
    host: Host,
    run_id: int,
    phases: list[dict[str, Any]],
    index: int,
    *,
    from_status: str,
    old_phase: str | None,
    now: datetime,
    batch: Batch | None = None,
) -> None:
    """Make ``phases[index]`` current in ``conn``: its steps and gate are made before the
    transition (so the gate's clock and tally start with the phase), and the phase left
    behind records going past its gate. Raises :class:`Lost` when the run changed
    underneath; the caller rolls back, so nothing is written then. Given ``batch``, the
    new steps and the entry's lines are kept for its set-wise inserts (the caller flushes
    them before anything reads the run's steps)."""
    phase = phases[index]
    scope, params = await runs.param_values(conn, run_id)
    values = run_params.with_scope(params, scope)
    count = await materialise_phase(
        conn, run_id=run_id, phase=phase, registry=host.registry, values=values, batch=batch
    )
    # The gate opens with its condition's {"param": ...} values written out, so the emit
    # path compares plain values and finds the gate by them (pageant.gates.matching).
    gate = await gates.enter_phase(
        conn, run_id=run_id, phase=run_params.resolve(phase, values), now=now
    )
    if not await runs.enter_phase(
        conn, run_id, from_status=from_status, old_phase=old_phase, phase=phase["key"]
    ):
        raise Lost
    if old_phase is None:
        await runlog.run_status(conn, run_id, at=now, from_="starting", to="running", batch=batch)
    else:
        await gates.leave_phase(conn, run_id=run_id, phase=phases[index - 1], now=now)
        await runlog.phase_completed(conn, run_id, at=now, phase=old_phase, index=index - 1)
    await runlog.phase_entered(
        conn, run_id, at=now, phase=phase["key"], index=index, steps=count, gate=gate, batch=batch
    )
