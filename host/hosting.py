"""The host: one plugin manager, one database engine and one engine task per instance.

Nothing happens at import; a ``Host`` does its work when it is built and started.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import secrets
import socket
from collections.abc import Callable, Coroutine, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, Unpack

from pageant.db.definitions import PinnedSpecs
from pageant.db.outage import Outage
from pageant.hookspecs.models import changes_world
from pageant.plugins.calls import PluginSlots
from pageant.plugins.context import PluginContext
from pageant.plugins.loader import Candidate, PluginManager, load_plugins
from pageant.plugins.readings import Readings
from pageant.support.clock import Clock, SystemClock
from pageant.support.recent import RecentAnswers
from pageant.support.settings import Settings

if TYPE_CHECKING:
    import asyncio

    import aiohttp
    from sqlalchemy.ext.asyncio import AsyncEngine

    from pageant.db.shared import Write
    from pageant.gates.emit import Firings
    from pageant.link.service import Link as GameLinkService
    from pageant.support.metrics import Metrics

log = logging.getLogger("pageant")


class EmitOptions(TypedDict, total=False):
    """How a firing is made besides its trigger and payload (see :meth:`Host.emit`)."""

    actor: str | None
    key: str | None
    at: Any
    issuer: str | None


def make_identity() -> str:
    """Who claims rows: host name, pid and a random part (a restarted pid is a new owner)."""
    return f"{socket.gethostname()[:60]}:{os.getpid()}:{secrets.token_hex(4)}"


class OutcomeQueue(Protocol):
    """The engine's group commit (:class:`pageant.db.group.OutcomeBatch`)."""

    async def run(self, write: Write) -> Any: ...


class OwnTransaction:
    """:attr:`Host.outcomes` where no engine is attached: each write in a transaction of
    its own."""

    def __init__(self, db: AsyncEngine) -> None:
        self.db = db

    async def run(self, write: Write) -> Any:
        """Make ``write`` alone; answers what it answered once its transaction committed."""
        async with self.db.begin() as conn:
            return await write(conn, None)


class EngineSeam(Protocol):
    """What the host and the code it is handed to use of the engine attached to it
    (:class:`pageant.engine.Engine`): the seam between the Host and its runner, reached
    one way, :attr:`Host.engine`. A stage's own state is the stage's (the prune's last
    instant, the cleanup's settling), and what outlives an engine is the host's (the pinned
    specs, the database's outage note)."""

    #: Set once the engine began a clean stop: nothing new is claimed from then on.
    stopping: bool
    #: When the last tick finished, or the loop started before any (``time.monotonic()``).
    last_tick_at: float | None

    @property
    def inflight(self) -> Mapping[int, asyncio.Task[Any]]: ...
    @property
    def cleaning(self) -> Mapping[int, asyncio.Task[Any]]: ...
    @property
    def outcomes(self) -> OutcomeQueue: ...

    def wake(self, *, advance_only: bool = False) -> None: ...
    async def http_session(self) -> aiohttp.ClientSession: ...
    def plugin_call(self, owner: str) -> AbstractAsyncContextManager[None]: ...
    def spawn(self, run_id: int, work: Coroutine[Any, Any, tuple[str, bool]]) -> None: ...
    def give_back_beside(self, run_id: int, work: Coroutine[Any, Any, str]) -> None: ...


class Host:
    """A pageant host.

    ``plugins`` are extra candidates (objects handed over directly, as tests and embedders
    do); ``discover`` reads installed entry points of group ``pageant``.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        plugins: Sequence[Candidate] = (),
        discover: bool = True,
        clock: Clock | None = None,
        db: AsyncEngine | None = None,
    ) -> None:
        self.settings = settings or Settings()
        self.clock: Clock = clock or SystemClock()
        self.identity = make_identity()
        self.plugins: PluginManager = load_plugins(
            plugins, discover=discover, settings=self.settings
        )
        self.registry = self.plugins.registry
        self._own_db = db is None
        self._db = db
        #: The runner of this host once one is attached (:class:`pageant.engine.Engine`),
        #: None before and after: the one way the host and its engine's stages reach it.
        self.engine: EngineSeam | None = None
        self.started = False
        #: owner -> why its plugin cannot take steps now (see :meth:`plugin_unavailable`).
        self._unavailable: dict[str, str] = {}
        self._metrics: Metrics | None = None
        self._versions: PinnedSpecs | None = None
        self._outage: Outage | None = None
        self._firings: Firings | None = None
        self._console_reads: asyncio.Semaphore | None = None
        self._recent_consoles: RecentAnswers | None = None
        self._link: GameLinkService | None = None
        #: What :meth:`warn_once` has said already.
        self._warned: set[str] = set()
        #: The plugins' readings, each read at most once per reading_interval_seconds.
        self.readings = Readings(self.registry, self.clock, self.settings.reading_interval_seconds)
        #: Each plugin's own bound on the give-back calls made into it at once.
        self.plugin_slots = PluginSlots(self.settings.plugin_concurrency)

    def warn_once(self, key: str, message: str, *args: Any) -> bool:
        """Log ``message`` as a WARNING the first time this host meets ``key``; answers
        whether it was logged. For a plugin's repeated mistake that changes nothing by
        itself (resources a ``notify`` action reports, say): said once, not once per step."""
        if key in self._warned:
            return False
        self._warned.add(key)
        log.warning(message, *args)
        return True

    @property
    def metrics(self) -> Metrics:
        """This host's :class:`pageant.support.metrics.Metrics` (made on first use)."""
        if self._metrics is None:
            from pageant.support.metrics import Metrics

            self._metrics = Metrics()
            self._metrics.count_plugins(self.plugins.records)
        return self._metrics

    @property
    def console_reads(self) -> asyncio.Semaphore:
        """The run console's readers' budget: at most ``read_concurrency`` consoles read at
        once, the rest waiting their turn in arrival order (made on first use). The engine
        shares the event loop and the database pool with every reader; readers that ask as
        fast as they are answered would otherwise take most of both."""
        if self._console_reads is None:
            self._console_reads = asyncio.Semaphore(self.settings.read_concurrency)
        return self._console_reads

    @property
    def recent_consoles(self) -> RecentAnswers:
        """The run consoles read in the last ``console_max_age_ms``, shared by their readers
        (made on first use; :mod:`pageant.support.recent`). The API and the web console's run pages
        read through it; the CLI, the kit and the tests read :func:`pageant.runs.console.console`
        afresh."""
        if self._recent_consoles is None:
            self._recent_consoles = RecentAnswers(self.settings.console_max_age_ms / 1000)
        return self._recent_consoles

    @property
    def console_max_age(self) -> timedelta:
        """How old what a console's reader is answered may be (``console_max_age_ms``): the
        console itself, and whether the reader's token is still live."""
        return timedelta(milliseconds=self.settings.console_max_age_ms)

    def attach_engine(self, engine: EngineSeam | None) -> None:
        """Make ``engine`` this host's runner: the one :meth:`wake` wakes and the engine's
        legs read their state from (None: none any more). An ``Engine`` attaches itself
        when it is built; :attr:`engine` is the one way to reach it."""
        self.engine = engine

    def wake(self, *, advance_only: bool = False) -> None:
        """Wake this host's engine, if it has one, to act now rather than at its next
        poll (a run was started, a gate closed, a schedule changed). ``advance_only``: only
        the advance stage has something to do (a run started now, a gate closed)."""
        if self.engine is None:
            return
        if advance_only:
            self.engine.wake(advance_only=True)
        else:
            self.engine.wake()

    @property
    def outcomes(self) -> OutcomeQueue:
        """Where a write of a step's outcome, a claim or a start is made: the engine's group
        commit (:class:`pageant.db.group.OutcomeBatch`), or a transaction of its own
        where no engine is attached (:class:`OwnTransaction`). ``await
        host.outcomes.run(write)`` answers what ``write`` answered once its transaction
        committed."""
        if self.engine is not None:
            return self.engine.outcomes
        return OwnTransaction(self.db)

    @property
    def versions(self) -> PinnedSpecs:
        """The pinned versions' specs this host has read (made on first use): a published
        version never changes, so the engine's steps and the run consoles share one cache."""
        if self._versions is None:
            self._versions = PinnedSpecs()
        return self._versions

    @property
    def outage(self) -> Outage:
        """This host's note of a database outage (:class:`pageant.db.outage.Outage`, made
        on first use): the engine reports one once, when it begins and when it ends."""
        if self._outage is None:
            self._outage = Outage(self.clock, self.metrics)
        return self._outage

    @property
    def db(self) -> AsyncEngine:
        if self._db is None:
            from pageant.db.engine import create_engine

            self._db = create_engine(
                self.settings.database_url, pool_size=self.settings.database_pool_size
            )
        return self._db

    def plugin_unavailable(self, owner: str) -> str | None:
        """Why the plugin that owns ``owner``'s ids cannot take a step now, or None.

        ``may_invoke`` asks this before every dispatch and refuses with code
        ``unavailable``. It answers what :meth:`mark_unavailable` was told: the one place
        the host learns that a plugin (or its game) is down. A contested owner is
        :meth:`unavailable`'s: its steps wait instead of being refused.
        """
        return self._unavailable.get(owner)

    def unavailable_owners(self) -> tuple[str, ...]:
        """The owners whose plugins are unavailable now."""
        return tuple(sorted(self._unavailable))

    def mark_unavailable(self, owner: str, reason: str | None) -> None:
        """Record that ``owner``'s plugin is unavailable for ``reason`` (None: available,
        which is :meth:`plugin_back`)."""
        if reason is None:
            self.plugin_back(owner)
        else:
            self._unavailable[owner] = reason

    def plugin_back(self, owner: str) -> bool:
        """``owner``'s plugin (or its game) is back: the one path every return takes — a
        plugin's ``context.set_available(True)`` (OpenArena's RCON answering again), and a
        game link's server syncing again. What waited for it goes on by itself: its held
        steps, and the cleanup held for it (:mod:`pageant.ledger.held`), at the engine's
        pass, woken now. Answers whether it had been unavailable (a return already known
        changes nothing and wakes nobody). Asking the plugin to reconcile is the caller's:
        the plugin knows whether its game restarted."""
        if self._unavailable.pop(owner, None) is None:
            return False
        log.info("plugin %s is available again; what waited for it goes on", owner)
        self.wake()
        return True

    def unavailable(self, action_id: str) -> str | None:
        """Why steps of ``action_id`` must wait rather than run, or None: asked before a
        step is claimed, so nothing is tried and no attempt spent. Today: its owner is
        contested (two distributions claim it, both refused) until a restart settles it.
        Unlike :meth:`plugin_unavailable`, which ``may_invoke`` turns into a refusal, this
        holds the run (``waiting_on.reason`` ``unavailable``). And: the action changes the
        world (``change``, ``irreversible``) and its plugin reported itself down
        (``context.set_available(False, reason)``): its steps, and its reverts, wait."""
        contested = self.plugins.unavailable(action_id)
        if contested is not None:
            return contested
        action = self.registry.actions.get(action_id)
        if action is None or not changes_world(action.risk):
            return None
        return self.plugin_unavailable(action_id.split(".", 1)[0])

    async def start_plugins(self) -> None:
        """Hand each loaded plugin its context (a plugin whose startup raises is refused),
        then run the boot-time self-check of the leases that declare one, ask each plugin
        that declares ``check`` what is wrong (:mod:`pageant.plugins.self_check`), and warn
        once of each plugin that cannot promise a late change is refused
        (:func:`pageant.plugins.notices.late_change_warning`)."""
        self.plugins.start(
            lambda record: self.context_for(
                record.label, record.owner or "", settings=record.settings
            )
        )
        from pageant.plugins.lease_check import check_leases
        from pageant.plugins.self_check import check_plugins

        held = await self.held_lease_targets()
        await check_leases(self.registry, self.plugins.records, self.clock.now(), held)
        await check_plugins(self.plugins.records)
        for record in self.plugins.loaded():
            late = self.plugins.late_change_warning(record.owner or "")
            if late is not None:
                logging.getLogger("pageant.plugins").warning("plugin %s: %s", record.label, late)
        self.started = True

    async def held_lease_targets(self) -> set[tuple[str, str]]:
        """``(lease id, target)`` of every lease a run holds now, from the ledger; empty
        when the database cannot say (a SQLite file not made yet is not made here, and a
        schema not migrated holds nothing)."""
        import asyncio

        from pageant.db import resources
        from pageant.db.engine import sqlite_file

        path = sqlite_file(self.settings.database_url)
        if self._db is None and path is not None:
            # Connecting would make the file: a host that has no database yet holds nothing.
            if not await asyncio.to_thread(os.path.exists, path):
                return set()
        owners = {lease_id.split(".", 1)[0] for lease_id in self.registry.leases}
        held: set[tuple[str, str]] = set()
        try:
            async with self.db.connect() as conn:
                for owner in sorted(owners):
                    for row in await resources.holding_of_owner(conn, owner):
                        if row.kind in self.registry.leases:
                            held.add((row.kind, row.ref))
        except Exception:  # no database yet, or not migrated: nothing is held
            log.debug("could not read the held leases", exc_info=True)
        return held

    def context_for(self, label: str, owner: str, *, settings: Any = None) -> PluginContext:
        """The context a plugin receives: what it may ask of this host, lent as callables."""
        return PluginContext(
            label,
            owner,
            registry=self.registry,
            emit=functools.partial(self.emit_as_plugin, owner),
            emit_batch=functools.partial(self.emit_batch_as_plugin, owner),
            reconcile=self.reconcile,
            set_available=self.mark_unavailable,
            settings=settings,
            link=self.link_of(owner),
        )

    @property
    def link(self) -> GameLinkService:
        """The game link (:class:`pageant.link.service.Link`), made on first use."""
        if self._link is None:
            from pageant.link.service import Link

            self._link = Link(
                self.db,
                self.clock,
                self.settings,
                on_return=self.link_returned,
                on_late=lambda server: self.metrics.link_late.labels(server=server).inc(),
                mark=self.mark_unavailable,
            )
            for record in self.plugins.loaded():
                use = getattr(record.info, "link", None)
                if use is not None and record.owner:
                    for server in use.servers:
                        self._link.uses(record.owner, server)
        return self._link

    def link_of(self, owner: str) -> Any:
        """``context.link`` of ``owner``'s plugin: the game link, its calls made as it."""
        from pageant.link.plugin import OwnerLink

        return OwnerLink(lambda: self.link, owner)

    async def link_returned(self, server: str) -> None:
        """A link server synced again after being down: what waited on it goes on, and the
        plugins that use it reconcile their recorded resources."""
        for owner in sorted(self.link.owners.get(server, ())):
            if self.link.down_of(owner) is None:
                self.mark_unavailable(owner, None)
            if self.reconcile_hook(owner) is not None:
                try:
                    await self.reconcile(owner)
                except Exception:
                    log.exception("reconcile of %s after %s came back failed", owner, server)

    def reconcile_hook(self, owner: str) -> Any:
        """The loaded plugin's ``pageant_reconcile`` for ``owner``, or None."""
        for record in self.plugins.loaded():
            if record.owner != owner:
                continue
            for impl in self.plugins.pm.hook.pageant_reconcile.get_hookimpls():
                if impl.plugin is record.plugin:
                    return impl.function
        return None

    async def reconcile(self, owner: str) -> dict[str, Any]:
        """Ask ``owner``'s plugin which of its recorded resources are still in the world
        (see :func:`pageant.ledger.reconcile.reconcile`)."""
        from pageant.ledger.reconcile import reconcile

        return await reconcile(self.db, self.clock, owner, self.reconcile_hook(owner))

    async def reconcile_all(self) -> None:
        """Reconcile every loaded plugin that implements ``pageant_reconcile`` (at start)."""
        for record in self.plugins.loaded():
            if record.owner and self.reconcile_hook(record.owner) is not None:
                try:
                    await self.reconcile(record.owner)
                except Exception:
                    log.exception("reconcile of %s failed", record.owner)

    @property
    def firings(self) -> Firings:
        """The emit path (:class:`pageant.gates.emit.Firings`), made on first use."""
        if self._firings is None:
            from pageant.gates.emit import Firings

            self._firings = Firings(
                self.registry,
                self.db,
                self.clock,
                self.settings,
                lambda: self.wake(advance_only=True),  # a gate closed: advance's to do
            )
        return self._firings

    async def emit(
        self,
        trigger_id: str,
        payload: Any,
        *,
        actor: str | None = None,
        key: str | None = None,
        at: Any = None,
        issuer: str | None = None,
        token_id: int | None = None,
    ) -> dict[str, int]:
        """Fire ``trigger_id`` with ``payload``: the emit path that feeds phase gates.

        Every open ``on`` gate the firing can count for evaluates it; a match is counted,
        and the gate closes when its tally reaches its count (the engine is woken). Answers
        ``{gates_matched, gates_closed}``. Raises :class:`~pageant.errors.NotFound` for a
        trigger no plugin registers and :class:`~pageant.errors.Invalid` naming the problem
        for a payload, ``key`` or ``at`` that does not fit (nothing is written). ``actor``
        is who fired (kept on the log lines); a ``key`` already sent by ``issuer`` answers
        its first answer and counts nothing. A ``token_id`` (the API's caller) must still
        be live when the firing is recorded.
        """
        firing = self.firings.check(trigger_id, payload, key=key, at=at)
        (answer,) = await self.firings.fire([firing], issuer=issuer, actor=actor, token_id=token_id)
        return answer

    async def emit_batch(
        self,
        items: Any,
        *,
        actor: str | None = None,
        issuer: str | None = None,
        check: Callable[[str], None] | None = None,
        token_id: int | None = None,
    ) -> list[dict[str, Any]]:
        """Fire a batch, ``[{"trigger", "payload", "id"?, "at"?}, ...]``, in one transaction.

        Answers one entry per item, in order: ``{"status": 200, gates_matched,
        gates_closed}``, or the refused item's own ``{"status": 400 | 404, "error": ...}``;
        a refused item changes nothing and does not sink the others. ``check`` is asked
        about each item's trigger (who may fire it, :mod:`pageant.gates.firers`); what it
        raises is that item's answer. Raises
        :class:`~pageant.errors.Invalid` when ``items`` is not a list of at most
        :data:`pageant.gates.emit.MAX_BATCH` objects.
        """
        checked = self.firings.check_batch(items, check)
        answers = checked.answers
        for i, answer in zip(
            checked.kept,
            await self.firings.fire(checked.firings, issuer=issuer, actor=actor, token_id=token_id),
            strict=True,
        ):
            answers[i] = {"status": 200, **answer}
        return [answer or {} for answer in answers]

    async def emit_as_plugin(
        self, owner: str, trigger_id: str, payload: Any, **how: Unpack[EmitOptions]
    ) -> dict[str, int]:
        """A plugin's ``context.emit``: :meth:`emit`, refused with
        :class:`~pageant.errors.Forbidden` for a trigger another owner declares."""
        from pageant.gates.firers import check_plugin_firing

        check_plugin_firing(trigger_id, owner)
        return await self.emit(trigger_id, payload, **how)

    async def emit_batch_as_plugin(
        self, owner: str, items: Any, *, actor: str | None = None, issuer: str | None = None
    ) -> list[dict[str, Any]]:
        """A plugin's ``context.emit_batch``: :meth:`emit_batch`, each item of another
        owner's trigger refused by itself (``403``)."""
        from pageant.gates.firers import check_plugin_firing

        return await self.emit_batch(
            items,
            actor=actor,
            issuer=issuer,
            check=functools.partial(check_plugin_firing, plugin_owner=owner),
        )

    async def stop_plugins(self, within: float | None = None) -> None:
        """Await each started plugin's ``pageant_shutdown``, each for at most ``within``
        seconds (default ``stop_grace_seconds``); nothing when no plugin was started."""
        grace = self.settings.stop_grace_seconds if within is None else within
        await self.plugins.shutdown(grace)
        self.started = False

    async def close(self) -> None:
        """Stop the plugins this host started (:meth:`stop_plugins`), then the game link, and
        close its database engine (when it made it)."""
        await self.stop_plugins()
        if self._link is not None:
            await self._link.close()
        if self._db is not None and self._own_db:
            await self._db.dispose()
            self._db = None
