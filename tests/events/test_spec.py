"""The spec validator: shapes, bounds, normalisation, every error at once, and dormancy.

Pure (no database): the registries are real, built by the real plugin loader from the
built-in core plugin, the installed wisps plugin and a small inline plugin ``kit`` whose
actions cover every risk class and param type.
"""

from __future__ import annotations

import copy
import json
from typing import Any, ClassVar

import pytest

from pageant import hookimpl
from pageant.errors import Invalid
from pageant.events.authoring import validator as spec
from pageant.events.authoring.validator import (
    MAX_ADVANCE_COUNT,
    MAX_LABEL,
    MAX_PHASE_KEY,
    MAX_PHASES,
    MAX_STEPS,
    MAX_STEPS_PER_PHASE,
    MAX_STRING_PARAM,
    action_steps,
    default_on_failure,
    dormant_items,
    empty_spec,
    format_after,
    parse_after,
    validate,
)
from pageant.plugins.loader import candidate_for, load_plugins
from pageant.plugins.registry import Registry


async def _perform(ctx: Any) -> dict[str, Any]:
    return {"ok": True}


def _param(name: str, type_: str, example: Any, required: bool = False) -> dict[str, Any]:
    return {
        "name": name,
        "type": type_,
        "required": required,
        "description": f"A {type_}.",
        "example": example,
    }


class Kit:
    """An inline plugin: one action per risk class, and one param of every type."""

    PLUGIN_INFO: ClassVar[dict[str, str]] = {"owner": "kit", "contract": "^1.0"}

    @hookimpl
    def pageant_actions(self) -> list[dict[str, Any]]:
        return [
            {
                "id": "kit.tune",
                "label": "Tune",
                "version": 3,
                "risk": "inspect",
                "budget_ms": 1000,
                "params": [
                    _param("level", "integer", 2),
                    _param("ratio", "number", 0.5),
                    _param("loud", "boolean", True),
                    _param("name", "string", "a"),
                ],
                "perform": _perform,
            },
            {
                "id": "kit.burn",
                "label": "Burn",
                "risk": "irreversible",
                "budget_ms": 1000,
                "perform": _perform,
            },
        ]

    @hookimpl
    def pageant_triggers(self) -> list[dict[str, Any]]:
        return [
            {
                "id": "kit.rang",
                "label": "A bell rang",
                "variables": [
                    {"name": "bell", "type": "string", "description": "Which.", "example": "x"}
                ],
            }
        ]


def _registry(*, discover: bool) -> Registry:
    manager = load_plugins([candidate_for(Kit(), "kit")], discover=discover)
    refused = [r.reason for r in manager.records if r.status != "loaded"]
    assert not refused, refused
    return manager.registry


@pytest.fixture(scope="module")
def registry() -> Registry:
    """Core, the installed wisps plugin (through its entry point), and kit."""
    registry = _registry(discover=True)
    assert "wisps.summon" in registry.actions and "wisps.caught" in registry.triggers
    return registry


@pytest.fixture(scope="module")
def uninstalled() -> Registry:
    """The same host after wisps was uninstalled: core and kit only."""
    registry = _registry(discover=False)
    assert "wisps.summon" not in registry.actions
    return registry


# ── builders ──


def announce(message: str = "Hello", **extra: Any) -> dict[str, Any]:
    return {"action": "core.announce", "params": {"leg": "core.log", "message": message}, **extra}


def wait(seconds: Any = 5) -> dict[str, Any]:
    return {"action": "core.wait", "params": {"seconds": seconds}}


def summon(colour: str = "north", count: Any = 3, **extra: Any) -> dict[str, Any]:
    return {"action": "wisps.summon", "params": {"colour": colour, "count": count}, **extra}


def tune(**params: Any) -> dict[str, Any]:
    return {"action": "kit.tune", "params": params}


def phase(key: str = "main", steps: list[Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {"key": key, "label": key.title(), "steps": steps or [], **extra}


def make(*phases: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"phases": list(phases) or [phase()], **top}


def errors_of(raw: Any, registry: Registry, stored: Any = None) -> list[str]:
    with pytest.raises(Invalid) as caught:
        validate(raw, registry, stored=stored)
    assert caught.value.message == "invalid spec"
    assert caught.value.status == 400
    return caught.value.details


def error_of(raw: Any, registry: Registry, stored: Any = None) -> str:
    errors = errors_of(raw, registry, stored)
    assert len(errors) == 1, errors
    return errors[0]


def rich(registry_has_kit: bool = True) -> dict[str, Any]:
    """A spec using every feature: schedule, gates of both kinds, defaults and overrides."""
    return {
        "schedule": {"kind": "weekly", "days": ["Friday", "monday"], "time": "20:00"},
        "phases": [
            {
                "key": "muster",
                "label": "Muster",
                "steps": [announce("The champion stirs"), wait(300), summon(count=2)],
                "advance": {
                    "on": "wisps.caught",
                    "where": {
                        "all": [
                            {"var": "colour", "op": "eq", "value": "north"},
                            {"var": "weight", "op": "gte", "value": 1},
                        ]
                    },
                    "count": 2,
                },
            },
            {
                "key": "fight_2",
                "label": "Fight",
                "steps": [
                    tune(level=1, ratio=2, loud=False, name="x"),
                    {"action": "kit.burn", "label": "Burn it", "on_failure": "skip"},
                ],
                "advance": {"on": "kit.rang"},
            },
            {"key": "wind-down", "label": "Wind down", "steps": [], "advance": {"after": "120m"}},
        ],
    }


# ── the small helpers ──


def test_empty_spec_is_valid_and_a_fresh_copy_each_time(registry: Registry) -> None:
    first = empty_spec()
    assert first == {
        "schedule": {"kind": "manual"},
        "phases": [{"key": "main", "label": "Main", "steps": []}],
    }
    assert validate(first, registry) == first
    first["phases"][0]["steps"].append(wait())
    assert empty_spec()["phases"][0]["steps"] == []


@pytest.mark.parametrize(
    ("risk", "expected"),
    [
        ("notify", "skip"),
        ("inspect", "skip"),
        ("change", "pause"),
        ("irreversible", "abort_run"),
        ("unheard-of", "pause"),
    ],
)
def test_default_on_failure_by_risk(risk: str, expected: str) -> None:
    assert default_on_failure(risk) == expected


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1s", 1),
        ("90s", 90),
        ("30m", 1800),
        ("2h", 7200),
        ("30d", 30 * 86_400),
        ("720h", 30 * 86_400),
        ("2592000s", None),  # seven digits: outside the grammar even though it is 30d
        ("000001s", 1),
        ("0s", None),
        ("31d", None),
        ("721h", None),
        ("1h30m", None),
        ("1.5h", None),
        ("30M", None),
        (" 30m", None),
        ("30m\n", None),
        ("\u0663s", None),  # an Arabic-Indic three: a digit to \d, not to this grammar
        ("", None),
        (30, None),
        (None, None),
    ],
)
def test_parse_after(text: Any, seconds: int | None) -> None:
    assert parse_after(text) == seconds


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(1, "1s"), (59, "59s"), (60, "1m"), (90, "90s"), (7200, "2h"), (5400, "90m"), (86_400, "1d")],
)
def test_format_after_uses_the_largest_exact_unit(seconds: int, text: str) -> None:
    assert format_after(seconds) == text
    assert parse_after(text) == seconds


def test_action_steps_lists_every_step_with_its_path(registry: Registry) -> None:
    checked = validate(make(phase("a", [wait()]), phase("b", [announce(), wait(1)])), registry)
    assert [(path, step["action"]) for path, step in action_steps(checked)] == [
        ("spec.phases[0].steps[0]", "core.wait"),
        ("spec.phases[1].steps[0]", "core.announce"),
        ("spec.phases[1].steps[1]", "core.wait"),
    ]
    assert action_steps(None) == []
    assert action_steps({"phases": [1, {"steps": "no"}, {"steps": [2, wait()]}]}) == [
        ("spec.phases[2].steps[1]", wait())
    ]


# ── top level ──


@pytest.mark.parametrize("raw", [None, [], "spec", 3])
def test_a_spec_must_be_an_object(raw: Any, registry: Registry) -> None:
    assert error_of(raw, registry) == "spec: expected an object with schedule, phases"


def test_unknown_top_level_key_is_refused_naming_it(registry: Registry) -> None:
    assert error_of(make(announcements=[]), registry) == (
        'spec: unknown key "announcements"; expected params, schedule, phases, announcement, '
        "acknowledge, catch_up, blackouts, start_when, requires"
    )


@pytest.mark.parametrize("schedule", ["absent", None])
def test_missing_schedule_means_manual(schedule: Any, registry: Registry) -> None:
    raw = make() if schedule == "absent" else make(schedule=schedule)
    assert validate(raw, registry)["schedule"] == {"kind": "manual"}


# ── schedule ──


@pytest.mark.parametrize(
    ("schedule", "normalised"),
    [
        ({"kind": "manual"}, {"kind": "manual"}),
        ({"kind": "once", "at": "2027-03-26T19:00"}, {"kind": "once", "at": "2027-03-26T19:00"}),
        ({"kind": "once", "at": "2028-02-29T00:00"}, {"kind": "once", "at": "2028-02-29T00:00"}),
        (
            {"kind": "weekly", "days": ["Sunday", "friday", "MONDAY", "friday"], "time": "23:59"},
            {"kind": "weekly", "days": ["monday", "friday", "sunday"], "time": "23:59"},
        ),
        (
            {"kind": "monthly", "nth": -1, "weekday": "Friday", "time": "00:00"},
            {"kind": "monthly", "nth": -1, "weekday": "friday", "time": "00:00"},
        ),
        (
            {"kind": "monthly", "nth": 4, "weekday": "monday", "time": "09:30"},
            {"kind": "monthly", "nth": 4, "weekday": "monday", "time": "09:30"},
        ),
    ],
)
def test_schedules_are_normalised(
    schedule: dict[str, Any], normalised: dict[str, Any], registry: Registry
) -> None:
    checked = validate(make(schedule=schedule), registry)
    assert checked["schedule"] == normalised
    assert validate(checked, registry) == checked


WEEKDAY_LIST = "monday, tuesday, wednesday, thursday, friday, saturday, sunday"


@pytest.mark.parametrize(
    ("schedule", "errors"),
    [
        ("weekly", ["spec.schedule: expected an object with a kind"]),
        (
            {"kind": "daily"},
            ['spec.schedule.kind: expected one of manual, once, weekly, monthly; got "daily"'],
        ),
        ({}, ["spec.schedule.kind: expected one of manual, once, weekly, monthly; got null"]),
        (
            {"kind": "manual", "time": "20:00"},
            ['spec.schedule: unknown key "time" for a "manual" schedule; expected kind'],
        ),
        (
            {"kind": "weekly", "days": ["friday"], "time": "20:00", "at": "2027-01-01T00:00"},
            [
                'spec.schedule: unknown key "at" for a "weekly" schedule; '
                "expected kind, days, time, params, stagger, zones"
            ],
        ),
        (
            {"kind": "once", "at": "2027-02-29T10:00"},
            ['spec.schedule.at: "2027-02-29T10:00" is not a real date'],
        ),
        (
            {"kind": "once", "at": "2027-03-01 10:00"},
            [
                'spec.schedule.at: expected a local date and time as "YYYY-MM-DDTHH:MM"; '
                'got "2027-03-01 10:00"'
            ],
        ),
        (
            {"kind": "once", "at": "2027-03-01T24:00"},
            [
                'spec.schedule.at: expected a local date and time as "YYYY-MM-DDTHH:MM"; '
                'got "2027-03-01T24:00"'
            ],
        ),
        (
            {"kind": "once"},
            ['spec.schedule.at: expected a local date and time as "YYYY-MM-DDTHH:MM"; got null'],
        ),
        (
            {"kind": "weekly", "days": [], "time": "20:00"},
            ["spec.schedule.days: expected a non-empty list of weekday names"],
        ),
        (
            {"kind": "weekly", "days": "friday", "time": "20:00"},
            ["spec.schedule.days: expected a non-empty list of weekday names"],
        ),
        (
            {"kind": "weekly", "days": ["friday", "funday", 5], "time": "20:00"},
            [
                f'spec.schedule.days[1]: "funday" is not a weekday; expected one of {WEEKDAY_LIST}',
                f"spec.schedule.days[2]: 5 is not a weekday; expected one of {WEEKDAY_LIST}",
            ],
        ),
        (
            {"kind": "weekly", "days": ["friday"], "time": "24:00"},
            ['spec.schedule.time: expected a 24-hour time as "HH:MM"; got "24:00"'],
        ),
        (
            {"kind": "weekly", "days": ["friday"], "time": "9:00"},
            ['spec.schedule.time: expected a 24-hour time as "HH:MM"; got "9:00"'],
        ),
        (
            {"kind": "weekly", "days": ["friday"], "time": "20:00\n"},
            ['spec.schedule.time: expected a 24-hour time as "HH:MM"; got "20:00\\n"'],
        ),
        (
            {"kind": "monthly", "nth": 5, "weekday": "moonday", "time": "20:60"},
            [
                'spec.schedule.time: expected a 24-hour time as "HH:MM"; got "20:60"',
                'spec.schedule.weekday: "moonday" is not a weekday; '
                f"expected one of {WEEKDAY_LIST}",
                "spec.schedule.nth: expected 1, 2, 3, 4 or -1 (the last); got 5",
            ],
        ),
    ],
)
def test_bad_schedules_are_refused_with_every_reason(
    schedule: Any, errors: list[str], registry: Registry
) -> None:
    assert errors_of(make(schedule=schedule), registry) == errors


@pytest.mark.parametrize("nth", [0, 5, -2, True, 1.0, "1", None])
def test_monthly_nth_is_one_to_four_or_last(nth: Any, registry: Registry) -> None:
    raw = make(schedule={"kind": "monthly", "nth": nth, "weekday": "friday", "time": "20:00"})
    assert error_of(raw, registry).startswith("spec.schedule.nth: expected 1, 2, 3, 4 or -1")


# ── phases ──


def test_phases_must_be_a_non_empty_list(registry: Registry) -> None:
    expected = "spec.phases: expected a non-empty list of phases"
    assert error_of({}, registry) == expected
    assert error_of({"phases": []}, registry) == expected
    assert error_of({"phases": {"main": {}}}, registry) == expected


def test_phase_count_bound_on_both_halves(registry: Registry) -> None:
    at_bound = make(*[phase(f"p{i}") for i in range(MAX_PHASES)])
    assert len(validate(at_bound, registry)["phases"]) == MAX_PHASES == 40
    over = make(*[phase(f"p{i}") for i in range(MAX_PHASES + 1)])
    assert error_of(over, registry) == "spec.phases: at most 40 phases; this spec has 41"


def test_phase_key_length_bound_on_both_halves(registry: Registry) -> None:
    assert MAX_PHASE_KEY == 64
    key = "a" * 64
    assert validate(make(phase(key)), registry)["phases"][0]["key"] == key
    assert error_of(make(phase("a" * 65)), registry) == (
        "spec.phases[0].key: at most 64 characters; this one has 65"
    )


@pytest.mark.parametrize("key", ["wind-down", "fight_2", "a", "a1-b2_c3"])
def test_phase_keys_that_are_slugs(key: str, registry: Registry) -> None:
    assert validate(make(phase(key)), registry)["phases"][0]["key"] == key


@pytest.mark.parametrize("key", ["Main", "1st", "a--b", "a-", "-a", "a b", "wind.down", 7, "ä"])
def test_phase_keys_that_are_not_slugs(key: Any, registry: Registry) -> None:
    raw = make({"key": key, "label": "X", "steps": []})
    assert error_of(raw, registry) == (
        f"spec.phases[0].key: {json.dumps(key, ensure_ascii=False)} is not a phase key; "
        'expected a slug such as "wind-down" (lowercase letters and digits, words joined by - or _)'
    )


def test_phase_key_is_required_and_unique(registry: Registry) -> None:
    raw = make({"label": "No key", "steps": []}, phase("main"), phase("other"), phase("main"))
    assert errors_of(raw, registry) == [
        "spec.phases[0].key: a phase needs a key",
        'spec.phases[3].key: "main" is already the key of spec.phases[1]',
    ]


def test_phase_label_is_required_and_bounded(registry: Registry) -> None:
    assert MAX_LABEL == 200
    raw = make(
        {"key": "a", "steps": []},
        {"key": "b", "label": "", "steps": []},
        {"key": "c", "label": "  ", "steps": []},
        {"key": "d", "label": 5, "steps": []},
        {"key": "e", "label": "x" * 201, "steps": []},
        {"key": "f", "label": "x" * 200, "steps": []},
    )
    assert errors_of(raw, registry) == [
        "spec.phases[0].label: a label is required",
        "spec.phases[1].label: a label is required",
        "spec.phases[2].label: a label is required",
        "spec.phases[3].label: expected a string; got 5",
        "spec.phases[4].label: at most 200 characters; this one has 201",
    ]


def test_phase_shape_errors(registry: Registry) -> None:
    raw = make(
        "main",
        {"key": "a", "label": "A", "steps": [], "announce": True},
        {"key": "b", "label": "B"},
        {"key": "c", "label": "C", "steps": {}},
    )
    assert errors_of(raw, registry) == [
        "spec.phases[0]: expected an object",
        'spec.phases[1]: unknown key "announce"; expected key, label, steps, advance, countdown',
        "spec.phases[2].steps: expected a list of steps",
        "spec.phases[3].steps: expected a list of steps",
    ]


def test_steps_per_phase_bound_on_both_halves(registry: Registry) -> None:
    assert MAX_STEPS_PER_PHASE == 100
    checked = validate(make(phase("a", [wait()] * 100)), registry)
    assert len(checked["phases"][0]["steps"]) == 100
    assert error_of(make(phase("a", [wait()] * 101)), registry) == (
        "spec.phases[0].steps: at most 100 steps in one phase; this one has 101"
    )


def test_total_steps_bound_on_both_halves(registry: Registry) -> None:
    assert MAX_STEPS == 500
    full = [phase(f"p{i}", [wait()] * 100) for i in range(5)]
    assert sum(len(p["steps"]) for p in validate(make(*full), registry)["phases"]) == 500
    assert error_of(make(*full, phase("extra", [wait()])), registry) == (
        "spec.phases: at most 500 steps across all phases; this spec has 501"
    )


# ── steps ──


def test_step_defaults_come_from_the_declaration(registry: Registry) -> None:
    checked = validate(
        make(
            phase(
                "main",
                [announce(), wait(), summon(), tune(), {"action": "kit.burn"}],
            )
        ),
        registry,
    )
    steps = checked["phases"][0]["steps"]
    assert steps[0] == {
        "action": "core.announce",
        "label": "Announce",
        "params": {"leg": "core.log", "message": "Hello"},
        "on_failure": "skip",
        "action_version": 1,
        "dormant": False,
    }
    assert [s["on_failure"] for s in steps] == ["skip", "skip", "pause", "skip", "abort_run"]
    assert [s["label"] for s in steps] == ["Announce", "Wait", "Summon wisps", "Tune", "Burn"]
    assert steps[3]["action_version"] == 3
    assert steps[3]["params"] == {}  # optional params absent are omitted, not nulled
    assert steps[4]["params"] == {}


def test_step_overrides_are_kept_and_output_only_fields_recomputed(registry: Registry) -> None:
    raw = {
        "action": "kit.tune",
        "label": "My tune",
        "params": {"level": 1, "name": None, "ratio": ""},
        "on_failure": "abort_run",
        "action_version": 99,
        "dormant": True,
    }
    (step,) = validate(make(phase("main", [raw])), registry)["phases"][0]["steps"]
    assert step == {
        "action": "kit.tune",
        "label": "My tune",
        "params": {"level": 1},
        "on_failure": "abort_run",
        "action_version": 3,
        "dormant": False,
    }


def test_step_label_is_bounded_and_blank_means_default(registry: Registry) -> None:
    ok = validate(
        make(phase("main", [announce(label="x" * 200), announce(label=""), announce(label=" ")])),
        registry,
    )
    assert [s["label"] for s in ok["phases"][0]["steps"]] == ["x" * 200, "Announce", "Announce"]
    bad = make(phase("main", [announce(label="x" * 201), announce(label=["a"])]))
    assert errors_of(bad, registry) == [
        "spec.phases[0].steps[0].label: at most 200 characters; this one has 201",
        'spec.phases[0].steps[1].label: expected a string; got ["a"]',
    ]


def test_step_shape_errors(registry: Registry) -> None:
    raw = make(
        phase(
            "main",
            [
                "core.wait",
                {"actionId": "core.wait", "params": {"seconds": 1}},
                {"action": "", "params": {}},
                {"action": "nobody.thing"},
                {**wait(), "on_failure": "retry"},
                {"action": "core.wait", "params": [5]},
            ],
        )
    )
    assert errors_of(raw, registry) == [
        "spec.phases[0].steps[0]: expected an object",
        'spec.phases[0].steps[1]: unknown key "actionId"; '
        "expected action, label, params, on_failure, hold_seconds, action_version, dormant",
        "spec.phases[0].steps[1].action: a step needs an action id; got null",
        'spec.phases[0].steps[2].action: a step needs an action id; got ""',
        'spec.phases[0].steps[3].action: no plugin registers "nobody.thing"',
        'spec.phases[0].steps[4].on_failure: expected one of skip, pause, abort_run; got "retry"',
        "spec.phases[0].steps[5].params: expected an object; got [5]",
    ]


def test_params_unknown_and_required(registry: Registry) -> None:
    raw = make(
        phase(
            "main",
            [
                {"action": "wisps.summon", "params": {"colour": "north", "creatures": 3}},
                {"action": "wisps.summon", "params": {"colour": "", "count": None}},
                {"action": "wisps.summon"},
            ],
        )
    )
    path = "spec.phases[0].steps"
    assert errors_of(raw, registry) == [
        f'{path}[0].params: "creatures" is not a param of wisps.summon',
        f'{path}[0].params: "count" is required',
        f'{path}[1].params: "colour" is required',
        f'{path}[1].params: "count" is required',
        f'{path}[2].params: "colour" is required',
        f'{path}[2].params: "count" is required',
    ]


@pytest.mark.parametrize(
    ("params", "normalised"),
    [
        ({"level": 5}, {"level": 5}),
        ({"level": -3}, {"level": -3}),
        ({"level": 5.0}, {"level": 5}),  # a whole number, as JSON Schema counts it
        ({"ratio": 5}, {"ratio": 5}),
        ({"ratio": 2.5}, {"ratio": 2.5}),
        ({"loud": False}, {"loud": False}),
        ({"loud": True}, {"loud": True}),
        ({"name": "0"}, {"name": "0"}),
        ({"name": "x" * MAX_STRING_PARAM}, {"name": "x" * 4000}),
        ({"level": 0, "ratio": 0, "loud": False}, {"level": 0, "ratio": 0, "loud": False}),
    ],
)
def test_param_types_accepted(
    params: dict[str, Any], normalised: dict[str, Any], registry: Registry
) -> None:
    (step,) = validate(make(phase("main", [tune(**params)])), registry)["phases"][0]["steps"]
    assert step["params"] == normalised


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"level": True}, '"level" must be an integer; got true'),
        ({"level": 5.5}, '"level" must be an integer; got 5.5'),
        ({"level": "5"}, '"level" must be an integer; got "5"'),
        ({"ratio": True}, '"ratio" must be a number; got true'),
        ({"ratio": "2.5"}, '"ratio" must be a number; got "2.5"'),
        ({"ratio": float("nan")}, '"ratio" must be a finite number; got NaN'),
        ({"ratio": float("inf")}, '"ratio" must be a finite number; got Infinity'),
        ({"loud": 1}, '"loud" must be true or false; got 1'),
        ({"loud": "true"}, '"loud" must be true or false; got "true"'),
        ({"name": 5}, '"name" must be a string; got 5'),
        ({"name": ["a"]}, '"name" must be a string; got ["a"]'),
        (
            {"name": "caf\udce9"},  # bytes that were not UTF-8, as Python keeps them
            '"name" must be text; it holds U+DCE9, half of a surrogate pair alone (a byte that '
            'is not UTF-8); got "caf\\udce9"',
        ),
        ({"name": "x" * 4001}, '"name" is at most 4000 characters; this one has 4001'),
    ],
)
def test_param_types_refused(params: dict[str, Any], error: str, registry: Registry) -> None:
    assert error_of(make(phase("main", [tune(**params)])), registry) == (
        f"spec.phases[0].steps[0].params: {error}"
    )


# ── gates ──


def gated(advance: Any) -> dict[str, Any]:
    return make(phase("main", [wait()], advance=advance))


def gate_of(advance: Any, registry: Registry) -> Any:
    return validate(gated(advance), registry)["phases"][0].get("advance", "absent")


def test_no_gate_is_omitted(registry: Registry) -> None:
    assert gate_of(None, registry) == "absent"
    assert "advance" not in validate(make(), registry)["phases"][0]


@pytest.mark.parametrize(
    ("after", "normalised"),
    [
        ("1s", "1s"),
        ("90s", "90s"),
        ("60s", "1m"),
        ("120m", "2h"),
        ("1440m", "1d"),
        ("30d", "30d"),
        ("720h", "30d"),
        ("45m", "45m"),
    ],
)
def test_after_gates_are_normalised(after: str, normalised: str, registry: Registry) -> None:
    assert gate_of({"after": after}, registry) == {"after": normalised}


@pytest.mark.parametrize("after", ["0s", "31d", "721h", "1h30m", "1.5h", "30", "m", 30, None])
def test_after_gates_outside_the_grammar_or_bounds(after: Any, registry: Registry) -> None:
    assert error_of(gated({"after": after}), registry) == (
        'spec.phases[0].advance.after: expected a duration such as "30m" '
        f"(a whole number of s, m, h or d) from 1s to 30d; got {json.dumps(after)}"
    )


@pytest.mark.parametrize("after", ["", "  "])
def test_a_blank_after_gate_asks_for_a_duration(after: str, registry: Registry) -> None:
    assert error_of(gated({"after": after}), registry) == (
        "spec.phases[0].advance.after: give a duration such as 10m "
        "(a whole number of s, m, h or d); it is blank"
    )


def test_on_gate_count_bound_on_both_halves(registry: Registry) -> None:
    assert MAX_ADVANCE_COUNT == 1000
    assert gate_of({"on": "wisps.caught", "count": 1000}, registry)["count"] == 1000
    assert gate_of({"on": "wisps.caught", "count": 1}, registry)["count"] == 1
    for count in (1001, 0, True, 2.0, "2"):
        assert error_of(gated({"on": "wisps.caught", "count": count}), registry) == (
            "spec.phases[0].advance.count: expected a whole number from 1 to 1000; "
            f"got {json.dumps(count)}"
        )


def test_on_gate_defaults_and_shape(registry: Registry) -> None:
    assert gate_of({"on": "wisps.caught"}, registry) == {
        "on": "wisps.caught",
        "where": None,
        "count": 1,
        "dormant": False,
    }


def test_on_gate_where_is_validated_by_the_condition_grammar(registry: Registry) -> None:
    where = {"any": [{"var": "colour", "op": "in", "value": ["north", "ember"]}]}
    gate = gate_of({"on": "wisps.caught", "where": where, "count": 2}, registry)
    assert gate == {"on": "wisps.caught", "where": where, "count": 2, "dormant": False}
    errors = errors_of(
        gated({"on": "wisps.caught", "where": {"var": "regoin", "op": "eq", "value": "x"}}),
        registry,
    )
    assert errors == [
        'spec.phases[0].advance.where.var: "regoin" is not a variable of "wisps.caught"'
    ]


@pytest.mark.parametrize(
    ("advance", "error"),
    [
        ("10m", 'expected an object with "after" or "on"; got "10m"'),
        ({}, 'expected exactly one of "after", "on" or "reading"'),
        ({"where": {}}, 'expected exactly one of "after", "on" or "reading"'),
        (
            {"after": "10m", "on": "wisps.caught"},
            'expected exactly one of "after", "on" or "reading"',
        ),
        ({"after": "10m", "count": 2}, 'unknown key "count" for an "after" gate; expected after'),
        (
            {"after": "10m", "dormant": False},
            'unknown key "dormant" for an "after" gate; expected after',
        ),
        (
            {"on": "wisps.caught", "timeout": "1h"},
            'unknown key "timeout" for an "on" gate; '
            "expected on, where, count, dormant, public, label, milestones",
        ),
    ],
)
def test_gate_shape_errors(advance: Any, error: str, registry: Registry) -> None:
    assert error_of(gated(advance), registry) == f"spec.phases[0].advance: {error}"


@pytest.mark.parametrize("trigger", ["", 5, None])
def test_on_gate_needs_a_trigger_id(trigger: Any, registry: Registry) -> None:
    assert error_of(gated({"on": trigger}), registry) == (
        f"spec.phases[0].advance.on: expected a trigger id; got {json.dumps(trigger)}"
    )


def test_gate_on_an_unregistered_trigger_is_dormant_and_keeps_where(registry: Registry) -> None:
    where = {"var": "anything", "op": "whatever", "value": [1]}
    gate = gate_of({"on": "shard.boss_up", "where": where, "count": 2}, registry)
    assert gate == {"on": "shard.boss_up", "where": where, "count": 2, "dormant": True}
    # count is still checked: it does not depend on the trigger's declaration.
    assert error_of(gated({"on": "shard.boss_up", "count": 0}), registry).startswith(
        "spec.phases[0].advance.count:"
    )
    checked = validate(gated({"on": "shard.boss_up"}), registry)
    assert dormant_items(checked) == ["spec.phases[0].advance: shard.boss_up"]


# ── all at once ──


def test_every_error_is_reported_at_once(registry: Registry) -> None:
    raw = {
        "schedule": {"kind": "weekly", "days": ["friday"], "time": "8pm"},
        "phases": [
            phase("Muster", [summon(count=True), {"action": "nobody.thing"}]),
            phase("muster", [{"action": "wisps.summon", "params": {"colour": "north"}}]),
            phase("end", [wait("5")], advance={"after": "0s"}),
            phase("end", [], advance={"on": "wisps.caught", "where": {"var": "x"}}),
        ],
        "announcements": [],
    }
    assert errors_of(raw, registry) == [
        'spec: unknown key "announcements"; expected params, schedule, phases, announcement, '
        "acknowledge, catch_up, blackouts, start_when, requires",
        'spec.schedule.time: expected a 24-hour time as "HH:MM"; got "8pm"',
        'spec.phases[0].key: "Muster" is not a phase key; expected a slug such as "wind-down" '
        "(lowercase letters and digits, words joined by - or _)",
        'spec.phases[0].steps[0].params: "count" must be an integer; got true',
        'spec.phases[0].steps[1].action: no plugin registers "nobody.thing"',
        'spec.phases[1].steps[0].params: "count" is required',
        'spec.phases[2].steps[0].params: "seconds" must be an integer; got "5"',
        'spec.phases[2].advance.after: expected a duration such as "30m" '
        '(a whole number of s, m, h or d) from 1s to 30d; got "0s"',
        'spec.phases[3].key: "end" is already the key of spec.phases[2]',
        'spec.phases[3].advance.where.var: "x" is not a variable of "wisps.caught"',
        'spec.phases[3].advance.where: "op" is required',
        'spec.phases[3].advance.where: "value" is required',
    ]


def test_a_refused_spec_leaves_the_input_untouched(registry: Registry) -> None:
    raw = rich()
    raw["phases"][0]["steps"].append({"action": "nobody.thing"})
    before = copy.deepcopy(raw)
    errors_of(raw, registry)
    validate(rich(), registry)
    assert raw == before


# ── idempotence ──


def test_validate_accepts_its_own_output(registry: Registry) -> None:
    checked = validate(rich(), registry)
    assert validate(checked, registry) == checked
    # ... and its own output after a trip through the JSON column.
    assert validate(json.loads(json.dumps(checked)), registry, stored=checked) == checked
    assert checked["schedule"] == {"kind": "weekly", "days": ["monday", "friday"], "time": "20:00"}
    assert checked["phases"][2]["advance"] == {"after": "2h"}
    assert checked["phases"][1]["advance"] == {
        "on": "kit.rang",
        "where": None,
        "count": 1,
        "dormant": False,
    }
    assert checked["phases"][1]["steps"][1] == {
        "action": "kit.burn",
        "label": "Burn it",
        "params": {},
        "on_failure": "skip",
        "action_version": 1,
        "dormant": False,
    }
    assert dormant_items(checked) == []


def test_validate_accepts_its_own_output_with_dormant_parts(
    registry: Registry, uninstalled: Registry
) -> None:
    stored = validate(rich(), registry)
    dormant = validate(stored, uninstalled, stored=stored)
    assert dormant_items(dormant)  # the case under test really is dormant
    assert validate(dormant, uninstalled, stored=dormant) == dormant
    assert validate(json.loads(json.dumps(dormant)), uninstalled, stored=dormant) == dormant


# ── dormancy across an uninstall ──


def test_uninstalling_a_plugin_keeps_its_steps_and_gates_dormant(
    registry: Registry, uninstalled: Registry
) -> None:
    stored = validate(rich(), registry)
    after = validate(stored, uninstalled, stored=stored)
    muster = after["phases"][0]
    assert muster["steps"][2] == {
        "action": "wisps.summon",
        "label": "Summon wisps",
        "params": {"colour": "north", "count": 2},
        "on_failure": "pause",
        "action_version": 1,
        "dormant": True,
    }
    assert muster["advance"] == {**stored["phases"][0]["advance"], "dormant": True}
    # Everything the uninstall did not touch is exactly as it was.
    assert muster["steps"][:2] == stored["phases"][0]["steps"][:2]
    assert after["phases"][1:] == stored["phases"][1:]
    assert dormant_items(after) == [
        "spec.phases[0].steps[2]: wisps.summon",
        "spec.phases[0].advance: wisps.caught",
    ]


def test_reinstalling_brings_dormant_steps_back_to_life(
    registry: Registry, uninstalled: Registry
) -> None:
    stored = validate(rich(), registry)
    dormant = validate(stored, uninstalled, stored=stored)
    assert validate(dormant, registry, stored=dormant) == stored
    # Back to life means checked again: params edited while dormant answer for themselves.
    dormant["phases"][0]["steps"][2]["params"]["count"] = "many"
    assert error_of(dormant, registry, stored=dormant) == (
        'spec.phases[0].steps[2].params: "count" must be an integer; got "many"'
    )


def test_a_new_step_may_not_name_an_unregistered_action(
    registry: Registry, uninstalled: Registry
) -> None:
    stored = validate(make(phase("main", [wait()])), registry)
    edited = make(phase("main", [wait(), summon()]))
    assert error_of(edited, uninstalled, stored=stored) == (
        'spec.phases[0].steps[1].action: no plugin registers "wisps.summon"'
    )
    assert error_of(edited, uninstalled) == error_of(edited, uninstalled, stored=stored)


def test_an_action_already_stored_may_appear_in_further_steps(
    registry: Registry, uninstalled: Registry
) -> None:
    # Dormancy is keyed by action id, as in the reference: what the stored spec names.
    stored = validate(make(phase("main", [summon()])), registry)
    edited = make(phase("main", [summon(), wait()]), phase("more", [summon(colour="ember")]))
    checked = validate(edited, uninstalled, stored=stored)
    assert dormant_items(checked) == [
        "spec.phases[0].steps[0]: wisps.summon",
        "spec.phases[1].steps[0]: wisps.summon",
    ]


def test_a_dormant_step_is_kept_verbatim_with_safe_defaults(uninstalled: Registry) -> None:
    stored = {"phases": [{"key": "main", "label": "Main", "steps": [{"action": "gone.thing"}]}]}
    raw = make(
        phase(
            "main",
            [
                {
                    "action": "gone.thing",
                    "params": {"anything": [1, {"x": None}], "": "kept"},
                    "on_failure": "explode",
                    "action_version": True,
                    "dormant": False,
                },
                {"action": "gone.thing", "params": "odd", "label": "", "action_version": 4},
                {"action": "gone.thing", "label": "Mine", "on_failure": "skip"},
            ],
        )
    )
    steps = validate(raw, uninstalled, stored=stored)["phases"][0]["steps"]
    assert steps == [
        {
            "action": "gone.thing",
            "label": "gone.thing",
            "params": {"anything": [1, {"x": None}], "": "kept"},
            "on_failure": "pause",
            "action_version": 1,
            "dormant": True,
        },
        {
            "action": "gone.thing",
            "label": "gone.thing",
            "params": {},
            "on_failure": "pause",
            "action_version": 4,
            "dormant": True,
        },
        {
            "action": "gone.thing",
            "label": "Mine",
            "params": {},
            "on_failure": "skip",
            "action_version": 1,
            "dormant": True,
        },
    ]


def test_a_dormant_step_still_refuses_unknown_keys(uninstalled: Registry) -> None:
    stored = {"phases": [{"key": "main", "label": "Main", "steps": [{"action": "gone.thing"}]}]}
    raw = make(phase("main", [{"action": "gone.thing", "onFailure": "skip"}]))
    assert error_of(raw, uninstalled, stored=stored) == (
        'spec.phases[0].steps[0]: unknown key "onFailure"; '
        "expected action, label, params, on_failure, hold_seconds, action_version, dormant"
    )


def test_a_malformed_stored_spec_is_read_for_what_it_names(uninstalled: Registry) -> None:
    stored: dict[str, Any] = {"phases": ["junk", {"steps": [7, {"action": "gone.thing"}]}]}
    raw = make(phase("main", [{"action": "gone.thing"}]))
    assert dormant_items(validate(raw, uninstalled, stored=stored)) == [
        "spec.phases[0].steps[0]: gone.thing"
    ]


def test_dormant_items_ignores_what_is_not_dormant() -> None:
    assert dormant_items(None) == []
    assert dormant_items(empty_spec()) == []
    assert dormant_items({"phases": [{"steps": [{"action": "a.b", "dormant": "yes"}]}]}) == []


def test_module_exports_its_bounds() -> None:
    assert (spec.MAX_AFTER_SECONDS, spec.MIN_AFTER_SECONDS) == (30 * 86_400, 1)
    assert spec.MAX_STRING_PARAM == 4000


# ── the wording every checker of authored JSON shares ──

_RUNG = {"before": ["5m"], "legs": ["core.log"], "message": "In {remaining}"}
_PUBLIC_GATE = {"on": "wisps.caught", "count": 50, "public": True, "label": "Caught"}
_AT = {"at": [50], "legs": ["core.log"], "message": "{count} of {target}"}


@pytest.mark.parametrize(
    ("top", "expected"),
    [
        ({"blackouts": "night"}, 'spec.blackouts: expected a list of blackout slugs; got "night"'),
        ({"blackouts": ["night"] * 21}, "spec.blackouts: at most 20 blackouts; this has 21"),
        ({"params": {}}, "spec.params: expected a list of params; got {}"),
        (
            {"params": [{"name": f"p{i}", "type": "string"} for i in range(21)]},
            "spec.params: at most 20 params; this spec has 21",
        ),
        ({"phases": []}, "spec.phases: expected a non-empty list of phases"),
        ({"requires": []}, "spec.requires: expected an object with event and within; got []"),
        (
            {"requires": {"event": "muster", "within": "7d", "when": 1}},
            'spec.requires: unknown key "when"; expected event, outcome, within',
        ),
        ({"catch_up": "one"}, 'spec.catch_up: expected an object with a policy; got "one"'),
        (
            {"catch_up": {"policy": "one", "within": "3h", "late": 1}},
            'spec.catch_up: unknown key "late"; expected policy, within',
        ),
        (
            {"phases": [phase(countdown={**_RUNG, "before": []})]},
            'spec.phases[0].countdown.before: expected a list of durations such as ["30m", '
            '"5m"]; got []',
        ),
        (
            {"phases": [phase(countdown={**_RUNG, "legs": ["core.log"] * 6})]},
            "spec.phases[0].countdown.legs: at most 5 legs; got 6",
        ),
        (
            {"phases": [phase(countdown=[])]},
            "spec.phases[0].countdown: expected an object with before, legs and message; got []",
        ),
        (
            {"phases": [phase(steps=[{"action": "core.wait", "params": [5]}])]},
            "spec.phases[0].steps[0].params: expected an object; got [5]",
        ),
        (
            {"phases": [phase(advance={**_PUBLIC_GATE, "milestones": {**_AT, "at": [1] * 11}})]},
            "spec.phases[0].advance.milestones.at: at most 10 milestones; got 11",
        ),
        (
            {"phases": [phase(advance={**_PUBLIC_GATE, "milestones": {**_AT, "at": 50}})]},
            "spec.phases[0].advance.milestones.at: expected a list of percentages such as "
            "[25, 50, 75, 100]; got 50",
        ),
    ],
)
def test_a_refused_list_or_object_is_named_with_its_own_sentence(
    registry: Registry, top: dict[str, Any], expected: str
) -> None:
    assert error_of(make(**top), registry) == expected
