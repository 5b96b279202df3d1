"""What a publish changes in a definition's runs: the rows before it and after it, compared.

A publish switches the schedule by reconciling the runs with the new version
(:mod:`pageant.schedules.reconcile`). This module does not predict what that reconcile will
do: it reads the definition's rows before the reconcile and after it, in the same
transaction, and names the difference. The preview of a publish is the publish itself, run
in a transaction that is then rolled back; a real publish reads the same difference to know
whether it moves or removes an occurrence people rely on. So whatever the reconcile learns
to do shows up in the preview as it is, without a second account of the rules to keep equal.

Each run lands in at most one of:

- **added**: a row the publish made (it has no id yet in a preview), or a superseded one it
  brought back;
- **removed**: a scheduled row it cancelled (``superseded``);
- **moved**: a scheduled row at another instant now, with both instants;
- **blacked_out**: a row whose status became ``blacked_out`` (a blackout the event subscribes
  to covers it);
- **kept**: a run under way, which keeps the version it started with.

``dst`` lists, besides, every scheduled row whose daylight-saving adjustment is new: an
occurrence the publish put in a gap or a fold (added, moved, or re-slotted in place).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db import occurrences, runlog
from pageant.db.log_kinds import LogKind
from pageant.schedules.calendar import local_time
from pageant.states import RUN_LIVE, RunStatus

#: How many occurrences each list shows per scope when the caller names no number, and the
#: most it may name.
DEFAULT_PER_SCOPE, MAX_PER_SCOPE = 10, 100

#: Why a change to an occurrence asks the publisher for a reason, by what records it.
HELD_BY_LOG = {
    LogKind.CONTROL_CONFIRM: "confirmed",
    LogKind.ANNOUNCE: "announced",
}
#: An occurrence of a public, published event: players read it on the public calendar.
PUBLIC = "public"
#: What each reason word says, in a refusal's details.
HELD_SENTENCES = {
    "confirmed": "a person confirmed a step of it",
    "announced": "its announcement went out",
    PUBLIC: "it is on the public calendar",
}

Snapshot = dict[int, Row]


@dataclass
class Changes:
    """The difference one publish made (:func:`compare`), each list in instant order."""

    added: list[tuple[Row | None, Row]] = field(default_factory=list)
    removed: list[tuple[Row, Row]] = field(default_factory=list)
    moved: list[tuple[Row, Row]] = field(default_factory=list)
    blacked_out: list[tuple[Row | None, Row]] = field(default_factory=list)
    dst: list[tuple[Row | None, Row]] = field(default_factory=list)
    kept: list[Row] = field(default_factory=list)
    #: Run id -> why a change to it asks for a reason (``confirmed``, ``announced``,
    #: ``public``), for the removed and moved runs that do (:func:`held_runs`).
    held: dict[int, list[str]] = field(default_factory=dict)


async def snapshot(conn: AsyncConnection, definition_id: int, since: datetime) -> Snapshot:
    """The definition's rows a publish may touch (from ``since`` on) and its runs under way,
    by run id (:func:`pageant.db.occurrences.preview_rows`)."""
    return {row.id: row for row in await occurrences.preview_rows(conn, definition_id, since)}


def compare(before: Snapshot, after: Snapshot) -> Changes:
    """What changed between two snapshots of one definition's rows (see the module
    docstring)."""
    changes = Changes()
    for run_id, new in sorted(after.items(), key=lambda item: _order(item[1])):
        old = before.get(run_id)
        if new.status in RUN_LIVE:
            changes.kept.append(new)
            continue
        if new.status == RunStatus.BLACKED_OUT:
            if old is None or old.status != RunStatus.BLACKED_OUT:
                changes.blacked_out.append((old, new))
            continue
        scheduled = new.status == RunStatus.SCHEDULED
        if scheduled and (old is None or old.status != RunStatus.SCHEDULED):
            changes.added.append((old, new))
        elif old is not None and old.status == RunStatus.SCHEDULED and not scheduled:
            changes.removed.append((old, new))
        elif scheduled and old is not None and old.scheduled_for != new.scheduled_for:
            changes.moved.append((old, new))
        if scheduled and new.dst_adjusted and (old is None or old.dst_adjusted != new.dst_adjusted):
            changes.dst.append((old, new))
    return changes


def _order(row: Row) -> tuple[datetime, str, int]:
    return (row.scheduled_for, row.scope, row.id)


async def held_runs(
    conn: AsyncConnection, changes: Changes, *, public: bool
) -> dict[int, list[str]]:
    """The removed and moved runs a publisher must give a reason to change, each with why:
    a person confirmed a step of it or its announcement went out (its log says so), or the
    event is ``public`` (the run is on the public calendar)."""
    touched = [old.id for old, _new in [*changes.removed, *changes.moved]]
    logged = await runlog.kinds_written(conn, touched, list(HELD_BY_LOG))
    held: dict[int, list[str]] = {}
    for run_id in touched:
        why = [HELD_BY_LOG[kind] for kind in HELD_BY_LOG if kind in logged.get(run_id, ())]
        if public:
            why.append(PUBLIC)
        if why:
            held[run_id] = why
    return held


def held_details(changes: Changes, zones: Mapping[int, str]) -> list[str]:
    """One line per held run, for a refusal: the run, its occurrence, what the publish does
    to it and why that asks for a reason."""
    lines = []
    for verb, pairs in (("remove", changes.removed), ("move", changes.moved)):
        for old, new in pairs:
            why = changes.held.get(old.id)
            if not why:
                continue
            where = f" on {old.scope}" if old.scope else ""
            what = (
                f"move it to {local_time(new.scheduled_for, zones.get(new.version_id, 'UTC'))}"
                if verb == "move"
                else "remove it"
            )
            because = "; ".join(HELD_SENTENCES[word] for word in why)
            lines.append(
                f"run {old.id} ({local_time(old.scheduled_for, zones.get(old.version_id, 'UTC'))}"
                f"{where}): the publish would {what}, and {because}"
            )
    return lines


async def zones_of(conn: AsyncConnection, rows: Iterable[Row]) -> dict[int, str]:
    """The time zone of each version the rows are pinned to."""
    return await occurrences.version_timezones(conn, sorted({row.version_id for row in rows}))


# ── The answer ──────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Frame:
    """What rendering a preview needs besides the changes: the zones and numbers of the
    versions the rows are pinned to, the rows before and after, now, and how many
    occurrences each list shows per scope."""

    zones: Mapping[int, str]
    numbers: Mapping[int, int]
    before: Snapshot
    after: Snapshot
    now: datetime
    per_scope: int


def render(changes: Changes, frame: Frame) -> dict[str, Any]:
    """The preview's answer: each list cut to the first ``per_scope`` occurrences of each
    scope, ``counts`` saying how many each list holds in all, ``upcoming`` the next
    occurrences of each scope as they are and as they would be, and whether the publish
    needs a reason."""

    def item(old: Row | None, new: Row) -> dict[str, Any]:
        made = old is None
        return _occurrence(new, frame, run_id=None if made else new.id) | {
            "held_by": changes.held.get(new.id, []) if not made else []
        }

    def moved(old: Row, new: Row) -> dict[str, Any]:
        return {
            "run_id": new.id,
            "scope": new.scope,
            "slot": new.occurrence_local,
            "from": old.scheduled_for,
            "to": new.scheduled_for,
            "from_local": _local(old, frame),
            "to_local": _local(new, frame),
            "from_timezone": frame.zones.get(old.version_id, "UTC"),
            "timezone": frame.zones.get(new.version_id, "UTC"),
            "dst_adjusted": new.dst_adjusted,
            "held_by": changes.held.get(new.id, []),
        }

    lists = {
        "added": [item(old, new) for old, new in changes.added],
        "removed": [
            _occurrence(old, frame, run_id=old.id)
            | {"status": new.status, "held_by": changes.held.get(old.id, [])}
            for old, new in changes.removed
        ],
        "moved": [moved(old, new) for old, new in changes.moved],
        "blacked_out": [item(old, new) for old, new in changes.blacked_out],
        "dst": [item(old, new) for old, new in changes.dst],
        "kept": [
            _occurrence(row, frame, run_id=row.id) | {"version": frame.numbers.get(row.version_id)}
            for row in changes.kept
        ],
    }
    answer: dict[str, Any] = {
        name: _per_scope(items, frame.per_scope) for name, items in lists.items()
    }
    answer["counts"] = {name: len(items) for name, items in lists.items()}
    answer["reason_required"] = bool(changes.held)
    answer["upcoming"] = _upcoming(frame, changes.held)
    return answer


def _local(row: Row, frame: Frame) -> str:
    return local_time(row.scheduled_for, frame.zones.get(row.version_id, "UTC"))


def _occurrence(row: Row, frame: Frame, *, run_id: int | None) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "scope": row.scope,
        "slot": row.occurrence_local,
        "scheduled_for": row.scheduled_for,
        "local_time": _local(row, frame),
        "timezone": frame.zones.get(row.version_id, "UTC"),
        "status": row.status,
        "dst_adjusted": row.dst_adjusted,
    }


def _per_scope(items: Sequence[dict[str, Any]], per_scope: int) -> list[dict[str, Any]]:
    shown: dict[str, int] = {}
    kept = []
    for entry in items:
        seen = shown.get(entry["scope"], 0)
        if seen < per_scope:
            shown[entry["scope"]] = seen + 1
            kept.append(entry)
    return kept


def _upcoming(frame: Frame, held: Mapping[int, list[str]]) -> list[dict[str, Any]]:
    """Per scope, its next ``per_scope`` scheduled occurrences from now: before the publish
    and after it."""

    def ahead(rows: Snapshot, scope: str) -> list[dict[str, Any]]:
        found = sorted(
            (
                row
                for row in rows.values()
                if row.scope == scope
                and row.status == RunStatus.SCHEDULED
                and row.scheduled_for >= frame.now
            ),
            key=_order,
        )
        return [
            _occurrence(row, frame, run_id=row.id if row.id in frame.before else None)
            | {"held_by": held.get(row.id, []) if row.id in frame.before else []}
            for row in found[: frame.per_scope]
        ]

    scopes = sorted({row.scope for row in [*frame.before.values(), *frame.after.values()]})
    return [
        {"scope": scope, "before": ahead(frame.before, scope), "after": ahead(frame.after, scope)}
        for scope in scopes
    ]
