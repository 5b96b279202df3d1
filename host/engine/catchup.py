"""Catch-up in the tick: the late occurrences of an event that catches up, decided and written.

The missed sweep hands here every scheduled run whose grace window has passed. The ones
whose event has a catch-up policy (``spec.catch_up``, read from the run's pinned version) and
that no host held while they were due are grouped by event and scope, and
:func:`pageant.schedules.catchup.decide` says what becomes of each group: a run let in to
catch up keeps ``scheduled`` with ``catch_up`` set (a compare-and-set, so two hosts never
both decide it), a run left behind is ``missed`` with its reason. The rest are the sweep's,
as ever.

"Held" is a run a host saw while it was due and kept waiting — its concurrency key taken, its
version unverified. Its grace window decides, exactly as before: nothing was down.

A run let in starts in the advance stage when its turn comes (:func:`turn`): never while
another run of its event and scope is live, nor before an earlier one let in has started, so
catch-up runs follow one another in slot order. Its start's ``run.status`` line says how late
it is and why (:func:`started_because`).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pageant.db import catch_up as catch_up_rows
from pageant.engine import transitions
from pageant.engine.contention import noted
from pageant.engine.transitions import is_late
from pageant.schedules import catchup
from pageant.states import WaitingReason

if TYPE_CHECKING:
    from sqlalchemy.engine import Row

    from pageant.hosting import Host

log = logging.getLogger("pageant.engine")

#: The waiting reasons of a run a host held while it was due: not a run the outage missed.
HELD = (WaitingReason.CONCURRENCY, WaitingReason.UNVERIFIED, WaitingReason.REQUIRES)


async def settle_late(host: Host, late: Sequence[Row], now: datetime) -> set[int]:
    """Decide the late runs (the missed sweep's) whose event catches up; answers the ids of
    the runs it took (decided here, or by another host first), which the sweep leaves."""
    groups: dict[tuple[int, str], list[Row]] = defaultdict(list)
    for row in late:
        if row.waiting_reason not in HELD:
            groups[(row.definition_id, row.scope)].append(row)
    taken: set[int] = set()
    for (definition_id, scope), seen in groups.items():
        try:
            policy = await _policy_of(host, seen)
            if not policy.catches_up:
                continue
            # The whole group, not only the batch's part of it: "one" runs the latest.
            async with host.db.connect() as conn:
                found = await catch_up_rows.late_of(conn, definition_id, scope, now)
            rows = [
                row
                for row in found
                if is_late(row._mapping, now) and row.waiting_reason not in HELD
            ]
            await _settle_group(host, policy, rows, now)
            taken.update(row.id for row in seen)
        except Exception as exc:
            if not noted(host, f"catching up event {definition_id}", exc):
                log.exception(
                    "could not decide the catch-up of event %s (scope %r)", definition_id, scope
                )
            # Undecided: left scheduled for the next tick rather than missed meanwhile.
            taken.update(row.id for row in seen)
    return taken


async def _policy_of(host: Host, rows: Sequence[Row]) -> catchup.CatchUp:
    # The latest occurrence's pinned version speaks for the group: a publish re-pins every
    # occurrence that has not started, so they agree but for one published mid-outage.
    latest = max(rows, key=lambda row: row.scheduled_for)
    async with host.db.connect() as conn:
        pinned = await host.versions.get(conn, latest.version_id)
    return catchup.of_spec(pinned.spec if pinned is not None else None)


async def _settle_group(
    host: Host, policy: catchup.CatchUp, rows: Sequence[Row], now: datetime
) -> None:
    by_id = {row.id: row for row in rows}
    decisions = catchup.decide(
        policy, [catchup.Late(row.id, row.scheduled_for) for row in rows], now
    )
    async with host.db.begin() as conn:
        for decision in decisions:
            row = by_id[decision.run_id]
            if decision.outcome is catchup.Outcome.CATCH_UP:
                if await catch_up_rows.grant_catch_up(conn, row.id, decision.note):
                    log.info("run %s will start late: %s", row.id, decision.note)
                continue
            await transitions.miss_in(conn, row._mapping, now=now, because=decision.note)


async def turn(host: Host, run: Mapping[str, Any]) -> str | None:
    """None when it is a catch-up run's turn to start; else what it waits for (another run
    of its event and scope that is live, or an earlier catch-up run not yet started)."""
    async with host.db.connect() as conn:
        ahead = await catch_up_rows.catch_up_ahead(conn, run)
    if ahead is None:
        return None
    return f"catching up after run {ahead.id} ({ahead.status})"


def started_because(run: Mapping[str, Any], now: datetime) -> str | None:
    """What a run's start says of its lateness: ``started 40 min late, catching up after the
    host was down (catch_up: one, within 3h)`` for a catch-up run, None for any other."""
    note = run.get("catch_up")
    if not note:
        return None
    return catchup.started_late(str(note), run["scheduled_for"], now)
