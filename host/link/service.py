"""The game link of one host: plugins' calls become command rows; agents' syncs take them,
bring back their answers, and say the server is alive.

``call`` queues a command (or finds it again under its key) and waits for its answer until
its deadline, then withdraws it, saying truthfully whether it was never delivered or
delivered and unanswered. ``take`` is a sync's wait: it answers the commands due for its
server at once, or waits (a future, no thread, no connection) until one is queued or its
wait runs out. Availability is read from the syncs: up within ``link_offline_seconds`` of
the last, down after, unknown before the first since this host started.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import Callable, Coroutine, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from pageant.db import link as link_rows
from pageant.hookspecs.link import Down, LinkFailure, NotDelivered, Unanswered
from pageant.link.waiters import CHECK_SECONDS, Checker, Waiters
from pageant.link.writes import TAKE_LIMIT, Answer, Deliver, LinkWrites, Note, Queue
from pageant.support.clock import Clock
from pageant.support.settings import Settings
from pageant.support.tasks import end_if_cancelled
from pageant.support.timefmt import iso

log = logging.getLogger("pageant.link")

#: A delivered command unanswered this long is handed out again on the next sync: its
#: delivery may have been lost on the way (the agent answers a key it has seen once).
REDELIVER_AFTER = timedelta(seconds=5)
#: How long a count of a server's waiting commands is trusted (seconds).
COUNT_EVERY = 0.5
#: How often this host writes a server's last sync to the database (other hosts read it).
NOTE_EVERY = timedelta(seconds=1)
#: How long closing the link waits for what a server's return began (its reconcile).
RETURN_GRACE_SECONDS = 5.0
#: The most looks (a sync's read of whether anything is due for its server) made at once.
#: Agents that came up together sync together: a thousand syncs arriving in a second each
#: took a pooled connection at once, and past the pool's size each opened one of its own,
#: closed once used (on SQLite a thread and a connection a look, three a second in a host
#: holding 1,000 idle syncs, and its resident memory crept with them). Eight at once read
#: such a wave from connections the pool keeps; the others wait their turn. A call's look
#: (made while a sync of its server waits, to hand it the command) takes no turn: waiting
#: behind the syncs' looks, the calls of a busy link ran fewer a second, at more statements
#: each (docs/performance.md).
LOOKS_AT_ONCE = 8

SERVER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}\Z")
COMMAND = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,99}\Z")
MAX_KEY = 200

UP, DOWN, UNKNOWN = "up", "down", "unknown"


class Link:
    """One host's side of the game link (made by :attr:`pageant.hosting.Host.link`)."""

    def __init__(
        self,
        db: AsyncEngine,
        clock: Clock,
        settings: Settings,
        *,
        on_return: Callable[[str], Coroutine[Any, Any, None]] | None = None,
        on_late: Callable[[str], None] | None = None,
        mark: Callable[[str, str | None], None] | None = None,
    ) -> None:
        self.db = db
        self.clock = clock
        self.settings = settings
        self.started_at = clock.now()
        self._on_return = on_return
        self._on_late = on_late
        self._mark = mark
        #: The owners this link marked unavailable (it clears only its own marks).
        self._marked: set[str] = set()
        #: server -> when it last synced, as this host knows it (its own syncs and the
        #: database's record of every host's).
        self._synced: dict[str, datetime] = {}
        self._noted: dict[str, datetime] = {}
        #: server -> the owners whose plugins use it (declared, called, or bound tokens).
        self.owners: dict[str, set[str]] = {}
        #: The servers last seen down: a sync from one of them is its return.
        self._down: set[str] = set()
        self._syncs = Waiters()
        self._answers = Waiters()
        #: (server, command, key) -> id, of the commands a call on this host waits for: an
        #: answer through this host wakes its call with the answer, without a read.
        self._awaited: dict[tuple[str, str, str], int] = {}
        #: Commands queued, delivered and answered, and syncs noted, by every call and sync
        #: on this host: committed together as they arrive (one transaction for many).
        self._writes = LinkWrites(db)
        #: server -> until when (this link's clock) this host knows nothing is due for it:
        #: a sync then waits without a read. A command queued here clears it, one queued
        #: through another host is found by the periodic check, and a command handed out
        #: but not answered is due again after REDELIVER_AFTER, when the knowledge ends.
        self._clear: dict[str, datetime] = {}
        #: server -> commands being queued through this host now: while any is, a sync
        #: reads (the command may be committed before its queueing call hears so).
        self._queueing_now: dict[str, int] = {}
        #: server -> how many commands were queued through this host: a sync's look that
        #: began before one was committed must not record "nothing due" after it.
        self._queued_count: dict[str, int] = {}
        self._checker = Checker(self._check, lambda: len(self._syncs) + len(self._answers) > 0)
        self._returns: set[asyncio.Task[None]] = set()
        self._queueing: dict[str, asyncio.Lock] = {}
        #: server -> (commands waiting, when counted): see :meth:`_refuse_if_full`.
        self._counted: dict[str, tuple[int, float]] = {}
        self._looks = asyncio.Semaphore(LOOKS_AT_ONCE)

    @property
    def offline(self) -> timedelta:
        return timedelta(seconds=self.settings.link_offline_seconds)

    def uses(self, owner: str, server: str) -> None:
        """Note that ``owner``'s plugin uses ``server`` (its availability follows it)."""
        self.owners.setdefault(server, set()).add(owner)

    # ── availability ─────────────────────────────────────────────────────────

    async def refresh(self) -> None:
        """Read every server's last sync from the database (any host's)."""
        async with self.db.connect() as conn:
            seen = await link_rows.last_syncs(conn)
        for server, at in seen.items():
            if at > self._synced.get(server, at - timedelta(seconds=1)):
                self._synced[server] = at
            self.owners.setdefault(server, set())

    def state(self, server: str, now: datetime | None = None) -> tuple[str, str]:
        """``(up | down | unknown, sentence)`` of ``server`` now."""
        now = now or self.clock.now()
        last = self._synced.get(server)
        if last is None:
            since = max(0, int((now - self.started_at).total_seconds()))
            if now - self.started_at < self.offline:
                return UNKNOWN, f"{server} has not synced yet (the host started {since} s ago)"
            return DOWN, f"{server} has not synced since the host started {since} s ago"
        ago = max(0, int((now - last).total_seconds()))
        if now - last < self.offline:
            return UP, f"{server} last synced {ago} s ago"
        return DOWN, f"{server} last synced {ago} s ago"

    def states(self, owner: str | None = None) -> dict[str, dict[str, str]]:
        """Every server known (or ``owner``'s), sorted: ``{server: {state, said}}``."""
        now = self.clock.now()
        out = {}
        for server in sorted(self.owners):
            if owner is not None and owner not in self.owners[server]:
                continue
            state, said = self.state(server, now)
            out[server] = {"state": state, "said": said}
        return out

    def annotate(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The plugin listing (``pageant plugins``, the API, the plugins page) with each
        link plugin's servers and their states under ``link``."""
        for item in items:
            owner = item.get("owner")
            if owner and (states := self.states(owner)):
                item["link"] = states
        return items

    def counts(self) -> dict[str, int]:
        """How many servers are up, down and unknown now."""
        counts = {UP: 0, DOWN: 0, UNKNOWN: 0}
        for seen in self.states().values():
            counts[seen["state"]] += 1
        return counts

    def down_of(self, owner: str) -> str | None:
        """Why ``owner``'s plugin must wait: the first of its servers that is down, said;
        None while every one is up or unknown."""
        for seen in self.states(owner).values():
            if seen["state"] == DOWN:
                return seen["said"]
        return None

    async def watch_once(self) -> dict[str, int]:
        """Read every server's last sync and act on what changed: an owner with a server
        down is marked unavailable with the sentence (its steps wait, spending no attempt),
        and available again once none is. Answers how many servers are in each state."""
        await self.refresh()
        counts = {UP: 0, DOWN: 0, UNKNOWN: 0}
        for server, seen in self.states().items():
            counts[seen["state"]] += 1
            if seen["state"] == DOWN and server not in self._down:
                log.warning("game link: %s", seen["said"])
                self._down.add(server)
        owners = sorted({owner for users in self.owners.values() for owner in users})
        for owner in owners:
            reason = self.down_of(owner)
            if reason is not None and self._mark is not None:
                self._mark(owner, reason)
                self._marked.add(owner)
            elif owner in self._marked and self._mark is not None:
                self._mark(owner, None)
                self._marked.discard(owner)
        return counts

    async def watch(self, every: float = 1.0) -> None:
        """:meth:`watch_once` every ``every`` seconds, until cancelled.

        A cancel that lands inside a database call may be swallowed by the driver as it
        gives its connection back; the loop looks before it sleeps (:func:`end_if_cancelled`)
        and ends rather than watching on for ever."""
        while True:
            try:
                await self.watch_once()
            except Exception:  # the database is out of reach: the next round tries again
                log.debug("the link's watch failed", exc_info=True)
            end_if_cancelled()
            await asyncio.sleep(every)

    # ── a plugin's call ──────────────────────────────────────────────────────

    async def call(
        self,
        owner: str,
        server: str,
        command: str,
        payload: Mapping[str, Any],
        *,
        key: str,
        deadline: datetime,
    ) -> Any:
        """:meth:`pageant.hookspecs.GameLink.call` for ``owner``'s plugin."""
        if not isinstance(server, str) or SERVER.match(server) is None:
            raise ValueError(f"server {server!r}: expected 1 to 100 of A-Z a-z 0-9 . _ -")
        if not isinstance(command, str) or COMMAND.match(command) is None:
            raise ValueError(f"command {command!r}: expected 1 to 100 of A-Z a-z 0-9 . _ : / -")
        if not isinstance(key, str) or not 1 <= len(key) <= MAX_KEY:
            raise ValueError(f"key: expected 1 to {MAX_KEY} characters")
        if deadline.tzinfo is None:
            raise ValueError("deadline: expected a timezone-aware instant")
        self.uses(owner, server)
        now = self.clock.now()
        if deadline <= now:
            raise NotDelivered(server, command, f"{command} for {server}: its deadline has passed")
        state, said = self.state(server, now)
        if state == DOWN:
            await self.refresh()
            state, said = self.state(server, now)
        if state == DOWN:
            raise Down(server, command, f"{command} was not queued: {said}")
        command_id, fresh = await self._queue(owner, server, command, dict(payload), key, deadline)
        awaited = (server, command, key)
        self._awaited[awaited] = command_id
        try:
            return await self._await_answer(command_id, server, command, deadline, fresh=fresh)
        finally:
            if self._awaited.get(awaited) == command_id:
                del self._awaited[awaited]

    async def _queue(
        self,
        owner: str,
        server: str,
        command: str,
        payload: dict[str, Any],
        key: str,
        deadline: datetime,
    ) -> tuple[int, bool]:
        """The command's id, and whether it was queued just now (not found queued before)."""
        now = self.clock.now()
        values = {
            "server": server,
            "owner": owner,
            "command": command,
            "key": key,
            "payload": payload,
            "status": "queued",
            "deadline": deadline,
            "created_at": now,
            # Every command names the same columns, so a batch inserts them in one run
            # (one handed straight to its sync is inserted delivered: see _insert).
            "delivered_at": None,
            "deliveries": 0,
        }
        lock = self._queueing.setdefault(server, asyncio.Lock())
        # One count-then-insert at a time per server on this host, so the bound holds here
        # exactly. Two hosts queueing at once may each pass the count and go one past it;
        # the bound is on memory and the agent's backlog, and one more is not a loss.
        self._queueing_now[server] = self._queueing_now.get(server, 0) + 1
        handed = False
        try:
            if self._full(server):
                # Full when last counted: refused from one read (unless it is a retry of a
                # command queued already), in parallel, not in the queue's turn.
                self._clear.pop(server, None)
                found = await self._writes.run(
                    Queue(values, False, self._refuse_if_full, self._room)
                )
            else:
                async with lock:
                    found, handed = await self._insert(server, values)
        finally:
            self._queueing_now[server] -= 1
            if not self._queueing_now[server]:
                del self._queueing_now[server]
            self._queued_count[server] = self._queued_count.get(server, 0) + 1
            if not handed:
                self._clear.pop(server, None)
        if isinstance(found, NotDelivered):
            raise found
        if found is None:  # counted again, with room: queued in the queue's turn
            return await self._queue(owner, server, command, payload, key, deadline)
        if not handed:
            self._syncs.wake(server)
        return found

    async def _insert(self, server: str, values: dict[str, Any]) -> tuple[Any, bool]:
        """Queue a command (in its server's turn on this host): what :class:`Queue` answers,
        and whether the command went straight to a sync of its server held on this host.

        It does when this host knows nothing else is due for the server and one of its syncs
        waits: the row is inserted delivered, in the same transaction, and the command handed
        to that sync from memory once it commits (no read, no second write). Should that sync
        be gone by then (its agent closed the connection), the row is put back to queued,
        never delivered, for the next sync; should the answer to the sync be lost on its way,
        the command is handed out again after :data:`REDELIVER_AFTER`, as any delivery is. A
        command found queued before (a retry) is not handed: the sync is woken to read what
        is due."""
        now = self.clock.now()
        clear = self._clear.get(server)
        if (clear is None or now >= clear) and self._syncs.parked(server):
            # What this host knew has lapsed (a delivery may be due again) but a sync waits:
            # one look renews it rather than leaving this command to be read and delivered.
            if not await self._due_now(server, now):
                clear = self._clear[server] = now + REDELIVER_AFTER
        waiter = self._syncs.claim(server) if clear is not None and now < clear else None
        if waiter is None:
            self._clear.pop(server, None)
            return await self._writes.run(
                Queue(values, True, self._refuse_if_full, self._room)
            ), False
        values = {**values, "status": "delivered", "delivered_at": now, "deliveries": 1}
        found: Any = None
        try:
            found = await self._writes.run(Queue(values, True, self._refuse_if_full, self._room))
        finally:
            fresh = isinstance(found, tuple) and found[1]
            handed = fresh and self._syncs.holds(waiter)
            if not waiter.done():
                waiter.set_result([self._handed(values)] if handed else None)
        if fresh and not handed:
            # Its sync went (the agent closed its connection) as it was inserted: it is
            # queued again, never delivered, for the next sync (which it wakes).
            async with self.db.begin() as conn:
                await link_rows.undeliver(conn, found[0], delivered_at=now)
            self._clear.pop(server, None)
        return found, handed

    @staticmethod
    def _handed(values: dict[str, Any]) -> dict[str, Any]:
        """A command as a sync hands it out, from the values it was inserted with (its
        payload as the database keeps it: JSON)."""
        return {
            "command": values["command"],
            "key": values["key"],
            "payload": json.loads(json.dumps(values["payload"])),
            "deadline": iso(values["deadline"]),
        }

    def _full(self, server: str) -> bool:
        counted = self._counted.get(server)
        return (
            counted is not None
            and counted[0] >= self.settings.link_queue_max
            and asyncio.get_running_loop().time() - counted[1] < COUNT_EVERY
        )

    def _room(self, server: str) -> bool:
        """Whether ``server``'s queue surely has room for one more command by this host's
        count (then it is counted as used): the count only grows between reads, so it is
        read again once it reaches ``link_queue_max`` (:meth:`_refuse_if_full`)."""
        counted = self._counted.get(server)
        if counted is None or counted[0] + 1 >= self.settings.link_queue_max:
            return False
        self._counted[server] = (counted[0] + 1, counted[1])
        return True

    async def _refuse_if_full(self, conn: Any, server: str, command: str, key: str) -> None:
        """Refuse a command past ``link_queue_max``. The count is read once, then kept up
        to date by this host's own inserts (never lowered: answers are not counted off) and
        read again only once it reaches the bound, at most every :data:`COUNT_EVERY`: a
        flood of calls for a silent server costs no read each, and a slot freed since is
        seen within that."""
        loop = asyncio.get_running_loop()
        counted = self._counted.get(server)
        if counted is None or (
            counted[0] >= self.settings.link_queue_max and loop.time() - counted[1] >= COUNT_EVERY
        ):
            counted = (await link_rows.waiting_count(conn, server), loop.time())
        waiting = counted[0]
        if waiting >= self.settings.link_queue_max:
            self._counted[server] = counted
        else:
            self._counted[server] = (waiting + 1, counted[1])  # this one is about to be queued
        if waiting >= self.settings.link_queue_max:
            raise NotDelivered(
                server,
                command,
                f"{server} has {waiting} commands waiting (link_queue_max "
                f"{self.settings.link_queue_max}); {command} under key {key} was not queued",
            )

    async def _await_answer(
        self, command_id: int, server: str, command: str, deadline: datetime, *, fresh: bool
    ) -> Any:
        # Read once first, unless queued just now: it may have been answered before.
        woken: Any = not fresh
        while True:
            # Watched before the read: an answer recorded between the two still wakes it.
            future = self._answers.watch(command_id)
            if woken is not True and woken is not False:  # answered through this host
                self._answers.forget(command_id, future)
                return self._said(server, command, woken)
            if woken:
                async with self.db.connect() as conn:
                    row = await link_rows.get(conn, command_id)
                if row is not None and row.status == "answered":
                    self._answers.forget(command_id, future)
                    return self._said(server, command, row.answer)
            remaining = (deadline - self.clock.now()).total_seconds()
            if remaining <= 0:
                self._answers.forget(command_id, future)
                break
            self._checker.ensure()
            # Woken by an answer through this host, or through another by the periodic
            # check; the row is read only then. The wait is sliced so a clock moved on (by
            # a test) is seen within a slice.
            woken = await self._answers.wait(command_id, future, min(remaining, CHECK_SECONDS * 2))
            if woken and future.result() is not None:
                woken = future.result()
        async with self.db.begin() as conn:
            withdrawn = await link_rows.withdraw(conn, command_id, now=self.clock.now())
            row = await link_rows.get(conn, command_id)
        if withdrawn is None and row is not None and row.status == "answered":
            return self._said(server, command, row.answer)
        if withdrawn == "never_delivered":
            raise NotDelivered(
                server,
                command,
                f"{command} was never delivered to {server} before its deadline; it was "
                "withdrawn and nothing happened",
            )
        raise Unanswered(
            server,
            command,
            f"{command} was delivered to {server} but not answered before its deadline; it "
            "was withdrawn, and the game may have acted",
        )

    @staticmethod
    def _said(server: str, command: str, said: dict[str, Any] | None) -> Any:
        said = said or {}
        if "error" in said:
            raise LinkFailure(
                server,
                command,
                f"the agent on {server} answered {command} with an error: {said['error']}",
            )
        return said.get("answer")

    # ── an agent's sync ──────────────────────────────────────────────────────

    async def record_results(self, server: str, results: Sequence[Mapping[str, Any]]) -> int:
        """Record the agent's answers (each once); answers how many were late (their
        command withdrawn already: kept, never acted on)."""
        now = self.clock.now()
        answers = [
            (
                result["command"],
                result["key"],
                {"error": result["error"]}
                if result.get("error") is not None
                else {"answer": result.get("answer")},
            )
            for result in results
        ]

        done = await self._writes.run(Answer(server, answers, now))
        late = 0
        for (command, key, said), outcome in zip(answers, done, strict=True):
            if outcome == "late":
                late += 1
                log.info(
                    "%s answered %s (key %s) after it was withdrawn; recorded, not acted on",
                    server,
                    command,
                    key,
                )
                if self._on_late is not None:
                    self._on_late(server)
            elif outcome == "answered":
                command_id = self._awaited.get((server, command, key))
                if command_id is not None:
                    self._answers.wake(command_id, said)
        return late

    async def synced(self, server: str, owners: Sequence[str]) -> None:
        """Note a sync from ``server`` (its heartbeat); its first sync after being down is
        its return, which reconciles its plugins."""
        now = self.clock.now()
        was, _ = self.state(server, now)
        for owner in owners:
            self.uses(owner, server)
        self.owners.setdefault(server, set())
        self._synced[server] = now
        noted = self._noted.get(server)
        if noted is None or now - noted >= NOTE_EVERY or now < noted:
            self._noted[server] = now
            await self._writes.run(Note(server, now))
        if (was == DOWN or server in self._down) and self._on_return is not None:
            self._down.discard(server)
            log.info("%s is back: it synced again", server)
            task: asyncio.Task[None] = asyncio.get_running_loop().create_task(
                self._on_return(server)
            )
            self._returns.add(task)
            task.add_done_callback(self._returns.discard)

    def noted_down(self, server: str) -> None:
        """Remember that ``server`` was seen down (its next sync is its return)."""
        self._down.add(server)

    async def take(
        self, server: str, wait: float, there: Callable[[], bool] = lambda: True
    ) -> list[dict[str, Any]]:
        """The commands due for ``server``, marked delivered: at once when there are any,
        else when one is queued or ``wait`` seconds have passed (then none). ``there`` says
        whether the agent is still there to be answered (its connection open): a sync whose
        agent has gone takes nothing more, and is handed nothing straight from a queueing."""
        loop = asyncio.get_running_loop()
        until = loop.time() + wait
        woken = False
        while True:
            if not there():  # its agent has gone: nothing is handed to no one
                return []
            # Watched before the read: a command queued between the two still wakes it.
            future = self._syncs.watch(server)
            clear = self._clear.get(server)
            if (
                not woken
                and clear is not None
                and self.clock.now() < clear
                and server not in self._queueing_now
            ):
                commands = []  # nothing due, as this host knows: wait without a read
            else:
                commands = await self._deliver(server, look_first=not woken)
            remaining = until - loop.time()
            if commands or remaining <= 0:
                self._syncs.forget(server, future)
                return commands
            self._checker.ensure()
            woken = await self._syncs.wait(server, future, remaining, there)
            if woken and future.result():  # handed a command straight from its queueing
                return list(future.result())

    async def _deliver(self, server: str, *, look_first: bool) -> list[dict[str, Any]]:
        now = self.clock.now()
        queued_before = self._queued_count.get(server, 0)
        if look_first and not await self._due_now(server, now, self._looks):
            # Looked for with a read: a sync that finds nothing (most of them) writes
            # nothing. A sync woken by a command queued here goes straight to the write.
            self._note_clear(server, now, queued_before)
            return []
        due, moved = await self._writes.run(Deliver(server, now, now - REDELIVER_AFTER))
        if len(due) < TAKE_LIMIT:  # all handed out: due again only after REDELIVER_AFTER
            self._note_clear(server, now, queued_before)
        return [
            {
                "command": row.command,
                "key": row.key,
                "payload": row.payload,
                "deadline": iso(row.deadline),
            }
            for row in due
            if row.id in moved
        ]

    async def _due_now(
        self, server: str, now: datetime, turns: asyncio.Semaphore | None = None
    ) -> bool:
        """Whether a command is due for ``server`` now, read (a queued one, or one delivered
        and unanswered for :data:`REDELIVER_AFTER`). A sync's look waits for one of
        ``turns`` (:data:`LOOKS_AT_ONCE`); a call's look (a sync of its server waits for the
        command it brings) does not wait behind a wave of syncs."""
        async with turns or contextlib.nullcontext(), self.db.connect() as conn:
            due = await link_rows.due_for(
                conn, server, now=now, redeliver_before=now - REDELIVER_AFTER, limit=1
            )
            await conn.rollback()
        return bool(due)

    def _note_clear(self, server: str, now: datetime, queued_before: int) -> None:
        """Know that nothing is due for ``server`` until a redelivery could be, unless a
        command was queued through this host since the look began, or is being queued."""
        if self._queued_count.get(server, 0) == queued_before and server not in self._queueing_now:
            self._clear[server] = now + REDELIVER_AFTER

    async def _check(self) -> None:
        """The periodic check: wake the syncs whose servers have commands queued through
        another host, and the calls whose commands were answered through another host."""
        servers = [key for key in self._syncs.keys()]
        commands = [key for key in self._answers.keys()]
        async with self.db.connect() as conn:
            ready = await link_rows.servers_with_queued(conn, servers, now=self.clock.now())
            answered = await link_rows.answered_among(conn, commands)
        for server in ready:
            self._clear.pop(server, None)
            self._syncs.wake(server)
        for row in answered:
            self._answers.wake(row.id)

    @property
    def writes(self) -> LinkWrites:
        """This host's queue of link writes (its counts of transactions and writes)."""
        return self._writes

    @property
    def held(self) -> int:
        """How many syncs are held open on this host now."""
        return len(self._syncs)

    async def close(self) -> None:
        """Stop the periodic check, let the link's writes handed in so far be made, and let
        what a server's return began (its plugins' reconcile) finish before the database
        goes: cancelled inside a database call, either left the driver closing a connection
        that never closed. What is still going after :data:`RETURN_GRACE_SECONDS` is
        cancelled, and waited for."""
        await self._checker.stop()
        await self._writes.settle(RETURN_GRACE_SECONDS)
        if self._returns:
            _, going = await asyncio.wait(set(self._returns), timeout=RETURN_GRACE_SECONDS)
            for task in going:
                task.cancel()
            await asyncio.gather(*going, return_exceptions=True)
