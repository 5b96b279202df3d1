"""A published schedule turned into runs: the schedule reconciliation the expansion, a
publish and an archive share. (Not the plugin hook ``pageant_reconcile``, which asks a plugin
which of its resources are still in force.)

The recurrence (:mod:`pageant.schedules.recurrence`) says which occurrences a schedule produces;
this module makes the rows of ``event_runs`` agree with it, inside one transaction the caller
owns. An occurrence is known by its UTC instant *and* by its authored local slot
(``occurrence_local``), and the rows are matched on both, in this order:

1. a row at an instant the schedule produces is that occurrence: a scheduled one is re-pinned
   to the version (and its slot rewritten if a new zone gave the instant another slot); one
   the schedule itself cancelled (``superseded``) and that never started comes back;
2. a row whose slot the schedule still produces, at another instant (a new time zone, a
   tzdata update), is that occurrence too: a scheduled one is moved there (``run.moved``);
   any other (a person's cancel, a run that happened, an occurrence a person rescheduled —
   ``moved_from`` set) keeps the slot, so nothing is added and nothing is moved back;
3. a scheduled row the schedule no longer produces is cancelled, reason ``superseded``;
4. every produced occurrence left without a row, from ``now - grace`` to the horizon, gets one
   (from further back when the expansion asks, for an event that catches up: see
   :func:`reconcile_schedule`'s ``catch_up_from``).

A publish applies all four; the expansion all but the third (see :func:`reconcile_schedule`).

Two more rules read the event's blackouts (:mod:`pageant.schedules.blackouts`, the spec's
``blackouts``): an occurrence inside a period of one is marked ``blacked_out`` with the
blackout's name (made so when its row is created, marked when it was ``scheduled``), and a
``blacked_out`` row no blackout covers any more is ``scheduled`` again. A fan-out with a
``stagger`` runs each set's occurrence at its own offset, or (``"local"``) at the schedule's
wall time in the set's own zone (:mod:`pageant.schedules.stagger`).

So re-running it over any window gives the same rows back, and no change of schedule, zone
or tzdata ever leaves two live rows for one occurrence. Nothing before ``now - grace`` is
ever created: an outage does not manufacture history. (The one exception is an event's own
catch-up window, which its author asked for: ``catch_up_from``.)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db import blackouts as blackout_rows
from pageant.db import occurrences, runlog, steps
from pageant.db.blackouts import ACTIVE
from pageant.db.occurrences import SUPERSEDED
from pageant.db.shared import Batch
from pageant.runs import countdown, waiting
from pageant.runs import params as run_params
from pageant.runs.create import create_run, materialise_phase, rematerialise_first_phase
from pageant.schedules import blackouts, fan_out, recurrence, stagger
from pageant.states import RunStatus

if TYPE_CHECKING:
    from pageant.plugins.registry import Registry

#: ``expanded_until`` of a schedule that will produce nothing more (manual, a past once).
NEVER = datetime(9999, 12, 31, tzinfo=UTC)
#: The reason an archive writes on the occurrences it cancels.
ARCHIVED = "archived"
# Rows are read from this far before the window, so an occurrence whose instant moved across
# the window's start is still recognised by its slot. A move is at most a day's offset
# change (Samoa, 2011), so two days is ample.
_SLOT_MARGIN = timedelta(days=2)
#: A write of :mod:`pageant.db.occurrences` that puts a never-started run back on
#: ``scheduled`` (from blacked out, from superseded); whether the row moved.
_BackToScheduled = Callable[..., Awaitable[bool]]


@dataclass(frozen=True)
class Plan:
    """What expands: a definition's published version, its zone and the definition's own
    grace window and concurrency key."""

    definition_id: int
    version_id: int
    spec: Mapping[str, Any]
    timezone: str
    grace_seconds: int
    concurrency_key: str | None = None

    @property
    def schedule(self) -> Any:
        return self.spec.get("schedule") if isinstance(self.spec, Mapping) else None

    @classmethod
    def of(cls, row: Any) -> Plan:
        """The plan of a :func:`pageant.db.schedules.published_schedules` row."""
        return cls(
            definition_id=row.id,
            version_id=row.current_version_id,
            spec=row.spec if isinstance(row.spec, Mapping) else {},
            timezone=row.timezone,
            grace_seconds=row.grace_seconds,
            concurrency_key=row.concurrency_key,
        )


@dataclass
class Outcome:
    """What one schedule reconciliation changed."""

    created: int = 0
    #: The runs made, in order: each is fired as ``core.run.scheduled`` after the commit.
    created_runs: list[int] = field(default_factory=list)
    repinned: int = 0
    moved: int = 0
    superseded: int = 0
    revived: int = 0
    #: Occurrences a blackout took (a row marked, or made marked) or gave back.
    blacked_out: int = 0
    lifted: int = 0
    #: Runs just made inside a blackout, marked once their steps are written.
    made_blacked_out: list[tuple[int, blackouts.Calendar, str]] = field(default_factory=list)

    @property
    def remarked(self) -> int:
        """How many occurrences a blackout marked or gave back."""
        return self.blacked_out + self.lifted


def expanded_until(plan: Plan, end: datetime) -> datetime:
    """The ``expanded_until`` after expanding to ``end``: the first occurrence at or past
    ``end`` (it has no row yet), or :data:`NEVER`. Raises ValueError for a schedule or zone
    the recurrence cannot read.

    With a stagger, the first of every set's staggered occurrences at or past ``end``: a set
    whose offset carries its run past ``end`` still needs its row made. With ``"local"``,
    the first of every set's occurrences in its own zone."""
    window = stagger.window_of(plan.schedule)
    if not window and not stagger.is_local(plan.schedule):
        found = recurrence.next_occurrence(plan.schedule, plan.timezone, end)
        return found.at if found is not None else NEVER
    firsts = []
    for scope in _scopes(plan):
        by = stagger.offset(scope, window)
        zone = stagger.zone_of(plan.schedule, scope, plan.timezone)
        found = recurrence.next_occurrence(plan.schedule, zone, end - by)
        if found is not None:
            firsts.append(found.at + by)
    return min(firsts, default=NEVER)


def _scopes(plan: Plan) -> dict[str, dict[str, Any]]:
    """The scope each of the schedule's param sets makes, with its values (one empty scope
    without a fan-out)."""
    return {run_params.scope_of(values): values for values in fan_out.listed_sets(plan.schedule)}


async def calendars_of(conn: AsyncConnection, spec: Mapping[str, Any]) -> list[blackouts.Calendar]:
    """The active blackouts ``spec`` subscribes to, in the order it names them."""
    slugs = blackouts.subscribed(spec)
    found = [
        blackouts.Calendar(row.slug, row.name, row.timezone, tuple(row.periods or ()))
        for row in await blackout_rows.blackouts_by_slug(conn, slugs)
        if row.state == ACTIVE
    ]
    return blackouts.in_order(found, slugs)


def produces_after(plan: Plan, instant: datetime) -> bool:
    """Whether the schedule has an occurrence at or after ``instant`` (False for a manual
    one, or a ``once`` that has passed)."""
    return recurrence.next_occurrence(plan.schedule, plan.timezone, instant) is not None


async def reconcile_schedule(
    conn: AsyncConnection,
    plan: Plan,
    *,
    now: datetime,
    end: datetime,
    registry: Registry | None,
    actor: str | None = None,
    supersede: bool = True,
    catch_up_from: datetime | None = None,
    publish_reason: str | None = None,
    read: fan_out.Read | None = None,
) -> Outcome:
    """Make the definition's rows agree with ``plan`` up to ``end`` (see the module
    docstring); answers what changed. Raises ValueError when the schedule or zone cannot be
    read, before anything is written.

    A schedule that fans out (``schedule.params``, a list of param sets) is reconciled once
    per set, at the scope that set makes (:func:`pageant.runs.params.scope_of`): each
    occurrence is one run per set. Without a fan-out, the rows at the empty scope are the
    schedule's. A publish also supersedes the scheduled rows of a scope the schedule no
    longer makes (a set taken out).

    ``supersede=False`` leaves alone a scheduled row the schedule does not produce (rule 3).
    The expansion passes it: between two publishes the schedule does not change, so such a
    row was not made by the schedule, and only the publish that changed it may take it away.

    ``catch_up_from`` (the expansion's, for an event whose catch-up policy asks for it):
    rule 4 makes the missing occurrences from there rather than from ``now - grace``. They
    are the ones no host materialised because none ran; the missed sweep hands them to the
    catch-up decision at once. The other rules keep to ``now - grace``.

    ``publish_reason``, the reason a publish was given, is written on each ``run.moved`` and
    superseding ``run.status`` line it makes.

    A fan-out over an option source (:mod:`pageant.schedules.fan_out`) makes the sets of
    ``read``, the source's values read before this transaction: the scheduled rows of a
    scope the source no longer offers are superseded (at an expansion too), each with the
    reason. Without a ``read`` of values (a publish, or a source that could not be read),
    it keeps the sets of the runs it has scheduled and supersedes none of them.
    """
    start = now - timedelta(seconds=plan.grace_seconds)
    sets, drop_gone = await _sets(conn, plan, read, since=start, supersede=supersede)
    scoped = {run_params.scope_of(values): values for values in sets}
    outcome = Outcome()
    calendars = await calendars_of(conn, plan.spec)
    # The runs it makes (every set's, every occurrence's) keep their steps and lines for one
    # insert each, made below before anything else can read them.
    made = Batch(conn)
    for scope, values in scoped.items():
        await _reconcile_scope(
            conn,
            plan,
            scope,
            values,
            now=now,
            end=end,
            registry=registry,
            actor=actor,
            supersede=supersede,
            outcome=outcome,
            produce=True,
            made=made,
            catch_up_from=catch_up_from,
            publish_reason=publish_reason,
            calendars=calendars,
        )
    await steps.flush_new(made)
    await runlog.flush(made)
    await _black_out_made(conn, plan, outcome, now=now, actor=actor)
    if drop_gone:
        gone = await occurrences.scheduled_scopes(conn, plan.definition_id, start)
        for scope in sorted(gone - set(scoped)):
            await _reconcile_scope(
                conn,
                plan,
                scope,
                {},
                now=now,
                end=end,
                registry=registry,
                actor=actor,
                supersede=True,
                outcome=outcome,
                produce=False,
                gone_because=read.gone_because(scope) if read is not None else None,
                publish_reason=publish_reason,
            )
    return outcome


async def _sets(
    conn: AsyncConnection,
    plan: Plan,
    read: fan_out.Read | None,
    *,
    since: datetime,
    supersede: bool,
) -> tuple[list[dict[str, Any]], bool]:
    """The param sets the schedule makes, and whether the scheduled rows of a scope it no
    longer makes are superseded."""
    if fan_out.for_each_of(plan.schedule) is None:
        return fan_out.listed_sets(plan.schedule), supersede
    if read is not None and read.sets is not None:
        return read.sets, True
    # Not read now: the last known values, the sets of the runs the fan-out has scheduled.
    return await occurrences.scheduled_param_sets(conn, plan.definition_id, since), False


async def _reconcile_scope(
    conn: AsyncConnection,
    plan: Plan,
    scope: str,
    values: Mapping[str, Any],
    *,
    now: datetime,
    end: datetime,
    registry: Registry | None,
    actor: str | None,
    supersede: bool,
    outcome: Outcome,
    produce: bool,
    made: Batch | None = None,
    catch_up_from: datetime | None = None,
    publish_reason: str | None = None,
    calendars: list[blackouts.Calendar] | None = None,
    gone_because: str | None = None,
) -> None:
    """The four rules over one scope's rows (``produce=False``: a scope the schedule no
    longer makes, whose scheduled rows are all superseded), and the blackouts' two. The runs
    it creates keep their steps and lines for ``made`` when given."""
    start = now - timedelta(seconds=plan.grace_seconds)
    # Rule 4's own start: earlier only for a catch-up's missing occurrences.
    create_from = min(start, catch_up_from) if catch_up_from is not None else start
    rows = await occurrences.occurrence_rows(
        conn, plan.definition_id, create_from - _SLOT_MARGIN, scope
    )
    upper = max(end, rows[-1].scheduled_for + _SLOT_MARGIN) if rows else end
    produced = _produced(plan, scope, create_from - _SLOT_MARGIN, upper) if produce else []
    by_instant = {occ.at: occ for occ in produced}
    by_slot = {occ.slot: occ for occ in produced}
    taken: set[str] = set()  # slots whose occurrence has its row
    held = {row.scheduled_for for row in rows}
    work = _Work(
        conn,
        plan,
        now=now,
        registry=registry,
        actor=actor,
        outcome=outcome,
        scope=scope,
        values=dict(values),
        made=made,
        publish_reason=publish_reason,
        calendars=calendars or [],
    )

    rest = []
    for row in rows:
        occ = by_instant.get(row.scheduled_for)
        if occ is None or row.moved_from is not None:
            rest.append(row)
            continue
        taken.add(occ.slot)
        if row.source == "schedule" and row.scheduled_for >= start:
            await work.keep(row, occ)

    unmatched = []
    for row in rest:
        occ = by_slot.get(row.occurrence_local or "")
        if row.source != "schedule" or occ is None or occ.slot in taken:
            unmatched.append(row)
        elif row.moved_from is not None:
            # A person moved this occurrence: it holds its slot where they put it.
            taken.add(occ.slot)
        elif row.status == "scheduled":
            if occ.at >= start:
                taken.add(occ.slot)
                if await work.move(row, occ):
                    held.discard(row.scheduled_for)
                    held.add(occ.at)
                    await work.mark_if_covered(row.id, occ)
            elif row.scheduled_for >= start:
                taken.add(occ.slot)
                await work.supersede(row, "its new instant has already passed")
        elif row.status == RunStatus.BLACKED_OUT and supersede:
            # Its instant moved (a new zone): withdrawn below, and the occurrence is made
            # again at its new instant, where the blackouts are asked afresh.
            unmatched.append(row)
        elif not _superseded(row):
            # A person's cancel, or a run that happened: the slot had its occurrence.
            taken.add(occ.slot)

    for row in unmatched if supersede else ():
        if row.source != "schedule" or row.scheduled_for < start:
            continue
        if row.status == "scheduled":
            await work.supersede(
                row, gone_because or "the published schedule no longer produces it"
            )
        elif row.status == RunStatus.BLACKED_OUT:
            await work.withdraw(row, "the published schedule no longer produces it")

    for occ in produced:
        if create_from <= occ.at < end and occ.slot not in taken and occ.at not in held:
            held.add(occ.at)
            await work.create(occ)


def _produced(
    plan: Plan, scope: str, start: datetime, end: datetime
) -> list[recurrence.Occurrence]:
    """The schedule's occurrences for ``scope`` with ``start <= at < end``, each at its
    stagger offset when the schedule staggers, and read in the scope's own zone when it
    staggers ``"local"``."""
    window = stagger.window_of(plan.schedule)
    by = stagger.offset(scope, window)
    zone = stagger.zone_of(plan.schedule, scope, plan.timezone)
    found = recurrence.occurrences(plan.schedule, zone, start - by, end - by)
    return [stagger.shifted(occ, by) for occ in found]


async def _black_out_made(
    conn: AsyncConnection, plan: Plan, outcome: Outcome, *, now: datetime, actor: str | None
) -> None:
    """Mark the runs just made inside a blackout (made first, their steps and lines written,
    so the mark is the run's second line): they are never announced as scheduled."""
    for run_id, calendar, slot in outcome.made_blacked_out:
        if await _mark(conn, plan, run_id, calendar, now=now, actor=actor, slot=slot):
            outcome.blacked_out += 1
            outcome.created_runs.remove(run_id)


async def _mark(
    conn: AsyncConnection,
    plan: Plan,
    run_id: int,
    calendar: blackouts.Calendar,
    *,
    now: datetime,
    actor: str | None,
    slot: str,
) -> bool:
    """scheduled -> blacked_out, with its line; False when the run is no longer scheduled."""
    if not await occurrences.black_out(conn, run_id, name=calendar.name, now=now):
        return False
    cancelled = await steps.cancel_open_steps(conn, run_id, now=now)
    await runlog.run_status(
        conn,
        run_id,
        at=now,
        from_=RunStatus.SCHEDULED,
        to=RunStatus.BLACKED_OUT,
        reason=calendar.name,
        because=f'it falls inside the blackout "{calendar.name}" ({calendar.slug})',
        slot=slot,
        version_id=plan.version_id,
        cancelled_steps=cancelled,
        actor=actor,
    )
    return True


def _superseded(row: Row) -> bool:
    return row.status == "cancelled" and row.cancel_reason == SUPERSEDED and not row.started_at


@dataclass
class _Work:
    """The writes of one schedule reconciliation, each with its log line."""

    conn: AsyncConnection
    plan: Plan
    now: datetime
    registry: Registry | None
    actor: str | None
    outcome: Outcome
    scope: str = ""
    values: dict[str, Any] | None = None
    #: Where a new run's steps and lines are kept for one insert (None: made at once).
    made: Batch | None = None
    #: The reason the publish was given, for the lines of what it moves and supersedes.
    publish_reason: str | None = None
    #: The active blackouts the event subscribes to, in the order its spec names them.
    calendars: list[blackouts.Calendar] = field(default_factory=list)

    async def keep(self, row: Row, occ: recurrence.Occurrence) -> None:
        covered = blackouts.covering(self.calendars, occ.at)
        if row.status == "scheduled":
            if row.occurrence_local != occ.slot or row.dst_adjusted != occ.dst_adjusted:
                await self.move(row, occ)  # a new zone gave the instant another slot
            else:
                await self._repin(row.id)
            await self.mark_if_covered(row.id, occ)
        elif row.status == RunStatus.BLACKED_OUT:
            if covered is None:
                await self._lift(row, occ)
            elif row.cancel_reason != covered.name:
                await occurrences.rename_blackout(self.conn, row.id, name=covered.name)
        elif _superseded(row):
            await self._revive(row, occ)
            await self.mark_if_covered(row.id, occ)

    async def mark_if_covered(self, run_id: int, occ: recurrence.Occurrence) -> None:
        """Black out a scheduled run whose occurrence a subscribed blackout covers."""
        covered = blackouts.covering(self.calendars, occ.at)
        if covered is not None and await _mark(
            self.conn, self.plan, run_id, covered, now=self.now, actor=self.actor, slot=occ.slot
        ):
            self.outcome.blacked_out += 1

    async def _lift(self, row: Row, occ: recurrence.Occurrence) -> None:
        if not await self._restore(occurrences.lift_blackout, row, occ):
            return
        self.outcome.lifted += 1
        await self._rematerialise(row.id)
        because = f'the blackout "{row.cancel_reason}" no longer covers it'
        await self._scheduled_again(row, occ, RunStatus.BLACKED_OUT, because)

    async def _restore(self, write: _BackToScheduled, row: Row, occ: recurrence.Occurrence) -> bool:
        """Put a run that never started back on ``scheduled`` at ``occ`` on the plan's
        version (``write``: the way back from its state); whether it moved."""
        return await write(
            self.conn,
            row.id,
            version_id=self.plan.version_id,
            slot=occ.slot,
            dst_adjusted=occ.dst_adjusted,
        )

    async def _scheduled_again(
        self, row: Row, occ: recurrence.Occurrence, from_: RunStatus, because: str
    ) -> None:
        """The run log's line for a run put back on ``scheduled``, and its not-due note: a
        lifted blackout and a revived occurrence are told alike."""
        await runlog.run_status(
            self.conn,
            row.id,
            at=self.now,
            from_=from_,
            to=RunStatus.SCHEDULED,
            because=because,
            slot=occ.slot,
            version_id=self.plan.version_id,
            actor=self.actor,
        )
        await _note_not_due(self.conn, row.id, occ.at, self.now)

    async def _rematerialise(self, run_id: int) -> None:
        # Its steps were cancelled with it and never ran (attempts 0): make them again.
        await steps.delete_unstarted_steps(self.conn, run_id)
        phases = self.plan.spec.get("phases") or []
        if phases:
            await materialise_phase(
                self.conn,
                run_id=run_id,
                phase=phases[0],
                registry=self.registry,
                values=run_params.with_scope(self.values, self.scope),
            )

    async def move(self, row: Row, occ: recurrence.Occurrence) -> bool:
        if not await occurrences.move_occurrence(
            self.conn,
            row.id,
            old_at=row.scheduled_for,
            new_at=occ.at,
            slot=occ.slot,
            dst_adjusted=occ.dst_adjusted,
        ):
            return False
        self.outcome.moved += 1
        await countdown.follow_move(
            self.conn, row.id, old=row.scheduled_for, new=occ.at, now=self.now
        )
        await runlog.run_moved(
            self.conn,
            row.id,
            at=self.now,
            from_=row.scheduled_for,
            to=occ.at,
            from_slot=row.occurrence_local,
            slot=occ.slot,
            timezone=stagger.zone_of(self.plan.schedule, self.scope, self.plan.timezone),
            version_id=self.plan.version_id,
            dst_adjusted=occ.dst_adjusted,
            publish_reason=self.publish_reason,
            actor=self.actor,
        )
        await self._repin(row.id)
        return True

    async def _repin(self, run_id: int) -> None:
        if await rematerialise_first_phase(
            self.conn,
            run_id=run_id,
            version_id=self.plan.version_id,
            spec=self.plan.spec,
            now=self.now,
            registry=self.registry,
            actor=self.actor,
        ):
            self.outcome.repinned += 1

    async def supersede(self, row: Row, why: str) -> None:
        if not await occurrences.cancel_unstarted(
            self.conn, row.id, reason=SUPERSEDED, now=self.now
        ):
            return
        self.outcome.superseded += 1
        cancelled = await steps.cancel_open_steps(self.conn, row.id, now=self.now)
        await runlog.run_status(
            self.conn,
            row.id,
            at=self.now,
            from_="scheduled",
            to="cancelled",
            reason=SUPERSEDED,
            because=why,
            slot=row.occurrence_local,
            version_id=self.plan.version_id,
            cancelled_steps=cancelled,
            publish_reason=self.publish_reason,
            actor=self.actor,
        )

    async def withdraw(self, row: Row, why: str) -> None:
        """A blacked-out occurrence the schedule no longer produces: ``superseded``, as a
        scheduled one would be (players are not shown it; a later version may revive it)."""
        if not await occurrences.withdraw_blacked_out(self.conn, row.id, reason=SUPERSEDED):
            return
        self.outcome.superseded += 1
        await runlog.run_status(
            self.conn,
            row.id,
            at=self.now,
            from_=RunStatus.BLACKED_OUT,
            to=RunStatus.CANCELLED,
            reason=SUPERSEDED,
            because=why,
            slot=row.occurrence_local,
            version_id=self.plan.version_id,
            actor=self.actor,
        )

    async def _revive(self, row: Row, occ: recurrence.Occurrence) -> None:
        if not await self._restore(occurrences.revive_superseded, row, occ):
            return
        self.outcome.revived += 1
        await self._rematerialise(row.id)
        await countdown.materialise_rungs(
            self.conn,
            run_id=row.id,
            spec=self.plan.spec,
            start=occ.at,
            now=self.now,
            registry=self.registry,
        )
        because = "the published schedule produces it again"
        await self._scheduled_again(row, occ, RunStatus.CANCELLED, because)

    async def create(self, occ: recurrence.Occurrence) -> None:
        run_id, created = await create_run(
            self.conn,
            definition_id=self.plan.definition_id,
            version_id=self.plan.version_id,
            spec=self.plan.spec,
            scheduled_for=occ.at,
            now=self.now,
            source="schedule",
            scope=self.scope,
            params=self.values,
            concurrency_key=self.plan.concurrency_key,
            occurrence_local=occ.slot,
            dst_adjusted=occ.dst_adjusted,
            actor=self.actor,
            registry=self.registry,
            batch=self.made,
        )
        if created:
            self.outcome.created += 1
            self.outcome.created_runs.append(run_id)
            covered = blackouts.covering(self.calendars, occ.at)
            if covered is not None:
                self.outcome.made_blacked_out.append((run_id, covered, occ.slot))


async def _note_not_due(conn: AsyncConnection, run_id: int, at: datetime, now: datetime) -> None:
    ahead = waiting.describe(
        {"status": "scheduled", "scheduled_for": at}, [], now=now, max_attempts=0
    )
    if ahead is not None:
        await waiting.note(conn, run_id, ahead, now=now)


async def cancel_unstarted_runs(
    conn: AsyncConnection,
    definition_id: int,
    *,
    reason: str,
    now: datetime,
    actor: str | None = None,
) -> int:
    """Cancel every run of the definition's schedule that has not started, with ``reason``
    (an archive's ``archived``), each with its ``run.status`` line; answers how many."""
    cancelled = 0
    for row in await occurrences.unstarted_schedule_runs(conn, definition_id):
        if not await occurrences.cancel_unstarted(conn, row.id, reason=reason, now=now):
            continue
        cancelled += 1
        open_steps = await steps.cancel_open_steps(conn, row.id, now=now)
        await runlog.run_status(
            conn,
            row.id,
            at=now,
            from_="scheduled",
            to="cancelled",
            reason=reason,
            cancelled_steps=open_steps,
            actor=actor,
        )
    return cancelled


def earliest_touched(now: datetime, grace_seconds: int) -> datetime:
    """The earliest instant of a row a reconcile at ``now`` reads, and so may change (a row
    just before the grace window may be moved into it)."""
    return now - timedelta(seconds=grace_seconds) - _SLOT_MARGIN
