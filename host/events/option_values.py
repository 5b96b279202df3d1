"""Params bound to an option source, checked against what the source answers now.

Run at save and at verify. An unknown value is a problem naming the param and listing what
is allowed; a source that cannot answer (down, slow, malformed) is a warning, never a
refusal and never a crash, because an author must be able to save while a game is down.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pageant.events.authoring.validator import action_steps
from pageant.plugins.options import resolve_options

if TYPE_CHECKING:
    from pageant.plugins.registry import Registry

#: At most this many allowed values are listed in a message.
SHOWN_VALUES = 20


def _allowed(values: list[Any]) -> str:
    shown = ", ".join(f'"{v}"' if isinstance(v, str) else str(v) for v in values[:SHOWN_VALUES])
    more = len(values) - SHOWN_VALUES
    return shown + (f" and {more} more" if more > 0 else "")


async def check_option_values(
    spec: Mapping[str, Any], registry: Registry
) -> tuple[list[str], list[str]]:
    """``(problems, warnings)`` for every step param bound to an option source."""
    answers: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    warnings: list[str] = []
    for path, step in action_steps(spec):
        action = registry.actions.get(step.get("action", ""))
        params = step.get("params")
        if action is None or not isinstance(params, dict):
            continue
        for param in action.params:
            if param.option_source is None or param.name not in params:
                continue
            source = registry.option_sources.get(param.option_source)
            where = f"{path}.params.{param.name}"
            if source is None:
                warnings.append(
                    f"{where}: the option source {param.option_source} is not registered; "
                    "the value was not checked"
                )
                continue
            if source.id not in answers:
                answers[source.id] = await resolve_options(source)
            answer = answers[source.id]
            if not answer["ok"]:
                warnings.append(f"{where}: not checked; {answer['reason']}")
                continue
            values = [item["value"] for item in answer["items"]]
            if params[param.name] not in values:
                problems.append(
                    f"{where}: {params[param.name]!r} is not a value of {source.id}; "
                    f"expected one of {_allowed(values)}"
                )
    return problems, warnings
