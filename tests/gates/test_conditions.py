"""Conditions: the gate grammar's validator, evaluator, renderer and payload check agree."""

from __future__ import annotations

import math
import random
import re
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from pageant.gates.conditions import (
    MAX_DEPTH,
    MAX_IN,
    MAX_LEAVES,
    MAX_LIST,
    OPERATORS,
    check_payload,
    evaluate,
    named_values,
    render,
    validate_condition,
    variables_named,
)
from pageant.hookspecs import Trigger, TriggerVariable
from pageant.plugins.loader import load_plugins

WHERE = "spec.phases[0].advance.where"

#: A trigger declaring one variable of every type the grammar knows.
TYPED = Trigger(
    id="test.typed",
    label="Every type",
    variables=[
        TriggerVariable(name="name", type="string", description="A name.", example="a"),
        TriggerVariable(name="count", type="integer", description="A count.", example=1),
        TriggerVariable(name="weight", type="number", description="A weight.", example=1.5),
        TriggerVariable(name="alive", type="boolean", description="A flag.", example=True),
    ],
)


@pytest.fixture(scope="module")
def wisps() -> Trigger:
    """The wisps plugin's trigger, loaded through the real pipeline."""
    return load_plugins().registry.triggers["wisps.caught"]


def leaf(var: str, op: str, value: Any) -> dict[str, Any]:
    return {"var": var, "op": op, "value": value}


def valid(trigger: Trigger, raw: Any) -> dict[str, Any]:
    normalised, errors = validate_condition(trigger, raw, WHERE)
    assert errors == []
    assert normalised is not None
    return normalised


def refused(trigger: Trigger, raw: Any) -> list[str]:
    normalised, errors = validate_condition(trigger, raw, WHERE)
    assert normalised is None
    assert errors
    return errors


def nested(depth: int) -> dict[str, Any]:
    """A condition whose comparison sits inside ``depth`` groups, cycling all/any/not."""
    node: dict[str, Any] = leaf("colour", "eq", "north")
    for level in range(depth):
        kind = ("all", "any", "not")[level % 3]
        node = {"not": node} if kind == "not" else {kind: [node]}
    return node


# ── no condition ─────────────────────────────────────────────────────────────


def test_no_condition_is_valid_matches_everything_and_renders_empty(wisps: Trigger) -> None:
    assert validate_condition(wisps, None, WHERE) == (None, [])
    assert evaluate(None, {}) is True
    assert evaluate(None, "not even a dict") is True
    assert render(None) == ""
    assert variables_named(None) == set()


# ── grammar errors ───────────────────────────────────────────────────────────


def test_unknown_variable_is_named_with_the_trigger(wisps: Trigger) -> None:
    errors = refused(
        wisps,
        {"all": [leaf("colour", "eq", "north"), leaf("regoin", "eq", "Yew")]},
    )
    assert errors == [f'{WHERE}.all[1].var: "regoin" is not a variable of "wisps.caught"']


def test_operator_of_another_type_is_named_with_the_type(wisps: Trigger) -> None:
    assert refused(wisps, leaf("colour", "gt", "north")) == [
        f'{WHERE}.op: "gt" cannot be applied to a string'
    ]
    assert refused(wisps, leaf("weight", "contains", "1")) == [
        f'{WHERE}.op: "contains" cannot be applied to a number'
    ]
    assert refused(TYPED, leaf("count", "starts_with", "1")) == [
        f'{WHERE}.op: "starts_with" cannot be applied to an integer'
    ]
    assert refused(TYPED, leaf("alive", "in", [True])) == [
        f'{WHERE}.op: "in" cannot be applied to a boolean'
    ]
    assert refused(TYPED, leaf("alive", "lt", True)) == [
        f'{WHERE}.op: "lt" cannot be applied to a boolean'
    ]


def test_unknown_operator_lists_what_the_type_takes(wisps: Trigger) -> None:
    assert refused(wisps, leaf("colour", "like", "n%")) == [
        f'{WHERE}.op: "like" is not an operator; a string takes eq, ne, contains, starts_with, in'
    ]
    assert refused(wisps, leaf("weight", 3, 1)) == [
        f"{WHERE}.op: 3 is not an operator; a number takes eq, ne, gt, gte, lt, lte, in"
    ]


def test_unknown_variable_and_unknown_operator_are_both_reported(wisps: Trigger) -> None:
    errors = refused(wisps, leaf("regoin", "between", 1))
    assert errors == [
        f'{WHERE}.var: "regoin" is not a variable of "wisps.caught"',
        f'{WHERE}.op: "between" is not an operator; expected one of '
        "eq, ne, gt, gte, lt, lte, contains, starts_with, in",
    ]


def test_a_comparison_needs_var_op_and_value(wisps: Trigger) -> None:
    assert refused(wisps, {"var": "colour"}) == [
        f'{WHERE}: "op" is required',
        f'{WHERE}: "value" is required',
    ]
    assert refused(wisps, {"op": "eq", "value": 1}) == [f'{WHERE}: "var" is required']
    assert refused(wisps, leaf(7, "eq", 1)) == [f"{WHERE}.var: expected a variable name, got 7"]


def test_unknown_keys_are_refused_at_every_node(wisps: Trigger) -> None:
    assert refused(wisps, {**leaf("colour", "eq", "north"), "case": "insensitive"}) == [
        f'{WHERE}: unknown key "case"; a comparison has "var", "op" and "value"'
    ]
    assert refused(wisps, {"all": [leaf("colour", "eq", "north")], "label": "x"}) == [
        f'{WHERE}: a group has exactly one key, "all", "any" or "not"; found "all", "label"'
    ]
    assert refused(wisps, {"all": [], "any": []}) == [
        f'{WHERE}: a group has exactly one key, "all", "any" or "not"; found "all", "any"'
    ]
    assert refused(wisps, {"every": [leaf("colour", "eq", "north")]}) == [
        f'{WHERE}: expected a comparison with "var", "op" and "value", '
        'or a group "all", "any" or "not"; found "every"'
    ]


@pytest.mark.parametrize("raw", ["colour eq north", 3, [], True])
def test_a_condition_is_an_object(wisps: Trigger, raw: Any) -> None:
    errors = refused(wisps, raw)
    assert errors == [
        f'{WHERE}: expected a condition: a comparison with "var", "op" and "value", '
        'or a group "all", "any" or "not"'
    ]


@pytest.mark.parametrize("members", [[], "x", None, {"var": "colour"}])
def test_groups_take_a_non_empty_list(wisps: Trigger, members: Any) -> None:
    for key in ("all", "any"):
        assert refused(wisps, {key: members}) == [
            f"{WHERE}.{key}: expected a non-empty list of conditions"
        ]


def test_every_error_is_reported_with_its_own_path(wisps: Trigger) -> None:
    errors = refused(
        wisps,
        {
            "any": [
                leaf("regoin", "eq", "Yew"),
                {"not": leaf("colour", "gt", "a")},
                {"all": [leaf("weight", "eq", "heavy"), leaf("colour", "in", ["a", 2])]},
            ]
        },
    )
    assert errors == [
        f'{WHERE}.any[0].var: "regoin" is not a variable of "wisps.caught"',
        f'{WHERE}.any[1].not.op: "gt" cannot be applied to a string',
        f'{WHERE}.any[2].all[0].value: expected a number for "weight", got "heavy"',
        f'{WHERE}.any[2].all[1].value[1]: expected a string for "colour", got 2',
    ]


# ── value types ──────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("var", "value", "message"),
    [
        ("name", 5, 'expected a string for "name", got 5'),
        ("name", None, 'expected a string for "name", got null'),
        ("count", 5.5, 'expected an integer for "count", got 5.5'),
        ("count", True, 'expected an integer for "count", got true'),
        ("count", "5", 'expected an integer for "count", got "5"'),
        ("weight", True, 'expected a number for "weight", got true'),
        ("weight", "1.5", 'expected a number for "weight", got "1.5"'),
        ("weight", math.nan, 'expected a finite number for "weight", got NaN'),
        ("weight", math.inf, 'expected a finite number for "weight", got Infinity'),
        ("alive", 1, 'expected a boolean for "alive", got 1'),
        ("alive", "true", 'expected a boolean for "alive", got "true"'),
    ],
)
def test_values_are_checked_against_the_variable_type(var: str, value: Any, message: str) -> None:
    assert refused(TYPED, leaf(var, "eq", value)) == [f"{WHERE}.value: {message}"]


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("name", ""),
        ("name", "Yew"),
        ("count", 5),
        ("count", -3),
        ("weight", 5),
        ("weight", 1.5),
        ("alive", True),
        ("alive", False),
    ],
)
def test_values_of_the_variable_type_are_kept_as_given(var: str, value: Any) -> None:
    normalised = valid(TYPED, leaf(var, "eq", value))
    assert normalised == leaf(var, "eq", value)
    assert type(normalised["value"]) is type(value)


def test_in_takes_a_non_empty_list_of_the_variable_type(wisps: Trigger) -> None:
    assert refused(wisps, leaf("colour", "in", [])) == [
        f'{WHERE}.value: "in" takes a non-empty list of strings, got []'
    ]
    assert refused(wisps, leaf("weight", "in", 2)) == [
        f'{WHERE}.value: "in" takes a non-empty list of numbers, got 2'
    ]
    assert refused(TYPED, leaf("count", "in", [1, 2.5, False])) == [
        f'{WHERE}.value[1]: expected an integer for "count", got 2.5',
        f'{WHERE}.value[2]: expected an integer for "count", got false',
    ]
    assert valid(wisps, leaf("weight", "in", [1, 2.5])) == leaf("weight", "in", [1, 2.5])


# ── bounds, both halves ──────────────────────────────────────────────────────


def test_groups_nest_up_to_max_depth(wisps: Trigger) -> None:
    deepest = nested(MAX_DEPTH)
    assert valid(wisps, deepest) == deepest


def test_groups_nested_past_max_depth_are_refused(wisps: Trigger) -> None:
    errors = refused(wisps, nested(MAX_DEPTH + 1))
    assert len(errors) == 1
    assert f"groups nest at most {MAX_DEPTH} deep" in errors[0]
    # The offending group is the outermost one past the bound, named by its path.
    assert errors[0].startswith(f"{WHERE}.")


@pytest.mark.parametrize("key", ["all", "any"])
def test_a_group_holds_up_to_max_list(wisps: Trigger, key: str) -> None:
    members = [leaf("weight", "gt", i) for i in range(MAX_LIST)]
    assert valid(wisps, {key: members}) == {key: members}


@pytest.mark.parametrize("key", ["all", "any"])
def test_a_group_past_max_list_is_refused(wisps: Trigger, key: str) -> None:
    members = [leaf("weight", "gt", i) for i in range(MAX_LIST + 1)]
    assert refused(wisps, {key: members}) == [
        f"{WHERE}.{key}: a group holds at most {MAX_LIST} conditions; found {MAX_LIST + 1}"
    ]


def test_in_lists_up_to_max_in(wisps: Trigger) -> None:
    values = [f"c{i}" for i in range(MAX_IN)]
    assert valid(wisps, leaf("colour", "in", values))["value"] == values


def test_in_past_max_in_is_refused(wisps: Trigger) -> None:
    values = [f"c{i}" for i in range(MAX_IN + 1)]
    assert refused(wisps, leaf("colour", "in", values)) == [
        f'{WHERE}.value: "in" takes at most {MAX_IN} values; found {MAX_IN + 1}'
    ]


def _with_leaves(total: int) -> dict[str, Any]:
    groups, rest = divmod(total, MAX_LIST)
    members = [{"any": [leaf("weight", "eq", i) for i in range(MAX_LIST)]} for _ in range(groups)]
    if rest:
        members.append({"any": [leaf("weight", "eq", i) for i in range(rest)]})
    return {"all": members}


def test_a_condition_holds_up_to_max_leaves(wisps: Trigger) -> None:
    raw = _with_leaves(MAX_LEAVES)
    assert valid(wisps, raw) == raw


def test_a_condition_past_max_leaves_is_refused(wisps: Trigger) -> None:
    assert refused(wisps, _with_leaves(MAX_LEAVES + 1)) == [
        f"{WHERE}: a condition holds at most {MAX_LEAVES} comparisons; found {MAX_LEAVES + 1}"
    ]


# ── evaluation: every operator on both sides ─────────────────────────────────

OPERATOR_CASES = [
    # (variable, op, value, payload value, matches)
    ("name", "eq", "Yew", "Yew", True),
    ("name", "eq", "Yew", "yew", False),
    ("name", "ne", "Yew", "Britain", True),
    ("name", "ne", "Yew", "Yew", False),
    ("name", "contains", "Yew", "Yew (10, 20, 0)", True),
    ("name", "contains", "Yew", "Britain (10, 20, 0)", False),
    ("name", "starts_with", "Yew", "Yew woods", True),
    ("name", "starts_with", "Yew", "Old Yew", False),
    ("name", "in", ["north", "south"], "south", True),
    ("name", "in", ["north", "south"], "east", False),
    ("count", "eq", 3, 3, True),
    ("count", "eq", 3, 4, False),
    ("count", "ne", 3, 4, True),
    ("count", "ne", 3, 3, False),
    ("count", "gt", 3, 4, True),
    ("count", "gt", 3, 3, False),
    ("count", "gte", 3, 3, True),
    ("count", "gte", 3, 2, False),
    ("count", "lt", 3, 2, True),
    ("count", "lt", 3, 3, False),
    ("count", "lte", 3, 3, True),
    ("count", "lte", 3, 4, False),
    ("count", "in", [1, 3], 3, True),
    ("count", "in", [1, 3], 2, False),
    ("weight", "eq", 2, 2.0, True),
    ("weight", "eq", 1.5, 1.25, False),
    ("weight", "ne", 1.5, 1.25, True),
    ("weight", "ne", 1.5, 1.5, False),
    ("weight", "gt", 2, 2.5, True),
    ("weight", "gt", 2, 2, False),
    ("weight", "gte", 2.5, 2.5, True),
    ("weight", "gte", 2.5, 2.4, False),
    ("weight", "lt", 2, 1.99, True),
    ("weight", "lt", 2, 2.0, False),
    ("weight", "lte", 2, 2, True),
    ("weight", "lte", 2, 2.01, False),
    ("weight", "in", [1, 2.5], 2.5, True),
    ("weight", "in", [1, 2.5], 2, False),
    ("alive", "eq", True, True, True),
    ("alive", "eq", True, False, False),
    ("alive", "ne", True, False, True),
    ("alive", "ne", True, True, False),
]


def test_operator_cases_cover_every_operator_of_every_type() -> None:
    types = {v.name: v.type for v in TYPED.variables}
    for type_, ops in OPERATORS.items():
        for op in ops:
            outcomes = {m for var, o, _, _, m in OPERATOR_CASES if types[var] == type_ and o == op}
            assert outcomes == {True, False}, (type_, op)


@pytest.mark.parametrize(("var", "op", "value", "actual", "matches"), OPERATOR_CASES)
def test_every_operator_matches_and_misses(
    var: str, op: str, value: Any, actual: Any, matches: bool
) -> None:
    condition = valid(TYPED, leaf(var, op, value))
    assert evaluate(condition, {var: actual}) is matches
    # A firing that checked clean is what the evaluator is given in practice.
    assert check_payload(TYPED, {var: actual}) == ({var: actual}, [])


# ── evaluation: near misses ──────────────────────────────────────────────────


def test_a_missing_variable_is_a_near_miss_for_every_operator() -> None:
    for var, op, value, _, _ in OPERATOR_CASES:
        condition = valid(TYPED, leaf(var, op, value))
        assert evaluate(condition, {}) is False, (var, op)
        assert evaluate({"not": condition}, {}) is True, (var, op)


@pytest.mark.parametrize(
    ("condition", "payload"),
    [
        (leaf("weight", "gt", 2), {"weight": "3"}),
        (leaf("weight", "eq", 1), {"weight": True}),
        (leaf("alive", "eq", True), {"alive": 1}),
        (leaf("name", "contains", "1"), {"name": 1}),
        (leaf("name", "eq", "x"), {"name": None}),
        (leaf("name", "ne", "x"), {"name": None}),
        (leaf("name", "in", ["x"]), {"name": ["x"]}),
        (leaf("count", "in", [1]), {"count": True}),
        (leaf("weight", "lt", 2), {"weight": {"kg": 1}}),
    ],
)
def test_a_payload_value_of_another_type_is_a_near_miss(
    condition: dict[str, Any], payload: dict[str, Any]
) -> None:
    assert evaluate(valid(TYPED, condition), payload) is False


@pytest.mark.parametrize("payload", [None, [], "colour=north", 3, {"colour": "south"}])
def test_a_wrong_value_or_a_payload_that_is_not_an_object_never_matches(
    wisps: Trigger, payload: Any
) -> None:
    assert evaluate(valid(wisps, leaf("colour", "eq", "north")), payload) is False


def test_nested_groups_evaluate_as_written(wisps: Trigger) -> None:
    condition = valid(
        wisps,
        {
            "any": [
                {"all": [leaf("colour", "eq", "north"), leaf("weight", "gte", 2)]},
                {
                    "not": {
                        "any": [leaf("colour", "in", ["north", "south"]), leaf("weight", "gt", 0)]
                    }
                },
            ]
        },
    )
    assert evaluate(condition, {"colour": "north", "weight": 2}) is True
    assert evaluate(condition, {"colour": "north", "weight": 1}) is False
    assert evaluate(condition, {"colour": "east", "weight": 0}) is True
    assert evaluate(condition, {"colour": "east"}) is True
    assert evaluate(condition, {"colour": "east", "weight": 0.5}) is False
    assert evaluate(condition, {}) is True


# ── rendering ────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("raw", "sentence"),
    [
        (leaf("name", "contains", "Yew"), 'name contains "Yew"'),
        (leaf("name", "eq", "north"), 'name eq "north"'),
        (leaf("name", "starts_with", 'the "old" one'), 'name starts_with "the \\"old\\" one"'),
        (leaf("name", "eq", "Ñorth"), 'name eq "Ñorth"'),
        (leaf("weight", "gt", 2), "weight gt 2"),
        (leaf("weight", "lte", 1.5), "weight lte 1.5"),
        (leaf("count", "ne", -3), "count ne -3"),
        (leaf("alive", "eq", False), "alive eq false"),
        (leaf("name", "in", ["north", "south"]), 'name in ("north", "south")'),
        (leaf("count", "in", [1, 2]), "count in (1, 2)"),
        (
            {"all": [leaf("name", "eq", "a"), leaf("count", "gt", 1)]},
            'name eq "a" and count gt 1',
        ),
        (
            {"any": [leaf("name", "eq", "a"), leaf("count", "gt", 1)]},
            'name eq "a" or count gt 1',
        ),
        ({"not": leaf("alive", "eq", True)}, "not (alive eq true)"),
        (
            {"not": {"any": [leaf("name", "eq", "a"), leaf("name", "eq", "b")]}},
            'not (name eq "a" or name eq "b")',
        ),
        (
            {
                "all": [
                    leaf("name", "eq", "a"),
                    {"any": [leaf("count", "gt", 1), {"not": leaf("alive", "eq", True)}]},
                ]
            },
            'name eq "a" and (count gt 1 or not (alive eq true))',
        ),
        (
            {"any": [{"all": [leaf("count", "gt", 1)]}, leaf("weight", "lt", 0.5)]},
            "(count gt 1) or weight lt 0.5",
        ),
    ],
)
def test_render_every_shape(raw: dict[str, Any], sentence: str) -> None:
    assert render(valid(TYPED, raw)) == sentence


# ── what a condition names ───────────────────────────────────────────────────


def test_variables_named_and_only_those_are_kept(wisps: Trigger) -> None:
    condition = valid(wisps, {"any": [{"not": leaf("colour", "eq", "north")}]})
    assert variables_named(condition) == {"colour"}
    payload = {"colour": "south", "weight": 2}
    assert named_values(condition, payload) == {"colour": "south"}
    assert named_values(condition, {"weight": 2}) == {}
    assert named_values(condition, None) == {}


# ── property: the four parts agree on generated conditions ───────────────────

_SAMPLES: dict[str, list[Any]] = {
    "string": ["north", "south", "Yew", "Yew (1, 2)", "", "no"],
    "integer": [-2, 0, 1, 3, 10],
    "number": [-1.5, 0, 1, 2.5, 3],
    "boolean": [True, False],
}


def _random_leaf(rng: random.Random) -> dict[str, Any]:
    variable = rng.choice(TYPED.variables)
    op = rng.choice(OPERATORS[variable.type])
    samples = _SAMPLES[variable.type]
    if op == "in":
        value: Any = rng.sample(samples, rng.randint(1, len(samples)))
    else:
        value = rng.choice(samples)
    return leaf(variable.name, op, value)


def _random_condition(rng: random.Random, groups: int = 0) -> dict[str, Any]:
    if groups == MAX_DEPTH or rng.random() < 0.4:
        return _random_leaf(rng)
    kind = rng.choice(GROUP_KINDS)
    if kind == "not":
        return {"not": _random_condition(rng, groups + 1)}
    return {kind: [_random_condition(rng, groups + 1) for _ in range(rng.randint(1, 3))]}


GROUP_KINDS = ("all", "any", "not")


def _random_payload(rng: random.Random) -> dict[str, Any]:
    payload: dict[str, Any] = {}
    for variable in TYPED.variables:
        if rng.random() < 0.8:
            payload[variable.name] = rng.choice(_SAMPLES[variable.type])
    return payload


class _Recording(Mapping[str, Any]):
    """A payload that remembers which variables the evaluator looked at."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.read: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return self.data[key]

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self.read.add(key)
        return key in self.data

    def __iter__(self) -> Iterator[str]:
        raise AssertionError("the evaluator must not walk the whole payload")

    def __len__(self) -> int:
        return len(self.data)


RENDERED_VARIABLE = re.compile(r"\b([a-z_]+) (?:eq|ne|gt|gte|lt|lte|contains|starts_with|in) ")


@pytest.mark.parametrize("seed", range(20))
def test_generated_conditions_agree_across_validator_renderer_and_evaluator(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(25):
        raw = _random_condition(rng)
        normalised = valid(TYPED, raw)
        assert valid(TYPED, normalised) == normalised

        named = variables_named(normalised)
        assert set(RENDERED_VARIABLE.findall(render(normalised))) == named

        for _ in range(5):
            payload = _random_payload(rng)
            assert check_payload(TYPED, payload) == (payload, [])
            recording = _Recording(payload)
            result = evaluate(normalised, recording)
            assert recording.read <= named
            # What a gate stores is enough to reproduce its decision.
            assert evaluate(normalised, named_values(normalised, payload)) is result


def _junk(rng: random.Random, depth: int = 0) -> Any:
    choices: list[Any] = [None, True, 0, -1.5, math.nan, "", "colour", "eq", "all", [], {}]
    if depth < 6:
        choices += ["list", "dict", "leaf"] * 3
    pick = rng.choice(choices)
    if pick == "list":
        return [_junk(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if pick == "dict":
        keys = ["all", "any", "not", "var", "op", "value", "x"]
        return {k: _junk(rng, depth + 1) for k in rng.sample(keys, rng.randint(1, 3))}
    if pick == "leaf":
        return {
            "var": rng.choice(["colour", "weight", "regoin", 3]),
            "op": rng.choice([*OPERATORS["number"], "contains", "like", None]),
            "value": _junk(rng, depth + 1),
        }
    return pick


@pytest.mark.parametrize("seed", range(10))
def test_junk_is_answered_never_raised(wisps: Trigger, seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(200):
        raw = _junk(rng)
        normalised, errors = validate_condition(wisps, raw, WHERE)
        assert (normalised is None) == bool(errors) or raw is None
        assert all(e.startswith(WHERE) for e in errors)
        if normalised is not None:
            assert validate_condition(wisps, normalised, WHERE) == (normalised, [])
            render(normalised)
        payload = _junk(rng)
        assert isinstance(evaluate(normalised, payload), bool)
        _, payload_errors = check_payload(wisps, payload)
        assert all(e.startswith("body") for e in payload_errors)


# ── payloads ─────────────────────────────────────────────────────────────────


def test_check_payload_accepts_declared_variables(wisps: Trigger) -> None:
    assert check_payload(wisps, {"colour": "north", "weight": 2}) == (
        {"colour": "north", "weight": 2},
        [],
    )


def test_check_payload_allows_missing_variables(wisps: Trigger) -> None:
    assert check_payload(wisps, {}) == ({}, [])
    assert check_payload(wisps, {"weight": 1.5}) == ({"weight": 1.5}, [])


@pytest.mark.parametrize("payload", [None, [], "colour=north", 3])
def test_check_payload_needs_an_object(wisps: Trigger, payload: Any) -> None:
    assert check_payload(wisps, payload) == (
        {},
        ['body: expected an object of "wisps.caught"\'s variables'],
    )


def test_check_payload_names_undeclared_variables(wisps: Trigger) -> None:
    assert check_payload(wisps, {"colour": "north", "regoin": "Yew"}) == (
        {"colour": "north"},
        ['body.regoin: "regoin" is not a variable of "wisps.caught"'],
    )


def test_check_payload_names_the_variable_and_its_type(wisps: Trigger) -> None:
    normalised, errors = check_payload(
        wisps, {"colour": None, "weight": True, "regoin": 1}, path="emit"
    )
    assert normalised == {}
    assert errors == [
        'emit.colour: expected a string for "colour", got null',
        'emit.weight: expected a number for "weight", got true',
        'emit.regoin: "regoin" is not a variable of "wisps.caught"',
    ]


@pytest.mark.parametrize(
    ("var", "value", "message"),
    [
        ("count", 5.5, 'body.count: expected an integer for "count", got 5.5'),
        ("count", False, 'body.count: expected an integer for "count", got false'),
        ("weight", math.inf, 'body.weight: expected a finite number for "weight", got Infinity'),
        ("alive", "yes", 'body.alive: expected a boolean for "alive", got "yes"'),
    ],
)
def test_check_payload_refuses_each_wrong_type(var: str, value: Any, message: str) -> None:
    assert check_payload(TYPED, {var: value}) == ({}, [message])
