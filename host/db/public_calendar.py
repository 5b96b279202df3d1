"""SQL behind the public calendar: which events and series players may see, and which
occurrences the schedule itself withdrew.

An event is public while its ``visibility`` is ``public`` and its state ``ready``; a series
while its own ``visibility`` is ``public``. The series of a public event is joined only when
that series is public too, so a staff series never reaches a player through an event that
belongs to it: the filter lives in the statement, not in the code that renders its rows.
"""

from __future__ import annotations

from sqlalchemy import and_, bindparam, literal, select
from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db.log_kinds import LogKind
from pageant.db.occurrences import SUPERSEDED
from pageant.db.rows import AnyRow
from pageant.db.tables import event_definitions, event_run_log, event_runs, event_series
from pageant.db.tables import event_versions as versions
from pageant.states import RunStatus

d = event_definitions.c
s = event_series.c
r = event_runs.c
v = versions.c

PUBLIC = "public"

# The zone is the published version's: the working copy's may be an unpublished edit.
_EVENTS = (
    select(
        d.id,
        d.slug,
        d.title,
        d.description,
        v.timezone,
        s.slug.label("series_slug"),
        s.title.label("series_title"),
    )
    .select_from(
        event_definitions.join(versions, v.id == d.current_version_id).outerjoin(
            event_series, and_(s.id == d.series_id, s.visibility == PUBLIC)
        )
    )
    .where(d.visibility == PUBLIC, d.state == "ready")
)
_ALL_EVENTS = _EVENTS.order_by(d.id)
_EVENT_BY_SLUG = _EVENTS.where(d.slug == bindparam("slug"))
_EVENTS_OF_SERIES = _EVENTS.where(d.series_id == bindparam("series_id")).order_by(d.id)

_SERIES_BY_SLUG = select(s.id, s.slug, s.title, s.description).where(
    s.slug == bindparam("slug"), s.visibility == PUBLIC
)

# The schedule's own withdrawals (a republish that no longer produces the occurrence): the
# same test the revival uses, so a person's cancel whose free-text reason happens to read
# "superseded" - it has a control.cancel line - still counts as a cancel.
_SUPERSEDED = select(r.id).where(
    r.id.in_(bindparam("ids", expanding=True)),
    r.status == RunStatus.CANCELLED,
    r.cancel_reason == SUPERSEDED,
    ~select(literal(1))
    .select_from(event_run_log)
    .where(event_run_log.c.run_id == r.id, event_run_log.c.kind == LogKind.CONTROL_CANCEL)
    .correlate(event_runs)
    .exists(),
)


async def public_events(conn: AsyncConnection, *, series_id: int | None = None) -> list[AnyRow]:
    """Every public ready event (id, slug, title, description, published zone, and its
    series' slug and title when that series is public), in id order; only those of
    ``series_id`` when given."""
    if series_id is None:
        return list((await conn.execute(_ALL_EVENTS)).all())
    return list((await conn.execute(_EVENTS_OF_SERIES, {"series_id": series_id})).all())


async def public_event(conn: AsyncConnection, slug: str) -> AnyRow | None:
    """The public ready event named ``slug``, as :func:`public_events` reads it; None for an
    unknown slug and for a staff, draft or archived event alike."""
    return (await conn.execute(_EVENT_BY_SLUG, {"slug": slug})).first()


async def public_series(conn: AsyncConnection, slug: str) -> AnyRow | None:
    """The public series named ``slug`` (id, slug, title, description); None for an unknown
    slug and for a staff series alike."""
    return (await conn.execute(_SERIES_BY_SLUG, {"slug": slug})).first()


async def superseded_runs(conn: AsyncConnection, run_ids: list[int]) -> set[int]:
    """Those of ``run_ids`` that a republish cancelled as ``superseded`` (never a person)."""
    if not run_ids:
        return set()
    return set((await conn.execute(_SUPERSEDED, {"ids": run_ids})).scalars())
