"""API tokens: created once, shown once, stored as a sha256 hash; listed, revoked, expired.

A token is answered exactly once, by the call that creates it; every listing shows what a
token is (id, name, role, who made it, when it expires, when it was last used, who revoked
it) and never the token or its hash. Creating and revoking are audited: the actor is kept
on the token's row and written to the ``pageant.audit`` log.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import secrets
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pageant.access.roles import ROLES, STAFF  # noqa: F401 - STAFF: importable from here
from pageant.db import tokens as token_rows
from pageant.errors import Conflict, Invalid, NotFound, Unauthenticated

TOKEN_PREFIX = "pgt_"
#: ``last_used_at`` is written at most this often per token.
TOUCH_EVERY = timedelta(minutes=1)
#: The longest expiry a token may be given.
MAX_EXPIRY = timedelta(days=3650)
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_DURATION = re.compile(r"^\s*(\d{1,7})\s*([mhdw])\s*$")

audit = logging.getLogger("pageant.audit")


@dataclass(frozen=True)
class Principal:
    """Who is asking: the token's role and name, and a game token's bindings.

    ``servers`` are the server ids a game token speaks for on the game link; ``owners`` the
    plugin owners whose triggers it may fire. None: not bound (a token made before bindings
    existed, or a staff token) - it fires every owner's triggers and speaks for no server.
    ``zone`` is the zone its holder chose to read the web console in (an IANA name), kept
    with the token so it follows them to every browser; None: each page's own.
    """

    token_id: int
    role: str
    name: str
    servers: tuple[str, ...] | None = None
    owners: tuple[str, ...] | None = None
    zone: str | None = None

    @property
    def actor(self) -> str:
        return f"{self.role}:{self.name}"

    def may_fire(self, trigger_id: str) -> bool:
        """Whether this token's owner binding lets it fire ``trigger_id``."""
        return self.owners is None or trigger_id.partition(".")[0] in self.owners

    def speaks_for(self, server: str) -> bool:
        """Whether this token is bound to ``server`` on the game link."""
        return self.servers is not None and server in self.servers


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def parse_duration(text: str) -> timedelta:
    """``30d``, ``12h``, ``90m``, ``2w`` as a timedelta; ValueError naming the form otherwise."""
    found = _DURATION.match(text)
    if found is None or int(found.group(1)) == 0:
        raise ValueError(
            f"{text!r} is not a duration; expected a positive whole number and a unit "
            "m, h, d or w, such as 30d"
        )
    return timedelta(**{_UNITS[found.group(2)]: int(found.group(1))})


def binding_text(row: Any) -> str:
    """``, servers world-a, owners openarena``: a token's bindings as the audit log says them."""
    parts = [
        f"{field} {', '.join(names)}"
        for field, names in (("servers", row.servers), ("owners", row.owners))
        if names is not None
    ]
    return "".join(f", {part}" for part in parts)


def token_json(row: Row, now: datetime) -> dict[str, Any]:
    """A token as every listing shows it: never the token, never its hash."""
    if row.revoked_at is not None:
        status = "revoked"
    elif row.expires_at is not None and row.expires_at <= now:
        status = "expired"
    else:
        status = "active"
    return {
        "id": row.id,
        "name": row.name,
        "role": row.role,
        "servers": row.servers,
        "owners": row.owners,
        "status": status,
        "created_at": row.created_at,
        "created_by": row.created_by,
        "expires_at": row.expires_at,
        "last_used_at": row.last_used_at,
        "revoked_at": row.revoked_at,
        "revoked_by": row.revoked_by,
    }


async def create_token(
    engine: AsyncEngine,
    *,
    role: str,
    name: str,
    now: datetime,
    actor: str | None = None,
    expires_in: timedelta | None = None,
    servers: Sequence[str] | None = None,
    owners: Sequence[str] | None = None,
) -> str:
    """Store a new token's hash and answer the token itself (the only time it exists)."""
    issued = await issue_token(
        engine,
        role=role,
        name=name,
        now=now,
        actor=actor,
        expires_in=expires_in,
        servers=servers,
        owners=owners,
    )
    return str(issued["token"])


#: A server id on the game link: what an agent names in ``/api/v1/link/{server}/...``.
SERVER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}\Z")
#: An owner, as a plugin declares it (``PluginInfo.owner``).
OWNER_ID = re.compile(r"[a-z][a-z0-9_]*\Z")
#: The most names one binding may hold.
MAX_BINDINGS = 100


def binding_problems(
    role: str, servers: Sequence[str] | None, owners: Sequence[str] | None
) -> list[str]:
    """What is wrong with a token's bindings, each prefixed by its field; empty if nothing."""
    problems = []
    for field, names, pattern, expected in (
        ("servers", servers, SERVER_ID, "1 to 100 of A-Z a-z 0-9 . _ -, not starting with . _ -"),
        ("owners", owners, OWNER_ID, "an owner: one segment [a-z][a-z0-9_]*"),
    ):
        if names is None:
            continue
        if role != "game":
            problems.append(f"{field}: only a game token is bound; this one is {role}")
            continue
        if len(names) > MAX_BINDINGS:
            problems.append(f"{field}: at most {MAX_BINDINGS} names")
        for i, name in enumerate(names):
            if not isinstance(name, str) or pattern.match(name) is None:
                problems.append(f"{field}[{i}]: {name!r} is not valid; expected {expected}")
            elif field == "owners" and name == "core":
                problems.append(
                    f"{field}[{i}]: core's triggers are fired by the host alone; "
                    "no token fires them"
                )
    return problems


def _distinct(names: Sequence[str] | None) -> list[str] | None:
    return None if names is None else sorted(set(names))


async def issue_token(
    engine: AsyncEngine,
    *,
    role: str,
    name: str,
    now: datetime,
    actor: str | None,
    expires_in: timedelta | None = None,
    servers: Sequence[str] | None = None,
    owners: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Create a token: its listing shape plus ``token``, the only answer that holds it.

    A game token may be bound to ``servers`` (the server ids it speaks for on the game
    link) and to ``owners`` (the plugins whose triggers it may fire); None leaves it unbound.
    Raises :class:`Invalid` naming the role, the name, the expiry or the binding that is
    wrong."""
    problems = []
    if role not in ROLES:
        problems.append(f"role: {role!r} is not a role; expected one of {', '.join(ROLES)}")
    if not name or not name.strip() or len(name) > 100:
        problems.append("name: expected 1 to 100 characters")
    if expires_in is not None and not timedelta(0) < expires_in <= MAX_EXPIRY:
        problems.append(f"expires: expected more than nothing and at most {MAX_EXPIRY.days} days")
    problems.extend(binding_problems(role, servers, owners))
    if problems:
        raise Invalid("invalid token request", details=problems)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    async with engine.begin() as conn:
        token_id = await token_rows.insert_token(
            conn,
            {
                "name": name.strip(),
                "role": role,
                "token_hash": hash_token(token),
                "created_at": now,
                "created_by": actor,
                "expires_at": now + expires_in if expires_in is not None else None,
                "servers": _distinct(servers),
                "owners": _distinct(owners),
            },
        )
        row = await token_rows.read_back(conn, token_id)
    audit.info(
        "token %s (%s, %s%s) created by %s", token_id, name.strip(), role, binding_text(row), actor
    )
    return {**token_json(row, now), "token": token}


async def principal_for(engine: AsyncEngine, token: str, *, now: datetime) -> Principal | None:
    """The principal a bearer token stands for, or None for a token never issued.

    Raises :class:`Unauthenticated` for a revoked or an expired token, saying which. Notes
    the use: ``last_used_at`` moves only when the stamp read is a minute old or more, so a
    busy token costs one write a minute, not one per request.
    """
    return await principal_for_hash(engine, hash_token(token), now=now)


async def principal_for_hash(
    engine: AsyncEngine, token_hash: str, *, now: datetime
) -> Principal | None:
    """:func:`principal_for` from the token's hash: the web console's session keeps the hash,
    never the token, and asks this on every request, so a revoked or expired token ends its
    sessions at once (the same :class:`Unauthenticated`, the same note of its use)."""
    async with engine.connect() as conn:
        row = await token_rows.by_hash(conn, token_hash)
        await conn.rollback()
    # Gone, revoked or expired: no longer answered from memory either.
    if row is None:
        _forget(engine, token_hash)
        return None
    try:
        refuse_unless_live(row, now)
    except Unauthenticated:
        _forget(engine, token_hash)
        raise
    if row.last_used_at is None or now - row.last_used_at >= TOUCH_EVERY:
        async with engine.begin() as conn:
            await token_rows.touch(conn, row.id, seen=row.last_used_at, now=now)
    found = Principal(
        row.id,
        row.role,
        row.name,
        servers=None if row.servers is None else tuple(row.servers),
        owners=None if row.owners is None else tuple(row.owners),
        zone=row.zone,
    )
    _remember(engine, token_hash, _Known(found, row.expires_at, now))
    return found


def refuse_unless_live(row: Any, now: datetime) -> None:
    """Raise :class:`Unauthenticated` for a token ``row`` (``revoked_at``, ``expires_at``)
    that was revoked or has expired, saying which."""
    if row.revoked_at is not None:
        raise Unauthenticated("the bearer token was revoked")
    if row.expires_at is not None and row.expires_at <= now:
        raise Unauthenticated("the bearer token has expired")


# ── tokens checked again where they are used ──────────────────────────────────


@dataclass
class _Known:
    """A token last seen live: who it is, when it expires, when it was last read live."""

    principal: Principal
    expires_at: datetime | None
    seen_at: datetime


#: How many live tokens a host remembers (a game server holds one; admins a few).
KNOWN_LIMIT = 1024
_known: weakref.WeakKeyDictionary[Any, dict[str, _Known]] = weakref.WeakKeyDictionary()
#: The token reads in flight, by engine and hash (:func:`principal_seen_within`).
_reading: weakref.WeakKeyDictionary[Any, dict[str, asyncio.Future[Principal | None]]] = (
    weakref.WeakKeyDictionary()
)


def _remember(engine: AsyncEngine, token_hash: str, known: _Known) -> None:
    remembered = _known.setdefault(engine.sync_engine, {})
    if len(remembered) >= KNOWN_LIMIT and token_hash not in remembered:
        remembered.clear()
    remembered[token_hash] = known


def _forget(engine: AsyncEngine, token_hash: str) -> None:
    _known.get(engine.sync_engine, {}).pop(token_hash, None)


def _forget_token_id(engine: AsyncEngine, token_id: int) -> None:
    remembered = _known.get(engine.sync_engine, {})
    for token_hash in [h for h, k in remembered.items() if k.principal.token_id == token_id]:
        remembered.pop(token_hash, None)


def forget_tokens(engine: AsyncEngine) -> None:
    """Forget every token this process remembers as live on ``engine``."""
    _known.pop(engine.sync_engine, None)


async def principal_checked_later(
    engine: AsyncEngine, token: str, *, now: datetime
) -> Principal | None:
    """:func:`principal_for` for a route that checks the token again in the transaction
    that records its work (the firing routes: :func:`live_or_refused`), so nothing it does
    outlives a revoke. A token read live in the last minute is answered from memory, its
    expiry checked against ``now``; a revoke since shows here too, once a minute at most, and
    its use is noted once a minute, as ever (:func:`principal_seen_within`)."""
    return await principal_seen_within(engine, hash_token(token), now=now, within=TOUCH_EVERY)


async def principal_seen_within(
    engine: AsyncEngine, token_hash: str, *, now: datetime, within: timedelta
) -> Principal | None:
    """:func:`principal_for_hash`, but a token read live less than ``within`` ago is answered
    from memory, without a read (its expiry still checked against ``now``). A revoke through
    this process is seen at once (:func:`revoke_token` forgets what is remembered, and so
    does a lookup that finds the token revoked); one through another process (``pageant
    token revoke``, another host) is seen at most ``within`` late. ``within`` of nothing:
    the token is read."""
    known = _known.get(engine.sync_engine, {}).get(token_hash)
    if known is None or now - known.seen_at >= within or now < known.seen_at:
        # One read for every request that finds the token unknown or stale at once (a
        # hundred agents syncing on one token): the others wait for its answer.
        reading = _reading.setdefault(engine.sync_engine, {})
        pending = reading.get(token_hash)
        if pending is None:
            pending = asyncio.ensure_future(principal_for_hash(engine, token_hash, now=now))
            reading[token_hash] = pending
            pending.add_done_callback(lambda _: reading.pop(token_hash, None))
        return await asyncio.shield(pending)
    if known.expires_at is not None and known.expires_at <= now:
        raise Unauthenticated("the bearer token has expired")
    return known.principal


async def choose_zone(engine: AsyncEngine, token_id: int, zone: str | None) -> None:
    """Keep ``zone`` (an IANA name the caller has checked; None clears it) as the zone the
    holder of token ``token_id`` reads the web console in, in every browser they sign in
    from. What this process remembers of the token is forgotten, so its next page (a run's
    console included, which trusts a token read a moment ago) reads the choice."""
    async with engine.begin() as conn:
        await token_rows.set_zone(conn, token_id, zone)
    _forget_token_id(engine, token_id)


async def live_or_refused(
    conn: AsyncConnection, token_ids: Iterable[int], now: datetime
) -> dict[int, Unauthenticated]:
    """Read, in ``conn``'s transaction, whether tokens are still live; answers the refusal
    of each that is not (revoked, expired or gone), by id."""
    wanted = sorted(set(token_ids))
    if not wanted:
        return {}
    rows = await token_rows.states(conn, wanted)
    refused: dict[int, Unauthenticated] = {}
    for token_id in wanted:
        row = rows.get(token_id)
        try:
            if row is None:
                raise Unauthenticated("the bearer token is not valid")
            refuse_unless_live(row, now)
        except Unauthenticated as exc:
            refused[token_id] = exc
    return refused


async def list_tokens(
    engine: AsyncEngine, *, now: datetime, include_revoked: bool = False
) -> list[dict[str, Any]]:
    """Every token not revoked (or every token), oldest first, in the listing shape."""
    async with engine.connect() as conn:
        rows = await token_rows.list_tokens(conn, include_revoked=include_revoked)
    return [token_json(row, now) for row in rows]


async def find_token(engine: AsyncEngine, ref: str) -> int:
    """The id of the token ``ref`` names: an id (digits), else the name of exactly one
    token that is not revoked. Raises :class:`NotFound` or, for a name several tokens
    share, :class:`Conflict` listing their ids."""
    async with engine.connect() as conn:
        if ref.isascii() and ref.isdigit():
            row = await token_rows.get_token(conn, int(ref))
            if row is None:
                raise NotFound(f"no such token: {ref}")
            return int(row.id)
        named = await token_rows.tokens_named(conn, ref)
    if not named:
        raise NotFound(f"no token is named {ref!r} (or every one of that name is revoked)")
    if len(named) > 1:
        ids = ", ".join(str(row.id) for row in named)
        raise Conflict(f"{len(named)} tokens are named {ref!r} (ids {ids}); revoke one by its id")
    return int(named[0].id)


async def revoke_token(
    engine: AsyncEngine, token_id: int, *, actor: str, now: datetime
) -> dict[str, Any]:
    """Revoke a token: refused from its next request on. Answers it in the listing shape.
    Raises :class:`NotFound`, or :class:`Conflict` when it was revoked already."""
    async with engine.begin() as conn:
        row = await token_rows.get_token(conn, token_id)
        if row is None:
            raise NotFound(f"no such token: {token_id}")
        if not await token_rows.revoke(conn, token_id, actor=actor, now=now):
            raise Conflict(
                f"token {token_id} was already revoked (by {row.revoked_by or 'someone'})"
            )
        row = await token_rows.read_back(conn, token_id)
    forget_tokens(engine)
    audit.info("token %s (%s, %s) revoked by %s", token_id, row.name, row.role, actor)
    return token_json(row, now)
