"""Reconcile: ask a plugin which of the resources the ledger holds for it are still in the
world. Called at the host's start and whenever a plugin asks through its context; handed
what it needs (the database, the clock, the plugin's hook), so it imports nothing of the
host."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from pageant.db import resources, runlog
from pageant.hookspecs import HeldResource, Resource
from pageant.ledger.state import released, settle
from pageant.support.clock import Clock

log = logging.getLogger("pageant.ledger")


def _still_in_force(answer: Any) -> set[Any]:
    # Each item: a ref (the contract's answer), or a {kind, ref} mapping or a resource
    # object, which name the kind as well.
    out: set[Any] = set()
    if not isinstance(answer, list | tuple | set):
        raise TypeError(f"reconcile answered {type(answer).__name__}, not a list")
    for item in answer:
        if isinstance(item, Resource | HeldResource):
            out.add((item.kind, item.ref))
        elif isinstance(item, Mapping):
            out.add((str(item["kind"]), str(item["ref"])))
        else:
            out.add(str(item))
    return out


async def reconcile(
    db: AsyncEngine, clock: Clock, owner: str, hook: Callable[..., Any] | None
) -> dict[str, Any]:
    """Ask ``owner``'s plugin (its ``pageant_reconcile``, ``hook``) which of the rows it holds
    are still in the world; the rows it no longer reports become ``orphaned`` (never
    ``reverted``). A reconcile that raises or answers something unreadable changes nothing
    and is logged. Answers ``{asked, orphaned}`` (and ``error``)."""
    async with db.connect() as conn:
        rows = await resources.holding_of_owner(conn, owner)
    if hook is None or not rows:
        return {"asked": len(rows), "orphaned": 0}
    asked = [
        HeldResource(
            owner=row.owner,
            kind=row.kind,
            ref=row.ref,
            status=row.status,
            payload=dict(row.payload or {}),
        )
        for row in rows
    ]
    try:
        answer = hook(asked)
        if inspect.isawaitable(answer):
            answer = await answer
        still = _still_in_force(answer)
    except Exception as exc:
        log.warning("reconcile of %s failed; the ledger is left as it was: %s", owner, exc)
        now = clock.now()
        async with db.begin() as conn:
            for run_id in sorted({row.run_id for row in rows}):
                await runlog.resource_reconcile_failed(
                    conn, run_id, at=now, owner=owner, error=f"{type(exc).__name__}: {exc}"
                )
        return {"asked": len(rows), "orphaned": 0, "error": str(exc)}
    now = clock.now()
    gone = [row for row in rows if (row.kind, row.ref) not in still and row.ref not in still]
    async with db.begin() as conn:
        for row in gone:
            await released(
                conn, row, to="orphaned", now=now, attempted=False, detail={"by": "reconcile"}
            )
        for run_id in sorted({row.run_id for row in gone}):
            await settle(conn, run_id, now=now)
    return {"asked": len(rows), "orphaned": len(gone)}
