"""``pageant events``: list the events, show one, publish one (or preview the publish)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from pageant.cli.common import (
    actor,
    as_json_text,
    json_option,
    settings_options,
    table,
    when,
    with_host,
)
from pageant.schedules.preview import DEFAULT_PER_SCOPE, MAX_PER_SCOPE
from pageant.support.settings import Settings

if TYPE_CHECKING:
    from pageant.hosting import Host


@click.group()
def events() -> None:
    """Events: list them, show one, publish one."""


@events.command("list")
@click.option("--state", type=click.Choice(["draft", "ready", "archived"]), default=None)
@json_option
@settings_options
def events_list(settings: Settings, state: str | None, as_json: bool) -> None:
    """List the events (as GET /api/v1/admin/events lists them)."""
    from pageant.events import definitions

    async def _go(host: Host) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        after: int | None = None
        async with host.db.connect() as conn:
            while True:
                rows = await definitions.list_definitions(
                    conn, state=state, after_id=after, limit=200
                )
                found += await definitions.render_events(conn, rows, now=host.clock.now())
                if len(rows) < 200:
                    return found
                after = rows[-1].id

    items = with_host(settings, _go)
    if as_json:
        click.echo(as_json_text({"items": items}))
        return
    rows = [["id", "slug", "state", "next", "waiting", "title"]]
    for item in items:
        rows.append(
            [
                str(item["id"]),
                item["slug"],
                item["state"],
                when(item["next_occurrence"]),
                str(item["runs_waiting"]),
                item["title"],
            ]
        )
    click.echo(table(rows) if items else "no events")


@events.command("show")
@click.argument("event")
@json_option
@settings_options
def events_show(settings: Settings, event: str, as_json: bool) -> None:
    """Show one event, by id or slug."""
    from pageant.events import definitions

    async def _go(host: Host) -> dict[str, Any]:
        async with host.db.connect() as conn:
            definition_id = await definitions.find_event(conn, event)
            return await definitions.render_event(conn, definition_id, now=host.clock.now())

    item = with_host(settings, _go)
    if as_json:
        click.echo(as_json_text(item))
        return
    version = item["current_version"]
    click.echo(f"{item['title']} ({item['slug']}, id {item['id']})")
    click.echo(f"  state:     {item['state']}")
    click.echo(f"  version:   {version['number'] if version else 'never published'}")
    click.echo(f"  timezone:  {item['timezone']}")
    click.echo(f"  next:      {when(item['next_occurrence'])}")
    click.echo(f"  waiting:   {item['runs_waiting']} run(s) waiting on a person")
    for phase in (item["spec"] or {}).get("phases") or []:
        steps = ", ".join(st.get("action", "?") for st in phase.get("steps") or [])
        click.echo(f"  phase {phase.get('key')}: {steps or 'no steps'}")


@events.command("publish")
@click.argument("event")
@click.option(
    "--preview",
    is_flag=True,
    help="Publish nothing: show what publishing would change (added, removed, moved, ...).",
)
@click.option(
    "--occurrences",
    type=click.IntRange(1, MAX_PER_SCOPE),
    default=None,
    help=f"With --preview: how many occurrences each list shows per scope "
    f"(default {DEFAULT_PER_SCOPE}, at most {MAX_PER_SCOPE}).",
)
@click.option(
    "--reason",
    default=None,
    help="Why: needed when the publish moves or removes an occurrence someone confirmed, "
    "that was announced, or that is on the public calendar.",
)
@json_option
@settings_options
def events_publish(
    settings: Settings,
    event: str,
    preview: bool,
    occurrences: int | None,
    reason: str | None,
    as_json: bool,
) -> None:
    """Publish EVENT's saved working copy as its next version (by id or slug), or with
    --preview show what that would change (as POST .../publish?preview=1 answers)."""
    from pageant.events import definitions
    from pageant.events.publish_preview import preview_publish
    from pageant.events.publishing import publish

    if occurrences is not None and not preview:
        raise click.UsageError("--occurrences is only read with --preview")
    text = (reason or "").strip() or None
    if text is not None and len(text) > definitions.MAX_PUBLISH_REASON:
        raise click.UsageError(
            f"--reason: at most {definitions.MAX_PUBLISH_REASON} characters; got {len(text)}"
        )

    async def _preview(host: Host) -> dict[str, Any]:
        async with host.db.connect() as conn:
            definition_id = await definitions.find_event(conn, event)
        return await preview_publish(
            host.db,
            definition_id,
            host.registry,
            now=host.clock.now(),
            actor=actor(),
            horizon_days=host.settings.horizon_days,
            per_scope=occurrences or DEFAULT_PER_SCOPE,
        )

    async def _publish(host: Host) -> dict[str, Any]:
        async with host.db.connect() as conn:
            definition_id = await definitions.find_event(conn, event)
        await publish(host, definition_id, actor=actor(), reason=text)
        async with host.db.connect() as conn:
            return await definitions.render_event(
                conn, definition_id, now=host.clock.now(), registry=host.registry
            )

    if preview:
        answer = with_host(settings, _preview)
        click.echo(as_json_text(answer) if as_json else preview_text(answer))
        return
    item = with_host(settings, _publish)
    if as_json:
        click.echo(as_json_text(item))
        return
    click.echo(f"published {item['slug']} as version {item['current_version']['number']}")


#: A preview's lists in the order the table shows them, each with its word.
_CHANGES = (
    ("moved", "moved"),
    ("removed", "removed"),
    ("added", "added"),
    ("blacked_out", "blacked out"),
    ("dst", "dst"),
    ("kept", "kept"),
)


def preview_text(answer: dict[str, Any]) -> str:
    """A publish preview (:func:`pageant.events.publish_preview.preview_publish`) as text: a
    summary line, then one table row per change."""
    counts = answer["counts"]
    lines = [
        f"publishing would make version {answer['version']}: {counts['added']} added, "
        f"{counts['removed']} removed, {counts['moved']} moved, {counts['blacked_out']} "
        f"blacked out, {counts['dst']} newly in a DST gap or fold; {counts['kept']} under way "
        "keep their version"
    ]
    rows = [["change", "run", "scope", "slot", "now", "would be", "held by"]]
    for name, word in _CHANGES:
        for item in answer[name]:
            rows.append(_preview_row(name, word, item))
    if len(rows) > 1:
        lines.append(table(rows))
    shown = sum(len(answer[name]) for name, _ in _CHANGES)
    if shown < sum(counts.values()):
        lines.append(f"(the first occurrences of each scope; {sum(counts.values())} in all)")
    if answer["reason_required"]:
        lines.append(
            "a reason is required: it moves or removes occurrences people rely on "
            '(publish with --reason "...")'
        )
    return "\n".join(lines)


def _preview_row(name: str, word: str, item: dict[str, Any]) -> list[str]:
    run = "new" if item["run_id"] is None else str(item["run_id"])
    slot = item["slot"] or "-"
    held = ", ".join(item.get("held_by") or []) or "-"
    if name == "moved":
        return [word, run, item["scope"] or "-", slot, item["from_local"], item["to_local"], held]
    when = item["local_time"]
    if item.get("dst_adjusted"):
        dst = item["dst_adjusted"]
        when += f" ({dst['kind']}, {dst['shift_minutes']} min)"
    if name in ("added", "dst"):
        return [word, run, item["scope"] or "-", slot, "-", when, held]
    if name == "kept":
        return [word, run, item["scope"] or "-", slot, when, f"v{item['version']}", held]
    return [word, run, item["scope"] or "-", slot, when, "-", held]
