"""The engine speaks the state vocabulary it has (:mod:`pageant.states`): no bare string in
``engine/`` spells a run's or a step's status, a health, a cleanup status, an outcome of
moving a run or of dispatching a step, a waiting reason, a resource status or a refusal code.

A bare ``"failed"`` says nothing of which ``failed`` it is (a run's, a step's, an outcome's)
and nothing checks its spelling; the enumerations say both, and a new status is added in
one place and found by every reader. What is not a value is left alone: a mapping's key
(``row["status"]``, ``{"cap": ...}``, ``detail.get("error")``) names a field, not a state.
"""

from __future__ import annotations

import ast
from enum import StrEnum
from pathlib import Path

from pageant import states

ENGINE = Path(__file__).resolve().parents[2] / "host" / "engine"


def _vocabulary() -> frozenset[str]:
    words: set[str] = {states.PARKED}
    for value in vars(states).values():
        if isinstance(value, type) and issubclass(value, StrEnum) and value is not StrEnum:
            words |= {member.value for member in value}
    return frozenset(words)


def _keys(tree: ast.AST) -> set[int]:
    """The ids of the constants that name a field: a dict's keys, a subscript, a ``.get``."""
    keys: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys |= {id(key) for key in node.keys if key is not None}
        elif isinstance(node, ast.Subscript):
            keys.add(id(node.slice))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
        ):
            keys.add(id(node.args[0]))
    return keys


def _docstrings(tree: ast.AST) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def bare_words(source: str) -> list[tuple[int, str]]:
    """``(line, word)`` for each bare string in ``source`` that spells a state word."""
    tree = ast.parse(source)
    words = _vocabulary()
    skip = _keys(tree) | _docstrings(tree)
    return sorted(
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value in words
        and id(node) not in skip
    )


def test_the_engine_spells_no_state_as_a_bare_string() -> None:
    files = sorted(ENGINE.glob("*.py"))
    assert len(files) >= 10
    found = [
        f"engine/{path.name}:{line}: {word!r}"
        for path in files
        for line, word in bare_words(path.read_text())
    ]
    assert not found, "use the enumerations of pageant.states:\n" + "\n".join(found)


def test_a_bare_state_word_is_found_and_a_field_name_is_not() -> None:
    source = (
        'if run["status"] == "running":\n'
        '    return "failed"\n'
        'detail = {"cap": 1, "error": detail.get("error")}\n'
        "status = RunStatus.RUNNING\n"
    )
    assert bare_words(source) == [(1, "running"), (2, "failed")]
