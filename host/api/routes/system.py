"""Liveness, metrics and the API's own description."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, RootModel

from pageant.api.bodies import no_defaults
from pageant.api.keys import HOST, ROUTES
from pageant.api.openapi import document
from pageant.api.routing import SOME_FIELDS, Query, RouteTable, respond
from pageant.db.errors import is_unavailable, reason_of
from pageant.db.migrate import SchemaState, head_revision, schema_state
from pageant.hosting import Host
from pageant.runs.console import runs_by_status

routes = RouteTable("system")

#: The engine is unhealthy when it has not finished a tick for this many poll intervals.
STALE_TICKS = 3
#: The longest /healthz waits for the database: a load balancer's probe must be answered
#: while the database is black-holed, not when the outage ends.
DATABASE_ANSWER_SECONDS = 2.0


class SchemaOut(BaseModel):
    model_config = SOME_FIELDS

    current: str | None
    head: str | None
    up_to_date: bool


class EngineOut(BaseModel):
    model_config = ConfigDict(json_schema_extra=no_defaults)

    running: bool = Field(description="whether this process runs an engine at all")
    # The rest only while an engine runs.
    stopping: bool = False
    identity: str = ""
    last_tick_seconds_ago: float | None = None
    runs_in_flight: int = 0


class LinkState(BaseModel):
    state: Literal["up", "down", "unknown"]
    said: str


class Health(BaseModel):
    model_config = ConfigDict(json_schema_extra=no_defaults)

    status: Literal["ok", "degraded", "unhealthy"]
    problems: list[str] = []
    schema_: SchemaOut = Field(alias="schema")
    engine: EngineOut
    link: dict[str, LinkState] = Field(
        default_factory=dict,
        description="each game-link server's state (up, down, unknown) and why; a server "
        "down does not make the host unhealthy",
    )
    plugins: dict[str, list[str]] = Field(
        default_factory=dict,
        description="what plugins' own checks found wrong at start, by plugin (a game's "
        "setting, such as a wrong password for one of its servers): detail that leaves the "
        "verdict alone",
    )


class MetricsText(RootModel[str]):
    """The Prometheus text format."""


class OpenApiDocument(RootModel[dict[str, Any]]):
    """An OpenAPI 3.1 document."""


def engine_state(host: Host) -> tuple[dict[str, Any], list[str]]:
    """The engine's state and what is wrong with it (empty when nothing is)."""
    engine = host.engine
    if engine is None:
        return {"running": False}, []
    since = engine.last_tick_at
    age = None if since is None else round(time.monotonic() - since, 3)
    state = {
        "running": True,
        "stopping": engine.stopping,
        "identity": host.identity,
        "last_tick_seconds_ago": age,
        "runs_in_flight": len(engine.inflight),
    }
    problems = []
    limit = STALE_TICKS * host.settings.poll_seconds
    if engine.stopping:
        problems.append("engine: stopping")
    elif age is not None and age > limit:
        problems.append(f"engine: no tick for {age:.0f} s (more than {limit:g} s)")
    return state, problems


@routes.get(
    "/healthz",
    roles=None,
    summary="Health: 200 while the engine ticks and the schema is current, else 503",
    response=Health,
    also={503: Health},
    query={
        "verbose": Query(
            "present (with any value, or none): always 200, with status ok or degraded - the "
            "state without the verdict"
        )
    },
)
async def healthz(request: web.Request) -> web.Response:
    host = request.app[HOST]
    engine, problems = engine_state(host)
    state, problem = await _schema(host)
    if problem is not None:
        problems.insert(0, problem)
    elif not state.up_to_date:
        problems.append(f"schema: at {state.current or 'nothing'}, this pageant needs {state.head}")
    body: dict[str, Any] = {"schema": state.as_dict(), "engine": engine}
    if link := host.link.states():
        body["link"] = link
    if problems:
        body["problems"] = problems
    plugin_problems = {r.label: r.problems for r in host.plugins.records if r.problems}
    if plugin_problems:
        body["plugins"] = plugin_problems
    if "verbose" in request.query:
        return respond({"status": "degraded" if problems else "ok", **body})
    return respond({"status": "unhealthy" if problems else "ok", **body}, 503 if problems else 200)


async def _schema(host: Host) -> tuple[SchemaState, str | None]:
    """The schema's revision, read within :data:`DATABASE_ANSWER_SECONDS`; or, when the
    database did not answer, an unknown revision and the problem saying why."""
    try:
        async with asyncio.timeout(DATABASE_ANSWER_SECONDS):
            return await schema_state(host.db), None
    except TimeoutError:
        problem = f"database: no answer within {DATABASE_ANSWER_SECONDS:g} s"
    except Exception as exc:
        if not is_unavailable(exc):
            raise
        problem = f"database: unreachable ({reason_of(exc)})"
    return SchemaState(current=None, head=head_revision()), problem


@routes.get(
    "/metrics",
    roles=("admin",),
    summary="Metrics in the Prometheus text format",
    response=MetricsText,
    media_type="text/plain",
)
async def metrics(request: web.Request) -> web.Response:
    host = request.app[HOST]
    for status, n in (await runs_by_status(host)).items():
        host.metrics.runs.labels(status=status).set(n)
    for state, n in host.link.counts().items():
        host.metrics.link_servers.labels(state=state).set(n)
    from pageant.support.metrics import CONTENT_TYPE

    response = web.Response(body=host.metrics.render())
    response.headers["Content-Type"] = CONTENT_TYPE
    return response


@routes.get(
    "/api/v1/openapi.json",
    roles=None,
    summary="This API's OpenAPI document",
    response=OpenApiDocument,
)
async def openapi(request: web.Request) -> web.Response:
    from pageant import __version__

    return respond(document(request.app[ROUTES], __version__, request.app[HOST].registry))
