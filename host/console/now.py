"""Now: the runs under way across every event, each with why it waits; those waiting on a
person lead the page in a banner.

The data is :func:`pageant.runs.listing.list_runs`, the function behind
``GET /api/v1/admin/runs`` and ``pageant runs list``, with its summary of what needs
attention.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from aiohttp import web

from pageant.access.roles import STAFF
from pageant.console.keys import host_of, render, render_tagged, require
from pageant.db import runs as run_rows
from pageant.events import definitions
from pageant.runs.listing import RunFilter, list_runs
from pageant.states import RUN_LIVE

routes = web.RouteTableDef()

#: The statuses of a run that is under way.
#: The most runs the page lists (newest first); the summary counts every one.
LIMIT = 200
#: How far back the count of runs that ended badly looks.
RECENT = timedelta(hours=24)


async def _now(request: web.Request) -> dict[str, Any]:
    found = await list_runs(
        host_of(request), RunFilter(statuses=RUN_LIVE), before_id=None, limit=LIMIT
    )
    runs = found["items"]
    host = host_of(request)
    now = host.clock.now()
    async with host.db.connect() as conn:
        trouble = await run_rows.ended_in_trouble(conn, since=now - RECENT)
        # Only asked when nothing is under way: whether there is any event to start yet.
        any_event = bool(runs) or bool(await definitions.list_definitions(conn, limit=1))
    since = (now - RECENT).strftime("%Y-%m-%dT%H:%M")
    # A person is what a parked step and a paused run both wait for (as the summary counts).
    waiting = [r for r in runs if (r["waiting_on"] or {}).get("reason") in ("parked", "paused")]
    return {
        "runs": runs,
        "waiting_on_person": waiting,
        "summary": found["summary"],
        "more": found["next_before"] is not None,
        "trouble": trouble,
        "trouble_since": since,
        "any_event": any_event,
    }


@routes.get("/now")
async def now_page(request: web.Request) -> web.Response:
    require(request, STAFF)
    return render(request, "now.html", **await _now(request))


@routes.get("/now/live")
async def now_live(request: web.Request) -> web.Response:
    """The part of the page htmx polls, revalidated as the run page's is
    (:func:`~pageant.console.keys.render_tagged`)."""
    require(request, STAFF)
    return render_tagged(request, "_now_live.html", **await _now(request))
