"""Runs: start one now, list an event's runs, the run console, and the run controls."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, field_validator

from pageant.access.roles import ADMIN, CONTROLLERS, STAFF
from pageant.api.keys import HOST
from pageant.api.pagination import encode_cursor, page_from
from pageant.api.routing import CURSOR, LIMIT, RouteTable, int_param, principal, read_body, respond
from pageant.db.states import Health, RunStatus, StepStatus
from pageant.errors import Forbidden, NotFound
from pageant.events import definitions
from pageant.runs import controls, listing
from pageant.runs.console import console, run_view, runs_page, step_view
from pageant.runs.create import start_now
from pageant.runs.waiting import REASONS

routes = RouteTable("runs")


_NULLABLE_TIME = {"type": ["string", "null"], "format": "date-time"}
WAITING = {
    "type": ["object", "null"],
    "properties": {
        "reason": {"enum": list(REASONS)},
        "since": {"type": "string", "format": "date-time"},
        "until": {"type": "string", "format": "date-time"},
        "holder_run_id": {"type": "integer"},
        "step_id": {"type": "integer"},
        "attempt": {"type": "integer"},
        "of": {"type": "integer"},
        "sentence": {"type": "string"},
    },
}
RUN = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "definition_id": {"type": "integer"},
        "definition_slug": {"type": "string"},
        "definition_title": {"type": "string"},
        "version_id": {"type": "integer"},
        "version_number": {"type": "integer"},
        "scope": {"type": "string"},
        "params": {
            "type": "object",
            "description": "the values the run was started with, one per declared param",
        },
        "source": {"enum": ["manual", "schedule"]},
        "status": {"enum": [s.value for s in RunStatus]},
        "health": {"enum": [h.value for h in Health]},
        "cleanup_status": {"type": "string"},
        "current_phase": {"type": ["string", "null"]},
        "scheduled_for": {"type": "string", "format": "date-time"},
        "hold_until": _NULLABLE_TIME,
        "last_error": {"type": ["string", "null"]},
        "cancel_reason": {"type": ["string", "null"]},
        "concurrency_key": {"type": ["string", "null"]},
        "dst_adjusted": {"type": ["object", "null"]},
        "moved_from": _NULLABLE_TIME,
        "created_at": {"type": "string", "format": "date-time"},
        "started_at": _NULLABLE_TIME,
        "ended_at": _NULLABLE_TIME,
        "waiting_on": WAITING,
    },
}
STEP = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "phase": {"type": "string"},
        "seq": {"type": "integer"},
        "label": {"type": "string"},
        "action": {"type": "string"},
        "action_version": {"type": "integer"},
        "params": {"type": "object"},
        "on_failure": {"enum": ["skip", "pause", "abort_run"]},
        "status": {"enum": [s.value for s in StepStatus]},
        "attempts": {"type": "integer"},
        "parked": {"type": "boolean"},
        "due_at": _NULLABLE_TIME,
        "last_error": {"type": ["string", "null"]},
        "note": {"type": ["string", "null"]},
        "spent": {
            "type": ["object", "null"],
            "description": "what the step paid: {dimension: amount}",
        },
        "started_at": _NULLABLE_TIME,
        "finished_at": _NULLABLE_TIME,
    },
}
LOG_LINE = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "at": {"type": "string", "format": "date-time"},
        "kind": {"type": "string"},
        "phase": {"type": ["string", "null"]},
        "step_id": {"type": ["integer", "null"]},
        "detail": {"type": ["object", "null"]},
        "actor": {"type": ["string", "null"]},
    },
}
GATE = {
    "type": ["object", "null"],
    "properties": {
        "kind": {"enum": ["after", "on"]},
        "phase": {"type": "string"},
        "condition": {"type": ["string", "null"]},
        "trigger_id": {"type": ["string", "null"]},
        "tally": {"type": "integer"},
        "needed": {"type": "integer"},
        "entered_at": {"type": "string", "format": "date-time"},
        "deadline": _NULLABLE_TIME,
        "last_event_at": _NULLABLE_TIME,
        "last_event_counted": {"type": ["boolean", "null"]},
        "satisfied_at": _NULLABLE_TIME,
        "satisfied_by": {"enum": ["deadline", "tally", "forced", None]},
    },
}
PARTICIPANT = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "role": {"type": ["string", "null"]},
        "step_id": {"type": ["integer", "null"]},
    },
}
RESULT_ENTRY = {
    "type": "object",
    "properties": {
        "rank": {"type": ["integer", "null"]},
        "name": {"type": "string"},
        "detail": {"type": "string"},
    },
}
RESULTS = {
    "type": "object",
    "properties": {
        "phase": {"type": "string"},
        "step_id": {"type": "integer"},
        "title": {"type": "string"},
        "entries": {"type": "array", "items": RESULT_ENTRY},
    },
}
BUDGET = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "dimension": {"type": "string"},
            "label": {"type": ["string", "null"]},
            "unit": {"type": ["string", "null"]},
            "cap": {"type": ["integer", "null"]},
            "consumed": {"type": "integer"},
            "cap_source_action": {"type": ["string", "null"]},
        },
    },
}
RESOURCE = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "step_id": {"type": ["integer", "null"]},
        "owner": {"type": "string"},
        "kind": {"type": "string", "description": '"@step" for a placeholder'},
        "ref": {"type": "string"},
        "status": {
            "enum": ["pending", "confirmed", "revert_failed", "reverted", "drifted", "orphaned"]
        },
        "revert_attempts": {"type": "integer"},
        "last_error": {"type": ["string", "null"]},
        "lease_until": _NULLABLE_TIME,
        "payload": {"type": ["object", "null"]},
    },
}
CONSOLE = {
    "type": "object",
    "required": [
        "run",
        "steps",
        "gate",
        "participants",
        "results",
        "budget",
        "resources",
        "cleanup_summary",
        "log",
    ],
    "properties": {
        "run": RUN,
        "steps": {"type": "array", "items": STEP},
        "gate": GATE,
        "participants": {"type": "array", "items": PARTICIPANT},
        "results": {"type": "array", "items": RESULTS},
        "budget": BUDGET,
        "resources": {"type": "array", "items": RESOURCE},
        "cleanup_summary": {"type": "string"},
        "log": {"type": "array", "items": LOG_LINE},
    },
}
CLEANUP = {
    "type": "object",
    "required": ["run", "resources", "cleanup_summary"],
    "properties": {
        "run": RUN,
        "resources": {"type": "array", "items": RESOURCE},
        "cleanup_summary": {"type": "string"},
    },
}
RUN_LIST = {
    "type": "object",
    "properties": {
        "items": {"type": "array", "items": RUN},
        "next_cursor": {"type": ["string", "null"]},
    },
}
SUMMARY = {
    "type": "object",
    "description": "counts over every run that has not ended, whatever the filters",
    "properties": {
        "waiting_on_person": {
            "type": "integer",
            "description": "runs paused or at a parked step (as an event's runs_waiting)",
        },
        "stalled": {"type": "integer"},
        "degraded": {"type": "integer"},
        "running": {"type": "integer"},
    },
}
RUNS_NOW = {
    "type": "object",
    "required": ["items", "next_cursor", "summary"],
    "properties": {
        "items": {"type": "array", "items": RUN},
        "next_cursor": {"type": ["string", "null"]},
        "summary": SUMMARY,
    },
}


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StartBody(_Body):
    """Start-now: the run's params (each declared by the event's spec; ``scope``, the param
    every event has, tells apart runs of one event at one instant)."""

    scope: str = Field(default="", max_length=100)
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="a value for each param the published spec declares (spec.params); "
        "a default fills a param left out",
    )


class ReasonBody(_Body):
    """Optional: why, kept in the control's log line."""

    reason: str | None = Field(default=None, max_length=200)


class CancelBody(_Body):
    """Why (required). ``cleanup: false`` (admins only) leaves what the run holds in the
    world as it is; the run's cleanup_status is then ``incomplete``."""

    reason: str = Field(min_length=1, max_length=200)
    cleanup: bool = True


class AdvanceBody(_Body):
    """Why the gate is forced: required, kept on the ``phase.advanced`` line."""

    reason: str = Field(min_length=1, max_length=200)

    @field_validator("reason")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a reason is required (it is what the log keeps of this decision)")
        return value


class RescheduleBody(_Body):
    """Where to move a scheduled run, and why (kept on the ``control.reschedule`` line)."""

    scheduled_for: datetime
    reason: str = Field(min_length=1, max_length=200)

    @field_validator("scheduled_for")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("an instant with an offset is required, e.g. 2027-03-26T19:00:00Z")
        return value.astimezone(UTC)

    @field_validator("reason")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a reason is required")
        return value


class ConfirmBody(_Body):
    note: str | None = Field(default=None, max_length=2000)


async def _require_event(request: web.Request) -> int:
    host = request.app[HOST]
    definition_id = int_param(request, "id", "event")
    async with host.db.connect() as conn:
        found = await definitions.get_definition(conn, definition_id)
    if found is None:
        raise NotFound(f"no such event: {definition_id}")
    return definition_id


# ── an event's runs ───────────────────────────────────────────────────────────


@routes.get(
    "/api/v1/admin/events/{id}/runs",
    roles=STAFF,
    summary="An event's runs, oldest first (by id)",
    response=RUN_LIST,
    query={"limit": LIMIT, "cursor": CURSOR},
)
async def list_runs(request: web.Request) -> web.Response:
    host = request.app[HOST]
    definition_id = await _require_event(request)
    page = page_from(request)
    items, ids = await runs_page(host, definition_id, after_id=page.after_id or 0, limit=page.limit)
    return respond({"items": items, "next_cursor": page.next_cursor(ids)})


@routes.post(
    "/api/v1/admin/events/{id}/runs",
    roles=ADMIN,
    summary="Start a run of the published version now",
    body_optional=True,
    body=StartBody,
    response=RUN,
    status=201,
)
async def start_run(request: web.Request) -> web.Response:
    host = request.app[HOST]
    definition_id = await _require_event(request)
    body = await read_body(request, StartBody, optional=True)
    run_id, created = await start_now(
        host, definition_id, scope=body.scope, params=body.params, actor=principal(request).actor
    )
    return respond(await run_view(host, run_id), status=201 if created else 200)


# ── what is running now ───────────────────────────────────────────────────────


@routes.get(
    "/api/v1/admin/runs",
    roles=STAFF,
    summary="Runs across every event, newest first, with a summary of what needs attention",
    response=RUNS_NOW,
    query={
        "status": "only runs in these statuses (repeat or comma-separate)",
        "health": "only runs of this health: ok, degraded, stalled (repeatable)",
        "waiting": "only runs waiting for this reason, e.g. parked (repeatable)",
        "definition": "only runs of this event (an id)",
        "series": "only runs of this series' events (an id)",
        "scope": "only runs of this scope",
        "from": "only runs scheduled at or after this instant (with an offset)",
        "to": "only runs scheduled before this instant (with an offset)",
        "limit": LIMIT,
        "cursor": CURSOR,
    },
)
async def runs_now(request: web.Request) -> web.Response:
    page = page_from(request)
    where = listing.read_filter(
        lambda name: list(request.query.getall(name, [])), label=lambda name: f"query.{name}"
    )
    found = await listing.list_runs(
        request.app[HOST], where, before_id=page.after_id, limit=page.limit
    )
    next_before = found["next_before"]
    return respond(
        {
            "items": found["items"],
            "next_cursor": None if next_before is None else encode_cursor(next_before),
            "summary": found["summary"],
        }
    )


# ── the console ───────────────────────────────────────────────────────────────


@routes.get(
    "/api/v1/admin/runs/{run_id}",
    roles=STAFF,
    summary="The run console: the run and why it waits, its steps, its gate, its log",
    response=CONSOLE,
)
async def run_console(request: web.Request) -> web.Response:
    return respond(await console(request.app[HOST], int_param(request, "run_id")))


# ── run controls ──────────────────────────────────────────────────────────────


async def _run_control(request: web.Request, model: type[_Body], act: Any) -> web.Response:
    host = request.app[HOST]
    run_id = int_param(request, "run_id")
    await controls.require_run(host, run_id)
    body = await read_body(
        request, model, optional=model not in (CancelBody, AdvanceBody, RescheduleBody)
    )
    await act(host, run_id, actor=principal(request).actor, **body.model_dump())
    return respond(await run_view(host, run_id))


@routes.post(
    "/api/v1/admin/runs/{run_id}/pause",
    roles=CONTROLLERS,
    summary="Pause a starting or running run (takes effect between two steps)",
    body_optional=True,
    body=ReasonBody,
    response=RUN,
)
async def pause_run(request: web.Request) -> web.Response:
    return await _run_control(request, ReasonBody, controls.pause)


@routes.post(
    "/api/v1/admin/runs/{run_id}/resume",
    roles=CONTROLLERS,
    summary="Resume a paused run (a failed step it stopped at is stepped over)",
    body_optional=True,
    body=ReasonBody,
    response=RUN,
)
async def resume_run(request: web.Request) -> web.Response:
    return await _run_control(request, ReasonBody, controls.resume)


@routes.post(
    "/api/v1/admin/runs/{run_id}/cancel",
    roles=CONTROLLERS,
    summary="Cancel a run that has not ended; its pending and parked steps are cancelled",
    body=CancelBody,
    response=RUN,
)
async def cancel_run(request: web.Request) -> web.Response:
    host = request.app[HOST]
    run_id = int_param(request, "run_id")
    await controls.require_run(host, run_id)
    body = await read_body(request, CancelBody)
    who = principal(request)
    if not body.cleanup and who.role != "admin":
        raise Forbidden(
            f"cleanup: false leaves the world as it is and is an admin's call; a {who.role} "
            "may cancel with cleanup"
        )
    await controls.cancel(host, run_id, actor=who.actor, **body.model_dump())
    return respond(await run_view(host, run_id))


@routes.post(
    "/api/v1/admin/runs/{run_id}/cleanup",
    roles=("admin",),
    summary="Try again to give back what an ended run still holds in the world",
    response=CLEANUP,
)
async def cleanup_run(request: web.Request) -> web.Response:
    host = request.app[HOST]
    run_id = int_param(request, "run_id")
    await controls.require_run(host, run_id)
    await controls.cleanup(host, run_id, actor=principal(request).actor)
    view = await console(host, run_id)
    return respond(
        {
            "run": view["run"],
            "resources": view["resources"],
            "cleanup_summary": view["cleanup_summary"],
        }
    )


@routes.post(
    "/api/v1/admin/runs/{run_id}/advance",
    roles=CONTROLLERS,
    summary="Force the current phase's open gate; the phase advances (its steps must be done)",
    body=AdvanceBody,
    response=RUN,
)
async def advance_run(request: web.Request) -> web.Response:
    return await _run_control(request, AdvanceBody, controls.advance)


@routes.post(
    "/api/v1/admin/runs/{run_id}/reschedule",
    roles=CONTROLLERS,
    summary="Move a scheduled run to another instant; the schedule never moves it back",
    body=RescheduleBody,
    response=RUN,
)
async def reschedule_run(request: web.Request) -> web.Response:
    return await _run_control(request, RescheduleBody, controls.reschedule)


# ── step controls ─────────────────────────────────────────────────────────────


async def _step_control(request: web.Request, model: type[_Body], act: Any) -> web.Response:
    host = request.app[HOST]
    run_id = int_param(request, "run_id")
    step_id = int_param(request, "step_id")
    await controls.require_step(host, run_id, step_id)
    body = await read_body(request, model, optional=True)
    await act(host, run_id, step_id, actor=principal(request).actor, **body.model_dump())
    return respond(await step_view(host, step_id))


@routes.post(
    "/api/v1/admin/runs/{run_id}/steps/{step_id}/confirm",
    roles=CONTROLLERS,
    summary="Confirm a parked step (a person did what it asked)",
    body_optional=True,
    body=ConfirmBody,
    response=STEP,
)
async def confirm_step(request: web.Request) -> web.Response:
    return await _step_control(request, ConfirmBody, controls.confirm)


@routes.post(
    "/api/v1/admin/runs/{run_id}/steps/{step_id}/skip",
    roles=CONTROLLERS,
    summary="Skip a pending or parked step",
    body_optional=True,
    body=ReasonBody,
    response=STEP,
)
async def skip_step(request: web.Request) -> web.Response:
    return await _step_control(request, ReasonBody, controls.skip)


@routes.post(
    "/api/v1/admin/runs/{run_id}/steps/{step_id}/retry",
    roles=CONTROLLERS,
    summary="Retry the failed or refused step a paused run stopped at (resumes the run)",
    body_optional=True,
    body=ReasonBody,
    response=STEP,
)
async def retry_step(request: web.Request) -> web.Response:
    return await _step_control(request, ReasonBody, controls.retry)
