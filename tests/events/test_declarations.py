"""Declarations: the models a plugin's declaration hooks return, and what each refuses."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from pageant.hookspecs import (
    Action,
    AnnounceLeg,
    Budget,
    Lease,
    OptionSource,
    Param,
    PluginInfo,
    Trigger,
    TriggerVariable,
)
from pageant.hookspecs.models import MAX_BUDGET_MS, check_literal, is_async_callable


async def perform(ctx: Any) -> dict[str, Any]:
    return {"ok": True}


async def revert(ctx: Any) -> dict[str, Any]:
    return {"ok": True}


def sync_perform(ctx: Any) -> dict[str, Any]:
    return {"ok": True}


def cost(params: dict[str, Any]) -> dict[str, float]:
    return {"x.gold": 1}


async def async_cost(params: dict[str, Any]) -> dict[str, float]:
    return {"x.gold": 1}


def action(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "x.act",
        "label": "Act",
        "risk": "change",
        "budget_ms": 1_000,
        "perform": perform,
    }
    base.update(overrides)
    return base


def refusal(model: type, data: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(data)
    return str(caught.value)


# ── ids ───────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    "ident",
    ["x.act", "x.a.b.c", "wisps.summon_2", "a1.b2"],
)
def test_ids_in_the_grammar_are_accepted(ident: str) -> None:
    assert Action.model_validate(action(id=ident)).id == ident


@pytest.mark.parametrize(
    "ident",
    [
        "x",  # no name
        "X.act",  # uppercase
        "x.Act",
        "x..act",  # empty segment
        "x.act.",
        ".x.act",
        "x.1act",  # a segment starts with a letter
        "1x.act",
        "x.act-two",  # no dashes
        "x act.y",
        "x.act\n",  # a trailing newline is not the end of an id
        "",
    ],
)
def test_ids_outside_the_grammar_are_refused(ident: str) -> None:
    message = refusal(Action, action(id=ident))
    assert "is not an id; expected <owner>.<name>[.<name>...]" in message


@pytest.mark.parametrize(
    ("model", "data", "field"),
    [
        (Budget, {"dimension": "gold", "label": "Gold", "unit": "coins"}, "dimension"),
        (Trigger, {"id": "Boss.up", "label": "Boss"}, "id"),
        (AnnounceLeg, {"id": "chat", "label": "Chat", "send": perform}, "id"),
        (OptionSource, {"id": "x.opt-s", "label": "Opts", "resolve": perform}, "id"),
        (
            Lease,
            {"id": "x", "label": "L", "read": perform, "apply": perform, "restore": perform},
            "id",
        ),
    ],
)
def test_every_kind_checks_its_id(model: type, data: dict[str, Any], field: str) -> None:
    assert "is not an id" in refusal(model, data)


def test_an_option_source_reference_must_be_an_id() -> None:
    message = refusal(
        Param,
        {"name": "c", "type": "string", "description": "d", "example": "a", "option_source": "c"},
    )
    assert "'c' is not an id" in message


@pytest.mark.parametrize("owner", ["wisps", "a", "a_1"])
def test_an_owner_is_one_segment(owner: str) -> None:
    assert PluginInfo(owner=owner, contract="^1.0").owner == owner


@pytest.mark.parametrize("owner", ["Wisps", "wisps.x", "1wisps", "", "wisps\n", "wi-sps"])
def test_an_owner_outside_the_grammar_is_refused(owner: str) -> None:
    assert "is not an owner" in refusal(PluginInfo, {"owner": owner, "contract": "^1.0"})


# ── params and their examples ─────────────────────────────────────────────────


def param(type_: str, example: Any) -> dict[str, Any]:
    return {"name": "p", "type": type_, "description": "A param.", "example": example}


@pytest.mark.parametrize(
    ("type_", "example"),
    [
        ("integer", 5),
        ("integer", 0),
        ("integer", -3),
        ("number", 5),
        ("number", 1.5),
        ("string", ""),
        ("string", "north"),
        ("boolean", True),
        ("boolean", False),
    ],
)
def test_an_example_of_the_declared_type_is_accepted(type_: str, example: Any) -> None:
    assert Param.model_validate(param(type_, example)).example == example


@pytest.mark.parametrize(
    ("type_", "example", "why"),
    [
        ("integer", True, "must be an integer"),  # a bool is not an integer here
        ("integer", 5.5, "must be an integer"),  # nor is a float with a fraction
        ("integer", "5", "must be an integer"),
        ("number", True, "must be a number"),
        ("number", False, "must be a number"),
        ("number", "1.5", "must be a number"),
        ("number", float("nan"), "must be a finite number"),
        ("number", float("inf"), "must be a finite number"),
        ("string", 5, "must be a string"),
        ("string", None, "must be a string"),
        ("boolean", 1, "must be true or false"),
        ("boolean", "true", "must be true or false"),
    ],
)
def test_an_example_that_does_not_type_check_is_refused(type_: str, example: Any, why: str) -> None:
    message = refusal(Param, param(type_, example))
    assert f"example {example!r} {why} (type {type_})" in message


# ── a param's bounds (contract 1.3) ──────────────────────────────────────────


@pytest.mark.parametrize(
    ("type_", "bounds", "inside", "outside", "why"),
    [
        ("integer", {"minimum": 0}, 0, -1, "must be at least 0"),
        ("integer", {"maximum": 86_400}, 86_400, 86_401, "must be at most 86400"),
        ("integer", {"maximum": 10}, 9.0, 10**20, "must be at most 10"),
        ("number", {"minimum": 0.5}, 0.5, 0.499, "must be at least 0.5"),
        ("number", {"maximum": 2.0}, 2, 2.001, "must be at most 2"),
        ("string", {"min_length": 2}, "ab", "a", "must be at least 2 characters long"),
        ("string", {"max_length": 3}, "abc", "abcd", "must be at most 3 characters long"),
        ("string", {"pattern": "[a-z]+"}, "yew", "yew!", 'must match the pattern "[a-z]+"'),
        ("string", {"enum": ["a", "b"]}, "b", "c", 'must be one of "a", "b"'),
        ("integer", {"enum": [1, 3]}, 3, 2, "must be one of 1, 3"),
    ],
)
def test_each_bound_holds_on_both_sides(
    type_: str, bounds: dict[str, Any], inside: Any, outside: Any, why: str
) -> None:
    declared = Param.model_validate({**param(type_, inside), **bounds})
    ok, value, _ = declared.check(inside)
    assert ok and value == inside
    assert declared.check(outside) == (False, None, why)
    assert declared.bound_problem(outside) == why
    assert declared.bounds == bounds


@pytest.mark.parametrize(
    ("type_", "example", "bounds", "why"),
    [
        ("string", "a", {"minimum": 1}, "minimum applies to integer and number params"),
        ("integer", 1, {"max_length": 4}, "max_length applies to string params"),
        ("integer", 1, {"pattern": "1"}, "pattern applies to string params"),
        ("integer", 5, {"minimum": 6, "maximum": 4}, "minimum 6 is above maximum 4"),
        ("string", "ab", {"min_length": 3, "max_length": 2}, "min_length 3 is above"),
        ("string", "a", {"pattern": "[a-"}, "pattern '[a-' does not compile"),
        ("string", "a", {"enum": []}, "enum is empty"),
        ("string", "a", {"enum": ["a", 2]}, "enum value 2 must be a string"),
        ("integer", 0, {"minimum": 1}, "example 0 must be at least 1"),
        ("string", "storm", {"enum": ["calm"]}, "example 'storm' must be one of \"calm\""),
        ("integer", 1, {"minimum": True}, "expected a number; got True"),
        ("number", 1, {"maximum": float("inf")}, "expected a finite number"),
        ("string", "a", {"min_length": -1}, "greater than or equal to 0"),
    ],
)
def test_a_bad_bound_or_an_example_outside_its_bounds_is_refused(
    type_: str, example: Any, bounds: dict[str, Any], why: str
) -> None:
    assert why in refusal(Param, {**param(type_, example), **bounds})


def test_an_example_is_required_even_on_an_optional_param() -> None:
    data = param("string", "x")
    del data["example"]
    assert "example" in refusal(Param, data)


def test_trigger_variables_type_check_their_examples_too() -> None:
    data = {"name": "weight", "type": "number", "description": "kg", "example": True}
    assert "must be a number" in refusal(TriggerVariable, data)


def test_check_literal_refuses_an_unknown_type() -> None:
    assert check_literal("date", "2027-01-01") == (False, None, "has an unknown type 'date'")


def test_a_param_declared_twice_is_refused() -> None:
    params = [param("string", "a"), param("integer", 1)]
    assert "param(s) declared twice: p" in refusal(Action, action(params=params))


def test_a_variable_declared_twice_is_refused() -> None:
    variable = {"name": "v", "type": "string", "description": "d", "example": "e"}
    data = {"id": "x.t", "label": "T", "variables": [variable, variable]}
    assert "variable(s) declared twice: v" in refusal(Trigger, data)


# ── budget_ms: 1 .. 600000 ───────────────────────────────────────────────────


@pytest.mark.parametrize("budget_ms", [1, 2, MAX_BUDGET_MS - 1, MAX_BUDGET_MS])
def test_budget_ms_inside_its_bounds_is_accepted(budget_ms: int) -> None:
    assert Action.model_validate(action(budget_ms=budget_ms)).budget_ms == budget_ms


@pytest.mark.parametrize("budget_ms", [0, -1, MAX_BUDGET_MS + 1, 10**9])
def test_budget_ms_outside_its_bounds_is_refused(budget_ms: int) -> None:
    assert "budget_ms" in refusal(Action, action(budget_ms=budget_ms))


@pytest.mark.parametrize("budget_ms", [True, "1000", 1000.0, None])
def test_budget_ms_must_be_a_real_integer(budget_ms: Any) -> None:
    assert "budget_ms" in refusal(Action, action(budget_ms=budget_ms))


def test_version_must_be_a_positive_integer() -> None:
    assert Action.model_validate(action(version=3)).version == 3
    for bad in (0, True, "2"):
        assert "version" in refusal(Action, action(version=bad))


# ── callables: async, except cost ─────────────────────────────────────────────


def test_a_sync_perform_is_refused() -> None:
    assert "perform must be an async def function" in refusal(Action, action(perform=sync_perform))


def test_a_sync_revert_is_refused() -> None:
    data = action(reversible="full", revert=sync_perform)
    assert "revert must be an async def function" in refusal(Action, data)


def test_a_sync_cost_is_accepted_and_an_async_cost_refused() -> None:
    assert Action.model_validate(action(cost=cost)).cost is cost
    message = refusal(Action, action(cost=async_cost))
    assert "cost must be a plain (synchronous) function of the params" in message


def test_a_cost_that_is_not_callable_is_refused() -> None:
    assert "cost" in refusal(Action, action(cost={"x.gold": 1}))


def test_a_sync_leg_preview_is_accepted_and_an_async_or_uncallable_one_refused() -> None:
    leg = {"id": "x.l", "label": "L", "send": perform}
    assert AnnounceLeg.model_validate(leg).preview is None
    assert AnnounceLeg.model_validate({**leg, "preview": sync_perform}).preview is sync_perform
    message = refusal(AnnounceLeg, {**leg, "preview": perform})
    assert "preview must be a plain (synchronous) function of the announcement" in message
    assert "preview" in refusal(AnnounceLeg, {**leg, "preview": {"line": "hi"}})


@pytest.mark.parametrize(
    ("model", "data", "name"),
    [
        (OptionSource, {"id": "x.o", "label": "O", "resolve": sync_perform}, "resolve"),
        (AnnounceLeg, {"id": "x.l", "label": "L", "send": sync_perform}, "send"),
        (
            Lease,
            {"id": "x.l", "label": "L", "read": sync_perform, "apply": perform, "restore": perform},
            "read",
        ),
        (
            Lease,
            {"id": "x.l", "label": "L", "read": perform, "apply": sync_perform, "restore": perform},
            "apply",
        ),
        (
            Lease,
            {"id": "x.l", "label": "L", "read": perform, "apply": perform, "restore": sync_perform},
            "restore",
        ),
    ],
)
def test_every_other_sync_callable_is_refused(model: type, data: dict[str, Any], name: str) -> None:
    assert f"{name} must be an async def function" in refusal(model, data)


class AsyncCallable:
    async def __call__(self, ctx: Any) -> dict[str, Any]:
        return {"ok": True}


def test_an_object_with_an_async_call_counts_as_async() -> None:
    assert is_async_callable(AsyncCallable())
    assert Action.model_validate(action(perform=AsyncCallable())).perform is not None


def test_a_class_is_not_an_async_callable_even_if_its_instances_are() -> None:
    # Calling the class builds an instance; nothing would ever be awaited.
    assert not is_async_callable(AsyncCallable)
    assert "perform must be an async def function" in refusal(Action, action(perform=AsyncCallable))


def test_a_bound_async_method_counts_as_async() -> None:
    class Plugin:
        async def resolve(self) -> list[Any]:
            return []

    source = OptionSource(id="x.o", label="O", resolve=Plugin().resolve)
    assert is_async_callable(source.resolve)


# ── revert present iff reversible ─────────────────────────────────────────────


@pytest.mark.parametrize("reversible", ["full", "partial"])
def test_a_reversible_action_needs_a_revert(reversible: str) -> None:
    message = refusal(Action, action(reversible=reversible))
    assert f'reversible is "{reversible}" but no revert is declared' in message
    assert Action.model_validate(action(reversible=reversible, revert=revert)).revert is revert


def test_an_irreversible_action_must_not_declare_a_revert() -> None:
    assert 'revert is declared but reversible is "none"' in refusal(Action, action(revert=revert))
    assert Action.model_validate(action()).reversible == "none"


# ── the rest of the shape ─────────────────────────────────────────────────────


def test_unknown_keys_are_refused() -> None:
    assert "Extra inputs are not permitted" in refusal(Action, action(colour="red"))
    budget = {"dimension": "x.g", "label": "G", "unit": "coins", "cap": 3}
    assert "Extra inputs are not permitted" in refusal(Budget, budget)


@pytest.mark.parametrize(
    ("field", "value"),
    [("risk", "dangerous"), ("reversible", "maybe"), ("label", "")],
)
def test_closed_vocabularies_and_labels_are_checked(field: str, value: str) -> None:
    assert field in refusal(Action, action(**{field: value}))


def test_a_budget_needs_a_unit() -> None:
    assert "unit" in refusal(Budget, {"dimension": "x.g", "label": "Gold"})
    assert "unit" in refusal(Budget, {"dimension": "x.g", "label": "Gold", "unit": ""})


def test_declarations_are_frozen() -> None:
    declared = Action.model_validate(action())
    with pytest.raises(ValidationError):
        declared.budget_ms = 5  # type: ignore[misc]  # assigning to a frozen model is the point


def test_a_string_holding_half_of_a_surrogate_pair_is_not_text() -> None:
    assert check_literal("string", "caf\udce9") == (
        False,
        None,
        "must be text; it holds U+DCE9, half of a surrogate pair alone (a byte that is not UTF-8)",
    )
    assert check_literal("string", "café 🐉") == (True, "café 🐉", "")
