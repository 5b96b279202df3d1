"""The rows the engine passes from one function to the next, typed by their columns.

A query answers a :class:`sqlalchemy.engine.Row`; the engine reads a step's row, a due
run's row and a run's state (its cursor) by column name, changes a field in hand now and
then (``status`` after a claim, ``waiting_reason`` once cleared) and hands them on. These
say which columns each carries, so a key that is not there is the type checker's to catch.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypedDict, cast

from sqlalchemy.engine import Row, RowMapping


class StepRow(TypedDict):
    """A step as :data:`pageant.db.steps.STEP_COLUMNS` (every column of the step's row)."""

    id: int
    run_id: int
    phase: str
    seq: int
    label: str
    action: str
    action_version: int
    params: dict[str, Any]
    on_failure: str
    status: str
    attempts: int
    due_at: datetime | None
    claimed_by: str | None
    lease_until: datetime | None
    idempotency_key: str
    last_error: str | None
    note: str | None
    started_at: datetime | None
    finished_at: datetime | None
    spent: dict[str, Any] | None


class RunState(TypedDict):
    """What a run's cursor reads of the run (:func:`pageant.db.runs.read_cursor`)."""

    status: str
    current_phase: str | None
    hold_until: datetime | None
    waiting_reason: str | None
    waiting_since: datetime | None


class RunRow(TypedDict):
    """A run as :data:`pageant.db.runs.RUN_COLUMNS` (the advance stage's due runs)."""

    id: int
    definition_id: int
    version_id: int
    scope: str
    params: dict[str, Any] | None
    scheduled_for: datetime
    source: str
    status: str
    health: str
    cleanup_status: str | None
    current_phase: str | None
    hold_until: datetime | None
    claimed_by: str | None
    lease_until: datetime | None
    last_error: str | None
    cancel_reason: str | None
    concurrency_key: str | None
    waiting_reason: str | None
    waiting_since: datetime | None
    dst_adjusted: bool
    moved_from: datetime | None
    catch_up: str | None
    created_at: datetime
    started_at: datetime | None
    ended_at: datetime | None
    slug: str
    title: str
    visibility: str
    grace_seconds: int
    version_number: int
    version_verified_at: datetime | None


def step_row(row: Row[Any] | RowMapping) -> StepRow:
    """A step's row, read by its columns."""
    return cast(StepRow, dict(row._mapping if isinstance(row, Row) else row))


def run_row(row: Row[Any] | RowMapping) -> RunRow:
    """A run's row, read by its columns."""
    return cast(RunRow, dict(row._mapping if isinstance(row, Row) else row))
