"""The run console page: the phases as a timeline, the gate, the budget, what the run holds
in the world and its cleanup, the log, and the controls.

The data is :func:`pageant.runs.console.console` (the same function behind
``GET /api/v1/admin/runs/{id}``); the controls call :mod:`pageant.runs.controls`, the
functions behind the API's control routes, with the same role sets (``CONTROLLERS``; the
cleanup, ``ADMIN``). A control the run has moved past answers 409 with the server's
sentence, shown on the page.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from markupsafe import Markup, escape

from pageant.access.roles import ADMIN, AUTHORS, CONTROLLERS, STAFF
from pageant.console import filters
from pageant.console import timeline as drawing
from pageant.console.clock import page_clock
from pageant.console.filters import at
from pageant.console.keys import host_of, path_id, render, render_tagged, require, see_other
from pageant.console.rehearsal import drawn as drawn_rehearsal
from pageant.db import phase_gates
from pageant.db.countdown import COUNTDOWN_PHASE
from pageant.engine import rehearsal
from pageant.errors import Conflict, Invalid, NotFound, PageantError
from pageant.events import definitions
from pageant.runs import controls, sentences
from pageant.runs.console import console, pinned_spec
from pageant.runs.milestones import milestone_phase
from pageant.runs.sentences import Context
from pageant.runs.versions import phases_of
from pageant.schedules.recurrence import zone
from pageant.states import (
    RUN_ADVANCE,
    RUN_CANCEL,
    RUN_ENDED,
    RUN_PAUSE,
    RUN_RESCHEDULE,
    RUN_RESUME,
    STEP_OPEN,
)

routes = web.RouteTableDef()

#: How many of the newest log lines the page shows.
LOG_LINES = 200
MAX_REASON = 200
MAX_NOTE = 2000

#: control -> (statuses of the run it acts from, whether a reason is required).
RUN_CONTROLS: dict[str, tuple[tuple[str, ...], bool]] = {
    "pause": (RUN_PAUSE.froms, False),
    "resume": (RUN_RESUME.froms, False),
    "advance": (RUN_ADVANCE.froms, True),
    "cancel": (RUN_CANCEL.froms, True),
    "reschedule": (RUN_RESCHEDULE.froms, True),
}
STEP_CONTROLS = ("confirm", "skip", "retry")

#: A ledger row's status -> (the words the page shows, whether the row still holds its
#: target in the world). The status itself is shown beside the words.
RESOURCE_STATES: dict[str, tuple[str, bool]] = {
    "pending": ("held; its answer not yet confirmed", True),
    "confirmed": ("held", True),
    "revert_failed": ("held; giving it back failed", True),
    "reverted": ("given back", False),
    "drifted": ("released; changed by someone else, left alone", False),
    "orphaned": ("released; no longer in the game", False),
}
#: The run's cleanup_status -> the sentence that leads the resources section (``pending``
#: reads differently while the run goes on: nothing is given back before it ends, or
#: before a lease's deadline).
CLEANUP_STATES: dict[str, str] = {
    "not_required": "Nothing to give back: the run has recorded nothing in the world.",
    "pending": "Giving back what is still held; the host keeps trying.",
    "pending-live": "What is held is given back when the run ends, or at a lease's deadline.",
    "incomplete": "Something is still out there and nothing is left to try on it.",
    "complete": "Everything recorded has been given back or released.",
}


def _run_id(request: web.Request, name: str = "run_id") -> int:
    return path_id(request, name, "run")


async def _pinned(request: web.Request, run: dict[str, Any]) -> dict[str, Any]:
    """What the page reads beside the console: the pinned version's phases, the event's
    zone, and every gate the run has opened (by phase)."""
    host = host_of(request)
    async with host.db.connect() as conn:
        found = await pinned_spec(host, conn, run["version_id"])
        event = await definitions.get_definition(conn, run["definition_id"])
        gates = await phase_gates.gates_of_run(conn, run["id"])
    return {
        "phases": (phases_of(found.spec) if found else None) or [],
        "tz": event.timezone if event is not None else "UTC",
        "gates": {gate.phase: dict(gate._mapping) for gate in gates},
    }


def phase_state(index: int, current: int | None, status: str) -> str:
    """Where a run is in its ``index``-th phase: ``done``, ``current``, ``ahead``, or, once
    the run has ended, ``stopped here`` (where it ended without completing) and
    ``not reached`` (after that)."""
    if status == "completed" or (current is not None and index < current):
        return "done"
    if current == index:
        return "current" if status not in RUN_ENDED else "stopped here"
    return "not reached" if status in RUN_ENDED else "ahead"


def sentence_html(line: dict[str, Any], context: Context, tz: str) -> Markup:
    """A record's sentence (:func:`pageant.runs.sentences.words`) for a page."""
    return filters.parts(sentences.words(line, context), tz)


def _log_rows(lines: list[dict[str, Any]], tz: str, context: Context) -> Markup:
    """The log's rows: each record's time on the page's clock, its phase, its sentence
    (the record as stored beside it, shown only by the log's one switch) and who.

    Written here rather than by the template's loop, as are a step's cells: a long run's
    page is mostly these rows, and this is several times faster."""
    rows = []
    for line in lines:
        kind = escape(line["kind"])
        phase = context.phase_labels.get(line["phase"]) or line["phase"] or ""
        rows.append(
            f'<tr class="k-{kind.split(".")[0]}">\n      <td data-label="At">'
            f"{at(line['at'], tz, clock=True)}</td>"
            f'\n      <td data-label="Phase">{escape(phase)}</td>'
            f'\n      <td data-label="What">{sentence_html(line, context, tz)}'
            f'<code class="stored">{escape(sentences.stored(line))}</code></td>'
            f'\n      <td data-label="Who">{escape(line["actor"] or "")}</td>\n    </tr>'
        )
    return Markup("\n".join(rows))


def _step_cells(step: dict[str, Any], tz: str, now: datetime) -> Markup:
    """A step's cells in its phase's table, but its controls: its number (the one the
    waiting sentence and the log use), label, action, status, attempts, when it started and
    ended, how long it took, and its last error or note."""
    status = "parked" if step["parked"] else step["status"]
    words = "parked: waiting for a person" if step["parked"] else step["status"]
    started, finished = step["started_at"], step["finished_at"]
    took = drawing.span_words(((finished or now) - started).total_seconds()) if started else ""
    detail = step["last_error"] or step["note"] or ""
    return Markup(
        f'<td data-label="Step">step {step["id"]}</td>'
        f'\n          <td data-label="Label">{escape(step["label"])}</td>'
        f'\n          <td data-label="Action"><code>{escape(step["action"])}</code></td>'
        f'\n          <td data-label="Status"><span class="status s-{escape(status)}">'
        f"{escape(words)}</span></td>"
        f'\n          <td data-label="Attempts">{step["attempts"]}</td>'
        f'\n          <td data-label="Started">{at(started, tz)}</td>'
        f'\n          <td data-label="Ended">{at(finished, tz)}</td>'
        f'\n          <td data-label="Took">{took}</td>'
        f'\n          <td data-label="Detail">{escape(detail)}</td>'
    )


async def timeline(request: web.Request, data: dict[str, Any]) -> dict[str, Any]:
    """The run console's data arranged for the page: each authored phase with its state
    (done, current, ahead, stopped here, not reached) and its steps (the rows once made;
    the authored ones before), the run drawn on a time axis, and the log in words."""
    run = data["run"]
    pinned = await _pinned(request, run)
    clock = page_clock(request, pinned["tz"])
    tz = clock.tz
    phases = pinned["phases"]
    keys = [p["key"] for p in phases]
    current = keys.index(run["current_phase"]) if run["current_phase"] in keys else None
    now = host_of(request).clock.now()
    made: dict[str, list[dict[str, Any]]] = {}
    for step in data["steps"]:
        made.setdefault(step["phase"], []).append({**step, "cells": _step_cells(step, tz, now)})
    out = []
    for i, phase in enumerate(phases):
        out.append(
            {
                "key": phase["key"],
                "label": phase.get("label") or phase["key"],
                "state": phase_state(i, current, run["status"]),
                "steps": made.get(phase["key"], []),
                # Its gate's milestone steps, sent as the count reaches each.
                "milestones": made.get(milestone_phase(i), []),
                "authored": phase.get("steps") or [],
                "advance": phase.get("advance"),
            }
        )
    drawn = drawing.draw(run, out, pinned["gates"], now=now, tz=tz)
    waiting = run["waiting_on"] or {}
    gate = data["gate"]
    phase_settled = all(
        st["status"] not in STEP_OPEN for st in made.get(run["current_phase"] or "", [])
    )
    offered = {name: run["status"] in statuses for name, (statuses, _) in RUN_CONTROLS.items()}
    offered["advance"] = (
        offered["advance"]
        and gate is not None
        and gate.get("satisfied_at") is None
        and phase_settled
    )
    retry_step = waiting.get("step_id") if run["status"] == "paused" else None
    context = Context(
        step_labels=sentences.labels_of(data["steps"]),
        phase_labels={p["key"]: p["label"] for p in out},
        units={b["dimension"]: b["unit"] for b in data.get("budget") or []},
    )
    ledger = _ledger(data)
    return {
        "run": run,
        "phases": out,
        "gate": gate,
        "log": data["log"][-LOG_LINES:],
        "log_rows": _log_rows(data["log"][-LOG_LINES:], tz, context),
        "waiting_html": filters.waiting(run["waiting_on"], tz),
        "tz": tz,
        "clock": clock,
        "event_tz": pinned["tz"],
        "drawn": drawn,
        "log_total": data.get("log_total", len(data["log"])),
        "live": run["status"] not in RUN_ENDED,
        "offered": offered,
        "retry_step": retry_step,
        "budget": data.get("budget") or [],
        "participants": data.get("participants") or [],
        "results": data.get("results") or [],
        # The countdown's rungs, sent before the run began: ahead of its phases, unnumbered.
        "countdown": made.get(COUNTDOWN_PHASE, []),
        **ledger,
    }


def _ledger(data: dict[str, Any]) -> dict[str, Any]:
    """The run's ledger rows as the page lists them (each with the step that recorded it),
    its cleanup state and the domain's one-line summary, whether the cleanup control fits
    (the run has ended while something is still held; ``controls.cleanup`` checks again),
    and whether the page keeps polling after the run ended (its cleanup is pending)."""
    by_id = {st["id"]: st for st in data["steps"]}
    rows = []
    for res in data.get("resources") or []:
        words, holding = RESOURCE_STATES.get(res["status"], (res["status"], False))
        step = by_id.get(res["step_id"]) if res["step_id"] is not None else None
        payload = res["payload"] or {}
        if res["kind"] == "@step":
            what = f"what step {res['step_id']} may have done (its answer never came)"
        elif payload.get("lease"):
            what = f"lease {payload['lease']} on {payload.get('target', res['ref'])}"
        else:
            what = f"{res['kind']} {res['ref']}"
        rows.append(
            {
                **res,
                "what": what,
                "words": words,
                "holding": holding,
                "step_label": step["label"] if step else None,
                "action": step["action"] if step else None,
                "phase": step["phase"] if step else None,
                "detail": payload.get("detail")
                if isinstance(payload.get("detail"), dict)
                else None,
            }
        )
    run = data["run"]
    ended = run["status"] in RUN_ENDED
    status = run.get("cleanup_status") or "not_required"
    words = "pending-live" if status == "pending" and not ended else status
    summary = (data.get("cleanup_summary") or "").rstrip(".")
    held = sum(1 for r in rows if r["holding"])
    if rows:
        summary += f" ({len(rows)} recorded in all)"
    return {
        "resources": rows,
        "held": held,
        "cleanup_status": status,
        "cleanup_words": CLEANUP_STATES.get(words, ""),
        "cleanup_summary": summary + ".",
        # Offered once the run has ended while something is still held (the server also
        # takes it when nothing is: then there is nothing for it to do).
        "cleanup_offered": ended and held > 0,
        # The page keeps updating after the run ends while the host still gives back.
        "giving_back": ended and status == "pending",
    }


async def _view(request: web.Request, run_id: int) -> dict[str, Any]:
    """What the run page and its polled part render: the console's newest lines, drawn."""
    host = host_of(request)
    # Readers within console_max_age_ms of each other share one read; the page is drawn for
    # each (it holds the reader's own session).
    data = await host.recent_consoles.get(
        ("page", run_id), lambda: console(host, run_id, log_tail=LOG_LINES)
    )
    return await timeline(request, data)


async def _page(
    request: web.Request, run_id: int, *, template: str, status: int = 200, **extra: Any
) -> web.Response:
    return render(request, template, status=status, **await _view(request, run_id), **extra)


@routes.get("/runs/{run_id}")
async def run_page(request: web.Request) -> web.Response:
    require(request, STAFF)
    return await _page(request, _run_id(request), template="run.html")


@routes.get("/runs/{run_id}/live")
async def run_live(request: web.Request) -> web.Response:
    """The part of the page htmx polls: everything but the page's frame, revalidated
    (:func:`~pageant.console.keys.render_tagged`): a poll that finds it unchanged is a 304
    with no body."""
    require(request, STAFF)
    return render_tagged(request, "_run_live.html", **await _view(request, _run_id(request)))


def _text(form: Any, name: str, limit: int) -> str | None:
    value = form.get(name)
    if not isinstance(value, str) or not value.strip():
        return None
    if len(value) > limit:
        raise Invalid(f"The {name} is at most {limit} characters; this one has {len(value)}.")
    return value.strip()


@routes.post("/runs/{run_id}/cleanup")
async def run_cleanup(request: web.Request) -> web.Response:
    """An admin's "try cleanup again" (``controls.cleanup``, behind
    ``POST /api/v1/admin/runs/{id}/cleanup``): a run in flight, or one that recorded
    nothing, is refused (409) with the server's sentence."""
    session = require(request, ADMIN)
    host = host_of(request)
    run_id = _run_id(request)
    await controls.require_run(host, run_id)
    try:
        await controls.cleanup(host, run_id, actor=session.principal.actor)
    except Conflict as exc:
        return await _page(
            request, run_id, template="run.html", status=exc.status, error=exc.message
        )
    return see_other(f"/runs/{run_id}")


@routes.post("/runs/{run_id}/rehearse")
async def run_rehearse(request: web.Request) -> web.Response:
    """Rehearse the event's published version against this finished run's firings
    (``POST /api/v1/admin/events/{id}/rehearse`` with ``from_run``): the run's page with
    the differences and the rehearsal drawn, or with the refusal's sentence."""
    require(request, AUTHORS)
    host = host_of(request)
    run_id = _run_id(request)
    run = await controls.require_run(host, run_id)
    try:
        report = await rehearsal.rehearse(host, run["definition_id"], from_run=run_id)
    except PageantError as exc:
        return await _page(
            request, run_id, template="run.html", status=exc.status, error=exc.message
        )
    return await _page(request, run_id, template="run.html", rehearsed=drawn_rehearsal(report))


@routes.post("/runs/{run_id}/{control}")
async def run_control(request: web.Request) -> web.Response:
    session = require(request, CONTROLLERS)
    host = host_of(request)
    run_id = _run_id(request)
    name = request.match_info["control"]
    if name not in RUN_CONTROLS:
        raise NotFound(f"There is no run control {name!r}.")
    await controls.require_run(host, run_id)
    form = await request.post()
    reason = _text(form, "reason", MAX_REASON)
    actor = session.principal.actor
    try:
        if RUN_CONTROLS[name][1] and reason is None:
            raise Invalid(f"A reason is required to {name} a run; it is kept in the log.")
        if name == "reschedule":
            return await _reschedule(request, run_id, form, actor=actor, reason=reason or "")
        act = getattr(controls, name)
        await act(host, run_id, actor=actor, reason=reason)
    except (Conflict, Invalid) as exc:
        return await _page(
            request, run_id, template="run.html", status=exc.status, error=exc.message
        )
    return see_other(f"/runs/{run_id}")


def _local(at: datetime, tz: str) -> str:
    return at.astimezone(zone(tz)).strftime("%a %Y-%m-%d %H:%M %Z")


async def _reschedule(
    request: web.Request, run_id: int, form: Any, *, actor: str, reason: str
) -> web.Response:
    """Move a scheduled run (``controls.reschedule``, behind ``POST .../reschedule``): the
    new start is a date and time on the event's wall clock; a bad one is shown at its
    field, in that zone's words."""
    host = host_of(request)
    run = (await console(host, run_id, log_tail=0))["run"]
    tz = (await _pinned(request, run))["tz"]
    sent = form.get("scheduled_for")
    raw = sent.strip() if isinstance(sent, str) else ""
    problem = ""
    try:
        when = datetime.fromisoformat(raw) if raw else None
    except ValueError:
        when = None
    if when is None or when.tzinfo is not None:
        problem = f"Expected a date and time such as 2027-03-26T19:00; got {raw[:40]!r}."
    else:
        when = when.replace(tzinfo=zone(tz)).astimezone(UTC)
        now = host.clock.now()
        if when <= now:
            problem = (
                f"{_local(when, tz)} is not later than now ({_local(now, tz)}); "
                "choose a later start."
            )
    if not problem and when is not None:
        try:
            await controls.reschedule(host, run_id, actor=actor, scheduled_for=when, reason=reason)
        except Invalid as exc:
            problem = "; ".join(d.split(": ", 1)[-1] for d in exc.details) or exc.message
    if problem:
        return await _page(
            request,
            run_id,
            template="run.html",
            status=400,
            error=f"The run was not rescheduled: {problem}",
            reschedule_error=problem,
            reschedule_value=raw[:40],
        )
    return see_other(f"/runs/{run_id}")


@routes.post("/runs/{run_id}/steps/{step_id}/{control}")
async def step_control(request: web.Request) -> web.Response:
    session = require(request, CONTROLLERS)
    host = host_of(request)
    run_id = _run_id(request)
    step_id = _run_id(request, "step_id")
    name = request.match_info["control"]
    if name not in STEP_CONTROLS:
        raise NotFound(f"There is no step control {name!r}.")
    await controls.require_step(host, run_id, step_id)
    form = await request.post()
    actor = session.principal.actor
    try:
        if name == "confirm":
            await controls.confirm(
                host, run_id, step_id, actor=actor, note=_text(form, "note", MAX_NOTE)
            )
        else:
            act = getattr(controls, name)
            await act(host, run_id, step_id, actor=actor, reason=_text(form, "reason", MAX_REASON))
    except (Conflict, Invalid) as exc:
        return await _page(
            request, run_id, template="run.html", status=exc.status, error=exc.message
        )
    return see_other(f"/runs/{run_id}")
