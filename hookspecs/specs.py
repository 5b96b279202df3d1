"""The hookspecs: every hook a pageant plugin may implement.

Each docstring follows one template: what the hook is for; **when** the host calls it;
its parameters; what it **returns**; what the host does **on failure**; an **example**; and
the contract version that added it. ``docs/hooks.md`` is rendered from these docstrings.

The bodies are their docstrings: the host never calls a hookspec, only the plugins'
implementations of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .context import HeldResource, PluginContext
from .markers import hookspec
from .models import Action, AnnounceLeg, Budget, Lease, OptionSource, Reading, Trigger

# ── declarations: called once, at load, one plugin at a time ─────────────────


class PageantSpecs:
    """The hook namespace registered with every host's plugin manager."""

    @hookspec
    def pageant_actions(self) -> Sequence[Action | dict[str, Any]]:
        """Declare the actions this plugin can perform.

        When: once, while the host loads plugins, after the plugin's contract range has
        been accepted and before any other plugin's declarations are merged.

        Returns: a list of :class:`~pageant.hookspecs.Action` models or dicts of the same
        shape. Every id starts with the plugin's ``owner``.

        On failure: if the hook raises, or any declaration is invalid, outside the
        plugin's namespace or a duplicate of another plugin's id, the whole plugin is
        refused with every problem named, and the host runs on without it.

        Restrictions: **a revert is final for its key** (contract 1.2). Once the host has
        called an action's ``revert`` under an idempotency key and it answered ok, nothing
        made under that key may be in the world, then or later: any ``perform`` under the
        same key that arrives afterwards (a retry, a call the host stopped waiting for, a
        request still queued in the game) must make nothing and answer ok with no
        resources. The host gives back a step whose perform timed out by calling
        ``revert`` with its key and no resources, and counts it given back on that ok
        alone; so a revert that cannot yet promise finality (the game may still apply the
        request) must answer a failure, and the host tries again. ``pageant
        contract-check`` and ``pageant.testing``'s ``Kit.perform_after_revert`` check it.

        A param may declare bounds (contract 1.3): ``minimum``/``maximum`` on an integer
        or number, ``min_length``/``max_length``/``pattern`` on a string, ``enum`` on any
        type (:class:`~pageant.hookspecs.Param`). The host refuses a value outside them
        when a spec is saved, as it refuses a wrong type, naming the param; ``perform``
        may still meet one (a run param written out at the run), and
        ``Param.check(value)`` answers it in the host's own words.

        Example::

            async def spawn(ctx: ActionContext) -> dict[str, Any]:
                if ctx.verify:
                    return {"ok": True}
                ref = await game.spawn(ctx.params["npc"], key=ctx.idempotency_key)
                return {"ok": True, "resources": [{"kind": "npc", "ref": ref}]}


            @hookimpl
            def pageant_actions() -> list[Action]:
                npc = Param(
                    name="npc",
                    type="string",
                    required=True,
                    description="Which NPC to spawn.",
                    example="dragon",
                )
                count = Param(
                    name="count",
                    type="integer",
                    description="How many (1 to 20).",
                    example=1,
                    minimum=1,
                    maximum=20,
                )
                return [
                    Action(
                        id="mygame.spawn",
                        label="Spawn an NPC",
                        risk="change",
                        budget_ms=5_000,
                        params=[npc, count],
                        perform=spawn,
                    )
                ]

        Added in contract 1.0; a revert final for its key, 1.2; a param's bounds, 1.3.
        """

    @hookspec
    def pageant_budgets(self) -> Sequence[Budget | dict[str, Any]]:
        """Declare the budget dimensions this plugin's actions spend against.

        When: once, at load, as :meth:`pageant_actions`.

        Returns: a list of :class:`~pageant.hookspecs.Budget` models or dicts.

        On failure: the plugin is refused with its reasons; the host runs on.

        A step's ``cost`` is reserved against its run's caps before ``perform`` is called,
        so steps running at once never pass a cap. A ``done`` (or parked) answer that
        carries ``spent`` (``{dimension: amount}``, what the game confirmed it made;
        contract 1.3) settles the step's charge down to that and gives the rest back to the
        run's later steps. Without ``spent`` the whole reservation stays spent; an amount
        above it is cut to it, a dimension the cost did not reserve is ignored (each with a
        warning in the host's log); a failure's ``spent`` is not read (a retry may yet make
        what it asked for).

        Example::

            @hookimpl
            def pageant_budgets() -> list[Budget]:
                return [Budget(dimension="mygame.npcs", label="NPCs spawned", unit="npcs")]

        Added in contract 1.0.
        """

    @hookspec
    def pageant_leases(self) -> Sequence[Lease | dict[str, Any]]:
        """Declare the borrowed values this plugin can set for a while and put back.

        When: once, at load, as :meth:`pageant_actions`. A run borrows one with the core
        action ``core.lease``; the host reserves the target, calls ``apply``, and at the
        deadline or the run's end calls ``read`` and then ``restore`` (or, when the game put
        the baseline back itself, records it restored by the game; when someone else changed
        the value meanwhile, leaves it alone: ``drifted``). ``core.lease`` passes the
        step's ``value`` param, a string, so ``apply`` receives a string and ``read``,
        ``apply`` and ``restore`` deal in strings (or None for a value that is unset).

        An ``apply`` that takes ``until`` (contract 1.2) is told when the lease ends at the
        latest, an aware UTC ``datetime``: hand it to the game, so the game can put the value
        back by itself if pageant is gone past it. An ``apply(target, value)`` is called as
        before. A lease that declares ``self_check`` (contract 1.2) offers only the targets
        it names; when the host starts, each is set to its probe value, read back and
        restored, and a target whose value does not take is dropped with a WARNING, shown
        dropped by ``pageant plugins`` and the plugins API, and refused by ``core.lease``.
        An ``apply`` and a ``restore`` that take ``key`` (contract 1.3) are handed the
        lease's idempotency key, fixed for one borrowing (the same on a retry, after a
        crash, and on its restore): a game whose answer to an ``apply`` was lost answers
        the retry from what it remembers under the key. Without it they are called as
        before.

        Returns: a list of :class:`~pageant.hookspecs.Lease` models or dicts.

        On failure: the plugin is refused with its reasons; the host runs on.

        Example::

            async def read(target: str) -> str:
                return await game.get_setting(target)


            async def apply(target: str, value: str, until: datetime, key: str) -> str:
                # The game puts the value back by itself at until, if nobody has by then,
                # and answers a second apply under key with the baseline it kept.
                return await game.set_setting(target, value, revert_at=until, request_id=key)


            async def restore(target: str, baseline: str, key: str) -> None:
                await game.set_setting(target, baseline, request_id=key)


            @hookimpl
            def pageant_leases() -> list[Lease]:
                return [
                    Lease(
                        id="mygame.setting",
                        label="A server setting",
                        # Offered targets, each with a value to probe it with at start.
                        self_check={"xp_rate": "1.5", "max_players": "64"},
                        read=read,
                        apply=apply,
                        restore=restore,
                    )
                ]

        Added in contract 1.0; the until of apply and self_check in 1.2; the key of apply
        and restore in 1.3.
        """

    @hookspec
    def pageant_option_sources(self) -> Sequence[OptionSource | dict[str, Any]]:
        """Declare the live value lists that params may draw their values from.

        When: once, at load, as :meth:`pageant_actions`. ``resolve()`` is called later,
        whenever the catalog's options route or the kit asks.

        Returns: a list of :class:`~pageant.hookspecs.OptionSource` models or dicts.

        On failure: the plugin is refused with its reasons; the host runs on. A
        ``resolve()`` that raises later answers ``{ok: false, reason}``, never a 500.

        An item may carry ``zone``, the IANA time zone of what it names (contract 1.4): a
        fan-out over servers with ``"stagger": "local"`` starts each server's runs at the
        schedule's wall time in its zone, read when the event is saved.

        Example::

            async def regions() -> list[dict[str, str]]:
                return [{"value": r.id, "label": r.name} for r in await game.regions()]


            @hookimpl
            def pageant_option_sources() -> list[OptionSource]:
                return [OptionSource(id="mygame.options.regions", label="Regions", resolve=regions)]

        Added in contract 1.0; an item's zone in 1.4.
        """

    @hookspec
    def pageant_triggers(self) -> Sequence[Trigger | dict[str, Any]]:
        """Declare the things that happen in the game and can advance a phase gate.

        When: once, at load, as :meth:`pageant_actions`.

        Returns: a list of :class:`~pageant.hookspecs.Trigger` models or dicts; each
        trigger's ``variables`` are what gate conditions and firing payloads are checked
        against.

        On failure: the plugin is refused with its reasons; the host runs on.

        Example::

            @hookimpl
            def pageant_triggers() -> list[dict[str, Any]]:
                return [
                    {
                        "id": "mygame.boss_slain",
                        "label": "A boss was slain",
                        "variables": [
                            {
                                "name": "region",
                                "type": "string",
                                "description": "Where it fell.",
                                "example": "yew",
                            }
                        ],
                    }
                ]

        Added in contract 1.0.
        """

    @hookspec
    def pageant_announce_legs(self) -> Sequence[AnnounceLeg | dict[str, Any]]:
        """Declare places an announcement can be sent (a chat channel, a broadcast).

        When: once, at load, as :meth:`pageant_actions`.

        Returns: a list of :class:`~pageant.hookspecs.AnnounceLeg` models or dicts. A
        leg's optional ``preview(announcement)`` (contract 1.5) is a plain synchronous,
        pure function answering, as a JSON object, what ``send`` would deliver of an
        :class:`~pageant.hookspecs.Announcement`; the host shows it in an event's
        announcement preview, before any run sends anything.

        On failure: the plugin is refused with its reasons; the host runs on. A
        ``preview`` that raises, or answers anything but a JSON object of at most 64 KiB,
        shows as ``{"error": ...}`` under the leg's id in that preview, and nothing else.

        Example::

            def chat_line(shown: Announcement) -> dict[str, Any]:
                return {"line": f"[{shown.title}] {shown.body}"}


            async def to_chat(message: str, ctx: SendContext) -> dict[str, Any]:
                shown = ctx.announcement or Announcement(title="Announcement", body=message)
                await game.broadcast(chat_line(shown)["line"])
                return {"ok": True}


            CHAT = AnnounceLeg(id="mygame.chat", label="Game chat", send=to_chat, preview=chat_line)


            @hookimpl
            def pageant_announce_legs() -> list[AnnounceLeg]:
                return [CHAT]

        Added in contract 1.0 (a leg's preview in 1.5).
        """

    @hookspec
    def pageant_readings(self) -> Sequence[Reading | dict[str, Any]]:
        """Declare the numbers this plugin can read from the game now (players online).

        When: once, at load, as :meth:`pageant_actions`. ``read(params, ctx)`` is called
        later, whenever an event's ``start_when`` or a phase's reading gate asks, at most
        once per ``reading_interval_seconds`` for the same params (everyone asking shares
        the answer).

        Returns: a list of :class:`~pageant.hookspecs.Reading` models or dicts. ``read``
        answers an ``int`` or a ``float``, or :data:`~pageant.hookspecs.UNKNOWN` when it
        cannot tell; never a guess.

        On failure: the plugin is refused with its reasons; the host runs on. A ``read``
        that raises, runs past its ``budget_ms`` or answers anything but a number counts as
        unknown (logged with the reading's id), and the event's ``else`` decides.

        Example::

            async def players_online(params: dict[str, Any], ctx: ReadContext) -> int | Unknown:
                status = await game.status(params["server"])
                return UNKNOWN if status is None else len(status.players)


            @hookimpl
            def pageant_readings() -> list[Reading]:
                return [
                    Reading(
                        id="mygame.players_online",
                        label="Players online",
                        unit="players online",
                        params=[
                            Param(
                                name="server",
                                type="string",
                                required=True,
                                description="Which server.",
                                example="eu-1",
                            )
                        ],
                        read=players_online,
                    )
                ]

        Added in contract 1.5.
        """

    # ── lifecycle ──────────────────────────────────────────────────────────────

    @hookspec
    def pageant_startup(self, context: PluginContext) -> None:
        """Receive the plugin context once the host has started.

        When: once per host start, after every plugin has loaded and the database is
        reachable, before the engine's first tick.

        Parameters:
            context: the plugin's :class:`~pageant.hookspecs.PluginContext`; keep it.
                ``await context.emit(trigger_id, payload)`` feeds phase gates;
                ``context.settings`` is the plugin's own settings model, filled (contract
                1.1; None when ``PLUGIN_INFO`` declares none).

        An event loop is running: the host calls this plain function from inside its
        asyncio loop (``serve``, every command that starts plugins, ``contract-check`` and
        the testing kit), so the hook may ``asyncio.get_running_loop()`` and start a task or
        a server there; it must not block the loop, nor start a loop of its own. Outside
        ``serve`` that loop ends with the command (``contract-check`` starts each plugin
        twice, in one loop): close what you opened in :func:`pageant_shutdown`.

        Returns: nothing.

        On failure: the plugin is marked refused with the exception as its reason and
        its declarations are withdrawn; the host runs on with the others.

        Example::

            class MyGame:
                @hookimpl
                def pageant_startup(self, context: PluginContext) -> None:
                    self.context = context  # emit later, from the game's own handlers

                async def on_boss_slain(self, region: str) -> None:
                    await self.context.emit("mygame.boss_slain", {"region": region})

        Added in contract 1.0.
        """

    @hookspec
    async def pageant_shutdown(self) -> None:
        """Close what ``pageant_startup`` opened: a task, a server, a connection to the game.

        When: once, as the host stops, for each plugin whose ``pageant_startup`` returned:
        after the engine has stopped (no step is in ``perform`` any more), in the event loop
        ``pageant_startup`` ran in, before that loop ends - on ``SIGTERM`` or ``SIGINT`` under
        ``serve``, at the end of every command that started plugins, and at the end of
        ``contract-check`` (once for each time it started the plugin). ``async def``; every
        plugin's shutdown is awaited at once, each bounded by ``stop_grace_seconds`` (under
        ``serve``: what the engine's stop left of it, at least a second).

        Returns: nothing.

        On failure: if it raises, the host logs the exception at ERROR naming the plugin;
        if it has not finished within the bound, it is cancelled and a WARNING names the
        plugin. Either way the host goes on stopping: a plugin never holds a stop past its
        bound.

        Example::

            class MyGame:
                @hookimpl
                def pageant_startup(self, context: PluginContext) -> None:
                    self.listener = asyncio.get_running_loop().create_task(self.listen())

                @hookimpl
                async def pageant_shutdown(self) -> None:
                    self.listener.cancel()
                    await asyncio.gather(self.listener, return_exceptions=True)

        Added in contract 1.3.
        """

    @hookspec
    async def pageant_reconcile(self, resources: Sequence[HeldResource]) -> Sequence[str]:
        """Say which recorded resources still exist in the world.

        When: once when the host starts (before the engine's first tick), and whenever the
        plugin calls ``await context.reconcile()`` (after its game reconnects, say).
        ``async def``.

        Parameters:
            resources: a :class:`~pageant.hookspecs.HeldResource` for each resource the host's
                ledger holds for this plugin: what its actions reported (``kind``, ``ref``,
                ``payload``) and the targets of its leases (``kind`` the lease id, ``ref`` the
                target).

        Returns: the ``ref`` of each of those resources still in force in the world. The host
        marks every row not returned ``orphaned`` — never reverted, since it is already
        gone — and logs it.

        On failure: if it raises or answers something that is not a list, nothing changes
        and each run concerned gets a ``resource.reconcile_failed`` log line.

        Example::

            @hookimpl
            async def pageant_reconcile(resources: Sequence[HeldResource]) -> list[str]:
                alive = set(await game.npc_refs())
                return [r.ref for r in resources if r.kind == "npc" and r.ref in alive]

        Added in contract 1.0.
        """
