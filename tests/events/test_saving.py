"""The check a spec passes to be saved (:mod:`pageant.events.saving`), the API's and the
console's: made before the write, and made again under the write's lock only when another
save changed the working copy it was made over. Its refusals through both surfaces are in
``tests/console/test_console_save_checks.py``."""

from __future__ import annotations

from typing import Any

import pytest

from pageant.errors import Invalid
from pageant.events.authoring.validator import dormant_items, validate
from pageant.events.saving import savable_spec, still_savable
from pageant.plugins.registry import Registry
from tests.events.test_spec import (  # noqa: F401 - fixtures used by name
    registry,
    summon,
    uninstalled,
    wait,
)


def _spec(*steps: dict[str, Any]) -> dict[str, Any]:
    return {
        "schedule": {"kind": "manual"},
        "phases": [{"key": "main", "label": "Main", "steps": list(steps)}],
    }


async def test_a_step_whose_plugin_is_gone_stays_dormant_only_over_a_copy_that_had_it(
    registry: Registry,  # noqa: F811 - the fixture imported above
    uninstalled: Registry,  # noqa: F811 - the fixture imported above
) -> None:
    with_wisps = validate(_spec(wait(), summon()), registry)
    edit = {**with_wisps, "phases": [{**with_wisps["phases"][0], "label": "Muster"}]}
    checked = await savable_spec(edit, uninstalled, stored=with_wisps)
    assert dormant_items(checked) == ["spec.phases[0].steps[1]: wisps.summon"]
    # nobody saved meanwhile: the check stands as it was made
    assert still_savable(checked, uninstalled, checked_with=with_wisps, stored=with_wisps) is (
        checked
    )
    # someone saved the copy without the step meanwhile: the step is new again, and refused
    without = validate(_spec(wait()), uninstalled)
    with pytest.raises(Invalid) as refused:
        still_savable(checked, uninstalled, checked_with=with_wisps, stored=without)
    assert refused.value.details == [
        'spec.phases[0].steps[1].action: no plugin registers "wisps.summon"'
    ]
    # a copy saved meanwhile that still has the step changes nothing
    again = validate(_spec(summon()), registry)
    assert still_savable(checked, uninstalled, checked_with=with_wisps, stored=again) == checked


async def test_a_value_its_source_does_not_offer_is_refused_naming_where_it_is(
    registry: Registry,  # noqa: F811 - the fixture imported above
) -> None:
    with pytest.raises(Invalid) as refused:
        await savable_spec(_spec(summon(colour="purple")), registry, stored=None)
    assert refused.value.details == [
        "spec.phases[0].steps[0].params.colour: 'purple' is not a value of "
        'wisps.options.colours; expected one of "north", "south", "ember"'
    ]
