"""The zone of each param set of a fan-out with ``"stagger": "local"``, read from the option
sources when a spec is saved.

``"local"`` starts each set's runs at the schedule's wall time in the set's own zone: a
server's, as its option source gives it (an item's ``zone``, contract 1.4). The schedule's
reconciliation runs inside a database transaction and never asks a plugin, so the zones are
asked here, where a save already asks the option sources outside its transaction
(:mod:`pageant.events.saving`), and kept with the spec as ``schedule.zones``
(``{"server=eu-1": "Europe/Berlin"}``). A version takes them with the rest of the spec, so a
republish of the same working copy keeps the same zones; a server's new zone is read at the
next save.

A set is given the zone of the first of its values (in the spec's order of params) whose
source gives one; a set none gives a zone to keeps the event's. A source that cannot answer
refuses nothing (an author must be able to save while a game is down): its sets keep the
zones the working copy was saved with before. A fan-out whose sources answered and gave no
zone at all is refused: ``"local"`` would mean nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pageant.errors import Invalid
from pageant.events.authoring.subscriptions import zoned_params
from pageant.runs.options import Answers
from pageant.runs.params import scope_of
from pageant.schedules.stagger import is_local

if TYPE_CHECKING:
    from pageant.plugins.registry import Registry

__all__ = ["with_zones"]

log = logging.getLogger("pageant.events")


async def with_zones(
    spec: dict[str, Any], registry: Registry, *, stored: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """``spec`` (validated) with its schedule's ``zones`` read from the option sources now;
    ``spec`` itself when its schedule is not ``"local"``. A set whose source cannot answer
    keeps its zone in ``stored`` (the working copy saved before), if it had one. Raises
    ``Invalid`` naming ``spec.schedule.stagger`` when every source answered and none gave a
    zone."""
    schedule = spec.get("schedule")
    if not isinstance(schedule, dict) or not is_local(schedule):
        return spec
    sets: list[dict[str, Any]] = schedule.get("params") or []
    declared = [p for p in spec.get("params") or [] if isinstance(p, dict)]
    names = zoned_params(sets, declared)
    sources = {p["name"]: p["option_source"] for p in declared if p["name"] in names}
    answers = Answers(registry)
    items_of: dict[str, dict[Any, str]] = {}  # source -> value -> zone, for those that answered
    silent: set[str] = set()  # sources that could not answer
    for source_id in dict.fromkeys(sources.values()):
        answer = await answers.of(source_id)
        if answer is None or not answer["ok"]:
            why = "it is not registered" if answer is None else answer["reason"]
            log.warning("saving event: zones of %s not read; %s", source_id, why)
            silent.add(source_id)
            continue
        items_of[source_id] = {
            item["value"]: item["zone"] for item in answer["items"] if item.get("zone")
        }
    if not silent and not any(items_of.values()):
        raise Invalid(
            "invalid spec",
            details=[
                'spec.schedule.stagger: "local" starts each param set at the schedule\'s '
                "time in the zone its option source gives it; "
                f"{_listed(sorted(items_of))}"
            ],
        )
    kept = _saved_zones(stored)
    zones: dict[str, str] = {}
    for values in sets:
        scope = scope_of(values)
        zone = _zone_of(values, names, sources, items_of)
        if zone is None and any(sources[name] in silent for name in names if name in values):
            zone = kept.get(scope)
        if zone is not None:
            zones[scope] = zone
    out = {key: value for key, value in schedule.items() if key != "zones"}
    if zones:
        out["zones"] = zones
    return {**spec, "schedule": out}


def _saved_zones(stored: Mapping[str, Any] | None) -> Mapping[str, str]:
    schedule = stored.get("schedule") if isinstance(stored, Mapping) else None
    saved = schedule.get("zones") if isinstance(schedule, Mapping) else None
    return saved if isinstance(saved, Mapping) else {}


def _zone_of(
    values: Mapping[str, Any],
    names: list[str],
    sources: Mapping[str, str],
    items_of: Mapping[str, Mapping[Any, str]],
) -> str | None:
    """The zone of the first of a set's values whose source gives one."""
    for name in names:
        if name in values:
            zone = items_of.get(sources[name], {}).get(values[name])
            if zone:
                return zone
    return None


def _listed(source_ids: list[str]) -> str:
    if len(source_ids) == 1:
        return f"the option source {source_ids[0]} gives no zone for any of its values"
    return f"the option sources {', '.join(source_ids)} give no zone for any of their values"
