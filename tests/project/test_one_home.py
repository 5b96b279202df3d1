"""A concept defined once: the world-changing risks live in ``hookspecs/models.py`` only."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pageant.hookspecs.models import WORLD_CHANGING_RISKS, changes_world

ROOT = Path(__file__).resolve().parents[2]
HOME = ROOT / "hookspecs" / "models.py"
WORLD_CHANGING = {"change", "irreversible"}


def copies(path: Path) -> list[int]:
    """Lines of ``path`` holding a tuple, list or set literal of exactly the two risks."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Tuple | ast.List | ast.Set) and len(node.elts) == 2:
            values = {e.value for e in node.elts if isinstance(e, ast.Constant)}
            if values == WORLD_CHANGING:
                found.append(node.lineno)
    return found


@pytest.mark.parametrize(
    ("risk", "changes"),
    [("notify", False), ("inspect", False), ("change", True), ("irreversible", True)],
)
def test_changes_world_by_risk(risk: str, changes: bool) -> None:
    assert changes_world(risk) is changes


def test_the_world_changing_risks_read_in_rising_order() -> None:
    # Messages join them: "only change and irreversible actions' resources are recorded".
    assert WORLD_CHANGING_RISKS == ("change", "irreversible")


def test_the_world_changing_risks_are_written_down_once() -> None:
    where = [
        f"{path.relative_to(ROOT)}:{line}"
        for top in ("host", "hookspecs", "builtin_plugins")
        for path in sorted((ROOT / top).rglob("*.py"))
        if path != HOME
        for line in copies(path)
    ]
    assert not where, (
        f"a copy of the world-changing risks at {', '.join(where)}; expected "
        "changes_world() or WORLD_CHANGING_RISKS from pageant.hookspecs.models"
    )
    assert copies(HOME), "expected the one definition in hookspecs/models.py"


def test_a_copy_is_found(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('OFF = frozenset({"irreversible", "change"})\nOK = ("change", "x")\n')
    assert copies(module) == [1]
