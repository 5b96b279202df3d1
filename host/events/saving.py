"""What a spec must pass to be saved as an event's working copy: the one check behind the
API's create and edit (``POST`` and ``PUT /api/v1/admin/events``) and the console editor's
Save, so a spec one surface refuses the other refuses too, in the same sentences.

The check asks plugins' option sources for their values, each bounded by its resolve
timeout, so a surface makes it *before* its write transaction: on SQLite that transaction
holds the file's write lock, and a slow game would stall every writer (the engine's too)
while its option source is asked. The write then only confirms that the stored spec the
check was made against is still the stored one (:func:`still_savable`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from pageant.errors import Invalid
from pageant.events.authoring import validator as specs
from pageant.events.option_values import check_option_values
from pageant.events.zones import with_zones

if TYPE_CHECKING:
    from pageant.plugins.registry import Registry

__all__ = ["savable_spec", "still_savable"]

log = logging.getLogger("pageant.events")


async def savable_spec(
    raw: Any, registry: Registry, *, stored: dict[str, Any] | None
) -> dict[str, Any]:
    """The normalised spec ``raw`` is saved as, over the working copy ``stored`` (``None``
    for a new event).

    Checks the spec against the registry (:func:`pageant.events.authoring.validator.validate`,
    which takes ``stored`` to keep a step whose plugin is gone as dormant), then every value
    written where an option source's value is taken against what the source answers now
    (:func:`pageant.events.option_values.check_option_values`). A source that cannot answer
    is logged as a warning and does not refuse the save (an author must be able to save
    while a game is down). A fan-out with ``"stagger": "local"`` is given each param set's
    zone from the sources (:func:`pageant.events.zones.with_zones`).

    Raises ``Invalid("invalid spec", details=[...])`` naming every problem with its path
    (``spec.phases[0].steps[0].params.colour: 'purple' is not a value of
    wisps.options.colours; expected one of "north", ...``). Writes nothing; call it outside
    a write transaction.
    """
    spec = specs.validate(raw, registry, stored=stored)
    unknown, unchecked = await check_option_values(spec, registry)
    for warning in unchecked:
        log.warning("saving event: %s", warning)
    if unknown:
        raise Invalid("invalid spec", details=unknown)
    return await with_zones(spec, registry, stored=stored)


def still_savable(
    spec: dict[str, Any],
    registry: Registry,
    *,
    checked_with: dict[str, Any] | None,
    stored: dict[str, Any] | None,
) -> dict[str, Any]:
    """``spec`` (an answer of :func:`savable_spec` made over ``checked_with``) as it is
    saved over ``stored``, the working copy read under the write's lock.

    When another save came between the check and the write, the registry checks are made
    again over the new working copy (which steps may stay dormant depends on it); the
    option values do not depend on it and are not asked again. Raises ``Invalid`` as
    :func:`savable_spec` does.
    """
    if stored == checked_with:
        return spec
    return specs.validate(spec, registry, stored=stored)
