"""Helpers for the schedule tests: schedule shapes, a published event in a real zone written
straight into the database (never expanded, as if no engine had run yet), and reads of a
definition's runs."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from pageant.db.tables import event_definitions, event_runs, event_versions

_numbers = itertools.count(1)

MAIN = {
    "key": "main",
    "label": "Main",
    "steps": [{"action": "core.announce", "params": {"leg": "core.log", "message": "Muster"}}],
}


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[misc]  # star-args against datetime's fixed parameters


def weekly(*days: str, at: str) -> dict[str, Any]:
    return {"kind": "weekly", "days": list(days), "time": at}


def monthly(nth: int, weekday: str, at: str) -> dict[str, Any]:
    return {"kind": "monthly", "nth": nth, "weekday": weekday, "time": at}


def once(at: str) -> dict[str, Any]:
    return {"kind": "once", "at": at}


def spec_with(schedule: dict[str, Any], *phases: dict[str, Any]) -> dict[str, Any]:
    return {"schedule": schedule, "phases": list(phases) or [MAIN]}


@dataclass(frozen=True)
class Published:
    id: int
    version_id: int


async def ready_event(
    db: AsyncEngine,
    now: datetime,
    schedule: dict[str, Any],
    tz: str = "Europe/Berlin",
    *,
    grace: int = 300,
    state: str = "ready",
    title: str | None = None,
    series_id: int | None = None,
    spec: dict[str, Any] | None = None,
) -> Published:
    """A definition in ``state`` with one published version of ``schedule`` in zone ``tz``
    (or of the whole ``spec``), written directly: ``expanded_until`` is NULL, so nothing has
    been materialised."""
    n = next(_numbers)
    event_spec = spec if spec is not None else spec_with(schedule)
    async with db.begin() as conn:
        definition_id = (
            await conn.execute(
                insert(event_definitions).values(
                    title=title or f"Event {n}",
                    slug=f"scheduled-{n}",
                    timezone=tz,
                    grace_seconds=grace,
                    series_id=series_id,
                    state=state,
                    spec=event_spec,
                    created_at=now,
                    updated_at=now,
                )
            )
        ).inserted_primary_key[0]
        version_id = (
            await conn.execute(
                insert(event_versions).values(
                    definition_id=definition_id,
                    number=1,
                    spec=event_spec,
                    timezone=tz,
                    published_at=now,
                    published_by="admin:test",
                    # Verified: what is tested here is the schedule, not the verify gate.
                    verified_at=now,
                    verified_by="admin:test",
                )
            )
        ).inserted_primary_key[0]
        await conn.execute(
            update(event_definitions)
            .where(event_definitions.c.id == definition_id)
            .values(current_version_id=version_id)
        )
    return Published(definition_id, version_id)


async def runs_of(db: AsyncEngine, definition_id: int) -> list[Any]:
    """Every run of a definition, in instant order."""
    async with db.connect() as conn:
        rows = await conn.execute(
            select(event_runs)
            .where(event_runs.c.definition_id == definition_id)
            .order_by(event_runs.c.scheduled_for, event_runs.c.id)
        )
        return list(rows)


def instants(rows: list[Any]) -> list[tuple[datetime, str | None, Any]]:
    """(scheduled_for, occurrence_local, dst_adjusted) of each row."""
    return [(r.scheduled_for, r.occurrence_local, r.dst_adjusted) for r in rows]


async def expanded_until(db: AsyncEngine, definition_id: int) -> datetime | None:
    async with db.connect() as conn:
        return (
            await conn.execute(
                select(event_definitions.c.expanded_until).where(
                    event_definitions.c.id == definition_id
                )
            )
        ).scalar_one()


async def set_expanded_until(db: AsyncEngine, definition_id: int, value: datetime | None) -> None:
    async with db.begin() as conn:
        await conn.execute(
            update(event_definitions)
            .where(event_definitions.c.id == definition_id)
            .values(expanded_until=value)
        )
