"""Storage: the migration builds exactly tables.py's schema on both dialects, and the schema
enforces what the engine relies on (aware UTC instants, one run per occurrence, one live run
per concurrency key)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import func, insert, inspect, select, update
from sqlalchemy.exc import IntegrityError, StatementError
from sqlalchemy.ext.asyncio import AsyncEngine

from pageant.db.engine import create_engine
from pageant.db.migrate import head_revision, schema_state, upgrade
from pageant.db.tables import (
    ALL_TABLES,
    LIVE_RUN_STATUSES,
    RUN_STATUSES,
    api_tokens,
    event_definitions,
    event_runs,
    event_versions,
    metadata,
)
from pageant.db.types import UTCDateTime
from tests.databases import empty_database

NOW = datetime(2027, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)


@pytest.fixture
def empty_url(dialect: str, tmp_path: Path) -> Iterator[str]:
    with empty_database(dialect, tmp_path) as url:
        yield url


async def table_names(engine: AsyncEngine) -> set[str]:
    async with engine.connect() as conn:
        names = await conn.run_sync(lambda c: set(inspect(c).get_table_names()))
        await conn.rollback()
    return names


# ── the migration ─────────────────────────────────────────────────────────────


async def test_the_migration_builds_an_empty_database_and_reapplies_as_a_no_op(
    empty_url: str,
) -> None:
    engine = create_engine(empty_url)
    try:
        before = await schema_state(engine)
        assert (before.current, before.up_to_date) == (None, False)
        assert await table_names(engine) == set()

        state = await upgrade(engine)
        assert state.current == state.head == head_revision()
        assert state.up_to_date
        assert await table_names(engine) == {t.name for t in ALL_TABLES} | {"alembic_version"}

        async with engine.begin() as conn:
            await conn.execute(
                insert(api_tokens).values(name="kept", role="admin", token_hash="h", created_at=NOW)
            )
        again = await upgrade(engine)
        assert again == state
        async with engine.connect() as conn:
            assert (await conn.execute(select(api_tokens.c.name))).scalars().all() == ["kept"]
            stamped = (await conn.exec_driver_sql("SELECT version_num FROM alembic_version")).all()
            await conn.rollback()
        assert [row[0] for row in stamped] == [head_revision()]
    finally:
        await engine.dispose()


def _default_text(default: Any) -> str | None:
    if default is None:
        return None
    arg = default.arg
    text = arg if isinstance(arg, str) else arg.text
    text = text.strip()
    while len(text) >= 2 and text[0] == "(" and text[-1] == ")":
        text = text[1:-1].strip()
    if len(text) >= 2 and text[0] == text[-1] == "'":
        text = text[1:-1]
    return text


def _real_difference(difference: Any) -> bool:
    # Both dialects reflect a default as SQL text (MariaDB "''", SQLite "('')") while tables.py
    # holds the bare value, and Alembic reports server_default="" as changed on every run. A
    # default counts as a difference only when the unquoted values differ.
    if isinstance(difference, list) and all(d[0] == "modify_default" for d in difference):
        return any(_default_text(d[5]) != _default_text(d[6]) for d in difference)
    return True


async def test_the_migrated_schema_equals_the_tables_module(db: AsyncEngine) -> None:
    def differences(connection: Any) -> list[Any]:
        context = MigrationContext.configure(
            connection, opts={"compare_type": True, "compare_server_default": True}
        )
        return [d for d in compare_metadata(context, metadata) if _real_difference(d)]

    async with db.connect() as conn:
        # Alembic only warns when a generated column's expression differs: make that a failure.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            found = await conn.run_sync(differences)
        await conn.rollback()
    assert found == []
    assert [str(w.message) for w in caught] == []


async def test_the_schema_comparison_would_see_a_drift(db: AsyncEngine) -> None:
    # The comparison above is only worth something if it can fail.
    from sqlalchemy import Column, Integer, MetaData, Table

    drifted = MetaData()
    for table in metadata.sorted_tables:
        table.to_metadata(drifted)
    Table("event_runs", drifted, Column("priority", Integer), extend_existing=True)
    drifted.tables["event_series"].c.visibility.server_default.arg = "public"

    def differences(connection: Any) -> list[Any]:
        context = MigrationContext.configure(
            connection, opts={"compare_type": True, "compare_server_default": True}
        )
        return [d for d in compare_metadata(context, drifted) if _real_difference(d)]

    async with db.connect() as conn:
        found = await conn.run_sync(differences)
        await conn.rollback()
    kinds = sorted(d[0][0] if isinstance(d, list) else d[0] for d in found)
    assert kinds == ["add_column", "modify_default"]


# ── instants ──────────────────────────────────────────────────────────────────


async def test_instants_round_trip_as_aware_utc_with_microseconds(db: AsyncEngine) -> None:
    berlin_summer = timezone(timedelta(hours=2))
    revoked = datetime(2027, 7, 1, 22, 30, 15, 654321, tzinfo=berlin_summer)
    async with db.begin() as conn:
        await conn.execute(
            insert(api_tokens).values(
                name="t", role="admin", token_hash="h1", created_at=NOW, revoked_at=revoked
            )
        )
    async with db.connect() as conn:
        row = (await conn.execute(select(api_tokens.c.created_at, api_tokens.c.revoked_at))).one()
        await conn.rollback()
    assert row.created_at == NOW
    assert row.created_at.tzinfo is UTC and row.created_at.microsecond == 123456
    assert row.revoked_at == revoked
    assert row.revoked_at.tzinfo is UTC
    assert (row.revoked_at.hour, row.revoked_at.microsecond) == (20, 654321)


async def test_instants_compare_in_sql_as_utc(db: AsyncEngine) -> None:
    async with db.begin() as conn:
        await conn.execute(
            insert(api_tokens).values(name="t", role="admin", token_hash="h1", created_at=NOW)
        )
    one_microsecond = timedelta(microseconds=1)
    elsewhere = NOW.astimezone(timezone(timedelta(hours=-5)))
    async with db.connect() as conn:

        def count(condition: Any) -> Any:
            return conn.execute(select(func.count()).select_from(api_tokens).where(condition))

        assert (await count(api_tokens.c.created_at == elsewhere)).scalar_one() == 1
        assert (await count(api_tokens.c.created_at < NOW + one_microsecond)).scalar_one() == 1
        assert (await count(api_tokens.c.created_at < NOW)).scalar_one() == 0
        await conn.rollback()


async def test_a_naive_datetime_is_refused_and_nothing_is_written(db: AsyncEngine) -> None:
    with pytest.raises(StatementError) as caught:
        async with db.begin() as conn:
            await conn.execute(
                insert(api_tokens).values(
                    name="t", role="admin", token_hash="h1", created_at=NOW.replace(tzinfo=None)
                )
            )
    assert isinstance(caught.value.orig, ValueError)
    assert "every instant must be timezone-aware" in str(caught.value.orig)
    async with db.connect() as conn:
        assert (await conn.execute(select(func.count()).select_from(api_tokens))).scalar_one() == 0
        await conn.rollback()


async def test_instant_columns_keep_microseconds(db: AsyncEngine, dialect: str) -> None:
    # MariaDB's DATETIME is whole seconds unless declared DATETIME(6); SQLite stores text.
    async with db.connect() as conn:
        if dialect == "mariadb":
            rows = (
                await conn.exec_driver_sql(
                    "SELECT table_name, column_name, column_type FROM information_schema.columns"
                    " WHERE table_schema = DATABASE() AND data_type = 'datetime'"
                )
            ).all()
        else:
            rows = [
                (table.name, column[1], column[2].lower())
                for table in ALL_TABLES
                for column in (await conn.exec_driver_sql(f"PRAGMA table_info({table.name})")).all()
                if column[2].upper().startswith("DATETIME")
            ]
        await conn.rollback()
    expected = {
        (table.name, column.name)
        for table in ALL_TABLES
        for column in table.columns
        if isinstance(column.type, UTCDateTime)
    }
    assert {(table, column) for table, column, _ in rows} == expected
    wanted = "datetime(6)" if dialect == "mariadb" else "datetime"
    assert {column_type for _, _, column_type in rows} == {wanted}


# ── runs: one per occurrence, one live per concurrency key ────────────────────


async def _definition(conn: Any, slug: str = "muster") -> tuple[int, int]:
    definition_id = (
        await conn.execute(
            insert(event_definitions).values(
                title=slug, slug=slug, spec={}, created_at=NOW, updated_at=NOW
            )
        )
    ).inserted_primary_key[0]
    version_id = (
        await conn.execute(
            insert(event_versions).values(
                definition_id=definition_id, number=1, spec={}, timezone="UTC", published_at=NOW
            )
        )
    ).inserted_primary_key[0]
    return definition_id, version_id


async def _run(conn: Any, ids: tuple[int, int], **values: Any) -> int:
    row = {
        "definition_id": ids[0],
        "version_id": ids[1],
        "scheduled_for": NOW,
        "source": "schedule",
        "status": "scheduled",
        "created_at": NOW,
        **values,
    }
    return (await conn.execute(insert(event_runs).values(**row))).inserted_primary_key[0]


async def _count_runs(db: AsyncEngine) -> int:
    async with db.connect() as conn:
        count = (await conn.execute(select(func.count()).select_from(event_runs))).scalar_one()
        await conn.rollback()
    return count


async def test_scope_defaults_to_the_empty_string(db: AsyncEngine) -> None:
    async with db.begin() as conn:
        ids = await _definition(conn)
        run_id = await _run(conn, ids)
        scope = (
            await conn.execute(select(event_runs.c.scope).where(event_runs.c.id == run_id))
        ).scalar_one()
    assert scope == ""


async def test_one_run_per_definition_scope_and_instant(db: AsyncEngine) -> None:
    async with db.begin() as conn:
        ids = await _definition(conn)
        other = await _definition(conn, "other")
        await _run(conn, ids)
        # Each part of the key alone does not collide.
        await _run(conn, ids, scope="yew")
        await _run(conn, ids, scheduled_for=NOW + timedelta(microseconds=1))
        await _run(conn, other)
    assert await _count_runs(db) == 4

    for duplicate in ({}, {"scope": ""}, {"scope": "yew"}):
        with pytest.raises(IntegrityError):
            async with db.begin() as conn:
                await _run(conn, ids, source="manual", **duplicate)
    # The same instant written in another zone is the same occurrence.
    with pytest.raises(IntegrityError):
        async with db.begin() as conn:
            await _run(conn, ids, scheduled_for=NOW.astimezone(timezone(timedelta(hours=9))))
    assert await _count_runs(db) == 4


async def _set_status(db: AsyncEngine, run_id: int, status: str) -> None:
    async with db.begin() as conn:
        await conn.execute(
            update(event_runs).where(event_runs.c.id == run_id).values(status=status)
        )


async def _lock_of(db: AsyncEngine, run_id: int) -> str | None:
    async with db.connect() as conn:
        lock = (
            await conn.execute(
                select(event_runs.c.concurrency_lock).where(event_runs.c.id == run_id)
            )
        ).scalar_one()
        await conn.rollback()
    return lock


@pytest.mark.parametrize("held_by", LIVE_RUN_STATUSES)
async def test_a_concurrency_key_is_held_by_one_live_run(db: AsyncEngine, held_by: str) -> None:
    async with db.begin() as conn:
        ids = await _definition(conn)
        first = await _run(conn, ids, concurrency_key="arena", status=held_by)
        second = await _run(
            conn, ids, concurrency_key="arena", scheduled_for=NOW + timedelta(hours=1)
        )
    assert await _lock_of(db, first) == "arena"
    assert await _lock_of(db, second) is None

    for status in LIVE_RUN_STATUSES:
        with pytest.raises(IntegrityError):
            await _set_status(db, second, status)
    # A live run may move between live statuses while it holds the key.
    for status in LIVE_RUN_STATUSES:
        await _set_status(db, first, status)
        assert await _lock_of(db, first) == "arena"


@pytest.mark.parametrize("released_by", ["completed", "failed", "cancelled", "missed", "scheduled"])
async def test_a_concurrency_key_is_released_when_its_run_is_no_longer_live(
    db: AsyncEngine, released_by: str
) -> None:
    async with db.begin() as conn:
        ids = await _definition(conn)
        first = await _run(conn, ids, concurrency_key="arena", status="running")
        second = await _run(
            conn, ids, concurrency_key="arena", scheduled_for=NOW + timedelta(hours=1)
        )
    await _set_status(db, first, released_by)
    assert await _lock_of(db, first) is None
    await _set_status(db, second, "starting")
    assert await _lock_of(db, second) == "arena"


async def test_a_live_run_cannot_be_inserted_beside_another_holding_its_key(
    db: AsyncEngine,
) -> None:
    async with db.begin() as conn:
        ids = await _definition(conn)
        await _run(conn, ids, concurrency_key="arena", status="running")
    with pytest.raises(IntegrityError):
        async with db.begin() as conn:
            await _run(
                conn,
                ids,
                concurrency_key="arena",
                status="starting",
                scheduled_for=NOW + timedelta(hours=1),
            )
    assert await _count_runs(db) == 1


async def test_runs_without_a_key_or_with_different_keys_never_collide(db: AsyncEngine) -> None:
    async with db.begin() as conn:
        ids = await _definition(conn)
        for i, key in enumerate([None, None, "arena", "docks"]):
            await _run(
                conn,
                ids,
                concurrency_key=key,
                status="running",
                scheduled_for=NOW + timedelta(hours=i),
            )
    assert await _count_runs(db) == 4


def test_live_statuses_are_statuses() -> None:
    assert set(LIVE_RUN_STATUSES) < set(RUN_STATUSES)
