"""docs/engine.md stays true: every file it names exists, every function or method it pins to a
file is defined there, and the tick's stages it lists are the tick's, in the tick's order.

The page is for someone about to change the engine; a name in it that no longer exists sends
that person looking for code that moved or went, which is worse than no page at all.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

from pageant.engine.tick import STAGES

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "engine.md"

#: A backticked path of the host's package as the page writes it (``engine/loop.py``,
#: ``hosting.py``), or of the repository (``benchmarks/step_walk.py``).
_PATH = re.compile(r"`(?P<path>[\w/]+\.py)`")
#: "`Name` (`file.py`" and "`file.py`, `Name`": a name pinned to the file beside it.
_NAME_THEN_FILE = re.compile(r"`(?P<name>[A-Za-z_][\w.]*)` \(`(?P<path>[\w/]+\.py)`")
_FILE_THEN_NAME = re.compile(r"`(?P<path>[\w/]+\.py)`, `(?P<name>[A-Za-z_][\w.]*)`")
#: The sentence that lists the tick's stages.
_STAGES = re.compile(r"runs the stages of `engine/tick.py` in order[^:]*: (?P<list>[^.]+)\.")
#: A line of the walk: an optional landmark and climb, a file, then the functions in it.
_WALK_LINE = re.compile(r"(?P<path>[\w/]+\.py)\s+(?P<names>[\w.<>, ]+)$")


def _file(path: str) -> Path:
    for base in (ROOT / "host", ROOT):
        if (base / path).is_file():
            return base / path
    raise AssertionError(f"docs/engine.md names {path}, which is not a file of the project")


@cache
def _defined(path: Path) -> frozenset[str]:
    """Every function, class, method and module-level name the file defines, by dotted name;
    a function nested in another as ``outer.<locals>.inner``, as a stack shows it."""
    names: set[str] = set()

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                names.add(prefix + child.name)
                visit(child, prefix + child.name + ".")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                names.add(prefix + child.name)
                visit(child, prefix + child.name + ".<locals>.")
            elif isinstance(child, ast.Assign | ast.AnnAssign) and not prefix:
                targets = child.targets if isinstance(child, ast.Assign) else [child.target]
                names.update(t.id for t in targets if isinstance(t, ast.Name))
            else:  # an if, a try, a with: what it holds is defined where it stands
                visit(child, prefix)

    visit(ast.parse(path.read_text()), "")
    return frozenset(names)


def _pinned() -> list[tuple[str, str]]:
    text = PAGE.read_text()
    pairs = [(m["path"], m["name"]) for m in _NAME_THEN_FILE.finditer(text)]
    pairs += [(m["path"], m["name"]) for m in _FILE_THEN_NAME.finditer(text)]
    walk = text.split("## The walk of one step", 1)[1].split("```")[1]
    for line in walk.strip().splitlines():
        found = _WALK_LINE.search(line)
        assert found, f"docs/engine.md: a line of the walk names no file: {line!r}"
        pairs += [(found["path"], name.strip()) for name in found["names"].split(",")]
    return pairs


def test_every_file_the_page_names_exists() -> None:
    paths = {m["path"] for m in _PATH.finditer(PAGE.read_text())}
    assert len(paths) >= 10, "the page's file names are no longer read: the pattern is stale"
    for path in sorted(paths):
        _file(path)


def test_every_function_the_page_pins_to_a_file_is_defined_there() -> None:
    pairs = _pinned()
    assert len(pairs) >= 20, "the page's names are no longer read: the patterns are stale"
    wrong = [f"{name} in {path}" for path, name in pairs if name not in _defined(_file(path))]
    assert not wrong, f"docs/engine.md names what its file does not define: {wrong}"


def test_the_tick_stages_the_page_lists_are_the_ticks_in_order() -> None:
    text = PAGE.read_text()
    sentence = _STAGES.search(text)
    assert sentence, "docs/engine.md no longer lists the tick's stages where the test reads them"
    listed = re.findall(r"`(\w+)`", sentence["list"])
    assert listed == [stage.__name__ for stage in STAGES]


def test_a_name_the_page_gets_wrong_is_caught() -> None:
    """The check itself can fail: a method the file does not define is not found."""
    assert "Engine.tick" in _defined(_file("engine/loop.py"))
    assert "Engine.no_such_stage" not in _defined(_file("engine/loop.py"))
    assert "_complete.<locals>.finish" in _defined(_file("engine/advance_stage.py"))
    assert "Done.__call__" in _defined(_file("engine/dispatch.py"))
