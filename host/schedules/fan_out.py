"""A schedule's fan-out: the param sets each occurrence makes one run of.

A fan-out is written in the spec as a list of sets, or as the values of an option source,
``"params": {"for_each": {"server": "openarena.options.servers"}}``: one run per server the
settings hold, so a server added to the settings is added to every event that fans out over
servers, and a server taken out is taken out of them.

The source is a plugin's call (bounded in time, :func:`pageant.plugins.options.resolve_options`),
so it is asked before the expansion's transaction and never inside one, and never by a
publish (whose transaction holds the definition's row): a publish keeps the sets its
scheduled runs already have and leaves the first read to the engine's next tick. The values
are read again at every expansion of the event, and at least every :data:`REFRESH`, so a
change of the settings reaches the runs within minutes: a new value's runs are made, and a
value gone from the source has its scheduled runs superseded, with the reason on their log
line.

A source that cannot be read at expansion (its game down, too slow, not registered any
more) drops nothing: the expansion keeps the **last known values** — the param sets of the
runs the fan-out has scheduled — so each of those goes on getting its runs, nothing is
superseded, and a WARNING names the event, the source and the reason. (A source that
answers with no values at all is read as it answers: no runs.)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from pageant.errors import Invalid
from pageant.plugins.options import resolve_options
from pageant.runs import params as run_params
from pageant.runs.params import FOR_EACH, MAX_PARAM_SETS

if TYPE_CHECKING:
    from pageant.plugins.registry import Registry

log = logging.getLogger("pageant.engine")

#: How long the values of a fan-out over an option source are kept before the expansion
#: reads them again (the event's ``expanded_until`` is never later than the horizon plus this).
REFRESH = timedelta(minutes=5)

__all__ = ["REFRESH", "Read", "for_each_of", "listed_sets", "read_sets"]


def for_each_of(schedule: Any) -> tuple[str, str] | None:
    """``(param, option source)`` of a fan-out over a source's values; None for any other
    schedule."""
    over = schedule.get("params") if isinstance(schedule, Mapping) else None
    if not isinstance(over, Mapping) or not isinstance(over.get(FOR_EACH), Mapping):
        return None
    for name, source in over[FOR_EACH].items():
        return str(name), str(source)
    return None


def listed_sets(schedule: Any) -> list[dict[str, Any]]:
    """The param sets a schedule writes out (``[{}]``, one run an occurrence, where it writes
    none, and where it fans out over a source, whose values only the expansion reads)."""
    sets = schedule.get("params") if isinstance(schedule, Mapping) else None
    return [dict(s) for s in sets if isinstance(s, Mapping)] if isinstance(sets, list) else [{}]


@dataclass(frozen=True)
class Read:
    """What a source offered for a fan-out: the param sets (None when it could not be read:
    the expansion keeps the last known ones), and what it goes on (the source, and the reason
    it could not be read)."""

    sets: list[dict[str, Any]] | None
    source: str
    reason: str | None = None

    def gone_because(self, scope: str) -> str:
        """The reason the scheduled runs of ``scope`` (a set's) are superseded: its value
        left the source."""
        return f"the run's set ({scope}) is no longer among the values of {self.source}"


async def read_sets(
    spec: Mapping[str, Any], registry: Registry | None, *, event: int
) -> Read | None:
    """The param sets of a fan-out over an option source, read from the source now; None for
    a schedule that does not fan out over one. Asks the plugin: call it outside any
    transaction.

    Each value is checked as a run's would be (:func:`pageant.runs.params.values_for`: the
    param's type, the other params' defaults); one that does not fit is left out and logged,
    as are values past :data:`pageant.runs.params.MAX_PARAM_SETS`."""
    over = for_each_of(spec.get("schedule"))
    if over is None:
        return None
    name, source_id = over
    source = registry.option_sources.get(source_id) if registry is not None else None
    if source is None:
        return _unread(event, source_id, f"no plugin registers {source_id} now")
    answer = await resolve_options(source)
    if not answer["ok"]:
        return _unread(event, source_id, str(answer["reason"]))
    declarations = spec.get("params") or []
    sets: list[dict[str, Any]] = []
    scopes: set[str] = set()
    for item in answer["items"]:
        try:
            values = run_params.values_for(declarations, {name: item["value"]})
        except Invalid as refused:
            log.warning("event %s: %s; no run for it", event, "; ".join(refused.details))
            continue
        scope = run_params.scope_of(values)
        if scope not in scopes:
            scopes.add(scope)
            sets.append(values)
    if len(sets) > MAX_PARAM_SETS:
        log.warning(
            "event %s: %s offers %d values; the fan-out takes the first %d",
            event,
            source_id,
            len(sets),
            MAX_PARAM_SETS,
        )
        sets = sets[:MAX_PARAM_SETS]
    return Read(sets, source_id)


def _unread(event: int, source_id: str, reason: str) -> Read:
    log.warning(
        "event %s fans out over %s, which could not be read (%s); it keeps its last known values",
        event,
        source_id,
        reason,
    )
    return Read(None, source_id, reason)
