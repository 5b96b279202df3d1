"""docs/deliberate-repetition.md stays true: every place it lists is a file of ``host/`` and,
where it names one, a function, method, class or module-level name defined in that file.

A pair is left out of the repetition count by the names of its places; a name that no
longer exists would leave out nothing, or the wrong thing, and the count would drift.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "deliberate-repetition.md"

#: One place of a listed pair: "`api/routes/link.py:sync`" or "`cli/events.py`".
_PLACE = re.compile(r"`(?P<path>[\w/]+\.(?:py|html))(?::(?P<name>[A-Za-z_][\w.]*))?`")
#: A listed pair: a line of the list or a row of the table naming two places.
_PAIR = re.compile(r"^(?:- |\| )`[\w/]+\.(?:py|html)[^`]*`[^~]*~ `")


def _defined(path: Path) -> set[str]:
    """Every dotted name defined in ``path``: functions, classes, methods, assignments."""
    names: set[str] = set()

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(prefix + child.name)
                walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.Assign):
                names.update(prefix + t.id for t in child.targets if isinstance(t, ast.Name))

    walk(ast.parse(path.read_text()), "")
    return names


def _pairs() -> list[str]:
    return [line for line in PAGE.read_text().splitlines() if _PAIR.match(line)]


def test_the_page_lists_pairs() -> None:
    assert len(_pairs()) > 50


def test_every_place_it_lists_exists() -> None:
    for line in _pairs():
        places = list(_PLACE.finditer(line))
        assert len(places) >= 2, line
        for place in places[:2]:
            path = ROOT / "host" / place["path"]
            assert path.is_file(), f"{line}: {place['path']} is not a file of host/"
            if place["name"] is not None:
                assert place["name"] in _defined(path), (
                    f"{line}: {place['path']} defines no {place['name']}"
                )
