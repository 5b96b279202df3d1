"""The event editor's announcement preview: the template fields as they stand in the form
(saved or not), rendered as :func:`pageant.events.announce_preview.preview` renders them
for the API, swapped into the editor by htmx."""

from __future__ import annotations

from aiohttp import web

from pageant.access.roles import AUTHORS
from pageant.console import editor
from pageant.console.keys import host_of, path_id, render, require
from pageant.events import definitions
from pageant.events.announce_preview import preview
from pageant.events.authoring.announce import validate_template
from pageant.schedules.recurrence import is_zone

routes = web.RouteTableDef()


@routes.post("/events/{id}/announce-preview")
async def announce_preview(request: web.Request) -> web.Response:
    require(request, AUTHORS)
    host = host_of(request)
    async with host.db.connect() as conn:
        row = await definitions.require_definition(conn, path_id(request, "id", "event"))
    form = await request.post()
    spec = editor.spec_from_form(form, host.registry)
    problems: list[str] = []
    template = validate_template(spec.get("announcement"), "spec.announcement", problems)
    if problems:
        return render(request, "_announce_preview.html", problems=problems, shown=None)
    title = form.get("title")
    timezone = form.get("timezone")
    shown = preview(
        title=title.strip() if isinstance(title, str) and title.strip() else row.title,
        slug=row.slug,
        public=row.visibility == "public",
        timezone=timezone if isinstance(timezone, str) and is_zone(timezone) else row.timezone,
        spec=spec,
        template=template,
        message=None,
        settings=host.settings,
        legs=host.registry.legs,
        now=host.clock.now(),
    )
    return render(request, "_announce_preview.html", problems=[], shown=shown)
