"""The wisps plugin, through the host's own loader and the contract's envelope reader."""

from __future__ import annotations

from datetime import UTC, datetime

import pageant_wisps
from pageant.hookspecs import ActionContext, classify
from pageant.plugins.loader import load_plugins


def ctx(key: str, **params: object) -> ActionContext:
    return ActionContext(
        params=params, idempotency_key=key, run=None, verify=False, deadline=datetime.now(UTC)
    )


def test_wisps_loads_from_its_entry_point() -> None:
    manager = load_plugins()
    record = next(r for r in manager.records if r.distribution == "pageant-wisps")
    assert record.status == "loaded", record.reason
    assert record.owner == "wisps"
    assert "wisps.summon" in manager.registry.actions
    assert manager.registry.owner_of("triggers", "wisps.caught") == "pageant-wisps[wisps]"


async def test_summon_twice_under_one_key_summons_once() -> None:
    pageant_wisps.WORLD.clear()
    first = classify(await pageant_wisps.summon(ctx("k1", colour="north", count=2)))
    again = classify(await pageant_wisps.summon(ctx("k1", colour="north", count=2)))
    assert first.ok and again.ok
    assert first.resources == again.resources
    assert len(pageant_wisps.WORLD["k1"]) == 2


async def test_dismiss_of_nothing_succeeds() -> None:
    pageant_wisps.WORLD.clear()
    answer = classify(await pageant_wisps.dismiss(ctx("never-summoned")))
    assert answer.ok


def test_cost_counts_wisps() -> None:
    assert pageant_wisps.cost({"colour": "north", "count": 4}) == {"wisps.wisps": 4}
