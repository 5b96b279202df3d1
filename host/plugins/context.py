"""What a plugin receives at ``pageant_startup``: its way back into the host.

The context is handed what it lends - the registry, the emit path, the reconcile request -
as values and callables, never the host itself, so this module imports nothing of the host
and the host, the emit path and the context form no import circle.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from pageant.hookspecs import Declarations

#: The emit path as the context calls it: ``(trigger_id, payload, actor=..., key=...,
#: at=..., issuer=...)``.
Emit = Callable[..., Awaitable[dict[str, int]]]
#: A batch of firings: ``(firings, actor=..., issuer=...)``.
EmitBatch = Callable[..., Awaitable[list[dict[str, Any]]]]
#: Reconcile one owner's recorded resources.
Reconcile = Callable[[str], Awaitable[Any]]
#: Tell the host an owner's plugin is unavailable for a reason (None: available again).
SetAvailable = Callable[[str, "str | None"], None]


class PluginContext:
    """Handed to each plugin's ``pageant_startup``: the host's implementation of the
    contract's :class:`pageant.hookspecs.PluginContext`.

    ``await emit(trigger_id, payload)`` feeds phase gates exactly as the HTTP fire route
    does; ``await reconcile()`` asks the host to reconcile this plugin's ledgered resources.
    ``registry`` is the read-only view of what every plugin declared; ``settings`` is the
    plugin's own settings model, filled (None when its ``PLUGIN_INFO`` declares none).
    """

    def __init__(
        self,
        plugin_label: str,
        owner: str,
        *,
        registry: Declarations,
        emit: Emit,
        emit_batch: EmitBatch | None = None,
        reconcile: Reconcile | None = None,
        settings: Any = None,
        set_available: SetAvailable | None = None,
        link: Any = None,
    ) -> None:
        self.plugin = plugin_label
        self.owner = owner
        self._registry = registry
        self._emit = emit
        self._emit_batch = emit_batch
        self._reconcile = reconcile
        self.settings = settings
        self._set_available = set_available
        #: The game link, its calls made as this plugin (:class:`pageant.hookspecs.GameLink`);
        #: None where no host lends one.
        self.link = link

    @property
    def registry(self) -> Declarations:
        return self._registry

    async def emit(
        self,
        trigger_id: str,
        payload: dict[str, Any],
        *,
        key: str | None = None,
        at: datetime | None = None,
    ) -> dict[str, int]:
        """Fire ``trigger_id`` with ``payload``; answers ``{gates_matched, gates_closed}``.

        Raises :class:`~pageant.errors.Invalid` naming the variable when the payload does
        not match the trigger's declared variables (or ``key``, ``at`` does not fit), and
        :class:`~pageant.errors.NotFound` for a trigger no plugin registers. The log lines
        name the plugin by its owner as the actor (``plugin:wisps``); its keys are kept
        apart from every other plugin's and game token's.
        """
        actor = f"plugin:{self.owner}"
        return await self._emit(trigger_id, payload, actor=actor, key=key, at=at, issuer=actor)

    async def emit_batch(self, firings: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Fire a batch in one transaction; one answer per firing, in order (see
        :meth:`pageant.hookspecs.PluginContext.emit_batch`)."""
        if self._emit_batch is None:
            raise NotImplementedError("this host lends no batch emit")
        actor = f"plugin:{self.owner}"
        return await self._emit_batch(firings, actor=actor, issuer=actor)

    async def reconcile(self) -> None:
        """Ask the host to call this plugin's ``pageant_reconcile`` with the ledger rows it
        holds for it now (after the game came back, say). Rows it no longer reports become
        ``orphaned``; a reconcile that raises changes nothing (and is logged)."""
        if self._reconcile is not None:
            await self._reconcile(self.owner)

    def set_available(self, available: bool, reason: str | None = None) -> None:
        """Tell the host whether this plugin's game can take world-changing steps now.

        While unavailable, the plugin's ``change`` and ``irreversible`` steps wait (the run
        says ``waiting_on.reason = "unavailable"`` with ``reason``) and so do the reverts of
        what it holds, spending no attempts; they resume once it is available again.
        """
        if self._set_available is not None:
            self._set_available(
                self.owner, None if available else (reason or "the plugin reports itself down")
            )
