"""The reading-gates stage: phases held by a quorum (a reading gate), read and decided.

A reading gate (``"advance": {"reading": ..., "at_least": n, "wait": "30m", "else": ...}``)
holds its phase until the reading reaches its number. Nothing fires it, so this stage reads
each open one of a running run in its current phase (through the host's
:class:`~pageant.plugins.readings.Readings`: at most once per ``reading_interval_seconds``
for the same params, shared with every start condition and gate asking), each run's in a
task of its own beside the tick. A reading that reached the number satisfies the gate
(``satisfied_by: reading``) and wakes the engine, whose advance stage then moves the run.
When the wait has ended short (or unknown), ``else`` decides: ``advance`` is the gate's
deadline satisfying it (:func:`pageant.gates.phase.at_deadline`, as an ``after`` gate's);
``fail`` fails the run, its reason saying how far short it was.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pageant.db import phase_gates as gate_rows
from pageant.engine import transitions
from pageant.engine.contention import noted
from pageant.engine.readiness import attached
from pageant.gates import phase as gates
from pageant.runs import lifecycle, quorum
from pageant.states import Outcome

if TYPE_CHECKING:
    from pageant.hosting import Host

log = logging.getLogger("pageant.engine")


async def read_gates(host: Host, now: datetime) -> None:
    """Read every open reading gate (at most ``runs_per_tick`` a tick), each run's in a task
    of its own."""
    async with host.db.connect() as conn:
        found = await gate_rows.open_reading_gates(conn, limit=host.settings.runs_per_tick)
    engine = attached(host, "reading gates")
    for row in found:
        gate = dict(row._mapping)
        if gate["deadline"] <= now and gates.at_deadline(gate):
            continue  # its deadline satisfies it: the advance stage's to move past
        engine.spawn(row.run_id, _look(host, gate, now))


async def _look(host: Host, gate: dict[str, Any], now: datetime) -> tuple[str, bool]:
    try:
        return await _decide(host, gate, now)
    except Exception as exc:
        if not noted(host, f"reading the gate of run {gate['run_id']}", exc):
            log.exception("could not read the gate of run %s", gate["run_id"])
        return Outcome.ERROR, False


async def _decide(host: Host, gate: dict[str, Any], now: datetime) -> tuple[str, bool]:
    condition = gate["condition"] or {}
    run = {"params": gate["run_params"], "scope": gate["run_scope"]}
    read = await host.readings.read(
        str(condition.get("reading")), quorum.reading_params(condition, run)
    )
    if read.amount is not None and read.amount >= condition.get("at_least", 0):
        async with host.db.begin() as conn:
            if not await gate_rows.satisfy_by_reading(
                conn, gate["id"], now, tally=int(read.amount)
            ):
                return Outcome.TAKEN, False
            await gates.log_closed(conn, await gate_rows.gate_by_id(conn, gate["id"]), now=now)
        return Outcome.WAITING, True  # the advance stage moves it on its next look
    if now < gate["deadline"] or condition.get("else") != gates.ELSE_FAIL:
        return Outcome.WAITING, False
    because = f"phase {gate['phase']}: {quorum.short_words(_waited(gate), host.registry, read)}"
    async with host.db.begin() as conn:
        failed = await transitions.fail_in(conn, gate["run_id"], because, now=now)
    if failed:
        await lifecycle.announce(host, gate["run_id"], lifecycle.RUN_FAILED)
    return Outcome.FAILED, failed


def _waited(gate: dict[str, Any]) -> dict[str, Any]:
    """The gate's condition with its ``wait``, as the quorum's sentences read one."""
    seconds = round((gate["deadline"] - gate["entered_at"]).total_seconds())
    return {**(gate["condition"] or {}), "wait": gates.format_after(seconds)}
