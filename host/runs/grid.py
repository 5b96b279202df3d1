"""An event's runs side by side: the newest runs as columns, the phases as rows.

Each cell says how one run fared in one phase — ``done``, ``current``, ``stopped`` (the run
ended there without completing it) or ``not reached`` — and how long the phase took, read
from the run log's ``phase.entered`` and ``phase.completed`` lines. Runs of a fan-out (one a
param set at each occurrence) are grouped by their params, so each server's runs sit
together.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pageant.db import runlog, runs
from pageant.db.log_kinds import LogKind
from pageant.gates.phase import elapsed
from pageant.hosting import Host
from pageant.states import RUN_ENDED

#: How many of the newest runs the grid shows.
GRID_RUNS = 30


def _group(params: Any) -> str:
    if not isinstance(params, Mapping) or not params:
        return ""
    return ", ".join(f"{k} {v}" for k, v in sorted(params.items()))


def cell(
    status: str,
    current: str | None,
    key: str,
    entered: datetime | None,
    left: datetime | None,
    now: datetime,
) -> dict[str, Any]:
    """One run's state in one phase, with how long it took (or has taken) in words."""
    if left is not None and entered is not None:
        state = "done"
    elif entered is not None and current == key and status not in RUN_ENDED:
        state = "current"
    elif entered is not None:
        state = "stopped"
    else:
        state = "not reached"
    took = None
    if entered is not None:
        took = elapsed(((left or now) - entered).total_seconds())
    return {"state": state, "took": took}


async def grid(
    host: Host, definition_id: int, phases: Sequence[Mapping[str, Any]], limit: int = GRID_RUNS
) -> dict[str, Any]:
    """The event's newest ``limit`` runs as columns (grouped by their params) and
    ``phases`` (each ``{key, label}``, the event's) as rows."""
    now = host.clock.now()
    async with host.db.connect() as conn:
        rows = await runs.newest_of_definition(conn, definition_id, limit)
        marks = await runlog.phase_marks(conn, [row.id for row in rows])
    entered: dict[tuple[int, str], datetime] = {}
    left: dict[tuple[int, str], datetime] = {}
    for mark in marks:
        place = (mark.run_id, mark.phase)
        if mark.kind == LogKind.PHASE_ENTERED:
            entered.setdefault(place, mark.at)
        else:
            left[place] = mark.at
    columns = sorted(
        (
            {
                "id": row.id,
                "status": row.status,
                "group": _group(row.params),
                "scheduled_for": row.scheduled_for,
            }
            for row in rows
        ),
        key=lambda c: (c["group"], c["id"]),
    )
    keys = [p["key"] for p in phases]
    extra = sorted({m.phase for m in marks if m.phase not in keys})
    rows_out = []
    for key in [*keys, *extra]:
        label = next((p.get("label") or key for p in phases if p["key"] == key), key)
        by_run = {row.id: row for row in rows}
        rows_out.append(
            {
                "key": key,
                "label": label,
                "cells": [
                    {
                        "run_id": c["id"],
                        **cell(
                            by_run[c["id"]].status,
                            by_run[c["id"]].current_phase,
                            key,
                            entered.get((c["id"], key)),
                            left.get((c["id"], key)),
                            now,
                        ),
                    }
                    for c in columns
                ],
            }
        )
    groups: list[dict[str, Any]] = []
    for c in columns:
        if groups and groups[-1]["name"] == c["group"]:
            groups[-1]["span"] += 1
        else:
            groups.append({"name": c["group"], "span": 1})
    return {"columns": columns, "rows": rows_out, "groups": groups}
