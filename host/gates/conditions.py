"""Conditions: the typed grammar a phase gate's ``where`` is written in.

A condition is JSON. A comparison (a *leaf*) tests one of the trigger's declared variables::

    {"var": "colour", "op": "eq", "value": "north"}

and groups combine conditions: ``{"all": [...]}``, ``{"any": [...]}``, ``{"not": ...}``.

This module is the one owner of the grammar. The validator (at save, against the trigger's
declaration), the evaluator (on every firing), the renderer (the sentence the run console
shows) and the payload check (what a firing may carry) all read the same tables below, so
they cannot disagree about what an operator means or which types it takes.

Why validate at save rather than at evaluation: a predicate that silently reads a misspelt
variable is a phase that silently never advances, and the night you find out is the night of
the event. So every mistake is refused when the author saves, naming the variable or the
operator, and the evaluator can then treat anything unexpected as a near miss (``False``)
without ever raising.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from pageant.hookspecs import Trigger
from pageant.hookspecs.models import check_literal

#: Groups (``all``, ``any``, ``not``) may nest this many deep on the way to any comparison.
MAX_DEPTH = 4
#: The most conditions one ``all`` or ``any`` may hold.
MAX_LIST = 20
#: The most values an ``in`` comparison may list.
MAX_IN = 50
#: The most comparisons one condition may hold in total. Depth and list length alone would
#: still allow 20**4 comparisons, evaluated on every firing and printed on the console.
MAX_LEAVES = 100

GROUP_KEYS = ("all", "any", "not")
LEAF_KEYS = ("var", "op", "value")

_NUMBER_OPS = ("eq", "ne", "gt", "gte", "lt", "lte", "in")
#: The operators each declared variable type takes, in the order messages list them.
OPERATORS: dict[str, tuple[str, ...]] = {
    "string": ("eq", "ne", "contains", "starts_with", "in"),
    "integer": _NUMBER_OPS,
    "number": _NUMBER_OPS,
    "boolean": ("eq", "ne"),
}
ALL_OPERATORS = ("eq", "ne", "gt", "gte", "lt", "lte", "contains", "starts_with", "in")

_TYPE_WORDS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
}
_PLURAL_WORDS = {
    "string": "strings",
    "integer": "integers",
    "number": "numbers",
    "boolean": "booleans",
}
_SHOW_LIMIT = 60


def _quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _show(value: Any) -> str:
    """A value as an author would have typed it, cut short so one error stays one line."""
    try:
        shown = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        shown = repr(value)
    # Half of a surrogate pair (from bytes that are not UTF-8) is shown escaped: the message
    # itself must be text, or answering it fails.
    shown = shown.encode("utf-8", "backslashreplace").decode("utf-8")
    return shown if len(shown) <= _SHOW_LIMIT else shown[: _SHOW_LIMIT - 1] + "…"


def _check_value(type_: str, value: Any, var: str) -> tuple[bool, Any, str]:
    """``check_literal`` plus finiteness: NaN and infinity compare with nothing sensibly."""
    ok, normalised, _ = check_literal(type_, value)
    if ok and not (isinstance(normalised, float) and not math.isfinite(normalised)):
        return True, normalised, ""
    if type_ == "string" and isinstance(value, str):
        return (
            False,
            None,
            (
                f"expected text for {_quote(var)}, got {_show(value)}, which holds half of a "
                "surrogate pair alone (a byte that is not UTF-8)"
            ),
        )
    non_finite = isinstance(value, float) and not math.isfinite(value)
    expected = "a finite number" if type_ == "number" and non_finite else _TYPE_WORDS[type_]
    return False, None, f"expected {expected} for {_quote(var)}, got {_show(value)}"


# ── validation ───────────────────────────────────────────────────────────────


class _Validator:
    """One walk over a raw condition, collecting every error rather than the first."""

    def __init__(self, trigger: Trigger, params: Mapping[str, str] | None) -> None:
        self.trigger_id = trigger.id
        self.types = {v.name: v.type for v in trigger.variables}
        self.params = params or {}
        self.errors: list[str] = []
        self.leaves = 0

    def node(self, raw: Any, path: str, groups: int) -> dict[str, Any] | None:
        if not isinstance(raw, dict):
            self.errors.append(
                f"{path}: expected a condition: a comparison with "
                '"var", "op" and "value", or a group "all", "any" or "not"'
            )
            return None
        present = [k for k in GROUP_KEYS if k in raw]
        if present:
            return self.group(raw, path, groups, present)
        if not any(k in raw for k in LEAF_KEYS):
            found = ", ".join(_quote(str(k)) for k in raw) or "no keys"
            self.errors.append(
                f"{path}: expected a comparison with "
                f'"var", "op" and "value", or a group "all", "any" or "not"; found {found}'
            )
            return None
        return self.leaf(raw, path)

    def group(
        self, raw: dict[str, Any], path: str, groups: int, present: list[str]
    ) -> dict[str, Any] | None:
        if len(raw) != 1:
            found = ", ".join(_quote(str(k)) for k in raw)
            self.errors.append(
                f'{path}: a group has exactly one key, "all", "any" or "not"; found {found}'
            )
            return None
        key = present[0]
        if groups + 1 > MAX_DEPTH:
            # Not descending further keeps a hostile, very deep body from costing a
            # recursion per level; the author learns the bound, which is the fix.
            self.errors.append(
                f"{path}: groups nest at most {MAX_DEPTH} deep; "
                f"this {_quote(key)} is number {groups + 1}"
            )
            return None
        if key == "not":
            inner = self.node(raw["not"], f"{path}.not", groups + 1)
            return None if inner is None else {"not": inner}
        members = raw[key]
        if not isinstance(members, list) or not members:
            # An empty group would be always-true (all) or never-true (any): neither is
            # something an author means, and the second is a gate that never opens.
            self.errors.append(f"{path}.{key}: expected a non-empty list of conditions")
            return None
        if len(members) > MAX_LIST:
            self.errors.append(
                f"{path}.{key}: a group holds at most {MAX_LIST} conditions; found {len(members)}"
            )
        checked = [self.node(m, f"{path}.{key}[{i}]", groups + 1) for i, m in enumerate(members)]
        if any(c is None for c in checked) or len(members) > MAX_LIST:
            return None
        return {key: checked}

    def leaf(self, raw: dict[str, Any], path: str) -> dict[str, Any] | None:
        self.leaves += 1
        before = len(self.errors)
        for key in raw:
            if key not in LEAF_KEYS:
                self.errors.append(
                    f"{path}: unknown key {_quote(str(key))}; "
                    'a comparison has "var", "op" and "value"'
                )
        type_ = self.variable(raw, path)
        op = self.operator(raw, path, type_)
        value = None
        if "value" not in raw:
            self.errors.append(f'{path}: "value" is required')
        elif type_ is not None and op is not None:
            value = self.value(raw["value"], f"{path}.value", type_, op, raw["var"])
        if len(self.errors) > before:
            return None
        return {"var": raw["var"], "op": op, "value": value}

    def variable(self, raw: dict[str, Any], path: str) -> str | None:
        """The declared type of the leaf's variable, or None after recording why not."""
        if "var" not in raw:
            self.errors.append(f'{path}: "var" is required')
            return None
        var = raw["var"]
        if not isinstance(var, str):
            self.errors.append(f"{path}.var: expected a variable name, got {_show(var)}")
            return None
        if var not in self.types:
            self.errors.append(
                f"{path}.var: {_quote(var)} is not a variable of {_quote(self.trigger_id)}"
            )
            return None
        return self.types[var]

    def operator(self, raw: dict[str, Any], path: str, type_: str | None) -> str | None:
        if "op" not in raw:
            self.errors.append(f'{path}: "op" is required')
            return None
        op = raw["op"]
        allowed = OPERATORS[type_] if type_ is not None else ALL_OPERATORS
        if not isinstance(op, str) or op not in ALL_OPERATORS:
            takes = f"{_TYPE_WORDS[type_]} takes" if type_ is not None else "expected one of"
            self.errors.append(
                f"{path}.op: {_show(op)} is not an operator; {takes} {', '.join(allowed)}"
            )
            return None
        if type_ is not None and op not in allowed:
            self.errors.append(f"{path}.op: {_quote(op)} cannot be applied to {_TYPE_WORDS[type_]}")
            return None
        return op

    def value(self, raw: Any, path: str, type_: str, op: str, var: str) -> Any:
        if is_param(raw):
            return self.param(raw, path, type_, op)
        if op != "in":
            ok, value, error = _check_value(type_, raw, var)
            if not ok:
                self.errors.append(f"{path}: {error}")
            return value
        if not isinstance(raw, list) or not raw:
            self.errors.append(
                f'{path}: "in" takes a non-empty list of {_PLURAL_WORDS[type_]}, got {_show(raw)}'
            )
            return None
        if len(raw) > MAX_IN:
            self.errors.append(f'{path}: "in" takes at most {MAX_IN} values; found {len(raw)}')
        values = []
        for i, item in enumerate(raw):
            ok, value, error = _check_value(type_, item, var)
            if not ok:
                self.errors.append(f"{path}[{i}]: {error}")
            values.append(value)
        return values

    def param(self, raw: dict[str, Any], path: str, type_: str, op: str) -> Any:
        """A ``{"param": name}`` value: a run param of the variable's type, for one value."""
        name = raw["param"]
        if op == "in":
            self.errors.append(f'{path}: "in" takes a list of values, not a param')
        elif not isinstance(name, str) or name not in self.params:
            declared = ", ".join(sorted(self.params)) or "none"
            self.errors.append(
                f"{path}: {_show(name)} is not a param of this event; it declares {declared}"
            )
        elif self.params[name] != type_:
            self.errors.append(
                f'{path}: the param "{name}" is {self.params[name]}; '
                f"this comparison takes {_TYPE_WORDS[type_]}"
            )
        return {"param": name}


def is_param(value: Any) -> bool:
    """True for a condition value ``{"param": name}``: the run's param, written out when
    the gate opens (:func:`pageant.runs.params.resolve`)."""
    return isinstance(value, dict) and len(value) == 1 and "param" in value


def validate_condition(
    trigger: Trigger, raw: Any, path: str, *, params: Mapping[str, str] | None = None
) -> tuple[dict[str, Any] | None, list[str]]:
    """Check a raw condition against ``trigger``'s declared variables.

    ``raw`` of ``None`` means no condition (every firing counts) and answers ``(None, [])``.
    Otherwise answers ``(normalised, [])``, or ``(None, errors)`` listing every problem, each
    prefixed by ``path`` and the node's own path within the condition, e.g.
    ``spec.phases[0].advance.where.all[1].var: "regoin" is not a variable of "wisps.caught"``.

    The normalised form is the same grammar with the values type-checked; validating it again
    answers it unchanged. ``params`` are the event's run params by name and type: a
    comparison's ``value`` may be ``{"param": name}`` naming one of the variable's type.
    """
    if raw is None:
        return None, []
    walker = _Validator(trigger, params)
    node = walker.node(raw, path, 0)
    if walker.leaves > MAX_LEAVES:
        walker.errors.append(
            f"{path}: a condition holds at most {MAX_LEAVES} comparisons; found {walker.leaves}"
        )
    if walker.errors:
        return None, walker.errors
    return node, []


# ── payloads ─────────────────────────────────────────────────────────────────


def check_payload(
    trigger: Trigger, payload: Any, path: str = "body"
) -> tuple[dict[str, Any], list[str]]:
    """Check a firing's payload against ``trigger``'s declared variables.

    Answers ``(normalised, errors)``. A payload that is not an object is an error; a key the
    trigger does not declare is an error naming it; a value of the wrong type is an error
    naming the variable and the type it should be (``null`` is a wrong type: an emitter that
    does not know a value leaves the variable out). A declared variable left out is allowed:
    a condition naming it simply does not match. ``normalised`` holds the variables that
    checked, even when there are errors elsewhere.
    """
    if not isinstance(payload, dict):
        return {}, [f"{path}: expected an object of {_quote(trigger.id)}'s variables"]
    types = {v.name: v.type for v in trigger.variables}
    normalised: dict[str, Any] = {}
    errors: list[str] = []
    for key, value in payload.items():
        name = str(key)
        if name not in types:
            errors.append(
                f"{path}.{name}: {_quote(name)} is not a variable of {_quote(trigger.id)}"
            )
            continue
        ok, checked, error = _check_value(types[name], value, name)
        if ok:
            normalised[name] = checked
        else:
            errors.append(f"{path}.{name}: {error}")
    return normalised, errors


# ── evaluation ───────────────────────────────────────────────────────────────


def _kind(value: Any) -> str | None:
    # bool first: a bool is an int to Python, and True must never equal 1 here.
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return None


def _compare(op: str, actual: Any, expected: Any) -> bool:
    kind = _kind(expected)
    if kind is None or _kind(actual) != kind:
        return False
    if op == "eq":
        return bool(actual == expected)
    if op == "ne":
        return bool(actual != expected)
    if kind == "string":
        if op == "contains":
            return expected in actual
        if op == "starts_with":
            return actual.startswith(expected)
        return False
    if kind == "number":
        if op == "gt":
            return bool(actual > expected)
        if op == "gte":
            return bool(actual >= expected)
        if op == "lt":
            return bool(actual < expected)
        if op == "lte":
            return bool(actual <= expected)
    return False


def _evaluate(node: Any, payload: Mapping[str, Any]) -> bool:
    if not isinstance(node, dict):
        return False
    if "all" in node:
        members = node["all"]
        return isinstance(members, list) and all(_evaluate(m, payload) for m in members)
    if "any" in node:
        members = node["any"]
        return isinstance(members, list) and any(_evaluate(m, payload) for m in members)
    if "not" in node:
        return not _evaluate(node["not"], payload)
    var, op, expected = node.get("var"), node.get("op"), node.get("value")
    if not isinstance(var, str) or not isinstance(op, str) or var not in payload:
        return False
    actual = payload[var]
    if op == "in":
        return isinstance(expected, list) and any(_compare("eq", actual, e) for e in expected)
    return _compare(op, actual, expected)


def evaluate(condition: dict[str, Any] | None, payload: Any) -> bool:
    """Whether a firing's payload satisfies a (validated) condition.

    ``None`` is satisfied by every firing. A comparison matches only when its variable is in
    the payload with a value of the comparison's type; a missing variable or a value of
    another type is a near miss (``False``), never an exception, so ``ne`` does not match a
    missing variable but ``not (… eq …)`` does. Strings compare case-sensitively. Never
    raises on any payload; a payload that is not an object has no variables.
    """
    if condition is None:
        return True
    return _evaluate(condition, payload if isinstance(payload, Mapping) else {})


# ── rendering ────────────────────────────────────────────────────────────────


def _literal(value: Any) -> str:
    if isinstance(value, list):
        return "(" + ", ".join(_literal(v) for v in value) + ")"
    return json.dumps(value, ensure_ascii=False)


def _render(node: dict[str, Any], nested: bool) -> str:
    for key, joiner in (("all", " and "), ("any", " or ")):
        if key in node:
            text = joiner.join(_render(m, True) for m in node[key])
            return f"({text})" if nested else text
    if "not" in node:
        return f"not ({_render(node['not'], False)})"
    return f"{node['var']} {node['op']} {_literal(node['value'])}"


def render(condition: dict[str, Any] | None) -> str:
    """The sentence the run console shows for a validated condition.

    ``location contains "Yew"``; ``colour in ("north", "south")``; ``all`` joins with
    ``and``, ``any`` with ``or``, a group inside another in parentheses, and ``not`` as
    ``not (…)``. ``None`` (every firing counts) renders as the empty string, so a caller
    writes ``waiting on <trigger>`` and adds `` where <sentence>`` only when there is one.
    """
    if condition is None:
        return ""
    return _render(condition, False)


# ── what a condition names ───────────────────────────────────────────────────


def variables_named(condition: dict[str, Any] | None) -> set[str]:
    """The variables a condition names: the only ones ever stored from a payload."""
    names: set[str] = set()
    stack: list[Any] = [condition]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        for key in ("all", "any"):
            if isinstance(node.get(key), list):
                stack.extend(node[key])
        if "not" in node:
            stack.append(node["not"])
        if isinstance(node.get("var"), str):
            names.add(node["var"])
    return names


def named_values(condition: dict[str, Any] | None, payload: Any) -> dict[str, Any]:
    """The part of a payload worth keeping beside a gate: only the variables it names.

    A game's payload can carry far more than a gate tests (serials, names, positions); the
    gate row is read onto an admin screen, so it keeps only what explains the decision.
    """
    if not isinstance(payload, Mapping):
        return {}
    return {name: payload[name] for name in sorted(variables_named(condition)) if name in payload}
