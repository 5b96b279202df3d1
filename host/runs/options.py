"""A run's param values checked against the option sources they are taken from, when the
run starts.

At save the spec's references (``{"param": "server"}``) were checked against the params'
declarations, never against a source's values: a server named by a run is only known when
the run starts. So a start — a person's (``POST .../runs``) or a schedule's fan-out at its
occurrence — checks each value it was given against

- the option source its param declares, and
- the option source of each step param that takes it (``{"param": name}``),

as the sources answer **now**: a server removed from the settings since the event was
published refuses that run, with a sentence naming the value and the source, and no other.
A source that cannot answer (down, slow, malformed) refuses nothing: the start goes ahead
unchecked and the reason is answered as a warning, as at save.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pageant.plugins.options import resolve_options
from pageant.runs.params import SCOPE, is_reference

if TYPE_CHECKING:
    from pageant.plugins.registry import Registry

log = logging.getLogger("pageant.runs")

#: At most this many allowed values are listed in a message.
SHOWN_VALUES = 20

__all__ = [
    "SHOWN_VALUES",
    "Answers",
    "allowed",
    "check_run_values",
    "is_reference",
    "takes_option_values",
]


def allowed(values: list[Any]) -> str:
    """The values a source offers, as a message lists them (the first :data:`SHOWN_VALUES`)."""
    shown = ", ".join(f'"{v}"' if isinstance(v, str) else str(v) for v in values[:SHOWN_VALUES])
    more = len(values) - SHOWN_VALUES
    return shown + (f" and {more} more" if more > 0 else "")


class Answers:
    """Each option source's answer, asked once however many values are checked against it."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._answers: dict[str, dict[str, Any]] = {}

    async def of(self, source_id: str) -> dict[str, Any] | None:
        """``{ok, items | reason}`` for ``source_id``; None when nobody registers it."""
        source = self.registry.option_sources.get(source_id)
        if source is None:
            return None
        if source_id not in self._answers:
            self._answers[source_id] = await resolve_options(source)
        return self._answers[source_id]


def _sources_by_param(
    spec: Mapping[str, Any], registry: Registry
) -> dict[str, list[tuple[str, str]]]:
    """For each run param: the option sources its value must be in, each with what takes
    it from there (``the param "server"`` or ``spec.phases[0].steps[1].params.server``)."""
    wanted: dict[str, list[tuple[str, str]]] = {}

    def want(name: str, source: str, because: str) -> None:
        sources = wanted.setdefault(name, [])
        if all(source != known for known, _ in sources):
            sources.append((source, because))

    for param in spec.get("params") or []:
        if isinstance(param, dict) and param.get("option_source"):
            want(param["name"], param["option_source"], f'the param "{param["name"]}"')
    phases = spec.get("phases")
    for i, phase in enumerate(phases if isinstance(phases, list) else []):
        steps = phase.get("steps") if isinstance(phase, dict) else None
        for j, step in enumerate(steps if isinstance(steps, list) else []):
            if not isinstance(step, dict) or not isinstance(step.get("params"), dict):
                continue
            action = registry.actions.get(step.get("action", ""))
            if action is None:
                continue
            for declared in action.params:
                value = step["params"].get(declared.name)
                if declared.option_source and is_reference(value):
                    where = f"spec.phases[{i}].steps[{j}].params.{declared.name}"
                    want(str(value["param"]), declared.option_source, where)
    return wanted


def takes_option_values(
    spec: Mapping[str, Any], values: Mapping[str, Any], registry: Registry
) -> bool:
    """Whether a run of ``spec`` with ``values`` has a value to check against an option
    source (:func:`check_run_values`): read from the spec alone, asking no plugin."""
    return any(
        name in values and not (name == SCOPE and not values[name])
        for name in _sources_by_param(spec, registry)
    )


async def check_run_values(
    spec: Mapping[str, Any],
    values: Mapping[str, Any],
    registry: Registry,
    answers: Answers | None = None,
) -> tuple[list[str], list[str]]:
    """``(problems, warnings)`` for a run of ``spec`` started with ``values`` (its checked
    params, :func:`pageant.runs.params.values_for`; ``scope`` among them when given).

    A problem reads ``params.server: "arena3" is not a value of openarena.options.servers
    (the servers it offers now: "arena1", "arena2"), which the param "server" takes``.
    A param with no value (optional, no default) is not checked. ``answers`` (given when
    many runs' values are checked together) asks each source once for them all."""
    answers = answers if answers is not None else Answers(registry)
    problems: list[str] = []
    warnings: list[str] = []
    for name, sources in _sources_by_param(spec, registry).items():
        if name not in values or (name == SCOPE and not values[name]):
            continue
        value = values[name]
        for source_id, because in sources:
            answer = await answers.of(source_id)
            if answer is None:
                warnings.append(
                    f"params.{name}: not checked; the option source {source_id} is not registered"
                )
            elif not answer["ok"]:
                warnings.append(f"params.{name}: not checked; {answer['reason']}")
            else:
                offered = [item["value"] for item in answer["items"]]
                if value not in offered:
                    shown = f'"{value}"' if isinstance(value, str) else str(value)
                    problems.append(
                        f"params.{name}: {shown} is not a value of {source_id} (it offers "
                        f"{allowed(offered) or 'none'} now), which {because} takes"
                    )
                    break
    for warning in warnings:
        log.warning("starting a run: %s", warning)
    return problems, warnings
