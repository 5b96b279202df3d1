"""Run params: what an event asks for when a run of it starts (``spec.params``).

An event declares its params once::

    {"params": [{"name": "server", "type": "string", "label": "Server",
                 "option_source": "arena.servers", "required": true}]}

and a run is started with values for them (``{"server": "eu-2"}``), by a person, the API or a
schedule's fan-out. The spec refers to a value as ``{"param": "server"}``: as a step's param,
as a gate condition's ``value``, and as ``{server}`` in the event's concurrency key. A
reference is checked at save against the declaration (the name is declared, the types agree),
and written out when the run reaches it — a step's params when its phase is materialised, a
gate's condition when its phase is entered — so what the engine and the emit path read is
plain values.

``scope`` is a param every event has without declaring it: a string, ``""`` unless given. A
run's scope (its place in the occurrence key, and ``{scope}`` in a concurrency key) is its
``scope`` value when it has one, and otherwise its params written out (``server=eu-2``), so
one occurrence fanned out over three servers is three runs.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from pageant.errors import Invalid
from pageant.hookspecs.models import check_literal
from pageant.support.refusals import show
from pageant.support.typedtext import read_words

#: The types a param may have: the trigger variables' (and the actions' params') types.
PARAM_TYPES = ("string", "integer", "number", "boolean")
#: The longest text value a run param may have.
MAX_PARAM_TEXT = 200
#: The most param sets one schedule fans out over (runs per occurrence).
MAX_PARAM_SETS = 1000
#: The key of a fan-out over an option source's values: ``{"for_each": {param: source}}``.
FOR_EACH = "for_each"
#: The param every event has: the run's scope.
SCOPE = "scope"
#: A run's scope is a column of 100 characters (the occurrence key).
MAX_SCOPE = 100
#: A concurrency key's placeholders: ``{server}``, ``{scope}``.
PLACEHOLDER = re.compile(r"\{([^{}]*)\}")


def is_reference(value: Any) -> bool:
    """True for ``{"param": name}``: a value written out from the run's params."""
    return isinstance(value, dict) and len(value) == 1 and "param" in value


def declared_types(declarations: list[dict[str, Any]] | None) -> dict[str, str]:
    """Each param's type by name, ``scope`` (a string) included whether declared or not."""
    types = {SCOPE: "string"}
    types.update({p["name"]: p["type"] for p in declarations or []})
    return types


def values_for(
    declarations: list[dict[str, Any]] | None, raw: Any, path: str = "params"
) -> dict[str, Any]:
    """A run's param values from what it was started with: each declared param's value,
    type-checked, or its default; ``scope`` kept when given. Raises :class:`Invalid` naming
    each undeclared name, wrong type and missing required param."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise Invalid("invalid params", details=[f"{path}: expected an object; got {show(raw)}"])
    declared = {p["name"]: p for p in declarations or []}
    errors: list[str] = []
    for name in raw:
        if name not in declared and name != SCOPE:
            names = ", ".join(sorted(declared)) or "none"
            errors.append(f"{path}.{name}: not a param of this event (it declares {names})")
    values: dict[str, Any] = {}
    for name, param in declared.items():
        if name in raw and raw[name] is not None:
            ok, value, why = check_literal(param["type"], raw[name])
            if not ok:
                errors.append(f"{path}.{name}: {why}; got {show(raw[name])}")
            elif isinstance(value, str) and len(value) > MAX_PARAM_TEXT:
                errors.append(f"{path}.{name}: at most {MAX_PARAM_TEXT} characters")
            else:
                values[name] = value
        elif "default" in param:
            values[name] = param["default"]
        elif param["required"]:
            errors.append(f"{path}.{name}: required ({param['label']})")
    if SCOPE in raw and SCOPE not in declared and raw[SCOPE] is not None:
        scope = raw[SCOPE]
        if not isinstance(scope, str) or len(scope) > MAX_SCOPE:
            errors.append(f"{path}.scope: expected text of at most {MAX_SCOPE} characters")
        elif scope:
            values[SCOPE] = scope
    if errors:
        raise Invalid("invalid params", details=errors)
    return values


def scope_of(values: Mapping[str, Any]) -> str:
    """A run's scope: its ``scope`` value, or its params written out in name order
    (``server=eu-2``); ``""`` for none. Past 100 characters it keeps its head and ends in a
    hash of the whole, so two long scopes stay apart."""
    if SCOPE in values:
        text = str(values[SCOPE])
    else:
        text = ",".join(f"{name}={_word(values[name])}" for name in sorted(values))
    if len(text) > MAX_SCOPE:
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        text = f"{text[: MAX_SCOPE - 17]}~{digest}"
    return text


def _word(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def with_scope(values: Mapping[str, Any] | None, scope: str) -> dict[str, Any]:
    """What a reference reads: the run's values, and ``scope`` as the run's scope."""
    return {**(values or {}), SCOPE: scope}


def resolve(value: Any, values: Mapping[str, Any]) -> Any:
    """``value`` with every ``{"param": name}`` in it written out from ``values``; a name
    with no value (a param declared after the run started) becomes None."""
    if is_reference(value):
        return values.get(value["param"])
    if isinstance(value, dict):
        return {k: resolve(v, values) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, values) for v in value]
    return value


def key_placeholders(template: str) -> list[str]:
    """The names a concurrency key writes in braces (``{server}``), in order."""
    return PLACEHOLDER.findall(template)


def key_problems(template: str | None, declarations: list[dict[str, Any]] | None) -> list[str]:
    """What is wrong with a concurrency key against the declared params: each placeholder
    that names no param."""
    if not template:
        return []
    types = declared_types(declarations)
    return [
        f"concurrency_key: {{{name}}} names no param of this event"
        for name in key_placeholders(template)
        if name not in types
    ]


def write_key(template: str, values: Mapping[str, Any]) -> str:
    """The concurrency key with each ``{name}`` written out from ``values``."""
    return PLACEHOLDER.sub(lambda m: _word(values.get(m.group(1), "")), template)


def values_from_text(
    declarations: list[dict[str, Any]] | None, pairs: list[str] | tuple[str, ...]
) -> dict[str, Any]:
    """Param values from ``name=value`` words (a command line's), each read as the type its
    param is declared with; a name the spec does not declare is kept as text, for
    :func:`values_for` to refuse with the same words as any start. Raises :class:`Invalid`
    naming each word it cannot read."""
    types = declared_types(declarations)
    return read_words(
        pairs,
        types,
        name="NAME",
        where=lambda key, text, kind: f"--param {key}: {text!r} is not {kind}",
        refusal="the params cannot be read",
    )
