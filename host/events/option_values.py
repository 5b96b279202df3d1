"""Values bound to an option source, checked against what the source answers now.

Run at save and at verify. What is checked is every value the spec writes out where an
option source's value is taken: a step param's literal value, a run param's default (against
its own source, and against the source of each step param that takes it), and each param set
of a schedule's fan-out. A step param written as ``{"param": name}`` is not a value: it was
checked against the param's declaration by the validator
(:func:`pageant.events.authoring.params.check_reference`), and the value a run is started
with is checked when it starts (:mod:`pageant.runs.options`).

An unknown value is a problem naming where it is written and listing what is allowed; a
source that cannot answer (down, slow, malformed) is a warning, never a refusal and never a
crash, because an author must be able to save while a game is down.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pageant.events.authoring.validator import action_steps
from pageant.runs.options import SHOWN_VALUES, Answers, allowed, is_reference

if TYPE_CHECKING:
    from pageant.plugins.registry import Registry

__all__ = ["SHOWN_VALUES", "check_option_values"]


async def check_option_values(
    spec: Mapping[str, Any], registry: Registry
) -> tuple[list[str], list[str]]:
    """``(problems, warnings)`` for every value the spec writes where an option source's
    value is taken."""
    answers = Answers(registry)
    declared = {
        param["name"]: (i, param)
        for i, param in enumerate(spec.get("params") or [])
        if isinstance(param, dict) and isinstance(param.get("name"), str)
    }
    # (where, value, source id): each value written in the spec and the source it must be in.
    wanted: list[tuple[str, Any, str]] = []
    for i, declaration in declared.values():
        source = declaration.get("option_source")
        if source and "default" in declaration:
            wanted.append((f"spec.params[{i}].default", declaration["default"], source))
    schedule = spec.get("schedule")
    sets = schedule.get("params") if isinstance(schedule, dict) else None
    for k, values in enumerate(sets if isinstance(sets, list) else []):
        for name, value in (values if isinstance(values, dict) else {}).items():
            taken_from = declared.get(name, (0, {}))[1].get("option_source")
            if taken_from:
                wanted.append((f"spec.schedule.params[{k}].{name}", value, taken_from))
    defaults_checked: set[tuple[str, str]] = set()
    for path, step in action_steps(spec):
        action = registry.actions.get(step.get("action", ""))
        params = step.get("params")
        if action is None or not isinstance(params, dict):
            continue
        for param in action.params:
            if param.option_source is None or param.name not in params:
                continue
            value = params[param.name]
            if not is_reference(value):
                wanted.append((f"{path}.params.{param.name}", value, param.option_source))
                continue
            # A param naming another source (or none) was let through the validator on its
            # default: that default is what this step takes unless a run says otherwise.
            ref = declared.get(value.get("param"))
            if ref is None or ref[1].get("option_source") == param.option_source:
                continue
            pair = (ref[1]["name"], param.option_source)
            if "default" in ref[1] and pair not in defaults_checked:
                defaults_checked.add(pair)
                wanted.append(
                    (f"spec.params[{ref[0]}].default", ref[1]["default"], param.option_source)
                )
    problems: list[str] = []
    warnings: list[str] = []
    for where, value, source_id in wanted:
        answer = await answers.of(source_id)
        if answer is None:
            warnings.append(
                f"{where}: the option source {source_id} is not registered; "
                "the value was not checked"
            )
        elif not answer["ok"]:
            warnings.append(f"{where}: not checked; {answer['reason']}")
        else:
            values = [item["value"] for item in answer["items"]]
            if value not in values:
                problems.append(
                    f"{where}: {value!r} is not a value of {source_id}; "
                    f"expected one of {allowed(values)}"
                )
    return problems, warnings
