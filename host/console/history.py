"""Runs: the history of every event's runs, newest first, filtered and paged.

The data is :func:`pageant.runs.listing.list_runs`, the function behind
``GET /api/v1/admin/runs``, read through the same :func:`~pageant.runs.listing.read_filter`
(so a bad filter is refused in the API's words, naming the form's field). Each row adds who
made the run (its ``run.created`` line's actor) and how long it took.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from aiohttp import web

from pageant.access.roles import STAFF
from pageant.console.clock import page_clock
from pageant.console.keys import host_of, render, require
from pageant.db import runlog
from pageant.errors import Invalid
from pageant.events import definitions
from pageant.runs import listing

routes = web.RouteTableDef()

#: Runs per page.
PAGE = 50
#: How many events the event filter offers.
EVENTS = 500
LABELS = {
    "status": "Status",
    "health": "Health",
    "definition": "Event",
    "from": "Scheduled from",
    "to": "Scheduled before",
}


def _instant_field(raw: str) -> str:
    """A form's ``datetime-local`` value (read as UTC) as the instant the filter reads; a
    value with its own offset is passed on unchanged."""
    text = raw.strip()
    if len(text) == 16 and text[10:11] == "T":
        return text + ":00Z"
    if len(text) == 19 and text[10:11] == "T":
        return text + "Z"
    return text


def _before(raw: str | None) -> int | None:
    if raw is None or raw == "":
        return None
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= listing.MAX_ID:
        raise Invalid("invalid filter", details=[f"before: expected a run id; got {raw[:20]!r}"])
    return int(raw)


def _took(run: dict[str, Any]) -> float | None:
    started, ended = run.get("started_at"), run.get("ended_at")
    if isinstance(started, datetime) and isinstance(ended, datetime):
        return (ended - started).total_seconds()
    return None


@routes.get("/runs")
async def runs_page(request: web.Request) -> web.Response:
    require(request, STAFF)
    host = host_of(request)
    query = request.query

    def get(name: str) -> list[str]:
        values = [v for v in query.getall(name, []) if v.strip()]
        return [_instant_field(v) for v in values] if name in ("from", "to") else values

    chosen = {
        "status": query.getall("status", []),
        "health": query.getall("health", []),
        "definition": query.get("definition", ""),
        "from": query.get("from", ""),
        "to": query.get("to", ""),
    }
    async with host.db.connect() as conn:
        events = await definitions.list_definitions(conn, limit=EVENTS)
    values: dict[str, Any] = {
        "chosen": chosen,
        "statuses": listing.STATUSES,
        "healths": listing.HEALTHS,
        "events": events,
        "runs": [],
        "next_before": None,
        "paged": False,
        "problems": [],
        "clock": page_clock(request),
    }
    try:
        where = listing.read_filter(get, label=lambda name: LABELS.get(name, name))
        before = _before(query.get("before"))
        found = await listing.list_runs(host, where, before_id=before, limit=PAGE)
    except Invalid as exc:
        values["problems"] = exc.details or [exc.message]
        return render(request, "runs.html", status=400, **values)
    runs = found["items"]
    async with host.db.connect() as conn:
        makers = await runlog.creators(conn, [r["id"] for r in runs])
    for run in runs:
        run["made_by"] = makers.get(run["id"])
        run["took"] = _took(run)
    keep = [(k, v) for k, v in query.items() if k != "before" and v]
    values.update(
        runs=runs,
        next_before=found["next_before"],
        paged=before is not None,
        keep=keep,
    )
    return render(request, "runs.html", **values)
