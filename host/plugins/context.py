"""What a plugin receives at ``pageant_startup``: its way back into the host."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pageant.hosting import Host


class PluginContext:
    """Handed to each plugin's ``pageant_startup``.

    ``await emit(trigger_id, payload)`` feeds phase gates exactly as the HTTP fire route
    does; ``await reconcile()`` asks the host to reconcile this plugin's ledgered resources.
    ``registry`` is the read-only view of what every plugin declared.
    """

    def __init__(self, host: Host, plugin_label: str, owner: str) -> None:
        self._host = host
        self.plugin = plugin_label
        self.owner = owner

    @property
    def registry(self) -> Any:
        return self._host.registry

    async def emit(self, trigger_id: str, payload: dict[str, Any]) -> dict[str, int]:
        """Fire ``trigger_id`` with ``payload``; answers ``{gates_matched, gates_closed}``.

        Raises :class:`~pageant.errors.Invalid` naming the variable when the payload does
        not match the trigger's declared variables, and :class:`~pageant.errors.NotFound`
        for a trigger no plugin registers. The log lines name the plugin by its owner as
        the actor (``plugin:wisps``).
        """
        return await self._host.emit(trigger_id, payload, actor=f"plugin:{self.owner}")

    async def reconcile(self) -> None:
        """Ask the host to reconcile this plugin's recorded resources (ledger)."""
        reconciler = getattr(self._host, "reconcile", None)
        if reconciler is not None:
            await reconciler(self.owner)
