"""The four things a second plugin author gets wrong, each done right, each tested.

A mint that strikes coins on a game server. ``SERVER`` stands in for the game: it keeps the
coins struck under each request id, and can be told to fail.
"""

from __future__ import annotations

from typing import Any

import pytest

from pageant import hookimpl
from pageant.testing import Kit, assert_failed, assert_ok

SERVER: dict[str, Any] = {"struck": {}, "down": False}
#: What the plugin wrote down before asking the game: request id -> coins asked for.
INTENTS: dict[str, int] = {}


class GameError(Exception):
    def __init__(self, message: str, *, permanent: bool) -> None:
        super().__init__(message)
        self.permanent = permanent


async def strike_on_server(request_id: str, coins: int) -> list[str]:
    if SERVER["down"]:
        raise GameError("the mint is not answering", permanent=False)
    if coins > 100:
        raise GameError("the mint strikes at most 100 at once", permanent=True)
    # 2. The server itself does nothing twice for one request id.
    return SERVER["struck"].setdefault(request_id, [f"{request_id}-{i}" for i in range(coins)])


async def strike(ctx: Any) -> dict[str, Any]:
    coins = ctx.params["coins"]
    if ctx.verify:
        return {"ok": True}
    # 3. Record before confirming: write the intent down under the step's key first, so a
    #    crash between the game's answer and ours is found again on the retry.
    INTENTS.setdefault(ctx.idempotency_key, coins)
    try:
        # 2. Pass the step's idempotency key through as the game's request id; a key of
        #    our own per call would strike again on every retry.
        refs = await strike_on_server(ctx.idempotency_key, coins)
    except GameError as exc:
        # 1. The failure default: anything not clearly ok is retried. Say retry: false when
        #    trying again cannot help, or the host retries a hopeless call.
        return {"ok": False, "retry": not exc.permanent, "error": str(exc)}
    return {"ok": True, "resources": [{"kind": "coin", "ref": ref} for ref in refs]}


def cost(params: dict[str, Any]) -> dict[str, float]:
    # 4. Declare the whole cost: every coin counts against the budget, or a cap on
    #    mint.coins cannot stop a run that strikes a thousand.
    return {"mint.coins": params["coins"]}


class Mint:
    PLUGIN_INFO = {"owner": "mint", "contract": "^1.1"}  # noqa: RUF012 - read by the loader

    @hookimpl
    def pageant_budgets(self) -> list[dict[str, Any]]:
        return [{"dimension": "mint.coins", "label": "Coins struck", "unit": "coins"}]

    @hookimpl
    def pageant_actions(self) -> list[dict[str, Any]]:
        coins = {
            "name": "coins",
            "type": "integer",
            "required": True,
            "description": "How many coins to strike.",
            "example": 3,
        }
        return [
            {
                "id": "mint.strike",
                "label": "Strike coins",
                # Struck coins are in players' purses: they cannot be taken back, and the
                # host records them (a notify action's resources would be dropped).
                "risk": "irreversible",
                "budget_ms": 5_000,
                "params": [coins],
                "cost": cost,
                "perform": strike,
            }
        ]


@pytest.fixture
def pageant_plugins() -> list[Any]:
    SERVER.update(struck={}, down=False)
    INTENTS.clear()
    return [Mint()]


async def test_a_hopeless_call_says_so_and_a_busy_one_is_retried(pageant_kit: Kit) -> None:
    assert_failed(await pageant_kit.perform("mint.strike", {"coins": 500}), retry=False)
    SERVER["down"] = True
    assert_failed(await pageant_kit.perform("mint.strike", {"coins": 5}), retry=True)


async def test_a_retry_under_one_key_strikes_once(pageant_kit: Kit) -> None:
    first = assert_ok(await pageant_kit.perform("mint.strike", {"coins": 2}, idempotency_key="s1"))
    again = assert_ok(await pageant_kit.perform("mint.strike", {"coins": 2}, idempotency_key="s1"))
    assert first.resources == again.resources
    assert len(SERVER["struck"]) == 1


async def test_the_intent_is_written_before_the_game_is_asked(pageant_kit: Kit) -> None:
    SERVER["down"] = True
    assert_failed(await pageant_kit.perform("mint.strike", {"coins": 4}, idempotency_key="s2"))
    assert INTENTS == {"s2": 4}  # the retry will find it


def test_the_cost_counts_every_coin(pageant_kit: Kit) -> None:
    action = pageant_kit.registry.actions["mint.strike"]
    assert action.cost({"coins": 40}) == {"mint.coins": 40}
