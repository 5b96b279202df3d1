"""Claiming set-wise: the advance stage claims the due runs, and their ready steps, together.

When the advance stage finds several running runs due at once — a hundred waits ending in
the same second, twenty runs moving side by side — it claims them in **one transaction**
instead of one task at a time: each run's claim (the same compare-and-set a run's own task
makes), their cursors in one read, and every step that is plainly ready (pending and due,
the run running, not held, the action available) with the same compare-and-set, budget
check and ledger placeholder as any claim. A note of what the run waited on is cleared in
the same transaction. Each claimed run is then handed to its task with its claim and its
cursor in hand, so it performs the step at once; a run whose step is not ready (a gate, a
due instant not come) is looked at by its task as ever.

On MariaDB the run rows are first locked ``FOR UPDATE SKIP LOCKED``: a run another host is
claiming right now is skipped, not waited for, so two hosts share the due runs instead of
queueing on each other's locks.

Only as many runs are claimed as there are dispatch slots free: a claimed step's lease runs
from its claim, and a step must not wait for a slot longer than its lease.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from pageant.db import runs
from pageant.engine.batch import in_outcome_transaction
from pageant.engine.dispatch import Ahead

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

    from pageant.hosting import Host

#: Fewer due runs than this are claimed by their own tasks (one run gains nothing).
MIN_SET = 2


def candidates(host: Host, found: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The due runs a set-wise claim may take: running and not held (a hold that ran out is
    the run's loop to clear), as many as there are dispatch slots free."""
    engine = host.engine
    room = host.settings.dispatch_concurrency - len(getattr(engine, "inflight", ()))
    plain = [row for row in found if row["status"] == "running" and row["hold_until"] is None]
    return plain[: max(0, room)]


async def claim_due(
    host: Host, found: Sequence[Mapping[str, Any]]
) -> tuple[dict[int, Ahead], set[int]]:
    """Claim what of ``found`` (the advance stage's due runs) can be claimed set-wise.

    Answers ``(claimed, tried)``: run id -> what its task starts from (the cursor read in
    the claim, and the step claimed when it was ready), and every run id this tried —
    one tried and not claimed is another claimer's, and not handed to a task.
    """
    rows = candidates(host, found)
    if len(rows) < MIN_SET or getattr(host.engine, "stopping", False):
        return {}, set()
    owner = host.identity
    now = host.clock.now()
    lease = now + timedelta(seconds=host.settings.run_lease_seconds)
    tried = {int(row["id"]) for row in rows}

    async def claim(conn: AsyncConnection) -> dict[int, Ahead]:
        # Shared with other runs' writes; may run twice (each time from the start).
        free = await runs.lock_free(conn, sorted(tried), now=now)
        mine = [
            run_id
            for run_id in free
            if await runs.claim_tick(conn, run_id, owner=owner, lease=lease, now=now)
        ]
        cursors = await runs.read_cursors(conn, mine)
        claimed: dict[int, Ahead] = {}
        for run_id in mine:
            ahead = Ahead(host, run_id)
            await ahead.take(conn, cursors.get(run_id), now=now, clear_waiting=True)
            claimed[run_id] = ahead
        return claimed

    return await in_outcome_transaction(host, claim), tried
