"""SQL over ``link_commands`` and ``link_servers``: the game link's durable commands and the
instant each server last synced.

A command moves ``queued -> delivered -> answered``, or to ``withdrawn`` from ``queued`` or
``delivered`` when its step's budget ends; each move is a compare-and-set on the status it
acts from, so of two hosts (or a sync and a withdrawal) one moves it and the other matches
nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import and_, bindparam, func, or_, select, tuple_, update
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db.idempotent import insert_keeping_existing, inserted_id
from pageant.db.inlists import padded
from pageant.db.tables import changed_one, link_commands, link_servers

c = link_commands.c
s = link_servers.c

#: What a command row is read as.
COMMAND_COLUMNS = (
    c.id,
    c.server,
    c.owner,
    c.command,
    c.key,
    c.payload,
    c.status,
    c.withdrawn_as,
    c.deadline,
    c.created_at,
    c.delivered_at,
    c.deliveries,
    c.answered_at,
    c.answer,
    c.late,
)

_WAITING = (
    select(func.count())
    .select_from(link_commands)
    .where(c.server == bindparam("server"), c.status.in_(("queued", "delivered")))
)

_FIND = select(*COMMAND_COLUMNS).where(
    c.server == bindparam("server"), c.command == bindparam("command"), c.key == bindparam("key")
)


async def waiting_count(conn: AsyncConnection, server: str) -> int:
    """How many commands for ``server`` are queued or delivered and not yet answered."""
    return int((await conn.execute(_WAITING, {"server": server})).scalar_one())


async def find(conn: AsyncConnection, server: str, command: str, key: str) -> Row | None:
    """The command ``command`` under ``key`` for ``server``, if one was ever queued."""
    return (await conn.execute(_FIND, {"server": server, "command": command, "key": key})).first()


async def insert_command(conn: AsyncConnection, values: dict[str, Any]) -> int | None:
    """Queue a command and answer its id; one already under its (server, command, key) is
    kept as it is (then None)."""
    statement = insert_keeping_existing(
        link_commands, [c.server, c.command, c.key], conn.dialect
    ).values(**values)
    return inserted_id(await conn.execute(statement), conn.dialect)


async def requeue(
    conn: AsyncConnection, command_id: int, *, deadline: datetime, payload: Any
) -> bool:
    """CAS withdrawn -> queued with a new deadline: a retry of the step sends its command
    again under the same key (the agent answers a key it has seen from what it remembers)."""
    statement = (
        update(link_commands)
        .where(c.id == command_id, c.status == "withdrawn")
        .values(
            status="queued",
            withdrawn_as=None,
            deadline=deadline,
            payload=payload,
            answered_at=None,
            answer=None,
            late=False,
        )
    )
    return await changed_one(conn, statement)


async def extend(conn: AsyncConnection, command_id: int, *, deadline: datetime) -> bool:
    """CAS queued|delivered with an earlier deadline -> ``deadline``: a retry of the step (a
    host restarted mid-command) waits for the command it queued before, for its own budget."""
    statement = (
        update(link_commands)
        .where(
            c.id == command_id,
            c.status.in_(("queued", "delivered")),
            c.deadline < deadline,
        )
        .values(deadline=deadline)
    )
    return await changed_one(conn, statement)


async def due_for(
    conn: AsyncConnection, server: str, *, now: datetime, redeliver_before: datetime, limit: int
) -> list[Row]:
    """The commands a sync of ``server`` hands out now, oldest first: queued ones, and
    delivered ones unanswered since before ``redeliver_before`` (their delivery may have
    been lost); never one whose deadline has passed."""
    statement = (
        select(*COMMAND_COLUMNS)
        .where(
            c.server == server,
            c.deadline > now,
            or_(
                c.status == "queued",
                and_(c.status == "delivered", c.delivered_at < redeliver_before),
            ),
        )
        .order_by(c.id)
        .limit(limit)
    )
    return list((await conn.execute(statement)).all())


async def mark_delivered(
    conn: AsyncConnection, command_ids: Sequence[int], *, now: datetime
) -> set[int]:
    """CAS queued|delivered (not withdrawn, not answered) -> delivered at ``now``, counting
    the delivery; answers the ids it moved (a command withdrawn meanwhile is not handed out)."""
    if not command_ids:
        return set()
    moved = set()
    statement = (
        update(link_commands)
        .where(
            c.id == bindparam("command_id"),
            c.status.in_(("queued", "delivered")),
            c.deadline > bindparam("now"),
        )
        .values(status="delivered", delivered_at=bindparam("now"), deliveries=c.deliveries + 1)
    )
    for command_id in command_ids:
        if await changed_one(conn, statement, {"command_id": command_id, "now": now}):
            moved.add(command_id)
    return moved


async def undeliver(conn: AsyncConnection, command_id: int, *, delivered_at: datetime) -> bool:
    """CAS delivered at ``delivered_at`` (its first delivery, unanswered) -> queued: a command
    inserted delivered for a sync that was gone before it could be handed the command."""
    statement = (
        update(link_commands)
        .where(
            c.id == command_id,
            c.status == "delivered",
            c.deliveries == 1,
            c.delivered_at == delivered_at,
        )
        .values(status="queued", delivered_at=None, deliveries=0)
    )
    return await changed_one(conn, statement)


async def answer(
    conn: AsyncConnection,
    server: str,
    command: str,
    key: str,
    *,
    said: dict[str, Any],
    now: datetime,
) -> str | None:
    """Record the agent's answer to a command, once. Answers what it did: ``answered``, or
    ``late`` (the command had been withdrawn: the answer is kept, never acted on), or None
    (no such command, or answered before: the first answer stands)."""
    where = (c.server == server, c.command == command, c.key == key, c.answered_at.is_(None))
    on_time = (
        update(link_commands)
        .where(*where, c.status.in_(("queued", "delivered")))
        .values(status="answered", answered_at=now, answer=said)
    )
    if await changed_one(conn, on_time):
        return "answered"
    late = (
        update(link_commands)
        .where(*where, c.status == "withdrawn")
        .values(answered_at=now, answer=said, late=True)
    )
    if await changed_one(conn, late):
        return "late"
    return None


async def withdraw(conn: AsyncConnection, command_id: int, *, now: datetime) -> str | None:
    """Withdraw a command whose budget ran out: CAS queued -> withdrawn ``never_delivered``,
    else delivered -> withdrawn ``unanswered``. Answers which, or None when it was answered
    first (then its answer stands)."""
    for before, said in (("queued", "never_delivered"), ("delivered", "unanswered")):
        statement = (
            update(link_commands)
            .where(c.id == command_id, c.status == before)
            .values(status="withdrawn", withdrawn_as=said)
        )
        if await changed_one(conn, statement):
            return said
    return None


async def get(conn: AsyncConnection, command_id: int) -> Row | None:
    return (await conn.execute(select(*COMMAND_COLUMNS).where(c.id == command_id))).first()


async def answered_among(conn: AsyncConnection, command_ids: Sequence[int]) -> list[Row]:
    """Of ``command_ids``, the commands answered (by any host's sync)."""
    if not command_ids:
        return []
    statement = select(*COMMAND_COLUMNS).where(
        c.id.in_(padded(command_ids)), c.status == "answered"
    )
    return list((await conn.execute(statement)).all())


async def servers_with_queued(
    conn: AsyncConnection, servers: Sequence[str], *, now: datetime
) -> set[str]:
    """Of ``servers``, those with a queued command still within its deadline (queued by any
    host): the periodic check that wakes a sync held on this host."""
    if not servers:
        return set()
    statement = (
        select(c.server)
        .where(c.status == "queued", c.server.in_(padded(servers)), c.deadline > now)
        .distinct()
    )
    return set((await conn.execute(statement)).scalars())


async def commands_of(conn: AsyncConnection, server: str, *, limit: int = 100) -> list[Row]:
    """A server's commands, newest first."""
    statement = (
        select(*COMMAND_COLUMNS).where(c.server == server).order_by(c.id.desc()).limit(limit)
    )
    return list((await conn.execute(statement)).all())


# The upsert of a server's last sync, built once a dialect: the first sync inserts the
# row, every later one moves the instant forward (never back: two hosts may write out of
# order).
_maria = mysql.insert(link_servers)
_SYNCED_MARIA = _maria.on_duplicate_key_update(
    last_sync_at=func.greatest(s.last_sync_at, _maria.inserted.last_sync_at)
)
_lite = sqlite.insert(link_servers)
_SYNCED_LITE = _lite.on_conflict_do_update(
    index_elements=[s.server],
    set_={"last_sync_at": func.max(s.last_sync_at, _lite.excluded.last_sync_at)},
)


async def note_sync(conn: AsyncConnection, server: str, at: datetime) -> None:
    """Record that ``server`` synced at ``at`` (kept if a later sync is recorded already)."""
    stmt = _SYNCED_MARIA if conn.dialect.name in ("mysql", "mariadb") else _SYNCED_LITE
    await conn.execute(stmt, {"server": server, "last_sync_at": at})


async def last_syncs(conn: AsyncConnection) -> dict[str, datetime]:
    """Every server that ever synced, and when it last did."""
    rows = await conn.execute(select(s.server, s.last_sync_at))
    return {row.server: row.last_sync_at for row in rows}


# ── in bulk, for the link's group commit (:mod:`pageant.link.writes`) ─────────────


async def _each(conn: AsyncConnection, statement: Any, params: list[dict[str, Any]]) -> int:
    """Run ``statement`` once for each of ``params``; answers the rows changed in all. One
    statement a batch where the driver counts the rows of a run over many (SQLite); one a
    row where it does not."""
    if conn.dialect.supports_sane_multi_rowcount:
        return int((await conn.execute(statement, params)).rowcount)
    return sum([(await conn.execute(statement, one)).rowcount for one in params])


async def note_syncs(conn: AsyncConnection, latest: dict[str, datetime]) -> None:
    """:func:`note_sync` for many servers at once."""
    stmt = _SYNCED_MARIA if conn.dialect.name in ("mysql", "mariadb") else _SYNCED_LITE
    params = [{"server": server, "last_sync_at": at} for server, at in sorted(latest.items())]
    await conn.execute(stmt, params)


_ANSWER_ALL = (
    update(link_commands)
    .where(
        c.server == bindparam("b_server"),
        c.command == bindparam("b_command"),
        c.key == bindparam("b_key"),
        c.answered_at.is_(None),
        # Not IN (...): an expanding parameter cannot run over many rows at once.
        or_(c.status == "queued", c.status == "delivered"),
    )
    .values(status="answered", answered_at=bindparam("b_now"), answer=bindparam("b_said"))
)


async def answer_all(
    conn: AsyncConnection, named: Sequence[tuple[str, str, str, dict[str, Any], datetime]]
) -> int:
    """:func:`answer` on time for each ``(server, command, key, said, now)``; answers how
    many it recorded (fewer than named: one was late, answered before, or unknown)."""
    params = [
        {"b_server": s_, "b_command": cmd, "b_key": key, "b_said": said, "b_now": now}
        for s_, cmd, key, said, now in named
    ]
    return await _each(conn, _ANSWER_ALL, params)


async def find_all(
    conn: AsyncConnection, names: Sequence[tuple[str, str, str]]
) -> dict[tuple[str, str, str], Row]:
    """:func:`find` for many ``(server, command, key)`` at once: those ever queued."""
    wanted = set(names)
    statement = select(*COMMAND_COLUMNS).where(
        tuple_(c.server, c.command, c.key).in_(padded(sorted(wanted)))
    )
    found = {}
    for row in (await conn.execute(statement)).all():
        name = (row.server, row.command, row.key)
        if name in wanted:
            found[name] = row
    return found


async def insert_commands(conn: AsyncConnection, rows: Sequence[dict[str, Any]]) -> int:
    """:func:`insert_command` for many commands at once (each kept if already queued);
    answers how many it inserted."""
    statement = insert_keeping_existing(link_commands, [c.server, c.command, c.key], conn.dialect)
    if conn.dialect.name in ("mysql", "mariadb"):  # a duplicate is a matched row there
        return sum([await insert_command(conn, row) is not None for row in rows])
    return int((await conn.execute(statement, list(rows))).rowcount)


async def due_among(
    conn: AsyncConnection, servers: Sequence[str], *, now: datetime, redeliver_before: datetime
) -> list[Row]:
    """:func:`due_for` for many servers at once, oldest first (no limit: the caller takes
    each server's share)."""
    statement = (
        select(*COMMAND_COLUMNS)
        .where(
            c.server.in_(padded(sorted(set(servers)))),
            c.deadline > now,
            or_(
                c.status == "queued",
                and_(c.status == "delivered", c.delivered_at < redeliver_before),
            ),
        )
        .order_by(c.id)
    )
    return list((await conn.execute(statement)).all())


async def mark_all_delivered(
    conn: AsyncConnection, command_ids: Sequence[int], *, now: datetime
) -> int:
    """:func:`mark_delivered` for many commands in one statement; answers how many moved
    (fewer than named: one was withdrawn or answered meanwhile)."""
    statement = (
        update(link_commands)
        .where(
            c.id.in_(padded(command_ids)),
            c.status.in_(("queued", "delivered")),
            c.deadline > now,
        )
        .values(status="delivered", delivered_at=now, deliveries=c.deliveries + 1)
    )
    return int((await conn.execute(statement)).rowcount)
