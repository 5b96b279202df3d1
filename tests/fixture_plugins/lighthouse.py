"""lighthouse: a fixture plugin whose game can only call out: every perform and revert goes
through the host's game link (``context.link.call``) to an agent syncing for ``world-a``."""

from __future__ import annotations

from typing import Any

from pageant import hookimpl
from pageant.hookspecs import Down, LinkFailure, NotDelivered, PluginContext, Unanswered

PLUGIN_INFO = {
    "owner": "lighthouse",
    "contract": "^1.3",
    "link": {"servers": ["world-a"], "commands": ["light", "snuff"]},
}


class Lighthouse:
    PLUGIN_INFO = PLUGIN_INFO

    def __init__(self) -> None:
        self.context: PluginContext | None = None
        #: What each call ended in: the answer, or the failure's class name and message.
        self.outcomes: list[Any] = []
        #: How many times the host asked it to reconcile.
        self.reconciled = 0

    @hookimpl
    def pageant_startup(self, context: PluginContext) -> None:
        self.context = context

    @hookimpl
    async def pageant_reconcile(self, resources: Any) -> list[str]:
        self.reconciled += 1
        return [r.ref for r in resources]

    async def _call(self, command: str, ctx: Any) -> dict[str, Any]:
        if ctx.verify:  # a dry run checks, and sends the game nothing
            return {"ok": True}
        assert self.context is not None and self.context.link is not None
        try:
            said = await self.context.link.call(
                ctx.params["server"],
                command,
                {"colour": ctx.params["colour"]},
                key=ctx.idempotency_key,
                deadline=ctx.deadline,
            )
        except (NotDelivered, Unanswered, Down, LinkFailure) as exc:
            self.outcomes.append((type(exc).__name__, exc.message))
            return {"ok": False, "retry": not isinstance(exc, Unanswered), "error": exc.message}
        self.outcomes.append(said)
        if command == "snuff" or "id" not in said:
            return {"ok": True}
        return {"ok": True, "resources": [{"kind": "lighthouse.light", "ref": str(said["id"])}]}

    async def light(self, ctx: Any) -> dict[str, Any]:
        return await self._call("light", ctx)

    async def snuff(self, ctx: Any) -> dict[str, Any]:
        return await self._call("snuff", ctx)

    @hookimpl
    def pageant_actions(self) -> list[dict[str, Any]]:
        return [
            {
                "id": "lighthouse.light",
                "label": "Light a lighthouse",
                "risk": "change",
                "reversible": "full",
                "params": [
                    {"name": "server", "type": "string", "description": "Where.", "example": "a"},
                    {
                        "name": "colour",
                        "type": "string",
                        "description": "Its hue.",
                        "example": "red",
                    },
                ],
                "perform": self.light,
                "revert": self.snuff,
                "budget_ms": 5000,
            }
        ]

    @hookimpl
    def pageant_triggers(self) -> list[dict[str, Any]]:
        return [
            {
                "id": "lighthouse.seen",
                "label": "A lighthouse was seen",
                "variables": [
                    {"name": "server", "type": "string", "description": "Where.", "example": "a"}
                ],
            }
        ]
