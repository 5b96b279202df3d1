"""An event's announcement preview: its template rendered, and what each leg would send."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from pageant.access.roles import STAFF
from pageant.api.keys import HOST
from pageant.api.routing import RouteTable, int_param, read_body, respond
from pageant.errors import Invalid
from pageant.events import definitions
from pageant.events.announce_preview import preview
from pageant.events.authoring import announce
from pageant.events.authoring.validator import MAX_STRING_PARAM

routes = RouteTable("events")


class AnnouncePreviewBody(BaseModel):
    """What to preview: the working copy's template unless ``announcement`` is given (an edit
    not yet saved), with ``message`` or the spec's first step message."""

    model_config = ConfigDict(extra="forbid")

    announcement: dict[str, Any] | None = Field(
        None,
        description="a template to try, {title?, body?}; the working copy's when absent",
        json_schema_extra={
            "properties": {
                "title": {"type": "string", "maxLength": announce.MAX_TITLE},
                "body": {"type": "string", "maxLength": announce.MAX_BODY},
            },
            "additionalProperties": False,
        },
    )
    message: Annotated[str, StringConstraints(min_length=1, max_length=MAX_STRING_PARAM)] | None = (
        None
    )


class AnnouncePreviewOut(BaseModel):
    """The rendered announcement, for the event's next occurrence (``occurrence: next``) or,
    with none ahead, as if started now."""

    message: str
    occurrence: Literal["next", "now"]
    title: str
    body: str
    link: str
    when: str | None
    when_text: str
    timezone: str
    legs: dict[str, dict[str, Any]]


@routes.post(
    "/api/v1/admin/events/{id}/announce-preview",
    roles=STAFF,
    summary="Preview an event's announcements: its template rendered, and each leg's payload",
    body=AnnouncePreviewBody,
    body_optional=True,
    response=AnnouncePreviewOut,
)
async def announce_preview(request: web.Request) -> web.Response:
    definition_id = int_param(request, "id", "event")
    host = request.app[HOST]
    async with host.db.connect() as conn:
        row = await definitions.require_definition(conn, definition_id)
    body = await read_body(request, AnnouncePreviewBody, optional=True)
    spec = row.spec if isinstance(row.spec, dict) else {}
    template = spec.get("announcement")
    if "announcement" in body.model_fields_set:
        problems: list[str] = []
        template = announce.validate_template(body.announcement, "body.announcement", problems)
        if problems:
            raise Invalid("invalid announcement template", details=problems)
    answer = preview(
        title=row.title,
        slug=row.slug,
        public=row.visibility == "public",
        timezone=row.timezone,
        spec=spec,
        template=template,
        message=body.message,
        settings=host.settings,
        legs=host.registry.legs,
        now=host.clock.now(),
    )
    return respond(answer)
