"""kitworld: fixture plugins for what contract-check observes of a plugin's world.

Each class is a plugin of its own, installed as one entry point. Their "game" is a
dictionary each keeps, which their ``PLUGIN_INFO["observe"]`` shows the kit.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pageant import hookimpl

WORLD: dict[str, Any] = {}


async def observe() -> dict[str, Any]:
    return dict(WORLD)


def info(owner: str, **more: Any) -> dict[str, Any]:
    return {"owner": owner, "contract": "^1.1", "observe": observe, **more}


def action(ident: str, perform: Any, **more: Any) -> dict[str, Any]:
    return {
        "id": ident,
        "label": ident,
        "risk": "notify",
        "budget_ms": 2_000,
        "perform": perform,
        **more,
    }


class Careless:
    """Writes to its world even under verify=True."""

    PLUGIN_INFO = info("careless")

    @hookimpl
    def pageant_actions(self) -> list[Any]:
        async def perform(ctx: Any) -> dict[str, Any]:
            WORLD[f"careless:{ctx.idempotency_key}"] = "written"
            return {"ok": True}

        return [action("careless.write", perform)]


class Careful:
    """The same action, honouring verify: the world stays as it was."""

    PLUGIN_INFO = info("careful")

    @hookimpl
    def pageant_actions(self) -> list[Any]:
        async def perform(ctx: Any) -> dict[str, Any]:
            if not ctx.verify:
                WORLD[f"careful:{ctx.idempotency_key}"] = "written"
            return {"ok": True}

        async def revert(ctx: Any) -> dict[str, Any]:
            if not ctx.verify:
                WORLD.pop(f"careful:{ctx.idempotency_key}", None)
            return {"ok": True}

        return [action("careful.write", perform, reversible="full", revert=revert)]


class Unforgiving:
    """Its revert fails when nothing was performed under the key."""

    PLUGIN_INFO = info("unforgiving")

    @hookimpl
    def pageant_actions(self) -> list[Any]:
        async def perform(ctx: Any) -> dict[str, Any]:
            return {"ok": True}

        async def revert(ctx: Any) -> dict[str, Any]:
            if f"unforgiving:{ctx.idempotency_key}" not in WORLD:
                return {"ok": False, "retry": False, "error": "nothing to revert"}
            return {"ok": True}

        return [action("unforgiving.make", perform, reversible="full", revert=revert)]


class Scribbler:
    """Its revert of nothing writes a tombstone into the world."""

    PLUGIN_INFO = info("scribbler")

    @hookimpl
    def pageant_actions(self) -> list[Any]:
        async def perform(ctx: Any) -> dict[str, Any]:
            return {"ok": True}

        async def revert(ctx: Any) -> dict[str, Any]:
            WORLD[f"tombstone:{ctx.idempotency_key}"] = True
            return {"ok": True}

        return [action("scribbler.make", perform, reversible="full", revert=revert)]


class Once:
    """Its dry run passes on the first host that runs it, and never again."""

    PLUGIN_INFO = info("once")
    ran = False

    @hookimpl
    def pageant_actions(self) -> list[Any]:
        async def perform(ctx: Any) -> dict[str, Any]:
            if Once.ran:
                return {"ok": False, "retry": False, "error": "already verified once"}
            Once.ran = True
            return {"ok": True}

        return [action("once.try", perform)]


#: target -> value: a lease's stand-in.
LAMPS: dict[str, Any] = {}


class Lamp:
    """A lease that reads, applies and restores as the contract says."""

    PLUGIN_INFO = info("lamp")

    @hookimpl
    def pageant_leases(self) -> list[Any]:
        async def read(target: str) -> Any:
            return LAMPS.get(target, "dim")

        async def apply(target: str, value: Any) -> Any:
            baseline = LAMPS.get(target, "dim")
            LAMPS[target] = value
            return baseline

        async def restore(target: str, baseline: Any) -> None:
            LAMPS[target] = baseline

        return [
            {
                "id": "lamp.brightness",
                "label": "Brightness",
                "example": "bright",
                "read": read,
                "apply": apply,
                "restore": restore,
            }
        ]


class Sticky:
    """A lease whose restore forgets to put the baseline back."""

    PLUGIN_INFO = info("sticky")

    @hookimpl
    def pageant_leases(self) -> list[Any]:
        async def read(target: str) -> Any:
            return LAMPS.get(f"sticky:{target}", "dim")

        async def apply(target: str, value: Any) -> Any:
            baseline = LAMPS.get(f"sticky:{target}", "dim")
            LAMPS[f"sticky:{target}"] = value
            return baseline

        async def restore(target: str, baseline: Any) -> None:
            return None

        return [
            {
                "id": "sticky.glow",
                "label": "Glow",
                "example": "bright",
                "read": read,
                "apply": apply,
                "restore": restore,
            }
        ]


class Herald:
    """Two announce legs: one honours verify, one posts anyway."""

    PLUGIN_INFO = info("herald")

    @hookimpl
    def pageant_announce_legs(self) -> list[Any]:
        async def quiet(message: str, ctx: Any) -> dict[str, Any]:
            if ctx.verify:
                return {"ok": True}
            await ctx.services.post_json("http://herald.invalid/quiet", {"message": message})
            return {"ok": True}

        async def loud(message: str, ctx: Any) -> dict[str, Any]:
            await ctx.services.post_json("http://herald.invalid/loud", {"message": message})
            return {"ok": True}

        return [
            {"id": "herald.quiet", "label": "Quiet", "send": quiet},
            {"id": "herald.loud", "label": "Loud", "send": loud},
        ]


class Slow:
    """An option source that takes 0.3 s to answer."""

    PLUGIN_INFO = info("slow")

    @hookimpl
    def pageant_option_sources(self) -> list[Any]:
        async def resolve() -> list[dict[str, Any]]:
            await asyncio.sleep(0.3)
            return [{"value": "a", "label": "A"}]

        return [{"id": "slow.values", "label": "Values", "resolve": resolve}]


class Sloppy:
    """Dry runs answering the shapes the host reads as retryable failures."""

    PLUGIN_INFO = info("sloppy")

    @hookimpl
    def pageant_actions(self) -> list[Any]:
        async def listy(ctx: Any) -> Any:
            return ["done"]

        async def okless(ctx: Any) -> Any:
            return {"done": True}

        return [action("sloppy.listy", listy), action("sloppy.okless", okless)]


class Blind:
    """Declares no ``observe``: the kit cannot see its world."""

    PLUGIN_INFO = {"owner": "blind", "contract": "^1.0"}  # noqa: RUF012 - read by the loader

    @hookimpl
    def pageant_actions(self) -> list[Any]:
        async def perform(ctx: Any) -> dict[str, Any]:
            return {"ok": True}

        return [action("blind.act", perform)]


async def broken_observe() -> dict[str, Any]:
    raise RuntimeError("the game's status page is down")


class Myopic:
    """Its action passes, but its ``observe`` raises: the kit cannot see its world."""

    PLUGIN_INFO = info("myopic", observe=broken_observe)

    @hookimpl
    def pageant_actions(self) -> list[Any]:
        async def perform(ctx: Any) -> dict[str, Any]:
            return {"ok": True}

        return [action("myopic.act", perform)]


class Doomed:
    """Its action fails its dry run, and its ``observe`` raises as well."""

    PLUGIN_INFO = info("doomed", observe=broken_observe)

    @hookimpl
    def pageant_actions(self) -> list[Any]:
        async def perform(ctx: Any) -> dict[str, Any]:
            return {"ok": False, "retry": False, "error": "no such arena"}

        return [action("doomed.act", perform)]


def counted(example: int) -> dict[str, Any]:
    """A ``count`` param bounded 1 to 50 (contract 1.3), with ``example``."""
    return {
        "name": "count",
        "type": "integer",
        "required": True,
        "description": "How many.",
        "example": example,
        "minimum": 1,
        "maximum": 50,
    }


class Ranged:
    """Its param declares bounds, and its example lies within them."""

    PLUGIN_INFO = info("ranged", contract="^1.3")

    @hookimpl
    def pageant_actions(self) -> list[Any]:
        async def perform(ctx: Any) -> dict[str, Any]:
            return {"ok": True}

        return [action("ranged.act", perform, params=[counted(4)])]


class Astray:
    """Its param's example lies outside the param's own bounds."""

    PLUGIN_INFO = info("astray", contract="^1.3")

    @hookimpl
    def pageant_actions(self) -> list[Any]:
        async def perform(ctx: Any) -> dict[str, Any]:
            return {"ok": True}

        return [action("astray.act", perform, params=[counted(0)])]


PLUGINS = {
    name.lower(): name
    for name in (
        "Careless",
        "Careful",
        "Unforgiving",
        "Scribbler",
        "Once",
        "Lamp",
        "Sticky",
        "Herald",
        "Slow",
        "Sloppy",
        "Blind",
        "Myopic",
        "Doomed",
        "Ranged",
        "Astray",
    )
}
