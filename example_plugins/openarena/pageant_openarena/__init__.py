"""openarena: run pageant world events on a real OpenArena server.

Written against the public contract alone (``pageant.hookspecs`` and ``pageant.hookimpl``).
The plugin steers each server over RCON (:mod:`pageant_openarena.rcon`) and hears it through
its game log (:mod:`pageant_openarena.gamelog`):

- ``openarena.say`` (a line to every player, never sent twice) and ``openarena.bots.add``
  (bots that join and fight, one resource each, kicked when the run ends);
- a lease, ``openarena.cvar``: a server cvar from an allowlist, borrowed and put back;
- one budget (``openarena.bots``), four option sources and five triggers, fired from the
  game log through ``context.emit``;
- a reading, ``openarena.players_online`` (contract 1.5): the clients ``status`` lists,
  bots only when the event asks (``"bots": true``);
- ``pageant_reconcile``, answered from ``status``; availability: a server that stops
  answering makes the plugin unavailable until it answers again, then asks for a reconcile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from pageant import hookimpl
from pageant.hookspecs import UNKNOWN, ActionContext, HeldResource, PluginContext, ReadContext

from .catalog import (
    BOT,
    CHARACTERS,
    MAPS,
    MAX_BOTS,
    MAX_MESSAGE,
    MAX_SKILL,
    TRIGGERS,
    bot_names,
)
from .rcon import BadPassword, NoAnswer, RconError
from .servers import Server
from .settings import WORD, OpenArenaSettings

__all__ = ["OpenArenaPlugin", "OpenArenaSettings"]

log = logging.getLogger("pageant_openarena")
#: The budget dimension the bots spend: what ``cost`` reserves and ``spent`` settles.
BOTS = "openarena.bots"

TOP_FRAGGER = "{top_fragger}"
SETTING = "PAGEANT_PLUGIN_OPENARENA_RCON_PASSWORD (rcon_password)"
#: ``openarena.bots.add``'s budget: the time the host gives one perform.
ADD_BUDGET_MS = 30_000


class OpenArenaPlugin:
    """The plugin. The host makes one per start (the entry point names this class)."""

    def __init__(self) -> None:
        self.settings: OpenArenaSettings | None = None
        self.context: PluginContext | None = None
        self.servers: dict[str, Server] = {}
        #: Why the plugin cannot reach any server (its settings lack a password), or None.
        self.problem: str | None = "the openarena plugin has no settings"
        self._watcher: asyncio.Task[None] | None = None
        self.PLUGIN_INFO = {
            "owner": "openarena",
            "contract": "^1.5",
            "settings": OpenArenaSettings,
            "observe": self.observe,
            "check": self.check,
        }

    # ── lifecycle ────────────────────────────────────────────────────────────

    @hookimpl
    def pageant_startup(self, context: PluginContext) -> None:
        """Keep the context, make a client per server, and start watching them: their
        logs (for triggers) and whether they answer (for availability)."""
        self.context = context
        self.settings = getattr(context, "settings", None)
        if self.settings is None:
            return
        self.problem = self.settings.unset_password()
        if self.problem is not None:
            # Installed and not configured is the ordinary state of a fresh install: said
            # once, and shown on the host's plugin listing as the reason it is unavailable.
            log.info("openarena does nothing until configured: %s", self.problem)
            context.set_available(False, f"not configured: {self.problem}")
            return
        self.servers = {c.id: Server(c, self.settings) for c in self.settings.resolved()}
        with contextlib.suppress(RuntimeError):  # no running loop: nothing to watch from
            self._watcher = asyncio.get_running_loop().create_task(self._watch())

    async def stop(self) -> None:
        """Stop watching (contract 1.1 has no shutdown hook: an embedder calls this)."""
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
            self._watcher = None
        for server in self.servers.values():
            if server.follower is not None:
                server.follower.close()

    async def _watch(self) -> None:
        assert self.settings is not None
        probe_every = max(1, round(self.settings.probe_seconds / self.settings.log_poll_seconds))
        turn = 0
        try:
            while True:
                try:
                    for server in self.servers.values():
                        await self._hear(server)
                    if turn % probe_every == 0:
                        await self._probe()
                except Exception:  # the watcher must outlive any one bad turn
                    log.exception("watching the OpenArena servers failed; trying again")
                turn += 1
                await asyncio.sleep(self.settings.log_poll_seconds)
        finally:
            # Cancelled (stop(), or the loop closing under a short-lived command such as
            # ``pageant plugins``): the logs it opened are closed with it.
            for server in self.servers.values():
                if server.follower is not None:
                    server.follower.close()

    async def _hear(self, server: Server) -> None:
        """Fire what the server's log gained since the last look."""
        if server.follower is None or self.context is None:
            return
        try:
            lines = server.follower.poll()
        except OSError as exc:
            log.warning("cannot read the game log of %s: %s", server.id, exc)
            return
        for line in lines:
            for firing in server.log.read(line):
                try:
                    await self.context.emit(firing.trigger, firing.payload)
                except Exception as exc:  # one bad firing must not stop the log
                    log.warning("emit %s failed: %s", firing.trigger, exc)

    async def _probe(self) -> None:
        """Ask every server for ``status``; tell the host when one stops answering, and
        when all answer again (then reconcile: what it held may be gone)."""
        assert self.settings is not None
        came_back = False
        for server in self.servers.values():
            if (
                server.up
                and time.monotonic() - server.rcon.answered_at < self.settings.probe_seconds
            ):
                continue  # it answered a moment ago: spare the server's rcon ration
            try:
                await server.clients()
            except BadPassword:
                was_up, server.up = server.up, True  # it answers; the actions say the rest
                server.problem = self._refused(server)
            except RconError:
                was_up, server.up = server.up, False
            else:
                was_up, server.up = server.up, True
                server.problem = None  # a password fixed on the server's side
            came_back = came_back or (was_up is False and server.up)
        self._tell_availability()
        if came_back and self.context is not None:
            await self.context.reconcile()

    def _tell_availability(self) -> None:
        if self.context is None:
            return
        down = [s for s in self.servers.values() if s.up is False]
        if not down:
            self.context.set_available(True)
            return
        names = ", ".join(f"{s.id} ({s.rcon.where})" for s in down)
        self.context.set_available(
            False,
            f"the OpenArena server {names} does not answer RCON within {down[0].rcon.timeout:g} s",
        )

    def _went_down(self, server: Server) -> None:
        server.up = False
        self._tell_availability()

    async def check(self) -> list[str]:
        """What is wrong at start (``PLUGIN_INFO["check"]``, contract 1.3): each server that
        refuses its rcon password, named with the settings entry that gives it. A server
        that does not answer is not a problem of the settings: availability says it."""
        found = await asyncio.gather(*(self._check(s) for s in self.servers.values()))
        return [problem for problem in found if problem is not None]

    async def _check(self, server: Server) -> str | None:
        try:
            await server.clients()
        except BadPassword:
            server.problem = self._refused(server)
        except RconError:
            return None
        else:
            server.problem = None
        return server.problem

    def _refused(self, server: Server) -> str:
        """The sentence for ``server`` refusing its password: where that password was set."""
        assert self.settings is not None
        own = any(s.id == server.id and s.rcon_password for s in self.settings.servers)
        if own:
            where = f'rcon_password in its [[plugins.openarena.servers]] entry (id = "{server.id}")'
        elif self.settings.servers:
            where = (
                f'its [[plugins.openarena.servers]] entry (id = "{server.id}") sets none, so it '
                f"takes {SETTING}: set its own rcon_password there, or fix that one"
            )
        else:
            where = SETTING
        return (
            f"the OpenArena server {server.id} ({server.rcon.where}) refused the rcon "
            f"password: check {where}"
        )

    async def observe(self) -> dict[str, Any]:
        """Each server's bots and leasable cvars: ``pageant contract-check`` compares them
        around every dry run."""
        allowed = set(self.settings.cvars if self.settings else [])
        picture: dict[str, Any] = {}
        for server in self.servers.values():
            # ``cvarlist`` rows end ``NAME "VALUE"``: one request for every cvar at once.
            # A long answer in many pieces: give each piece time to come, even on a busy host.
            answer = await server.rcon.command("cvarlist", idempotent=True, settle=0.6)
            rows = [line.split() for line in answer.splitlines()]
            picture[server.id] = {
                "bots": sorted(await server.bot_names()),
                "cvars": sorted(row[-2:] for row in rows if len(row) >= 2 and row[-2] in allowed),
            }
        return picture

    # ── reconcile ────────────────────────────────────────────────────────────

    @hookimpl
    async def pageant_reconcile(self, resources: Sequence[HeldResource]) -> list[str]:
        """The ``ref`` of each recorded resource still in the world: bots still on their
        server, and every cvar lease (whether it still holds the leased value is the
        restore's question: changed, it is drifted and left alone). A server that does not
        answer cannot say: raise, and the host changes nothing."""
        still = [r.ref for r in resources if r.kind == "openarena.cvar"]
        wanted = {r.payload.get("detail", {}).get("server") for r in resources if r.kind == BOT}
        present: set[str] = set()
        for server_id in sorted(s for s in wanted if s in self.servers):
            server = self.servers[server_id]
            present |= {f"{server.id}/{name}" for name in await server.bot_names_now()}
        still += [r.ref for r in resources if r.kind == BOT and r.ref in present]
        return still

    # ── the actions ──────────────────────────────────────────────────────────

    def _server(self, ctx: ActionContext) -> Server | str:
        """The step's server, or why there is none."""
        if not self.servers:
            return self.problem or "the openarena plugin has no servers"
        wanted = ctx.params.get("server") or next(iter(self.servers))
        found = self.servers.get(wanted)
        if found is None:
            return f"no server {wanted!r}; the servers are {', '.join(self.servers)}"
        # A password the server refused (at start, or since): a dry run says so too.
        return found.problem or found

    def _failed(self, server: Server, exc: RconError, *, sent: bool) -> dict[str, Any]:
        """The envelope of an rcon failure: a wrong password is for good; no answer makes
        the plugin unavailable, and is retried only when nothing may have happened."""
        if isinstance(exc, BadPassword):
            server.problem = self._refused(server)
            return {"ok": False, "retry": False, "error": server.problem}
        if isinstance(exc, NoAnswer):
            self._went_down(server)
            if sent:
                return {"ok": False, "retry": False, "error": f"{exc}; it may have arrived"}
            return {"ok": False, "retry": True, "error": str(exc)}
        return {"ok": False, "retry": False, "error": str(exc)}

    async def say(self, ctx: ActionContext) -> dict[str, Any]:
        """Say ``message`` to every player (``{top_fragger}`` names the run's best
        fragger). Not idempotent: once it has left, a lost answer is not retried."""
        server = self._server(ctx)
        message = str(ctx.params["message"])
        problem = server if isinstance(server, str) else _bad_message(message)
        if problem:
            return {"ok": False, "retry": False, "error": problem}
        assert isinstance(server, Server)
        if ctx.verify:
            return {"ok": True}
        if server.up is False:  # known down: it was never sent, so waiting is safe
            return {"ok": False, "retry": True, "error": f"{server.id} does not answer RCON"}
        if TOP_FRAGGER in message:
            message = message.replace(TOP_FRAGGER, self._top_fragger(server, ctx))
        try:
            refused = await server.say(message)
        except RconError as exc:
            return self._failed(server, exc, sent=True)
        if refused is not None:
            return {"ok": False, "retry": False, "error": f"{server.id}: {refused}"}
        return {"ok": True}

    def _top_fragger(self, server: Server, ctx: ActionContext) -> str:
        since = server.marks.get(ctx.run.id, Counter()) if ctx.run else Counter()
        ranked = (server.log.tally - since).most_common(1)
        return ranked[0][0] if ranked else "nobody"

    async def add_bots(self, ctx: ActionContext) -> dict[str, Any]:
        """Add ``count`` bots, once per idempotency key: a retry finds the bots already
        added by their names and adds only those missing. Once the key has been reverted,
        any perform under it (a retry, or one still in flight) leaves no bot and answers ok
        with no resources. The answer's ``spent`` is the bots the server confirmed: when it
        refuses one (full) after others joined, the step is done with those it took, and
        the host's meter gives the rest of the reservation back."""
        server = self._server(ctx)
        count, skill = ctx.params["count"], ctx.params["skill"]
        character = ctx.params.get("bot")
        problem = server if isinstance(server, str) else _outside("count", count, 1, MAX_BOTS)
        problem = problem or _outside("skill", skill, 1, MAX_SKILL)
        if not problem and character is not None and character not in CHARACTERS:
            problem = f"no bot {character!r}; the game has {', '.join(CHARACTERS)}"
        if problem:
            return {"ok": False, "retry": False, "error": problem}
        assert isinstance(server, Server)
        if ctx.verify:
            return {"ok": True}
        key = ctx.idempotency_key
        planned = bot_names(key, count, character)
        try:
            if key in server.reverted:
                await self._kick_all(server, [name for _, name in planned])
                return {"ok": True, "spent": {BOTS: 0}}
            if ctx.run is not None:
                server.marks.setdefault(ctx.run.id, Counter(server.log.tally))
            # The step's own clock: the host cuts the perform off ``budget_ms`` after it began.
            deadline = time.monotonic() + ADD_BUDGET_MS / 1000
            refused = await self._settle_bots(server, planned, skill, key, deadline)
            if key in server.reverted:
                await self._kick_all(server, [name for _, name in planned])
                return {"ok": True, "spent": {BOTS: 0}}
            joined = planned
            if refused is not None:
                present = await server.bot_names()
                joined = [(char, name) for char, name in planned if name in present]
                if not joined:
                    return {"ok": False, "retry": False, "error": f"{server.id}: {refused}"}
                log.warning(
                    "%s took %d of %d bots for step %s and refused the rest: %s",
                    server.id,
                    len(joined),
                    len(planned),
                    key,
                    refused,
                )
        except RconError as exc:
            # A retry under this key adds only what is missing: always safe to retry.
            return self._failed(server, exc, sent=False)
        return {
            "ok": True,
            "resources": [
                {"kind": BOT, "ref": f"{server.id}/{name}", "server": server.id, "name": name}
                for _, name in joined
            ],
            # What the game confirmed, not what was asked: the host's meter counts these.
            "spent": {BOTS: len(joined)},
        }

    async def _settle_bots(
        self,
        server: Server,
        planned: list[tuple[str, str]],
        skill: int,
        key: str,
        deadline: float,
    ) -> str | None:
        """Add each planned bot the server does not list, until it lists them all: None,
        or why the server refused one. An ``addbot`` that got no answer (the server's rcon
        ration spent by another client, most likely) is settled by reading ``status``, never
        by sending it again blind: only the bots truly missing are added again, for as long
        as the step's budget leaves time to read the answer. Past that, :class:`NoAnswer`."""
        present = await server.bot_names()
        # A last ``status`` may wait out the whole of a read's patience: start no round
        # that could not finish it before the step's deadline.
        reserve = server.rcon.timeout * (1 + server.rcon.retries) + 1
        while True:
            missing = [(char, name) for char, name in planned if name not in present]
            if not missing or key in server.reverted:
                return None
            if deadline - time.monotonic() < reserve:
                raise NoAnswer(
                    f"{server.id} ({server.rcon.where}) did not take "
                    f"{', '.join(name for _, name in missing)} before the step's deadline"
                )
            unsure = False
            for char, name in missing:
                if key in server.reverted:
                    return None  # reverted while this perform was under way
                try:
                    refused = await server.add_bot(char.lower(), skill, name)
                except NoAnswer:
                    unsure = True
                    continue
                if refused is not None:
                    return refused
                present.add(name)
            if unsure:
                present = await server.bot_names()

    async def kick_bots(self, ctx: ActionContext) -> dict[str, Any]:
        """Kick the bot in ``ctx.resources`` (or, when the add's answer was lost, every bot
        the key would have added). A bot already gone is no error. The key is remembered
        as reverted first, so no perform under it adds a bot again."""
        server = self._server(ctx)
        if isinstance(server, str):
            return {"ok": False, "retry": False, "error": server}
        if ctx.verify:
            return {"ok": True}
        server.mark_reverted(ctx.idempotency_key)
        names = [str(r.detail.get("name") or r.ref.partition("/")[2]) for r in ctx.resources]
        if not ctx.resources:
            names = [
                n
                for _, n in bot_names(
                    ctx.idempotency_key, ctx.params.get("count", MAX_BOTS), ctx.params.get("bot")
                )
            ]
        try:
            await self._kick_all(server, names)
        except RconError as exc:
            return self._failed(server, exc, sent=False)
        return {"ok": True}

    async def _kick_all(self, server: Server, names: list[str]) -> None:
        present = await server.bot_names()
        for name in names:
            if name in present:
                await server.kick(name)

    # ── the lease ────────────────────────────────────────────────────────────

    def _cvar(self, target: str) -> tuple[Server, str]:
        """``g_gravity`` on the first server, or ``arena2:g_gravity`` on ``arena2``."""
        if not self.servers:
            raise ValueError(self.problem or "the openarena plugin has no servers")
        server_id, _, name = target.rpartition(":")
        server = self.servers.get(server_id or next(iter(self.servers)))
        if server is None:
            raise ValueError(f"no server {server_id!r} for {target!r}")
        allowed = self.settings.cvars if self.settings else []
        if name not in allowed:
            raise ValueError(
                f"{name!r} is not a cvar openarena.cvar may lease; the allowlist (cvars) "
                f"is {', '.join(allowed)}"
            )
        return server, name

    async def read_cvar(self, target: str) -> str | None:
        server, name = self._cvar(target)
        return await server.read_cvar(name)

    async def apply_cvar(self, target: str, value: Any) -> str | None:
        """Read the baseline, then set ``value``; answers the baseline."""
        server, name = self._cvar(target)
        if not WORD.match(str(value)):
            raise ValueError(f"{value!r} is not a value a cvar can take in one word")
        baseline = await server.read_cvar(name)
        await server.set_cvar(name, str(value))
        return baseline

    async def restore_cvar(self, target: str, baseline: str | None) -> None:
        server, name = self._cvar(target)
        await server.set_cvar(name, baseline)

    # ── the reading ──────────────────────────────────────────────────────────

    async def players_online(self, params: dict[str, Any], ctx: ReadContext) -> Any:
        """The clients ``status`` lists on the server, bots only when ``bots`` is true (a
        bot's address is ``bot``); unknown when the server is not configured, refuses the
        password or does not answer."""
        server = self.servers.get(params["server"])
        if server is None or server.problem is not None:
            return UNKNOWN
        try:
            clients = await server.clients()
        except RconError:
            return UNKNOWN
        counts_bots = bool(params.get("bots", False))
        return sum(1 for client in clients if counts_bots or not client.bot)

    # ── the option sources ───────────────────────────────────────────────────

    async def resolve_servers(self) -> list[dict[str, str]]:
        return [{"value": s.id, "label": f"{s.id} ({s.rcon.where})"} for s in self.servers.values()]

    async def resolve_bots(self) -> list[dict[str, str]]:
        return [{"value": name, "label": name} for name in CHARACTERS]

    async def resolve_maps(self) -> list[dict[str, str]]:
        return [{"value": name, "label": name} for name in MAPS]

    async def resolve_cvars(self) -> list[dict[str, str]]:
        names = self.settings.cvars if self.settings else []
        first = next(iter(self.servers), None)
        return [
            {"value": name if s == first else f"{s}:{name}", "label": f"{name} on {s}"}
            for s in self.servers
            for name in names
        ]

    # ── declarations ─────────────────────────────────────────────────────────

    @hookimpl
    def pageant_actions(self) -> list[dict[str, Any]]:
        server = {
            "name": "server",
            "type": "string",
            "required": False,
            "description": "Which server (default: the first configured).",
            "example": "main",
            "option_source": "openarena.options.servers",
        }
        return [
            {
                "id": "openarena.say",
                "label": "Say to every player",
                "risk": "notify",
                "budget_ms": 10_000,
                "params": [
                    _param(
                        "message",
                        "string",
                        "What to say; {top_fragger} names the run's best fragger.",
                        "Low gravity! Frag away",
                    ),
                    server,
                ],
                "perform": self.say,
                "description": "A line on every player's screen; never sent twice.",
            },
            {
                "id": "openarena.bots.add",
                "label": "Add bots",
                "risk": "change",
                "reversible": "full",
                "budget_ms": ADD_BUDGET_MS,
                "params": [
                    _param("count", "integer", f"How many (1 to {MAX_BOTS}).", 3),
                    _param("skill", "integer", f"How good (1 to {MAX_SKILL}).", 3),
                    {
                        **_param("bot", "string", "Which character (default: a mix).", "Sarge"),
                        "required": False,
                        "option_source": "openarena.options.bots",
                    },
                    server,
                ],
                "cost": lambda params: {BOTS: params["count"]},
                "perform": self.add_bots,
                "revert": self.kick_bots,
                "description": "Bots that join and fight; kicked when the run ends.",
            },
        ]

    @hookimpl
    def pageant_leases(self) -> list[dict[str, Any]]:
        return [
            {
                "id": "openarena.cvar",
                "label": "A server cvar (gravity, speed, ...)",
                "example": "300",
                "read": self.read_cvar,
                "apply": self.apply_cvar,
                "restore": self.restore_cvar,
            }
        ]

    @hookimpl
    def pageant_budgets(self) -> list[dict[str, Any]]:
        return [{"dimension": BOTS, "label": "Bots added", "unit": "bots"}]

    @hookimpl
    def pageant_option_sources(self) -> list[dict[str, Any]]:
        return [
            {
                "id": "openarena.options.servers",
                "label": "Servers",
                "resolve": self.resolve_servers,
            },
            {"id": "openarena.options.bots", "label": "Bots", "resolve": self.resolve_bots},
            {"id": "openarena.options.maps", "label": "Maps", "resolve": self.resolve_maps},
            {
                "id": "openarena.options.cvars",
                "label": "Leasable cvars",
                "resolve": self.resolve_cvars,
            },
        ]

    @hookimpl
    def pageant_triggers(self) -> list[dict[str, Any]]:
        return TRIGGERS

    @hookimpl
    def pageant_readings(self) -> list[dict[str, Any]]:
        return [
            {
                "id": "openarena.players_online",
                "label": "Players online",
                "unit": "players online",
                "params": [
                    {
                        **_param("server", "string", "Which server.", "main"),
                        "option_source": "openarena.options.servers",
                    },
                    {
                        **_param("bots", "boolean", "Count bots as players too.", False),
                        "required": False,
                    },
                ],
                "read": self.players_online,
                "description": "The clients status lists; bots only when bots is true.",
            }
        ]


def _param(name: str, kind: str, description: str, example: Any) -> dict[str, Any]:
    return {
        "name": name,
        "type": kind,
        "required": True,
        "description": description,
        "example": example,
    }


def _outside(name: str, value: int, low: int, high: int) -> str | None:
    return None if low <= value <= high else f"{name} {value} is outside {low} to {high}"


def _bad_message(message: str) -> str | None:
    if not message.strip() or len(message) > MAX_MESSAGE:
        return f"message must be 1 to {MAX_MESSAGE} characters"
    if any(c in message for c in ';"\n\r'):
        return (
            "message may not hold ; or a double quote or a line break (the console splits on them)"
        )
    return None
