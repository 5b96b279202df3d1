"""SQLite's driver: one turn of aiosqlite's thread a statement, and everything SQLAlchemy
reads off a cursor (rows, rowcount, lastrowid, errors) as the stock driver gives it; a
write whose answer nobody reads deferred to the next statement's turn."""

from __future__ import annotations

import sqlite3

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DatabaseError, IntegrityError

from pageant.db import sqlite_driver
from pageant.db.engine import commit_with_next, create_engine, defer_with_next


@pytest.fixture
async def sqlite_db(tmp_path):
    db = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}")
    try:
        async with db.begin() as conn:
            await conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT UNIQUE)"))
        yield db
    finally:
        await db.dispose()


def count_turns(monkeypatch) -> list[str]:
    """Every call handed to a connection's thread, by name."""
    turns: list[str] = []
    handed = sqlite_driver.Connection._execute

    async def counted(self, fn, *args, **kwargs):
        turns.append(getattr(fn, "__name__", repr(fn)))
        return await handed(self, fn, *args, **kwargs)

    monkeypatch.setattr(sqlite_driver.Connection, "_execute", counted)
    return turns


async def test_a_statement_takes_one_turn_of_the_thread(sqlite_db, monkeypatch):
    async with sqlite_db.connect() as conn:
        await conn.execute(text("SELECT 1"))  # the transaction's BEGIN is behind us
        turns = count_turns(monkeypatch)
        rows = (await conn.execute(text("SELECT 1, 'a' UNION ALL SELECT 2, 'b'"))).all()
        await conn.execute(text("UPDATE t SET v = 'x' WHERE id = -1"))
    # aiosqlite's own cursor takes four: make the cursor, execute, fetch, close.
    assert turns == ["_run", "_run", "rollback"]  # the read's end is one more
    assert [tuple(row) for row in rows] == [(1, "a"), (2, "b")]


async def test_rowcount_lastrowid_and_many_rows_read_as_the_stock_driver_gives_them(sqlite_db):
    async with sqlite_db.begin() as conn:
        inserted = await conn.execute(text("INSERT INTO t (v) VALUES ('one')"))
        assert inserted.lastrowid == 1
        many = await conn.execute(
            text("INSERT INTO t (v) VALUES (:v)"), [{"v": f"n{i}"} for i in range(300)]
        )
        assert many.rowcount == 300
        changed = await conn.execute(text("UPDATE t SET v = v || '!' WHERE id > 250"))
        assert changed.rowcount == 51
        nothing = await conn.execute(text("UPDATE t SET v = 'x' WHERE id = -1"))
        assert nothing.rowcount == 0
        returned = await conn.execute(text("DELETE FROM t WHERE id > 298 RETURNING id"))
        assert sorted(returned.scalars().all()) == [299, 300, 301]
    async with sqlite_db.connect() as conn:
        result = await conn.execute(text("SELECT id FROM t ORDER BY id"))
        assert result.fetchone() == (1,)
        assert [row[0] for row in result.fetchmany(2)] == [2, 3]
        assert len(result.fetchall()) == 295
        empty = await conn.execute(text("SELECT id FROM t WHERE id < 0"))
        assert empty.all() == []


async def test_an_error_is_the_stock_drivers_and_the_transaction_rolls_back(sqlite_db):
    with pytest.raises(IntegrityError, match="UNIQUE"):
        async with sqlite_db.begin() as conn:
            await conn.execute(text("INSERT INTO t (v) VALUES ('same')"))
            await conn.execute(text("INSERT INTO t (v) VALUES ('same')"))
    async with sqlite_db.connect() as conn:
        assert (await conn.execute(text("SELECT count(*) FROM t"))).scalar_one() == 0


async def test_a_reads_begin_rides_with_its_first_statement(sqlite_db, monkeypatch):
    turns = count_turns(monkeypatch)
    async with sqlite_db.connect() as conn:
        await conn.execute(text("SELECT count(*) FROM t"))
    assert turns == ["_run", "rollback"]  # BEGIN, SELECT in one turn; the end in another
    turns.clear()
    async with sqlite_db.connect() as conn:
        pass  # a read that never ran a statement ends without a turn
    assert turns == []


async def test_a_read_is_still_one_snapshot(sqlite_db):
    async with sqlite_db.connect() as reader:
        before = (await reader.execute(text("SELECT count(*) FROM t"))).scalar_one()
        async with sqlite_db.begin() as writer:
            await writer.execute(text("INSERT INTO t (v) VALUES ('new')"))
        # The read began before the write committed: it goes on seeing what it saw.
        again = (await reader.execute(text("SELECT count(*) FROM t"))).scalar_one()
    assert before == again == 0
    async with sqlite_db.connect() as fresh:
        assert (await fresh.execute(text("SELECT count(*) FROM t"))).scalar_one() == 1


async def test_a_read_whose_first_statement_fails_still_ends_its_transaction(sqlite_db):
    async with sqlite_db.connect() as reader:
        with pytest.raises(Exception, match="no such table"):
            await reader.execute(text("SELECT * FROM missing"))
    # Nothing was left open on the connection: a writer gets the file at once.
    async with sqlite_db.begin() as writer:
        await writer.execute(text("INSERT INTO t (v) VALUES ('after')"))
    async with sqlite_db.connect() as conn:
        assert (await conn.execute(text("SELECT count(*) FROM t"))).scalar_one() == 1


async def test_a_writers_begin_immediate_rides_with_its_first_statement(sqlite_db, monkeypatch):
    turns = count_turns(monkeypatch)
    async with sqlite_db.begin() as conn:
        await conn.execute(text("SELECT count(*) FROM t"))
        # Only a read ran, yet the file's write lock is held: the BEGIN was IMMEDIATE.
        other = sqlite3.connect(sqlite_db.sync_engine.url.database, timeout=0)
        try:
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                other.execute("BEGIN IMMEDIATE")
        finally:
            other.close()
        await conn.execute(text("INSERT INTO t (v) VALUES ('w')"))
    assert turns == ["_run", "_run", "commit"]  # BEGIN IMMEDIATE and the SELECT in one turn
    turns.clear()
    async with sqlite_db.begin():
        pass  # a write that never ran a statement ends without a turn
    assert turns == []
    async with sqlite_db.connect() as conn:
        assert (await conn.execute(text("SELECT count(*) FROM t"))).scalar_one() == 1


async def test_a_writes_last_statement_can_commit_in_its_own_turn(sqlite_db, monkeypatch):
    turns = count_turns(monkeypatch)
    async with sqlite_db.begin() as conn:
        await conn.execute(text("INSERT INTO t (v) VALUES ('a')"))
        commit_with_next(conn)
        await conn.execute(text("INSERT INTO t (v) VALUES ('b')"))
    assert turns == ["_run", "_run"]  # the commit rode with the last statement
    # A last statement that fails commits nothing: the transaction rolls back whole.
    with pytest.raises(IntegrityError):
        async with sqlite_db.begin() as conn:
            await conn.execute(text("INSERT INTO t (v) VALUES ('c')"))
            commit_with_next(conn)
            await conn.execute(text("INSERT INTO t (v) VALUES ('a')"))
    # Asked for with no statement after it, the transaction commits as any other.
    async with sqlite_db.begin() as conn:
        await conn.execute(text("INSERT INTO t (v) VALUES ('d')"))
        commit_with_next(conn)
    async with sqlite_db.connect() as conn:
        rows = (await conn.execute(text("SELECT v FROM t ORDER BY id"))).scalars().all()
    assert rows == ["a", "b", "d"]


async def test_a_deferred_write_rides_with_the_next_statements_turn(sqlite_db, monkeypatch):
    turns = count_turns(monkeypatch)
    async with sqlite_db.begin() as conn:
        await conn.execute(text("INSERT INTO t (v) VALUES ('a')"))
        defer_with_next(conn, 1)
        deferred = await conn.execute(text("UPDATE t SET v = 'b' WHERE v = 'a'"))
        assert deferred.rowcount == 1  # answered at once, with the rows it must change
        defer_with_next(conn)
        anything = await conn.execute(text("INSERT INTO t (v) VALUES ('c')"))
        assert anything.rowcount == -1
        # The next statement runs after the deferred ones, in their order, and sees them.
        seen = (await conn.execute(text("SELECT v FROM t ORDER BY id"))).scalars().all()
        assert seen == ["b", "c"]
    assert turns == ["_run", "_run", "commit"]
    # Deferred last, a write rides with the commit: one turn for both.
    turns.clear()
    async with sqlite_db.begin() as conn:
        defer_with_next(conn)
        await conn.execute(text("INSERT INTO t (v) VALUES ('d')"))
    assert turns == ["_run"]
    async with sqlite_db.connect() as conn:
        rows = (await conn.execute(text("SELECT v FROM t ORDER BY id"))).scalars().all()
    assert rows == ["b", "c", "d"]


async def test_a_deferred_write_that_changes_other_rows_fails_before_the_commit(sqlite_db):
    async with sqlite_db.begin() as conn:
        await conn.execute(text("INSERT INTO t (v) VALUES ('a')"))
    with pytest.raises(DatabaseError, match="changed 0 rows, not 1"):
        async with sqlite_db.begin() as conn:
            await conn.execute(text("INSERT INTO t (v) VALUES ('b')"))
            defer_with_next(conn, 1)
            await conn.execute(text("UPDATE t SET v = 'x' WHERE v = 'missing'"))
            commit_with_next(conn)
            await conn.execute(text("INSERT INTO t (v) VALUES ('c')"))
    # Its error is the deferred write's own, before the commit: nothing was written.
    with pytest.raises(IntegrityError, match="UNIQUE"):
        async with sqlite_db.begin() as conn:
            await conn.execute(text("INSERT INTO t (v) VALUES ('e')"))
            defer_with_next(conn)
            await conn.execute(text("INSERT INTO t (v) VALUES ('a')"))
    async with sqlite_db.connect() as conn:
        rows = (await conn.execute(text("SELECT v FROM t ORDER BY id"))).scalars().all()
    assert rows == ["a"]


async def test_a_rollback_forgets_a_deferred_write(sqlite_db, monkeypatch):
    turns = count_turns(monkeypatch)
    with pytest.raises(LookupError):
        async with sqlite_db.begin() as conn:
            defer_with_next(conn)
            await conn.execute(text("INSERT INTO t (v) VALUES ('never')"))
            raise LookupError("the caller gave up")
    assert turns == []  # BEGIN never ran: nothing to roll back
    async with sqlite_db.begin() as conn:
        await conn.execute(text("INSERT INTO t (v) VALUES ('after')"))
    async with sqlite_db.connect() as conn:
        rows = (await conn.execute(text("SELECT v FROM t ORDER BY id"))).scalars().all()
    assert rows == ["after"]


@pytest.mark.parametrize(
    ("query", "kept"), [("", sqlite_driver.STATEMENT_CACHE), ("?cached_statements=64", 64)]
)
async def test_a_connection_keeps_a_bounded_number_of_prepared_statements(
    tmp_path, monkeypatch, query, kept
):
    # A pooled connection lives as long as the host: what each keeps prepared is bounded
    # (a URL may name its own bound).
    opened: list[dict] = []
    connect = sqlite3.connect

    def recorded(*args, **kwargs):
        opened.append(kwargs)
        return connect(*args, **kwargs)

    monkeypatch.setattr(sqlite_driver.sqlite3, "connect", recorded)
    db = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'cache.db'}{query}")
    try:
        async with db.connect() as conn:
            assert (await conn.execute(text("SELECT 1"))).scalar_one() == 1
    finally:
        await db.dispose()
    assert [options["cached_statements"] for options in opened] == [kept]
