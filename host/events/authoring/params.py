"""Run params in the spec: their declarations (``spec.params``), the references to them and a
schedule's fan-out, checked at save. What a run does with its values is
:mod:`pageant.runs.params`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pageant.errors import Invalid
from pageant.hookspecs.models import check_literal
from pageant.runs.params import (
    FOR_EACH,
    MAX_PARAM_SETS,
    MAX_PARAM_TEXT,
    PARAM_TYPES,
    SCOPE,
    declared_types,
    is_reference,
    scope_of,
    values_for,
)
from pageant.support.refusals import bounded_list, refuse_unknown, show

if TYPE_CHECKING:
    from pageant.plugins.registry import Registry

PARAM_KEYS = ("name", "type", "label", "option_source", "default", "required")
PARAM_NAME = re.compile(r"[a-z][a-z0-9_]*")
MAX_PARAMS = 20
MAX_PARAM_NAME = 64
MAX_PARAM_LABEL = 200


def validate_declarations(raw: Any, registry: Registry, errors: list[str]) -> list[dict[str, Any]]:
    """``spec.params``, normalised (each with ``name``, ``type``, ``label``, ``required``,
    and ``default`` / ``option_source`` when given); problems appended to ``errors``."""
    path = "spec.params"
    what = "expected a list of params"
    raw = bounded_list(raw, path, errors, what, MAX_PARAMS, "params", "this spec has", empty=True)
    declared: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(raw or []):
        ppath = f"{path}[{i}]"
        if not isinstance(item, dict):
            errors.append(f"{ppath}: expected an object with name and type")
            continue
        before = len(errors)
        refuse_unknown(item, PARAM_KEYS, ppath, errors)
        name = item.get("name")
        if (
            not isinstance(name, str)
            or not PARAM_NAME.fullmatch(name)
            or len(name) > MAX_PARAM_NAME
        ):
            errors.append(
                f'{ppath}.name: expected a name such as "server" (lowercase letters, digits '
                f"and _, at most {MAX_PARAM_NAME}); got {show(name)}"
            )
            name = None
        elif name in seen:
            errors.append(f'{ppath}.name: "{name}" is already the name of {path}[{seen[name]}]')
        else:
            seen[name] = i
        type_ = item.get("type")
        if type_ not in PARAM_TYPES:
            errors.append(
                f"{ppath}.type: expected one of {', '.join(PARAM_TYPES)}; got {show(type_)}"
            )
            type_ = None
        if name == SCOPE and type_ not in (None, "string"):
            errors.append(f'{ppath}.type: "scope" is the run\'s scope, a string; got {show(type_)}')
        label = item.get("label", name)
        if not isinstance(label, str) or not label.strip() or len(label) > MAX_PARAM_LABEL:
            errors.append(
                f"{ppath}.label: expected text of 1 to {MAX_PARAM_LABEL} characters; "
                f"got {show(label)}"
            )
        required = item.get("required", False)
        if not isinstance(required, bool):
            errors.append(f"{ppath}.required: expected true or false; got {show(required)}")
        source = item.get("option_source")
        if source is not None and source not in registry.option_sources:
            errors.append(f"{ppath}.option_source: no plugin registers {show(source)}")
        param: dict[str, Any] = {"name": name, "type": type_, "label": label, "required": required}
        if source is not None:
            param["option_source"] = source
        if "default" in item and type_ is not None:
            ok, value, why = check_literal(type_, item["default"])
            if not ok:
                errors.append(f"{ppath}.default: {why}; got {show(item['default'])}")
            elif type_ == "string" and len(value) > MAX_PARAM_TEXT:
                errors.append(f"{ppath}.default: at most {MAX_PARAM_TEXT} characters")
            else:
                param["default"] = value
        if len(errors) == before:
            declared.append(param)
    return declared


def fits(param_type: str, type_: str) -> bool:
    """Whether a run param of ``param_type`` may stand where ``type_`` is taken: the same
    type, or an integer where any number is taken."""
    return param_type == type_ or (param_type == "integer" and type_ == "number")


def check_reference(
    value: dict[str, Any],
    type_: str,
    types: Mapping[str, str],
    path: str,
    errors: list[str],
    *,
    declared: Mapping[str, dict[str, Any]] | None = None,
    option_source: str | None = None,
) -> bool:
    """Check a ``{"param": name}`` against the declared params and the type it stands for;
    False (with the problem in ``errors``) when it names no param or one whose type does not
    fit (:func:`fits`).

    Where the value is taken from an option source (``option_source``: the step param's),
    the param must name that same source (``declared``: the declarations by name), or have
    a default — which :mod:`pageant.events.option_values` then checks against the source,
    as it checks a value written in the spec. Either way the value a run is started with is
    checked against the source when the run starts (:mod:`pageant.runs.options`)."""
    name = value["param"]
    if not isinstance(name, str) or name not in types:
        known = ", ".join(sorted(types))
        errors.append(f"{path}: {show(name)} is not a param of this event; it declares {known}")
        return False
    if not fits(types[name], type_):
        errors.append(f'{path}: the param "{name}" is {types[name]}; this takes {type_}')
        return False
    param = (declared or {}).get(name)
    if option_source is None or (param is not None and param.get("option_source") == option_source):
        return True
    if param is not None and "default" in param:
        return True
    errors.append(
        f'{path}: takes a value of {option_source}; the param "{name}" names another option '
        f'source or none, and has no default: declare it with "option_source": '
        f'"{option_source}"'
    )
    return False


def validate_param_sets(
    raw: Any, declarations: list[dict[str, Any]], path: str, errors: list[str]
) -> list[dict[str, Any]] | None:
    """A schedule's fan-out: a list of param sets, each checked as a run's values would be
    (and the sets told apart by the scope each makes). None when absent."""
    if raw is None:
        return None
    if isinstance(raw, dict) and raw:
        errors.append(
            f'{path}: expected a list of param sets, or {{"for_each": {{param: option '
            f"source}}}}; got {show(raw)}"
        )
        return None
    what = "expected a non-empty list of param sets"
    raw = bounded_list(raw, path, errors, what, MAX_PARAM_SETS, "param sets", "this one has")
    if raw is None:
        return None
    sets: list[dict[str, Any]] = []
    scopes: dict[str, int] = {}
    for i, item in enumerate(raw):
        try:
            values = values_for(declarations, item, f"{path}[{i}]")
        except Invalid as refused:
            errors.extend(refused.details)
            continue
        scope = scope_of(values)
        if scope in scopes:
            errors.append(f"{path}[{i}]: the same params as {path}[{scopes[scope]}]")
            continue
        scopes[scope] = i
        sets.append(values)
    return sets


def validate_for_each(
    raw: Any, declarations: list[dict[str, Any]], registry: Registry, path: str, errors: list[str]
) -> dict[str, Any] | None:
    """A fan-out over an option source, ``{"for_each": {"server": "<source id>"}}``:
    one run per value the source offers when the occurrence is expanded
    (:mod:`pageant.schedules.fan_out`). The param must be declared; the source registered,
    and the one the param declares where it declares one; every other param must have a
    default or be optional, since the source gives only the one. None (with the problem in
    ``errors``) when it does not hold; the normalised form when it does."""
    unknown = sorted(set(raw) - {FOR_EACH})
    if unknown:
        errors.append(f'{path}.{unknown[0]}: is not a known field (a fan-out says "for_each")')
        return None
    over = raw[FOR_EACH]
    where = f"{path}.{FOR_EACH}"
    if not isinstance(over, dict) or len(over) != 1:
        errors.append(
            f"{where}: expected one param and the option source it fans out over, e.g. "
            f'{{"server": "openarena.options.servers"}}; got {show(over)}'
        )
        return None
    ((name, source),) = over.items()
    where = f"{where}.{name}"
    declared = {param["name"]: param for param in declarations}
    if name not in declared:
        known = ", ".join(sorted(declared)) or "none"
        errors.append(f"{where}: not a param of this event (it declares {known})")
        return None
    if not isinstance(source, str) or source not in registry.option_sources:
        errors.append(f"{where}: expected an option source a plugin registers; got {show(source)}")
        return None
    own = declared[name].get("option_source")
    if own is not None and own != source:
        errors.append(
            f'{where}: the param "{name}" takes its values from {own}; fan out over that '
            f"source, not {source}"
        )
        return None
    for param in declarations:
        if param["name"] != name and param.get("required") and "default" not in param:
            errors.append(
                f'{where}: the param "{param["name"]}" is required and has no default, and a '
                f'fan-out over {source} gives each run only "{name}"'
            )
            return None
    return {FOR_EACH: {name: source}}


__all__ = [
    "FOR_EACH",
    "MAX_PARAMS",
    "MAX_PARAM_SETS",
    "PARAM_KEYS",
    "check_reference",
    "declared_types",
    "fits",
    "is_reference",
    "validate_declarations",
    "validate_for_each",
    "validate_param_sets",
]
