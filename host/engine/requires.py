"""Campaigns in the tick: a due occurrence whose event requires another event's outcome.

A run's start asks :func:`check` first (:func:`pageant.engine.advance_stage._start`). It
reads the required event's runs and decides (:func:`pageant.runs.requires.read_decision`):

- **start** — the start goes on, and its ``run.status`` line says which run let it;
- **hold** — the run stays ``scheduled`` with the waiting reason ``requires`` and the
  sentence naming the run it waits for (noted once per change, like a held concurrency
  key). Nothing is held open while it waits: the advance stage looks at it again on each
  tick, as at any due run. Its grace window bounds the wait: the missed sweep hands a run
  still held when its window ends to :func:`give_up`, which skips it with the reason;
- **skip** — ``scheduled -> skipped`` with the reason, at once.

Every ending is the run's own compare-and-set from ``scheduled`` (``skip_in``), and a start
is the start's, so two hosts deciding the same occurrence at once write one outcome.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pageant.engine import transitions
from pageant.engine.contention import noted
from pageant.runs import requires as campaigns
from pageant.runs import waiting
from pageant.states import Outcome, WaitingReason

if TYPE_CHECKING:
    from sqlalchemy.engine import Row

    from pageant.hosting import Host

log = logging.getLogger("pageant.engine")


@dataclass(frozen=True)
class Checked:
    """What a requirement says of a due run: ``outcome`` is None when it may start, else
    what its start came to (held, skipped, or taken by another host); ``because`` is what
    its start says of the requirement."""

    outcome: Outcome | None = None
    because: str | None = None

    def started_because(self, other: str | None) -> str | None:
        """This start's words beside ``other`` (a catch-up's), either or both."""
        said = [part for part in (other, self.because) if part]
        return "; ".join(said) or None


#: A run whose event requires nothing: it starts as ever.
FREE = Checked()


async def check(host: Host, run: Mapping[str, Any], now: datetime) -> Checked:
    """Decide a due scheduled run's requirement at ``now``: hold it, skip it, or let it
    start (:class:`Checked`). An event without ``requires`` costs one cached read; a
    person's start-now is not held (that person decided it runs), as for verification."""
    if not campaigns.applies_to(run):
        return FREE
    async with host.db.connect() as conn:
        pinned = await host.versions.get(conn, run["version_id"])
        requirement = campaigns.of_spec(pinned.spec if pinned is not None else None)
        if requirement is None:
            return FREE
        decision = await campaigns.read_decision(conn, requirement, run, now)
    if decision.verdict is campaigns.Verdict.START:
        return Checked(because=campaigns.started_note(decision))
    if decision.verdict is campaigns.Verdict.HOLD:
        held = campaigns.waiting_on(decision, run, now)
        if run.get("waiting_reason") != WaitingReason.REQUIRES:
            async with host.db.begin() as conn:
                await waiting.note(conn, run["id"], held, now=now)
        return Checked(Outcome.REQUIRES)
    async with host.db.begin() as conn:
        skipped = await transitions.skip_in(
            conn, run["id"], campaigns.skipped_note(decision), now=now
        )
    return Checked(Outcome.SKIPPED if skipped else Outcome.TAKEN)


async def give_up(host: Host, late: Sequence[Row], now: datetime) -> set[int]:
    """Skip the late runs (the missed sweep's) that were held for their requirement when
    their grace window ended, saying so; answers the ids it took, which the sweep leaves."""
    taken: set[int] = set()
    for row in late:
        if row.waiting_reason != WaitingReason.REQUIRES:
            continue
        taken.add(row.id)
        try:
            async with host.db.begin() as conn:
                pinned = await host.versions.get(conn, row.version_id)
                requirement = campaigns.of_spec(pinned.spec if pinned is not None else None)
                if requirement is None:
                    await transitions.miss_in(conn, row._mapping, now=now)
                    continue
                await transitions.skip_in(
                    conn, row.id, campaigns.gave_up_note(requirement), now=now
                )
        except Exception as exc:
            if not noted(host, f"skipping run {row.id} held for its requirement", exc):
                log.exception("could not skip run %s held for its requirement", row.id)
    return taken
