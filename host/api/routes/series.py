"""Series: named arcs of events. Reads are staff; writes are authoring (admin, editor).

An event joins or leaves a series through ``PUT /api/v1/admin/events/{id}`` with
``series_id`` (null detaches).
"""

from __future__ import annotations

from datetime import datetime

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, field_validator

from pageant.access.roles import AUTHORS, STAFF
from pageant.api.bodies import (
    SLUG_SCHEMA,
    Description,
    Title,
    Visibility,
    check_body,
    check_slug,
    no_defaults,
    prefetch,
)
from pageant.api.keys import HOST
from pageant.api.pagination import page_from
from pageant.api.routing import CURSOR, LIMIT, RouteTable, int_param, respond
from pageant.events.series import (
    FALLBACK_SLUG,
    create_series,
    list_series,
    require_series,
    series_object,
    update_series,
)
from pageant.events.slugs import slugify

routes = RouteTable("series")


class SeriesCreate(BaseModel):
    """A new series: only ``title`` is required."""

    model_config = ConfigDict(extra="forbid", strict=True)

    title: Title
    slug: str | None = Field(
        None, description="Derived from the title when absent.", json_schema_extra=SLUG_SCHEMA
    )
    description: Description = ""
    visibility: Visibility = "staff"

    _slug = field_validator("slug")(check_slug)


class SeriesUpdate(BaseModel):
    """A partial update: only the fields sent change."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra=no_defaults)

    # Defaults are not validated: absent stays None, a null actually sent is refused. The
    # annotations say what a sent value must be (what the OpenAPI document shows); the None
    # defaults contradict them on purpose, hence each ignore[assignment].
    title: Title = None  # type: ignore[assignment]  # None: absent, see above
    slug: str = Field(None, json_schema_extra=SLUG_SCHEMA)  # type: ignore[assignment]  # None: absent, see above
    description: Description = None  # type: ignore[assignment]  # None: absent, see above
    visibility: Visibility = None  # type: ignore[assignment]  # None: absent, see above

    _slug = field_validator("slug")(check_slug)


class SeriesOut(BaseModel):
    id: int
    title: str
    slug: str
    description: str
    visibility: Visibility


class SeriesList(BaseModel):
    items: list[SeriesOut]
    next_cursor: str | None


def _now(request: web.Request) -> datetime:
    return request.app[HOST].clock.now()


@routes.get(
    "/api/v1/admin/series",
    roles=STAFF,
    summary="List series, in id order",
    response=SeriesList,
    query={
        "limit": LIMIT,
        "cursor": CURSOR,
    },
)
async def list_all(request: web.Request) -> web.Response:
    page = page_from(request)
    async with request.app[HOST].db.begin() as conn:
        rows = await list_series(conn, after_id=page.after_id, limit=page.limit + 1)
    items = [series_object(r) for r in rows[: page.limit]]
    return respond(page.answer(items, rows))


@routes.post(
    "/api/v1/admin/series",
    roles=AUTHORS,
    summary="Create a series",
    body=SeriesCreate,
    response=SeriesOut,
    status=201,
)
async def create(request: web.Request) -> web.Response:
    checked = check_body(SeriesCreate, await prefetch(request))
    checked.raise_if_invalid()
    body = checked.body
    assert body is not None
    async with request.app[HOST].db.begin() as conn:
        series_id = await create_series(
            conn,
            title=body.title,
            slug=body.slug,
            derived_slug=slugify(body.title, fallback=FALLBACK_SLUG),
            description=body.description,
            visibility=body.visibility,
            now=_now(request),
        )
        row = await require_series(conn, series_id)
    return respond(series_object(row), 201)


@routes.get("/api/v1/admin/series/{id}", roles=STAFF, summary="One series", response=SeriesOut)
async def get_one(request: web.Request) -> web.Response:
    series_id = int_param(request, "id", "series")
    async with request.app[HOST].db.begin() as conn:
        row = await require_series(conn, series_id)
    return respond(series_object(row))


@routes.put(
    "/api/v1/admin/series/{id}",
    roles=AUTHORS,
    summary="Edit a series (a partial update)",
    body=SeriesUpdate,
    response=SeriesOut,
)
async def update(request: web.Request) -> web.Response:
    series_id = int_param(request, "id", "series")
    raw = await prefetch(request)
    async with request.app[HOST].db.begin() as conn:
        await require_series(conn, series_id)
        checked = check_body(SeriesUpdate, raw)
        checked.raise_if_invalid()
        await update_series(conn, series_id, dict(checked.given), now=_now(request))
        row = await require_series(conn, series_id)
    return respond(series_object(row))
