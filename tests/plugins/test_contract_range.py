"""The contract-range grammar: every form admits and refuses on both of its edges."""

from __future__ import annotations

import pytest

from pageant.hookspecs import CONTRACT_VERSION
from pageant.plugins.ranges import BadRange, parse_range


def admits(text: str, version: str) -> bool:
    return parse_range(text).admits(version)


@pytest.mark.parametrize(
    ("text", "inside", "outside"),
    [
        # ^X.Y: >=X.Y.0 <(X+1).0.0
        ("^1.2", ["1.2.0", "1.2.1", "1.99.99"], ["1.1.99", "2.0.0", "0.9.0"]),
        ("^1", ["1.0.0", "1.99.99"], ["0.99.99", "2.0.0"]),
        ("^1.2.3", ["1.2.3", "1.99.0"], ["1.2.2", "2.0.0"]),
        # below 1.0 the minor is the breaking part
        ("^0.3", ["0.3.0", "0.3.99"], ["0.2.99", "0.4.0"]),
        ("^0.3.1", ["0.3.1", "0.3.99"], ["0.3.0", "0.4.0"]),
        # ^0 is anything before 1.0; ^0.0 is anything before 0.1
        ("^0", ["0.0.0", "0.99.99"], ["1.0.0"]),
        ("^0.0", ["0.0.0", "0.0.99"], ["0.1.0"]),
        # ^0.0.3 is exactly 0.0.3
        ("^0.0.3", ["0.0.3"], ["0.0.2", "0.0.4"]),
        # ~X.Y[.Z]: >=X.Y.Z <X.(Y+1).0
        ("~1.2", ["1.2.0", "1.2.99"], ["1.1.99", "1.3.0"]),
        ("~1.2.3", ["1.2.3", "1.2.99"], ["1.2.2", "1.3.0"]),
        ("~0.3", ["0.3.0", "0.3.7"], ["0.2.9", "0.4.0"]),
        # comparisons: all must hold
        (">=1.2 <2", ["1.2.0", "1.99.99"], ["1.1.99", "2.0.0"]),
        (">1.0", ["1.0.1", "7.0.0"], ["1.0.0", "0.9.9"]),
        ("<=1.0", ["1.0.0", "0.0.1"], ["1.0.1", "2.0.0"]),
        ("<2", ["1.99.99"], ["2.0.0"]),
        ("=1.0.0", ["1.0.0"], ["0.99.99", "1.0.1"]),
        (">=1.0.5 <=1.1", ["1.0.5", "1.1.0"], ["1.0.4", "1.1.1"]),
    ],
)
def test_range_admits_inside_and_refuses_outside(
    text: str, inside: list[str], outside: list[str]
) -> None:
    for version in inside:
        assert admits(text, version), f"{text} should admit {version}"
    for version in outside:
        assert not admits(text, version), f"{text} should refuse {version}"


def test_contradictory_comparisons_admit_nothing() -> None:
    assert not any(admits(">=2 <1", v) for v in ("0.5.0", "1.0.0", "1.5.0", "2.0.0"))


def test_surrounding_whitespace_is_ignored() -> None:
    assert admits("  ^1.0\n", "1.4.0")
    assert admits(">=1.2   <2", "1.5.0")


@pytest.mark.parametrize(
    "text",
    [
        "1.x",
        "",
        "   ",
        "^",
        "~1",
        ">=a",
        "1.0",
        "^1.2.3.4",
        "~",
        "^1.x",
        ">= 1.0",
        "=>1.0",
        "^1.0 || ^2.0",
        "latest",
        "*",
        "v1.0",
        "^-1",
    ],
)
def test_anything_outside_the_grammar_is_a_bad_range(text: str) -> None:
    with pytest.raises(BadRange, match="bad contract range"):
        parse_range(text)


def test_bad_range_names_the_part_it_does_not_understand() -> None:
    with pytest.raises(BadRange) as caught:
        parse_range(">=1.2 1.x")
    assert "'1.x' is not understood" in str(caught.value)
    assert "expected ^X.Y, ~X.Y or comparisons" in str(caught.value)


def test_a_range_that_is_not_text_is_a_bad_range() -> None:
    with pytest.raises(BadRange, match="bad contract range"):
        parse_range(None)  # type: ignore[arg-type]  # the wrong type is the point


def test_the_host_admits_plugins_written_against_its_own_major() -> None:
    major = CONTRACT_VERSION.split(".")[0]
    assert admits(f"^{major}.0", CONTRACT_VERSION)
    assert not admits(f"^{int(major) + 1}.0", CONTRACT_VERSION)
