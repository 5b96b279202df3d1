"""Event definitions and their published versions: the rules (the SQL is in
:mod:`pageant.db.definitions`).

A definition is what staff author: a title, a slug, a zone and a working-copy ``spec`` that
changes freely. Publishing freezes the working copy into an immutable, numbered
``event_versions`` row (1, 2, 3... per definition), which is what runs are pinned to; the
working copy then moves on as the next draft. ``state`` is ``draft`` until the first
publish, ``ready`` once a version exists (its schedule is live), ``archived`` when stopped.

Every function takes an open connection: the caller owns the transaction, so a route can
check, write and read back its answer in one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db import definitions as rows
from pageant.db.rows import AnyRow, columns_of
from pageant.errors import Conflict, Dormant, Invalid, NotFound
from pageant.events.authoring import validator as specs
from pageant.events.authoring.cautions import spec_warnings
from pageant.events.authoring.dormancy import as_registered
from pageant.events.campaigns import unknown_required
from pageant.events.composition import refuse_self_waits
from pageant.events.slugs import insert_with_slug, slug_owner, slugify, update_with_slug
from pageant.plugins.registry import Registry
from pageant.runs.params import key_problems
from pageant.schedules import calendar, fan_out, preview
from pageant.schedules import reconcile as schedule

STATES = ("draft", "ready", "archived")
#: The states an edit, a publish or an archive may act from.
OPEN_STATES = rows.OPEN_STATES
DEFAULT_TIMEZONE = "UTC"
DEFAULT_GRACE_SECONDS = 300
#: The grace window's bounds: a start may be late by up to a day, never negative.
MIN_GRACE_SECONDS, MAX_GRACE_SECONDS = 0, 86_400
#: The longest reason a publish may be given.
MAX_PUBLISH_REASON = 500

# ── Reading ─────────────────────────────────────────────────────────────────────────────────


async def get_definition(
    conn: AsyncConnection, definition_id: int, *, lock: bool = False
) -> AnyRow | None:
    """The ``event_definitions`` row, or None. ``lock`` holds it until the transaction ends
    (on MariaDB; SQLite's transactions already exclude each other)."""
    return await rows.get_definition(conn, definition_id, lock=lock)


async def require_definition(
    conn: AsyncConnection, definition_id: int, *, lock: bool = False
) -> AnyRow:
    """:func:`get_definition`, or :class:`NotFound` naming the id."""
    row = await get_definition(conn, definition_id, lock=lock)
    if row is None:
        raise NotFound(f"no event {definition_id}")
    return row


async def find_event(conn: AsyncConnection, ref: str) -> int:
    """The id of the event ``ref`` names: an id (digits) or a slug; else :class:`NotFound`."""
    text = ref.strip()
    if text.isascii() and text.isdigit():
        if int(text) > 2**63 - 1 or await get_definition(conn, int(text)) is None:
            raise NotFound(f"no event {text}")
        return int(text)
    found = await slug_owner(conn, "event_definitions", text)
    if found is None:
        raise NotFound(f"no event has the slug {text!r}")
    return int(found)


async def list_definitions(
    conn: AsyncConnection, *, state: str | None = None, after_id: int | None = None, limit: int
) -> list[AnyRow]:
    """Up to ``limit`` definitions (with their current version) in ascending id order,
    after ``after_id``, optionally only those in ``state``."""
    return await rows.list_view(conn, state=state, after_id=after_id, limit=limit)


async def runs_waiting(conn: AsyncConnection, definition_ids: Sequence[int]) -> dict[int, int]:
    """How many runs of each definition wait on a person (one query for all of them)."""
    if not definition_ids:
        return {}
    found = await rows.count_runs_waiting(conn, definition_ids)
    return {i: found.get(i, 0) for i in definition_ids}


async def next_occurrence_for(
    conn: AsyncConnection, definition_ids: Sequence[int], *, now: datetime
) -> dict[int, datetime | None]:
    """The next occurrence of each definition at or after ``now``, or None (manual, draft,
    archived, or a schedule with nothing ahead): the earliest scheduled run, else the
    projection past what is materialised. A fixed number of queries for the whole list."""
    return await calendar.next_occurrences(conn, list(definition_ids), now=now)


async def published_version(conn: AsyncConnection, definition_id: int) -> AnyRow | None:
    """The definition's current (latest published) ``event_versions`` row, or None."""
    row = await get_definition(conn, definition_id)
    if row is None or row.current_version_id is None:
        return None
    return await get_version_by_id(conn, row.current_version_id)


async def get_version_by_id(conn: AsyncConnection, version_id: int) -> AnyRow | None:
    """An ``event_versions`` row by its id (what a run is pinned to), or None."""
    return await rows.get_version_by_id(conn, version_id)


async def get_version(conn: AsyncConnection, definition_id: int, number: int) -> AnyRow | None:
    """Version ``number`` of a definition, or None."""
    return await rows.get_version(conn, definition_id, number)


async def list_versions(
    conn: AsyncConnection, definition_id: int, *, after_id: int | None = None, limit: int
) -> list[AnyRow]:
    """Up to ``limit`` versions of a definition in ascending id (and so number) order."""
    return await rows.list_versions(conn, definition_id, after_id=after_id, limit=limit)


# ── Rendering ───────────────────────────────────────────────────────────────────────────────


async def render_events(
    conn: AsyncConnection,
    rows: Sequence[AnyRow],
    *,
    now: datetime,
    registry: Registry | None = None,
) -> list[dict[str, Any]]:
    """Event objects for rows of the definition view (:func:`list_definitions`,
    :func:`view_definition`): a fixed number of queries however many rows there are.
    ``registry`` is what the published version's drift is measured against."""
    ids = [row.id for row in rows]
    waiting = await runs_waiting(conn, ids)
    upcoming = await next_occurrence_for(conn, ids, now=now)
    return [event_object(row, waiting[row.id], upcoming[row.id], registry=registry) for row in rows]


def version_drift(spec: Any, registry: Registry | None) -> list[dict[str, Any]]:
    """Steps of a published version written against an older declaration of their action
    (its ``version`` was bumped since: a param may mean something else now)."""
    if registry is None:
        return []
    drift = []
    for path, step in specs.action_steps(spec):
        action = registry.actions.get(step.get("action", ""))
        stored = step.get("action_version")
        if action is not None and isinstance(stored, int) and stored < action.version:
            drift.append(
                {
                    "path": path,
                    "action": action.id,
                    "stored_version": stored,
                    "declared_version": action.version,
                }
            )
    return drift


async def view_definition(conn: AsyncConnection, definition_id: int) -> AnyRow | None:
    """One row of the definition view (the definition with its current version)."""
    return await rows.view_one(conn, definition_id)


async def render_event(
    conn: AsyncConnection,
    definition_id: int,
    *,
    now: datetime,
    registry: Registry | None = None,
) -> dict[str, Any]:
    """The event object for one definition, or :class:`NotFound`."""
    row = await view_definition(conn, definition_id)
    if row is None:
        raise NotFound(f"no event {definition_id}")
    return (await render_events(conn, [row], now=now, registry=registry))[0]


def event_object(
    row: AnyRow,
    runs_waiting: int,
    next_occurrence: datetime | None,
    *,
    registry: Registry | None = None,
) -> dict[str, Any]:
    """The one rendering of an event (the admin API's event object)."""
    current = None
    if row.current_version_id is not None:
        current = {
            "id": row.current_version_id,
            "number": row.version_number,
            "published_at": row.version_published_at,
            "published_by": row.version_published_by,
            "verified_at": row.version_verified_at,
            "verified_by": row.version_verified_by,
        }
    event = {
        "id": row.id,
        "title": row.title,
        "slug": row.slug,
        "description": row.description,
        "timezone": row.timezone,
        "grace_seconds": row.grace_seconds,
        "concurrency_key": row.concurrency_key,
        "overlap": row.overlap,
        "series_id": row.series_id,
        "visibility": row.visibility,
        "state": row.state,
        # Dormancy as the registry stands now, not as it stood at the last save.
        "spec": row.spec if registry is None else as_registered(row.spec, registry),
        "current_version": current,
        "version_verified": current is not None and current["verified_at"] is not None,
        "version_drift": version_drift(row.version_spec, registry) if current else [],
        "next_occurrence": next_occurrence,
        "runs_waiting": runs_waiting,
    }
    if registry is not None:
        # What the author is warned of in the working copy, as the registry stands now.
        event["warnings"] = spec_warnings(event["spec"], registry)
    return event


def version_object(row: AnyRow) -> dict[str, Any]:
    """The one rendering of a published version."""
    return columns_of(row, ("id", "number", "published_at", "published_by", "spec"))


# ── Writing ─────────────────────────────────────────────────────────────────────────────────


async def create_definition(
    conn: AsyncConnection,
    *,
    title: str,
    slug: str | None,
    derived_slug: str,
    spec: dict[str, Any],
    now: datetime,
    actor: str | None,
    **fields: Any,
) -> int:
    """Insert a draft and answer its id.

    An explicit ``slug`` that is taken is a :class:`Conflict`; without one,
    ``derived_slug`` is suffixed ``-2``, ``-3``... until free
    (:func:`pageant.events.slugs.insert_with_slug`). ``fields`` are the other columns
    (description, timezone, grace_seconds, ...), already validated.
    """
    values = dict(
        fields,
        title=title,
        spec=spec,
        state="draft",
        created_at=now,
        updated_at=now,
        created_by=actor,
    )
    definition_id = await insert_with_slug(
        conn, "event_definitions", values, slug=slug, derived_slug=derived_slug, noun="event"
    )
    await _refuse_self_waits(conn, definition_id)
    return definition_id


async def _refuse_self_waits(conn: AsyncConnection, definition_id: int) -> None:
    # Read back after the write: the slug a derived one became (``-2``...) is known only now,
    # and raising here rolls the caller's transaction back whole.
    row = await get_definition(conn, definition_id)
    if row is not None:
        refuse_self_waits(row.spec, row.slug)


async def update_definition(
    conn: AsyncConnection, definition_id: int, changes: dict[str, Any], *, now: datetime
) -> None:
    """Write ``changes`` (already validated) to a definition.

    The caller holds the row (:func:`require_definition` with ``lock``) and has checked its
    state; a slug another definition holds is a :class:`Conflict`.
    """
    if changes:
        await update_with_slug(
            conn, "event_definitions", definition_id, {**changes, "updated_at": now}, noun="event"
        )
        if "spec" in changes or "slug" in changes:
            await _refuse_self_waits(conn, definition_id)


def refuse_unless_open(row: AnyRow, doing: str) -> None:
    """:class:`Conflict` naming the state, unless the definition may still be ``doing``."""
    if row.state not in OPEN_STATES:
        raise Conflict(
            f"event {row.id} is {row.state}; an {row.state} event cannot be {doing}",
            details=[f"state: {row.state}"],
        )


async def publish_definition(
    conn: AsyncConnection,
    definition_id: int,
    registry: Registry,
    *,
    now: datetime,
    actor: str | None,
    horizon_days: int,
    created: list[int] | None = None,
    reason: str | None = None,
) -> AnyRow:
    """Freeze the working copy into the next numbered version and answer its row
    (:func:`publish_and_compare`, then the reason rule).

    A publish that would remove or move an occurrence people rely on — a person confirmed a
    step of it, its announcement went out, or it is on the public calendar
    (:func:`pageant.schedules.preview.held_runs`) — needs a ``reason``: without one it is a
    :class:`Conflict` naming each such occurrence, raised inside the caller's transaction so
    that nothing is written. The reason, when given, is written on the log lines of what the
    publish moves and supersedes.
    """
    published = await publish_and_compare(
        conn,
        definition_id,
        registry,
        now=now,
        actor=actor,
        horizon_days=horizon_days,
        created=created,
        reason=reason,
    )
    if published.changes.held and not reason:
        zones = await preview.zones_of(
            conn, [*published.before.values(), *published.after.values()]
        )
        raise Conflict(
            f"publishing event {definition_id} would move or remove occurrences people rely "
            "on; publish again with a reason to go ahead",
            details=preview.held_details(published.changes, zones),
        )
    return published.version


@dataclass(frozen=True)
class Published:
    """A publish and what it changed in the definition's runs."""

    version: AnyRow
    changes: preview.Changes
    #: The rows the publish may touch, before and after it (:func:`preview.snapshot`).
    before: preview.Snapshot
    after: preview.Snapshot


async def publish_and_compare(
    conn: AsyncConnection,
    definition_id: int,
    registry: Registry,
    *,
    now: datetime,
    actor: str | None,
    horizon_days: int,
    created: list[int] | None = None,
    reason: str | None = None,
) -> Published:
    """Freeze the working copy into the next numbered version and answer it with what the
    switch changed in the runs (:func:`pageant.schedules.preview.compare`), including which
    removed or moved runs ask for a reason. Refuses nothing for want of a reason: that is
    :func:`publish_definition`'s rule, and a preview's to report.

    ``created``, when given, receives the ids of the runs the new schedule made: the caller
    fires ``core.run.scheduled`` for them once its transaction has committed.

    The working copy is re-validated against the plugins installed now (``Invalid`` if it
    no longer holds); anything dormant refuses the publish (:class:`Dormant`, each item
    with its path). The version takes the definition's zone; the definition becomes
    ``ready`` and points at it. Archived definitions are a :class:`Conflict`.

    The schedule switches in the same transaction: the occurrences up to ``horizon_days``
    ahead are reconciled with the new version (schedule reconciliation,
    :func:`pageant.schedules.reconcile.reconcile_schedule`: rows not started are re-pinned,
    moved or superseded, missing ones made), so no run of the old version starts after the
    publish has answered.
    """
    row = await require_definition(conn, definition_id, lock=True)
    refuse_unless_open(row, "published")
    try:
        spec = specs.validate(row.spec, registry, stored=row.spec)
    except Invalid as exc:
        # A plugin changed its declarations since the last save (a param renamed, a
        # condition's variable dropped): the author has to edit before this can run.
        raise Invalid(
            f"event {definition_id}'s working copy is no longer valid against the installed "
            "plugins; edit it, then publish",
            details=exc.details,
        ) from None
    refuse_self_waits(spec, row.slug)
    unmet = await unknown_required(conn, spec, own_slug=row.slug)
    if unmet:
        raise Invalid(
            f"event {definition_id} requires an event that does not exist; edit spec.requires, "
            "then publish",
            details=unmet,
        )
    unnamed = key_problems(row.concurrency_key, spec.get("params"))
    if unnamed:
        # The key and the spec are saved apart; they meet here, before any run holds a key
        # with a hole in it.
        raise Invalid(
            f"event {definition_id}'s concurrency key names a param its spec does not "
            "declare; declare it in spec.params or change the key, then publish",
            details=unnamed,
        )
    dormant = specs.dormant_items(spec)
    if dormant:
        raise Dormant(
            f"event {definition_id} names what no installed plugin registers; "
            "install the plugin or edit those out, then publish",
            details=dormant,
        )
    number = await rows.next_version_number(conn, definition_id)
    version_id = await rows.insert_version(
        conn,
        dict(
            definition_id=definition_id,
            number=number,
            spec=spec,
            timezone=row.timezone,
            published_at=now,
            published_by=actor,
        ),
    )
    if version_id is None:
        # Unreachable while the row lock holds; if it ever did not, two publishes would
        # meet on UNIQUE (definition_id, number), and the loser is told, not a 500.
        raise Conflict(
            f"event {definition_id} was published concurrently as version {number}; "
            "read it and publish again if needed"
        )
    plan = schedule.Plan(
        definition_id=definition_id,
        version_id=version_id,
        spec=spec,
        timezone=row.timezone,
        grace_seconds=row.grace_seconds,
        concurrency_key=row.concurrency_key,
    )
    end = now + timedelta(days=horizon_days)
    try:
        until = schedule.expanded_until(plan, end)
    except ValueError as exc:
        # Validated at save; only a zone that left the installed tzdata gets here.
        raise Invalid(
            f"event {definition_id}'s schedule cannot be computed", details=[f"timezone: {exc}"]
        ) from None
    if fan_out.for_each_of(plan.schedule) is not None:
        # Its values are a plugin's answer, never asked inside this transaction: the
        # engine's next expansion reads them (the publish keeps the sets it has runs for).
        until = min(until, now)
    since = schedule.earliest_touched(now, row.grace_seconds)
    before = await preview.snapshot(conn, definition_id, since)
    await rows.set_current_version(conn, definition_id, version_id, expanded_until=until, now=now)
    outcome = await schedule.reconcile_schedule(
        conn, plan, now=now, end=end, registry=registry, actor=actor, publish_reason=reason
    )
    if created is not None:
        created.extend(outcome.created_runs)
    found = await get_version_by_id(conn, version_id)
    assert found is not None
    after = await preview.snapshot(conn, definition_id, since)
    changes = preview.compare(before, after)
    # An event players can read about: what it had published is on the public calendar.
    public = row.visibility == "public" and row.current_version_id is not None
    changes.held = await preview.held_runs(conn, changes, public=public)
    return Published(version=found, changes=changes, before=before, after=after)


async def create_and_publish(
    conn: AsyncConnection,
    registry: Registry,
    raw: dict[str, Any],
    *,
    title: str,
    now: datetime,
    actor: str,
    horizon_days: int,
    description: str = "",
) -> int:
    """Validate ``raw``, create it as a staff-only draft in the default zone and grace, and
    publish it as ``actor``: an event seeded as an admin would make it; its id."""
    spec = specs.validate(raw, registry, stored=None)
    definition_id = await create_definition(
        conn,
        title=title,
        slug=None,
        derived_slug=slugify(title),
        spec=spec,
        now=now,
        actor=actor,
        description=description,
        timezone=DEFAULT_TIMEZONE,
        grace_seconds=DEFAULT_GRACE_SECONDS,
        concurrency_key=None,
        series_id=None,
        visibility="staff",
    )
    await publish_definition(
        conn, definition_id, registry, now=now, actor=actor, horizon_days=horizon_days
    )
    return definition_id


async def archive_definition(
    conn: AsyncConnection, definition_id: int, *, now: datetime, actor: str | None = None
) -> None:
    """Archive a draft or ready definition: its schedule stops.

    A compare-and-set on the state; an archived (or missing) definition is a
    :class:`Conflict` naming its state (or :class:`NotFound`). In the same transaction,
    every run of its schedule that has not started is cancelled with the reason
    ``archived``; runs already under way go on to their end.
    """
    if await rows.archive_if_open(conn, definition_id, now=now):
        await schedule.cancel_unstarted_runs(
            conn, definition_id, reason=schedule.ARCHIVED, now=now, actor=actor
        )
        return
    row = await require_definition(conn, definition_id)
    refuse_unless_open(row, "archived again")
