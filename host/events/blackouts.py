"""Blackouts as staff resources: a named, shared calendar of periods ("Tournament night",
"Maintenance") that events subscribe to through their spec's ``blackouts``.

A blackout is created, edited and archived like a series. Each of those changes what the
subscribed events' occurrences inside the horizon may do, so each re-marks them in the same
transaction (:func:`remark_subscribers`): an occurrence a period now covers is marked
``blacked_out`` with the blackout's name, one no period covers any more is ``scheduled``
again, and the answer says how many moved. Nothing is silently dropped: a blacked-out
occurrence stays on every calendar, named.

Every function takes an open connection; the caller owns the transaction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db import blackouts as rows
from pageant.db.blackouts import ACTIVE, ARCHIVED
from pageant.db.rows import AnyRow
from pageant.db.schedules import published_schedules
from pageant.errors import Conflict, NotFound
from pageant.runs import lifecycle
from pageant.schedules import blackouts as periods
from pageant.schedules import reconcile as schedule
from pageant.schedules.recurrence import is_zone

if TYPE_CHECKING:
    from pageant.hosting import Host
    from pageant.plugins.registry import Registry

__all__ = [
    "Remarked",
    "Remarking",
    "archive_blackout",
    "blackout_object",
    "check_zone_and_periods",
    "create_blackout",
    "require_blackout",
    "unknown_blackouts",
    "update_blackout",
]


@dataclass
class Remarked:
    """What re-marking the subscribed events changed: how many occurrences a blackout
    took or gave back, and the runs made on the way (announced after the commit)."""

    count: int = 0
    created_runs: list[int] = field(default_factory=list)

    async def announce(self, host: Host) -> None:
        """After the commit: fire ``core.run.scheduled`` for the runs made, and wake the
        engine (an occurrence given back may be due now)."""
        await lifecycle.announce_scheduled(host, self.created_runs)
        host.wake()


@dataclass(frozen=True)
class Remarking:
    """What re-marking the subscribed events reads: the instant of the change, the
    registry the reconcile materialises with, and how far ahead it looks. One value, so
    every blackout write (and every surface calling one) hands over the same three."""

    now: datetime
    registry: Registry
    horizon_days: int

    @classmethod
    def of(cls, host: Host) -> Remarking:
        """A host's now, registry and horizon: what a change made through the API or the
        web console re-marks with."""
        return cls(host.clock.now(), host.registry, host.settings.horizon_days)


async def require_blackout(conn: AsyncConnection, blackout_id: int) -> AnyRow:
    """The blackout row, or :class:`NotFound` naming the id."""
    row = await rows.get_blackout(conn, blackout_id)
    if row is None:
        raise NotFound(f"no blackout {blackout_id}")
    return row


def blackout_object(row: AnyRow) -> dict[str, Any]:
    """The one rendering of a blackout."""
    return {
        "id": row.id,
        "slug": row.slug,
        "name": row.name,
        "timezone": row.timezone,
        "periods": list(row.periods or []),
        "state": row.state,
    }


async def unknown_blackouts(conn: AsyncConnection, slugs: list[str]) -> list[str]:
    """Those of ``slugs`` that name no blackout (an archived one is known: it applies to
    nothing until it is edited back, and an event may keep naming it)."""
    known = {row.slug for row in await rows.blackouts_by_slug(conn, slugs)}
    return [slug for slug in slugs if slug not in known]


def check_zone_and_periods(given: dict[str, Any], errors: list[str]) -> dict[str, Any]:
    """``given`` with its ``timezone`` checked and its ``periods`` normalised (each absent
    one left alone); every problem is added to ``errors`` as ``body.<field>...: ...``."""
    out = dict(given)
    tz = out.get("timezone")
    if tz is not None and not is_zone(tz):
        errors.append(
            f'body.timezone: "{tz}" is not a known IANA time zone, such as "Europe/Berlin" or "UTC"'
        )
    if "periods" in out:
        out["periods"] = periods.check_periods(out["periods"], "body.periods", errors)
    return out


def _taken(slug: str) -> Conflict:
    return Conflict(f'the slug "{slug}" is taken by another blackout; choose another')


async def create_blackout(
    conn: AsyncConnection,
    values: dict[str, Any],
    remarking: Remarking,
) -> tuple[int, Remarked]:
    """Insert a checked blackout (slug, name, timezone, periods) and re-mark the events that
    already name its slug; its id and what moved. A taken slug is a :class:`Conflict`."""
    blackout_id = await rows.insert_blackout(
        conn, {**values, "state": ACTIVE, "created_at": remarking.now, "updated_at": remarking.now}
    )
    if blackout_id is None:
        raise _taken(values["slug"])
    remarked = await remark_subscribers(conn, [values["slug"]], remarking)
    return blackout_id, remarked


async def update_blackout(
    conn: AsyncConnection,
    blackout_id: int,
    changes: dict[str, Any],
    remarking: Remarking,
) -> Remarked:
    """Write ``changes`` (already checked) and re-mark the events that name its old or new
    slug. An archived blackout is a :class:`Conflict`: archiving is for good."""
    row = await require_blackout(conn, blackout_id)
    if row.state == ARCHIVED:
        raise Conflict(f"blackout {blackout_id} is archived; make a new one instead")
    if changes and not await rows.update_blackout(
        conn, blackout_id, {**changes, "updated_at": remarking.now}
    ):
        raise _taken(changes["slug"])
    slugs = sorted({row.slug, changes.get("slug", row.slug)})
    return await remark_subscribers(conn, slugs, remarking)


async def archive_blackout(
    conn: AsyncConnection,
    blackout_id: int,
    remarking: Remarking,
) -> Remarked:
    """Archive a blackout: it applies to nothing, and the occurrences it held come back."""
    row = await require_blackout(conn, blackout_id)
    if row.state == ARCHIVED:
        return Remarked()
    await rows.update_blackout(conn, blackout_id, {"state": ARCHIVED, "updated_at": remarking.now})
    return await remark_subscribers(conn, [row.slug], remarking)


async def remark_subscribers(
    conn: AsyncConnection,
    slugs: list[str],
    remarking: Remarking,
) -> Remarked:
    """Reconcile, up to the horizon, every ready event whose published version names one of
    ``slugs``, so its occurrences agree with its blackouts as they now are."""
    now, registry = remarking.now, remarking.registry
    end = now + timedelta(days=remarking.horizon_days)
    remarked = Remarked()
    for row in await published_schedules(conn):
        if not set(periods.subscribed(row.spec)) & set(slugs):
            continue
        outcome = await schedule.reconcile_schedule(
            conn, schedule.Plan.of(row), now=now, end=end, registry=registry, supersede=False
        )
        remarked.count += outcome.remarked
        remarked.created_runs.extend(outcome.created_runs)
    return remarked
