"""Runs: start one now, list an event's runs, the run console, and the run controls."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from aiohttp import web
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from pageant.access.roles import ADMIN, CONTROLLERS, STAFF
from pageant.api.keys import HOST
from pageant.api.openapi import ErrorBody
from pageant.api.pagination import encode_cursor, page_from
from pageant.api.routing import (
    CURSOR,
    LIMIT,
    SOME_FIELDS,
    RouteTable,
    encoded,
    int_param,
    principal,
    read_body,
    respond,
)
from pageant.errors import Forbidden, NotFound, PageantError
from pageant.events import definitions
from pageant.runs import controls, listing
from pageant.runs.batch import MAX_BATCH, Start, Started, start_many
from pageant.runs.console import console, run_view, run_views_of, runs_page, step_view
from pageant.runs.create import start_now
from pageant.runs.waiting import REASONS
from pageant.states import Health, RunStatus, StepStatus
from pageant.support.revalidation import tag_of, tagged

routes = RouteTable("runs")


class Waiting(BaseModel):
    """What a run waits on (its fields depend on the reason)."""

    model_config = SOME_FIELDS

    reason: str = Field(json_schema_extra={"enum": list(REASONS)})
    since: datetime
    until: datetime
    holder_run_id: int
    step_id: int
    attempt: int
    of: int
    #: The owner of the plugin an ended run's cleanup waits for (reason ``unavailable``).
    plugin: str
    sentence: str


class RunOut(BaseModel):
    model_config = SOME_FIELDS

    id: int
    definition_id: int
    definition_slug: str
    definition_title: str
    version_id: int
    version_number: int
    scope: str
    params: dict[str, Any] = Field(
        description="the values the run was started with, one per declared param"
    )
    source: Literal["manual", "schedule"]
    status: RunStatus
    health: Health
    cleanup_status: str
    current_phase: str | None
    scheduled_for: datetime
    hold_until: datetime | None
    last_error: str | None
    cancel_reason: str | None
    concurrency_key: str | None
    dst_adjusted: dict[str, Any] | None
    moved_from: datetime | None
    created_at: datetime
    started_at: datetime | None
    ended_at: datetime | None
    waiting_on: Waiting | None


class StepOut(BaseModel):
    model_config = SOME_FIELDS

    id: int
    phase: str
    seq: int
    label: str
    action: str
    action_version: int
    params: dict[str, Any]
    on_failure: Literal["skip", "pause", "abort_run"]
    status: StepStatus
    attempts: int
    parked: bool
    due_at: datetime | None
    last_error: str | None
    note: str | None
    spent: dict[str, Any] | None = Field(description="what the step paid: {dimension: amount}")
    started_at: datetime | None
    finished_at: datetime | None


class LogLine(BaseModel):
    model_config = SOME_FIELDS

    id: int
    at: datetime
    kind: str
    phase: str | None
    step_id: int | None
    detail: dict[str, Any] | None
    actor: str | None


class GateOut(BaseModel):
    model_config = SOME_FIELDS

    kind: Literal["after", "on"]
    phase: str
    condition: str | None
    trigger_id: str | None
    tally: int
    needed: int
    entered_at: datetime
    deadline: datetime | None
    last_event_at: datetime | None
    last_event_counted: bool | None
    satisfied_at: datetime | None
    satisfied_by: Literal["deadline", "tally", "forced"] | None


class Participant(BaseModel):
    model_config = SOME_FIELDS

    name: str
    role: str | None
    step_id: int | None


class ResultEntry(BaseModel):
    model_config = SOME_FIELDS

    rank: int | None
    name: str
    detail: str


class Results(BaseModel):
    model_config = SOME_FIELDS

    phase: str
    step_id: int
    title: str
    entries: list[ResultEntry]


class BudgetLine(BaseModel):
    model_config = SOME_FIELDS

    dimension: str
    label: str | None
    unit: str | None
    cap: int | None
    consumed: int
    cap_source_action: str | None


class ResourceOut(BaseModel):
    model_config = SOME_FIELDS

    id: int
    step_id: int | None
    owner: str
    kind: str = Field(description='"@step" for a placeholder')
    ref: str
    status: Literal["pending", "confirmed", "revert_failed", "reverted", "drifted", "orphaned"]
    revert_attempts: int
    last_error: str | None
    lease_until: datetime | None
    payload: dict[str, Any] | None


class ConsoleOut(BaseModel):
    """The run console: the run, its steps, its gate, and its log."""

    run: RunOut
    steps: list[StepOut]
    gate: GateOut | None
    participants: list[Participant]
    results: list[Results]
    budget: list[BudgetLine]
    resources: list[ResourceOut]
    cleanup_summary: str
    log: list[LogLine]


class CleanupOut(BaseModel):
    run: RunOut
    resources: list[ResourceOut]
    cleanup_summary: str


class RunList(BaseModel):
    model_config = SOME_FIELDS

    items: list[RunOut]
    next_cursor: str | None


class RunSummary(BaseModel):
    """counts over every run that has not ended, whatever the filters"""

    model_config = SOME_FIELDS

    waiting_on_person: int = Field(
        description="runs paused or at a parked step (as an event's runs_waiting)"
    )
    stalled: int
    degraded: int
    running: int


class RunsNow(BaseModel):
    items: list[RunOut]
    next_cursor: str | None
    summary: RunSummary


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


class BatchBody(_Body):
    """Runs to start now, in one transaction: each item is what a single start's body says.
    An item of the wrong shape refuses the whole batch (400 naming ``body.runs[i]``)."""

    runs: list[StartBody] = Field(min_length=1, max_length=MAX_BATCH)


class ItemError(BaseModel):
    """An item the batch refused, in its place: the error a single start would answer."""

    error: ErrorBody
    http_status: int = Field(description="the status a single start would have answered")


class BatchOut(BaseModel):
    runs: list[RunOut | ItemError] = Field(
        description="in the order of the request's items: each item's run, or its error"
    )


class ReasonBody(_Body):
    """Optional: why, kept in the control's log line."""

    reason: str | None = Field(default=None, max_length=200)


class CancelBody(_Body):
    """Why (required). ``cleanup: false`` (admins only) leaves what the run holds in the
    world as it is; the run's cleanup_status is then ``incomplete``."""

    reason: str = Field(min_length=1, max_length=200)
    cleanup: bool = True


def _not_blank(required: str) -> AfterValidator:
    """Refuses a reason of spaces with ``required``, the sentence its 400 says."""

    def check(value: str) -> str:
        if not value.strip():
            raise ValueError(required)
        return value

    return AfterValidator(check)


class AdvanceBody(_Body):
    """Why the gate is forced: required, kept on the ``phase.advanced`` line."""

    reason: Annotated[
        str,
        Field(min_length=1, max_length=200),
        _not_blank("a reason is required (it is what the log keeps of this decision)"),
    ]


class RescheduleBody(_Body):
    """Where to move a scheduled run, and why (kept on the ``control.reschedule`` line)."""

    scheduled_for: datetime
    reason: Annotated[str, Field(min_length=1, max_length=200), _not_blank("a reason is required")]

    @field_validator("scheduled_for")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("an instant with an offset is required, e.g. 2027-03-26T19:00:00Z")
        return value.astimezone(UTC)


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
    response=RunList,
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
    response=RunOut,
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


@routes.post(
    "/api/v1/admin/events/{id}/runs:batch",
    roles=ADMIN,
    summary=f"Start up to {MAX_BATCH} runs of the published version now, in one transaction; "
    "200 with each item's run or its own error, in order",
    body=BatchBody,
    response=BatchOut,
)
async def start_runs(request: web.Request) -> web.Response:
    host = request.app[HOST]
    definition_id = await _require_event(request)
    body = await read_body(request, BatchBody)
    starts = [Start(scope=item.scope, params=item.params) for item in body.runs]
    answers = await start_many(host, definition_id, starts, actor=principal(request).actor)
    views = await run_views_of(host, [a.run_id for a in answers if isinstance(a, Started)])
    return respond(
        {"runs": [views[a.run_id] if isinstance(a, Started) else _refused(a) for a in answers]}
    )


def _refused(error: PageantError) -> dict[str, Any]:
    return {
        "error": {"code": error.code, "message": error.message, "details": error.details},
        "http_status": error.status,
    }


# ── what is running now ───────────────────────────────────────────────────────


@routes.get(
    "/api/v1/admin/runs",
    roles=STAFF,
    summary="Runs across every event, newest first, with a summary of what needs attention",
    response=RunsNow,
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
    response=ConsoleOut,
    revalidated=True,
)
async def run_console(request: web.Request) -> web.Response:
    host, run_id = request.app[HOST], int_param(request, "run_id")

    async def build() -> tuple[bytes, str]:
        body = encoded(await console(host, run_id))
        return body, tag_of(body)

    # Readers within console_max_age_ms of each other share one read (its bytes and tag).
    body, tag = await host.recent_consoles.get(("api", run_id), build)
    return tagged(request, body, "application/json", tag=tag)


# ── run controls ──────────────────────────────────────────────────────────────


def _control(
    name: str, summary: str, model: type[_Body], *, optional: bool = True, of_step: bool = False
) -> None:
    """Declare ``POST .../runs/{run_id}/<name>`` (``.../steps/{step_id}/<name>`` when
    ``of_step``): the control ``name`` of :mod:`pageant.runs.controls`, answering the run (or
    the step) as it then is."""
    act = getattr(controls, name)
    path = "/api/v1/admin/runs/{run_id}" + ("/steps/{step_id}" if of_step else "") + f"/{name}"

    async def control(request: web.Request) -> web.Response:
        host = request.app[HOST]
        run_id = int_param(request, "run_id")
        if of_step:
            step_id = int_param(request, "step_id")
            await controls.require_step(host, run_id, step_id)
            ids: tuple[int, ...] = (run_id, step_id)
        else:
            await controls.require_run(host, run_id)
            ids = (run_id,)
        body = await read_body(request, model, optional=optional)
        await act(host, *ids, actor=principal(request).actor, **body.model_dump())
        return respond(await (step_view(host, step_id) if of_step else run_view(host, run_id)))

    control.__name__ = f"{name}_{'step' if of_step else 'run'}"
    routes.post(
        path,
        roles=CONTROLLERS,
        summary=summary,
        body_optional=optional,
        body=model,
        response=StepOut if of_step else RunOut,
    )(control)


_control(
    "pause",
    "Pause a starting or running run (takes effect between two steps)",
    ReasonBody,
)
_control(
    "resume",
    "Resume a paused run (a failed step it stopped at is stepped over)",
    ReasonBody,
)


@routes.post(
    "/api/v1/admin/runs/{run_id}/cancel",
    roles=CONTROLLERS,
    summary="Cancel a run that has not ended; its pending and parked steps are cancelled",
    body=CancelBody,
    response=RunOut,
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
    response=CleanupOut,
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


_control(
    "advance",
    "Force the current phase's open gate; the phase advances (its steps must be done)",
    AdvanceBody,
    optional=False,
)
_control(
    "reschedule",
    "Move a scheduled run to another instant; the schedule never moves it back",
    RescheduleBody,
    optional=False,
)


# ── step controls ─────────────────────────────────────────────────────────────


_control("confirm", "Confirm a parked step (a person did what it asked)", ConfirmBody, of_step=True)
_control("skip", "Skip a pending or parked step", ReasonBody, of_step=True)
_control(
    "retry",
    "Retry the failed or refused step a paused run stopped at (resumes the run)",
    ReasonBody,
    of_step=True,
)
