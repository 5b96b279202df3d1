"""The Luanti plugin stays small: its Python is at most 300 lines of code (the game link's
promise: a hand-built bridge for the same game took 610), counted by
``benchmarks/plugin_lines.py`` (code lines: no blank lines, comments or docstrings)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LUANTI = ROOT / "example_plugins" / "luanti" / "pageant_luanti"
MOST = 300


@pytest.fixture
def plugin_lines(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import plugin_lines

    return plugin_lines


def test_the_counter_counts_code_and_nothing_else(plugin_lines) -> None:
    source = '''"""A module docstring,
over two lines."""

# a comment
import os


def f(x):
    """A function's docstring."""
    return (
        x  # a trailing comment: the line holds code
    )


class C:
    """A class's."""

    y = "a string that is not a docstring"
'''
    assert plugin_lines.code_lines(source) == 7


def test_the_luanti_plugin_is_at_most_300_lines_of_code(plugin_lines) -> None:
    counts = plugin_lines.count(LUANTI)
    assert set(counts) >= {"__init__.py", "catalog.py", "install.py", "settings.py"}
    assert sum(counts.values()) <= MOST, counts
