"""The switchboard: every action with its owner, risk, enablement and caps (every staff role
reads it; an admin changes it), and each action's change history.

The data and the changes are :mod:`pageant.switchboard.board`'s — the functions behind
``GET``/``PUT /api/v1/admin/actions`` and ``.../history`` — so a bad cap is refused with the
same sentence, shown at its field, and nothing is written.
"""

from __future__ import annotations

from aiohttp import web

from pageant.access.roles import ADMIN, STAFF
from pageant.console.keys import host_of, render, require, see_other
from pageant.errors import Invalid, NotFound
from pageant.switchboard import board
from pageant.switchboard.pricing import MAX_AMOUNT

routes = web.RouteTableDef()


def _action_id(request: web.Request) -> str:
    raw = request.match_info["action_id"]
    if len(raw) > 200:
        raise NotFound(f"There is no action {raw[:40]!r}….")
    return raw


@routes.get("/switchboard")
async def switchboard_page(request: web.Request) -> web.Response:
    require(request, STAFF)
    host = host_of(request)
    async with host.db.connect() as conn:
        items = await board.listing(conn, host.registry)
    return render(request, "switchboard.html", actions=items)


async def _action_page(
    request: web.Request,
    action_id: str,
    *,
    status: int = 200,
    errors: dict[str, list[str]] | None = None,
    problems: list[str] | None = None,
    values: dict[str, str] | None = None,
    notice: str = "",
) -> web.Response:
    host = host_of(request)
    action = board.require_action(host.registry, action_id)
    async with host.db.connect() as conn:
        history = await board.history(conn, host.registry, action_id)
        settings = await board.listing(conn, host.registry)
    item = next(i for i in settings if i["id"] == action.id)
    if values is None:
        values = {f"cap-{d}": "" if cap is None else str(cap) for d, cap in item["caps"].items()}
        values["enabled"] = "yes" if item["enabled"] else "no"
    return render(
        request,
        "switchboard_action.html",
        status=status,
        action=item,
        history=list(reversed(history)),
        errors=errors or {},
        problems=problems or [],
        values=values,
        notice=notice,
        max_amount=MAX_AMOUNT,
    )


@routes.get("/switchboard/{action_id}")
async def action_page(request: web.Request) -> web.Response:
    require(request, STAFF)
    notice = "Saved." if request.query.get("saved") else ""
    return await _action_page(request, _action_id(request), notice=notice)


def _field_of(problem: str) -> str:
    """The field a domain problem names: ``body.caps.x: ...`` -> ``cap-x``."""
    path = problem.split(": ", 1)[0]
    if path.startswith("body.caps."):
        return "cap-" + path.removeprefix("body.caps.")
    if path == "body.enabled":
        return "enabled"
    return ""


@routes.post("/switchboard/{action_id}")
async def change_action(request: web.Request) -> web.Response:
    """The edit form: ``enabled`` (yes or no) and one ``cap-<dimension>`` per dimension the
    action spends (a whole number, or empty for no cap). The caps replace the action's map,
    as ``PUT /api/v1/admin/actions/{id}`` does."""
    session = require(request, ADMIN)
    host = host_of(request)
    action_id = _action_id(request)
    action = board.require_action(host.registry, action_id)
    form = await request.post()
    values = {k: v for k, v in form.items() if isinstance(v, str)}
    errors: dict[str, list[str]] = {}
    enabled_raw = values.get("enabled", "")
    if enabled_raw not in ("yes", "no"):
        errors.setdefault("enabled", []).append("Choose enabled or disabled.")
    usable = [d["dimension"] for d in board.spent_dimensions(action, host.registry) if d["usable"]]
    caps: dict[str, int | None] = {}
    for dimension in usable:
        raw = values.get(f"cap-{dimension}", "").strip()
        if not raw:
            continue
        if not (raw.isascii() and raw.isdigit()) or len(raw) > 20 or int(raw) > MAX_AMOUNT:
            errors.setdefault(f"cap-{dimension}", []).append(
                f"Expected a whole number from 0 to {MAX_AMOUNT}, or empty for no cap; "
                f"got {raw[:40]!r}."
            )
            continue
        caps[dimension] = int(raw)
    problems: list[str] = []
    if not errors:
        try:
            async with host.db.begin() as conn:
                await board.set_action(
                    conn,
                    host.registry,
                    action_id,
                    enabled=enabled_raw == "yes",
                    caps=caps,
                    actor=session.principal.actor,
                    now=host.clock.now(),
                )
        except Invalid as exc:
            for problem in exc.details or [exc.message]:
                field = _field_of(problem)
                message = problem.split(": ", 1)[-1] if field else problem
                if field:
                    errors.setdefault(field, []).append(message)
                else:
                    problems.append(problem)
        else:
            host.wake()  # a run waiting on a refused step may be retried now
            return see_other(f"/switchboard/{action_id}?saved=1")
    return await _action_page(
        request,
        action_id,
        status=400,
        errors=errors,
        problems=problems,
        values=values,
        notice="Nothing was changed; fix the fields marked below.",
    )
