"""The hookspecs: every hook a pageant plugin may implement.

Each docstring follows one template: what the hook is for; **when** the host calls it;
its parameters; what it **returns**; what the host does **on failure**; and the contract
version that added it. ``docs/hooks.md`` is rendered from these docstrings.
"""

from __future__ import annotations

from typing import Any

from .markers import hookspec

# ── declarations: called once, at load, one plugin at a time ─────────────────


class PageantSpecs:
    """The hook namespace registered with every host's plugin manager."""

    @hookspec
    def pageant_actions(self) -> list[Any]:
        """Declare the actions this plugin can perform.

        When: once, while the host loads plugins, after the plugin's contract range has
        been accepted and before any other plugin's declarations are merged.

        Returns: a list of :class:`~pageant.hookspecs.Action` models or dicts of the same
        shape. Every id starts with the plugin's ``owner``.

        On failure: if the hook raises, or any declaration is invalid, outside the
        plugin's namespace or a duplicate of another plugin's id, the whole plugin is
        refused with every problem named, and the host runs on without it.

        Added in contract 1.0.
        """

    @hookspec
    def pageant_budgets(self) -> list[Any]:
        """Declare the budget dimensions this plugin's actions spend against.

        When: once, at load, as :meth:`pageant_actions`.

        Returns: a list of :class:`~pageant.hookspecs.Budget` models or dicts.

        On failure: the plugin is refused with its reasons; the host runs on.

        Added in contract 1.0.
        """

    @hookspec
    def pageant_leases(self) -> list[Any]:
        """Declare the borrowed values this plugin can set for a while and put back.

        When: once, at load, as :meth:`pageant_actions`.

        Returns: a list of :class:`~pageant.hookspecs.Lease` models or dicts.

        On failure: the plugin is refused with its reasons; the host runs on.

        Added in contract 1.0.
        """

    @hookspec
    def pageant_option_sources(self) -> list[Any]:
        """Declare the live value lists that params may draw their values from.

        When: once, at load, as :meth:`pageant_actions`. ``resolve()`` is called later,
        whenever the catalog's options route or the kit asks.

        Returns: a list of :class:`~pageant.hookspecs.OptionSource` models or dicts.

        On failure: the plugin is refused with its reasons; the host runs on. A
        ``resolve()`` that raises later answers ``{ok: false, reason}``, never a 500.

        Added in contract 1.0.
        """

    @hookspec
    def pageant_triggers(self) -> list[Any]:
        """Declare the things that happen in the game and can advance a phase gate.

        When: once, at load, as :meth:`pageant_actions`.

        Returns: a list of :class:`~pageant.hookspecs.Trigger` models or dicts; each
        trigger's ``variables`` are what gate conditions and firing payloads are checked
        against.

        On failure: the plugin is refused with its reasons; the host runs on.

        Added in contract 1.0.
        """

    @hookspec
    def pageant_announce_legs(self) -> list[Any]:
        """Declare places an announcement can be sent (a chat channel, a broadcast).

        When: once, at load, as :meth:`pageant_actions`.

        Returns: a list of :class:`~pageant.hookspecs.AnnounceLeg` models or dicts.

        On failure: the plugin is refused with its reasons; the host runs on.

        Added in contract 1.0.
        """

    # ── lifecycle ──────────────────────────────────────────────────────────────

    @hookspec
    def pageant_startup(self, context: Any) -> None:
        """Receive the plugin context once the host has started.

        When: once per host start, after every plugin has loaded and the database is
        reachable, before the engine's first tick.

        Parameters:
            context: the plugin's :class:`~pageant.plugins.context.PluginContext`; keep it.
                ``await context.emit(trigger_id, payload)`` feeds phase gates;
                ``context.settings`` is the plugin's own settings model, filled (contract
                1.1; None when ``PLUGIN_INFO`` declares none).

        Returns: nothing.

        On failure: the plugin is marked refused with the exception as its reason and
        its declarations are withdrawn; the host runs on with the others.

        Added in contract 1.0.
        """

    @hookspec
    def pageant_reconcile(self, resources: list[Any]) -> Any:
        """Say which recorded resources still exist in the world.

        When: at boot, and whenever the plugin asks through its context. ``async def``.

        Parameters:
            resources: the ledger rows the host holds for this plugin's actions.

        Returns: the refs still in force.

        On failure: logged; the ledger is left as it was.

        Added in contract 1.0.
        """
