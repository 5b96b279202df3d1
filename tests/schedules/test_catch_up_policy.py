"""The catch-up decision as arithmetic: which late occurrences run and which are missed, the
window's edge on both sides, and the words each decision says."""

from __future__ import annotations

from datetime import timedelta

import pytest

from pageant.schedules.catchup import NONE, CatchUp, Late, decide, of_spec
from tests.scheduling import utc

NOW = utc(2026, 10, 25, 2, 0)
THREE_HOURS = CatchUp("all", 3 * 3600)


def late(*hours_ago: float) -> list[Late]:
    return [Late(n, NOW - timedelta(hours=h)) for n, h in enumerate(hours_ago, start=1)]


@pytest.mark.parametrize("policy", ["one", "all"])
def test_the_window_s_edge_is_inside_and_a_second_before_it_is_not(policy):
    catching = CatchUp(policy, 3 * 3600)
    edge = [Late(1, NOW - timedelta(hours=3))]
    (decision,) = decide(catching, edge, NOW)
    assert decision.outcome == "catch_up"
    before = [Late(1, NOW - timedelta(hours=3, seconds=1))]
    (decision,) = decide(catching, before, NOW)
    assert decision.outcome == "missed"
    assert decision.note.endswith(f"older than the catch-up window ({catching.describe()})")


def test_all_runs_each_inside_the_window_in_slot_order():
    decisions = decide(THREE_HOURS, late(0.5, 4, 2.5, 1.5), NOW)
    assert [(d.run_id, d.outcome) for d in decisions] == [
        (2, "missed"),
        (3, "catch_up"),
        (4, "catch_up"),
        (1, "catch_up"),
    ]
    assert decisions[1].note == "catching up after the host was down (catch_up: all, within 3h)"


def test_one_runs_only_the_latest_and_the_earlier_ones_name_it():
    decisions = decide(CatchUp("one", 3 * 3600), late(2.5, 1.5, 0.5, 5), NOW)
    assert [(d.run_id, d.outcome) for d in decisions] == [
        (4, "missed"),
        (1, "missed"),
        (2, "missed"),
        (3, "catch_up"),
    ]
    assert decisions[1].note == (
        "the host was down past its grace window, and a later occurrence (run 3) caught up "
        "instead (catch_up: one, within 3h)"
    )


def test_one_with_nothing_inside_the_window_runs_nothing():
    decisions = decide(CatchUp("one", 3600), late(2, 3), NOW)
    assert [d.outcome for d in decisions] == ["missed", "missed"]


def test_none_decides_nothing_and_leaves_them_to_the_missed_sweep():
    assert decide(NONE, late(1, 2), NOW) == []


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({}, NONE),
        (None, NONE),
        ({"catch_up": {"policy": "none"}}, NONE),
        ({"catch_up": {"policy": "one", "within": "3h"}}, CatchUp("one", 10_800)),
        ({"catch_up": {"policy": "all", "within": "7d"}}, CatchUp("all", 604_800)),
        # Never written by the validator; read as no policy rather than as a guess.
        ({"catch_up": {"policy": "all", "within": "8d"}}, NONE),
        ({"catch_up": {"policy": "all"}}, NONE),
    ],
)
def test_a_spec_s_policy_is_read_as_validated_or_not_at_all(spec, expected):
    assert of_spec(spec) == expected
