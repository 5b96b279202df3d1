"""mint: a slow game that drops coins, once on contract 1.1 and once on 1.2.

``<owner>.coins.drop {count}`` hands the game a command and waits for its answer; the game
applies it only when the test lets it (:data:`GAME`'s ``release``), so a perform cut off by
its budget lands later, after the host has given the step back. ``OldMint`` (``^1.1``)
reverts what the key made so far and nothing more; ``Mint`` (``^1.2``) makes its revert final
for the key: the game refuses a command whose key was reverted, however late it arrives.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from pageant import hookimpl


@dataclass
class Game:
    """The world both mints drop coins into: coin -> the key that made it."""

    coins: dict[str, str] = field(default_factory=dict)
    #: The keys a revert made final (only ``Mint``'s reverts say so).
    refused: set[str] = field(default_factory=set)
    #: Set by the test: the game applies the commands it is holding.
    release: asyncio.Event | None = None
    made: int = 0

    async def apply(self, key: str, count: int) -> None:
        if self.release is None:
            self.release = asyncio.Event()
        await self.release.wait()
        if key in self.refused:
            return
        for _ in range(count):
            self.made += 1
            self.coins[f"coin-{self.made}"] = key


GAME = Game()
#: The commands the game is holding, kept so none is garbage-collected mid-flight.
IN_FLIGHT: set[asyncio.Task[None]] = set()


class OldMint:
    """Contract 1.1: its revert takes back what the key made so far."""

    PLUGIN_INFO = {"owner": "oldmint", "contract": "^1.1"}  # noqa: RUF012 - read by the loader
    final = False

    async def drop(self, ctx: Any) -> dict[str, Any]:
        if ctx.verify:
            return {"ok": True}
        # The command leaves for the game; its answer comes when the game applies it.
        command = asyncio.get_running_loop().create_task(
            GAME.apply(ctx.idempotency_key, ctx.params["count"])
        )
        IN_FLIGHT.add(command)
        command.add_done_callback(IN_FLIGHT.discard)
        await asyncio.shield(command)
        made = [
            {"kind": "coin", "ref": c} for c, k in GAME.coins.items() if k == ctx.idempotency_key
        ]
        return {"ok": True, "resources": made}

    async def pick_up(self, ctx: Any) -> dict[str, Any]:
        if self.final:
            GAME.refused.add(ctx.idempotency_key)
        for res in ctx.resources:
            GAME.coins.pop(res.ref, None)
        if not ctx.resources:
            for coin in [c for c, k in GAME.coins.items() if k == ctx.idempotency_key]:
                del GAME.coins[coin]
        return {"ok": True}

    @hookimpl
    def pageant_actions(self) -> list[dict[str, Any]]:
        owner = self.PLUGIN_INFO["owner"]
        return [
            {
                "id": f"{owner}.coins.drop",
                "label": "Drop coins",
                "risk": "change",
                "reversible": "full",
                "budget_ms": 300,
                "params": [
                    {
                        "name": "count",
                        "type": "integer",
                        "required": True,
                        "description": "How many coins.",
                        "example": 2,
                    }
                ],
                "perform": self.drop,
                "revert": self.pick_up,
            }
        ]


class Mint(OldMint):
    """Contract 1.2: a revert is final for its key."""

    PLUGIN_INFO = {"owner": "mint", "contract": "^1.2"}  # noqa: RUF012 - read by the loader
    final = True
