"""Blackouts: the shared calendars events keep out of. Staff see the list; authors (admin,
editor) make one, edit its name, zone and periods, and archive it.

The same functions as ``/api/v1/admin/blackouts`` (:mod:`pageant.events.blackouts`), and the
same checks and sentences: every write re-marks the subscribed events' occurrences inside
the horizon, and the page says how many moved. The periods are written as JSON, in the
shape the API takes (docs/schedules.md, "Blackouts").
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from pageant.access.roles import AUTHORS, STAFF
from pageant.console.keys import host_of, path_id, render, require, see_other
from pageant.db.blackouts import list_blackouts
from pageant.errors import Invalid, PageantError
from pageant.events import blackouts
from pageant.events.blackouts import Remarking
from pageant.events.slugs import MAX_SLUG, SLUG_RE
from pageant.schedules.blackouts import MAX_NAME

routes = web.RouteTableDef()

#: The most blackouts the page lists (far more than a community keeps).
LISTED = 500
_EXAMPLE = '[{"kind": "weekly", "days": ["friday"], "start": "18:00", "end": "23:00"}]'


async def _page(
    request: web.Request,
    *,
    status: int = 200,
    errors: dict[str, list[str]] | None = None,
    values: dict[str, str] | None = None,
    editing: int | None = None,
    notice: str = "",
) -> web.Response:
    host = host_of(request)
    async with host.db.connect() as conn:
        rows = await list_blackouts(conn, limit=LISTED)
    items = [
        {**blackouts.blackout_object(row), "periods_json": json.dumps(list(row.periods or []))}
        for row in rows
    ]
    return render(
        request,
        "blackouts.html",
        status=status,
        blackouts=items,
        errors=errors or {},
        values=values or {"timezone": "UTC", "periods": _EXAMPLE},
        editing=editing,
        notice=notice,
    )


def _fields(form: Any, problems: list[str], *, creating: bool) -> dict[str, Any]:
    """The form's fields as the API's body would carry them, each problem with its field."""
    given: dict[str, Any] = {}
    slug = str(form.get("slug", "")).strip()
    if creating:
        if not (slug and len(slug) <= MAX_SLUG and SLUG_RE.match(slug)):
            problems.append(
                f"body.slug: expected 1 to {MAX_SLUG} lowercase letters and digits in words "
                'joined by single hyphens, such as "tournament-night"'
            )
        given["slug"] = slug
    name = str(form.get("name", "")).strip()
    if not name or len(name) > MAX_NAME:
        problems.append(f"body.name: expected 1 to {MAX_NAME} characters")
    given["name"] = name
    given["timezone"] = str(form.get("timezone", "")).strip() or "UTC"
    try:
        given["periods"] = json.loads(str(form.get("periods", "")))
    except ValueError:
        problems.append(f"body.periods: expected a JSON list of periods, such as {_EXAMPLE}")
    return blackouts.check_zone_and_periods(given, problems)


def _errors(problems: list[str]) -> dict[str, list[str]]:
    """Each problem under its field's name (``body.periods[1].end: ...`` -> ``periods``)."""
    placed: dict[str, list[str]] = {}
    for problem in problems:
        path, _, message = problem.partition(": ")
        field = path.removeprefix("body.").partition("[")[0].partition(".")[0]
        placed.setdefault(field, []).append(f"{path.removeprefix('body.')}: {message}")
    return placed


#: What the page says after each write, by the query its redirect carries.
_DONE = {"made": "Made", "changed": "Changed", "archived": "Archived"}


def _done(query: Any) -> str:
    """``Made. 2 occurrences of the subscribed events moved.``, from the redirect's query."""
    for key, word in _DONE.items():
        raw = query.get(key, "")
        if raw.isascii() and raw.isdigit() and len(raw) < 9:
            n = int(raw)
            return f"{word}. {n} occurrence{'' if n == 1 else 's'} of the subscribed events moved."
    return ""


def _values(form: Any) -> dict[str, str]:
    return {k: v for k, v in form.items() if isinstance(v, str) and k != "csrf_token"}


def _id(request: web.Request) -> int:
    return path_id(request, "blackout_id", "blackout")


@routes.get("/blackouts")
async def blackouts_page(request: web.Request) -> web.Response:
    require(request, STAFF)
    return await _page(request, notice=_done(request.query))


@routes.post("/blackouts")
async def create(request: web.Request) -> web.Response:
    require(request, AUTHORS)
    host = host_of(request)
    form = await request.post()
    problems: list[str] = []
    given = _fields(form, problems, creating=True)
    if problems:
        return await _page(
            request,
            status=400,
            errors=_errors(problems),
            values=_values(form),
            notice="No blackout was made; fix the fields marked below.",
        )
    try:
        async with host.db.begin() as conn:
            _, remarked = await blackouts.create_blackout(conn, given, Remarking.of(host))
    except PageantError as exc:
        return await _page(
            request, status=exc.status, errors={"slug": [exc.message]}, values=_values(form)
        )
    await remarked.announce(host)
    return see_other(f"/blackouts?made={remarked.count}")


@routes.post("/blackouts/{blackout_id}")
async def edit(request: web.Request) -> web.Response:
    require(request, AUTHORS)
    host = host_of(request)
    blackout_id = _id(request)
    form = await request.post()
    problems: list[str] = []
    given = _fields(form, problems, creating=False)
    try:
        if problems:
            raise Invalid("The blackout was not changed.", details=problems)
        async with host.db.begin() as conn:
            remarking = Remarking.of(host)
            remarked = await blackouts.update_blackout(conn, blackout_id, given, remarking)
    except PageantError as exc:
        return await _page(
            request,
            status=exc.status,
            errors=_errors(exc.details or [f"body.name: {exc.message}"]),
            editing=blackout_id,
            notice=f"The blackout was not changed. {exc.message}",
        )
    await remarked.announce(host)
    return see_other(f"/blackouts?changed={remarked.count}")


@routes.post("/blackouts/{blackout_id}/archive")
async def archive(request: web.Request) -> web.Response:
    require(request, AUTHORS)
    host = host_of(request)
    async with host.db.begin() as conn:
        remarked = await blackouts.archive_blackout(conn, _id(request), Remarking.of(host))
    await remarked.announce(host)
    return see_other(f"/blackouts?archived={remarked.count}")
