"""The wisps plugin, tested with pageant.testing alone: a real host over a throwaway SQLite
database, the plugin loaded from its installed entry point."""

from __future__ import annotations

import pytest

from pageant.testing import Kit, assert_failed, assert_log_kinds, assert_ok
from pageant_wisps import WORLD

SUMMON = {"colour": "north", "count": 2}


@pytest.fixture
def pageant_plugins() -> list[str]:
    return ["pageant-wisps"]


def test_wisps_loads_from_its_entry_point(pageant_kit: Kit) -> None:
    assert pageant_kit.refused() == {}
    assert "wisps.summon" in pageant_kit.registry.actions
    assert pageant_kit.registry.owner_of("triggers", "wisps.caught") == "pageant-wisps[wisps]"


async def test_summon_twice_under_one_key_summons_once(pageant_kit: Kit) -> None:
    first = assert_ok(await pageant_kit.perform("wisps.summon", SUMMON, idempotency_key="k1"))
    again = assert_ok(await pageant_kit.perform("wisps.summon", SUMMON, idempotency_key="k1"))
    assert len(first.resources) == 2
    assert first.resources == again.resources


async def test_an_unknown_colour_fails_for_good(pageant_kit: Kit) -> None:
    answer = await pageant_kit.perform("wisps.summon", {"colour": "teal", "count": 1})
    assert_failed(answer, retry=False, error="no such colour")


async def test_dismiss_of_nothing_succeeds(pageant_kit: Kit) -> None:
    assert_ok(await pageant_kit.perform("wisps.summon", SUMMON, revert=True))


async def test_a_summon_after_its_dismiss_summons_nothing(pageant_kit: Kit) -> None:
    await pageant_kit.perform_after_revert("wisps.summon", SUMMON, idempotency_key="late")
    assert "late" not in WORLD


async def test_the_colours_are_the_option_values(pageant_kit: Kit) -> None:
    values = [item["value"] for item in await pageant_kit.resolve("wisps.options.colours")]
    assert values == ["north", "south", "ember"]


async def test_two_northern_catches_open_the_muster(pageant_kit: Kit) -> None:
    event = {
        "phases": [
            {
                "key": "muster",
                "label": "Muster",
                "steps": [
                    {"action": "core.announce", "params": {"leg": "core.log", "message": "Go"}}
                ],
                "advance": {
                    "on": "wisps.caught",
                    "where": {"var": "colour", "op": "eq", "value": "north"},
                    "count": 2,
                },
            },
            {
                "key": "done",
                "label": "Done",
                "steps": [{"action": "core.wait", "params": {"seconds": 5}}],
            },
        ]
    }
    caught = ("wisps.caught", {"colour": "north", "weight": 1.5})
    console = await pageant_kit.run_to_completion(event, firings=[caught, caught])
    assert console["run"]["status"] == "completed"
    assert_log_kinds(
        console,
        [
            "condition.evaluated",
            "condition.evaluated",
            "phase.gate",
            "phase.advanced",
            "run.status",
        ],
    )
