"""kitfaults: fixture plugins that load but fail (or trouble) the contract check.

Each class is a plugin of its own (its own owner), installed as one entry point, so a test
can check one fault alone. Every one of them loads: these are the defects only exercising
the declarations finds, plus two the loader refuses (``Future``, ``Stalls``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from pageant import hookimpl
from pageant.hookspecs import Action, Trigger, TriggerVariable


def info(owner: str, contract: str = "^1.0") -> dict[str, str]:
    return {"owner": owner, "contract": contract}


async def fine(ctx: Any) -> dict[str, Any]:
    return {"ok": True}


def action(ident: str, perform: Any = fine, **more: Any) -> dict[str, Any]:
    return {
        "id": ident,
        "label": ident,
        "risk": "change",
        "budget_ms": 2_000,
        "perform": perform,
        **more,
    }


def param(name: str, example: Any, **more: Any) -> dict[str, Any]:
    kind = "integer" if isinstance(example, int) else "string"
    return {"name": name, "type": kind, "description": name, "example": example, **more}


class RefusesVerify:
    """``perform`` answers a failure to every dry run."""

    PLUGIN_INFO = info("balky")

    @staticmethod
    async def perform(ctx: Any) -> dict[str, Any]:
        if ctx.verify:
            return {"ok": False, "retry": False, "error": "dry runs are not supported"}
        return {"ok": True}

    @hookimpl
    def pageant_actions(self) -> list[dict[str, Any]]:
        return [action("balky.stomp", self.perform)]


class Raises:
    """``perform`` raises."""

    PLUGIN_INFO = info("brittle")

    @staticmethod
    async def perform(ctx: Any) -> dict[str, Any]:
        raise RuntimeError("the shard handle is None")

    @hookimpl
    def pageant_actions(self) -> list[dict[str, Any]]:
        return [action("brittle.shatter", self.perform)]


class Dawdles:
    """``perform`` outlives its 50 ms budget."""

    PLUGIN_INFO = info("dawdle")

    @staticmethod
    async def perform(ctx: Any) -> dict[str, Any]:
        await asyncio.sleep(5)
        return {"ok": True}

    @hookimpl
    def pageant_actions(self) -> list[dict[str, Any]]:
        return [action("dawdle.linger", self.perform, budget_ms=50)]


class Spendthrift:
    """One ``cost`` names a dimension nobody declares; another gives a negative amount."""

    PLUGIN_INFO = info("spendthrift")

    @hookimpl
    def pageant_actions(self) -> list[dict[str, Any]]:
        return [
            action("spendthrift.buy", cost=lambda params: {"spendthrift.gold": 2}),
            action("spendthrift.refund", cost=lambda params: {"spendthrift.silver": -1}),
        ]

    @hookimpl
    def pageant_budgets(self) -> list[dict[str, Any]]:
        return [{"dimension": "spendthrift.silver", "label": "Silver", "unit": "coins"}]


class DarkSource:
    """Its option source raises (the game server is down)."""

    PLUGIN_INFO = info("murk")

    @staticmethod
    async def regions() -> list[dict[str, Any]]:
        raise ConnectionError("shard unreachable")

    @hookimpl
    def pageant_actions(self) -> list[dict[str, Any]]:
        return [
            action(
                "murk.fog",
                params=[
                    param("region", "yew", required=True, option_source="murk.options.regions")
                ],
            )
        ]

    @hookimpl
    def pageant_option_sources(self) -> list[dict[str, Any]]:
        return [{"id": "murk.options.regions", "label": "Regions", "resolve": self.regions}]


class Picky:
    """A param's example is not among its source's values (a warning only)."""

    PLUGIN_INFO = info("picky")

    @staticmethod
    async def sizes() -> list[dict[str, Any]]:
        return [{"value": "small", "label": "Small"}, {"value": "large", "label": "Large"}]

    @hookimpl
    def pageant_actions(self) -> list[dict[str, Any]]:
        return [
            action(
                "picky.choose",
                params=[param("size", "medium", option_source="picky.options.sizes")],
            )
        ]

    @hookimpl
    def pageant_option_sources(self) -> list[dict[str, Any]]:
        return [{"id": "picky.options.sizes", "label": "Sizes", "resolve": self.sizes}]


class Fussy:
    """``perform`` reads an optional param as if a step always gave it."""

    PLUGIN_INFO = info("fussy")

    @staticmethod
    async def perform(ctx: Any) -> dict[str, Any]:
        volume = ctx.params["volume"]
        return {"ok": True, "hold_for": 0 if volume else 1}

    @hookimpl
    def pageant_actions(self) -> list[dict[str, Any]]:
        return [
            action(
                "fussy.shout",
                self.perform,
                params=[param("text", "hello", required=True), param("volume", 3)],
            )
        ]


class Leaky:
    """Its dry run posts a webhook: a dry run that changes the world."""

    PLUGIN_INFO = info("leaky")

    @staticmethod
    async def perform(ctx: Any) -> dict[str, Any]:
        await ctx.services.post_json("http://game.invalid/hook", {"hello": 1})
        return {"ok": True}

    @hookimpl
    def pageant_actions(self) -> list[dict[str, Any]]:
        return [action("leaky.drip", self.perform)]


class Hoarder:
    """Its dry run answers resources, as though it had created them (a warning); one of its
    actions is a notify, whose resources no run would ever record."""

    PLUGIN_INFO = info("hoarder")

    @staticmethod
    async def perform(ctx: Any) -> dict[str, Any]:
        return {"ok": True, "resources": [{"kind": "chest", "ref": "c-1"}]}

    @hookimpl
    def pageant_actions(self) -> list[dict[str, Any]]:
        return [
            action("hoarder.stash", self.perform),
            action("hoarder.tally", self.perform, risk="notify"),
        ]


class Hollow:
    """Models built with ``model_construct`` skip validation, so the loader takes them as
    they are; the kit re-checks what they claim."""

    PLUGIN_INFO = info("hollow")

    @hookimpl
    def pageant_actions(self) -> list[Action]:
        return [
            Action.model_construct(
                id="hollow.vanish",
                label="Vanish",
                version=1,
                risk="change",
                reversible="full",
                budget_ms=1_000,
                params=[],
                description="",
                cost=None,
                perform=fine,
                revert=None,
            )
        ]

    @hookimpl
    def pageant_triggers(self) -> list[Trigger]:
        weight = TriggerVariable.model_construct(
            name="weight", type="number", description="How heavy.", example="heavy"
        )
        return [Trigger.model_construct(id="hollow.seen", label="Seen", variables=[weight])]


class Revenant:
    """Its revert takes back what a key made, but a perform that arrives afterwards under
    the same key makes it again: a slow game plus a cancel leaves an orphan."""

    PLUGIN_INFO = info("revenant")

    def __init__(self) -> None:
        self.world: dict[str, str] = {}

    async def perform(self, ctx: Any) -> dict[str, Any]:
        if ctx.verify:
            return {"ok": True}
        self.world[ctx.idempotency_key] = "ghost"
        return {"ok": True, "resources": [{"kind": "ghost", "ref": ctx.idempotency_key[-8:]}]}

    async def revert(self, ctx: Any) -> dict[str, Any]:
        self.world.pop(ctx.idempotency_key, None)
        return {"ok": True}

    @hookimpl
    def pageant_actions(self) -> list[dict[str, Any]]:
        return [
            action("revenant.haunt", self.perform, revert=self.revert, reversible="full"),
        ]


class Future:
    """Written for a contract this host does not implement."""

    PLUGIN_INFO = info("future", "^2.0")

    @hookimpl
    def pageant_actions(self) -> list[dict[str, Any]]:
        return [action("future.act")]


class Stalls:
    """Its startup raises: the host refuses it after loading."""

    PLUGIN_INFO = info("stalls")

    @hookimpl
    def pageant_actions(self) -> list[dict[str, Any]]:
        return [action("stalls.act")]

    @hookimpl
    def pageant_startup(self, context: Any) -> None:
        raise RuntimeError("no game server configured")


#: entry-point name -> class name: how a test installs each as a plugin of its own.
PLUGINS = {
    "balky": "RefusesVerify",
    "brittle": "Raises",
    "dawdle": "Dawdles",
    "spendthrift": "Spendthrift",
    "murk": "DarkSource",
    "picky": "Picky",
    "fussy": "Fussy",
    "leaky": "Leaky",
    "hoarder": "Hoarder",
    "hollow": "Hollow",
    "revenant": "Revenant",
    "future": "Future",
    "stalls": "Stalls",
}
