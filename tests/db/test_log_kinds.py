"""The run log's kinds are one enumeration: docs/runs.md lists exactly its members, the host
spells a kind only through it, and every member has a writer."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from pageant.db.log_kinds import LogKind

ROOT = Path(__file__).resolve().parents[2]
HOST = ROOT / "host"
ENUM_FILE = HOST / "db" / "log_kinds.py"
# The console's renderings read kinds, they do not write them.
READERS = {HOST / "runs" / "console_text.py", HOST / "runs" / "sentences.py"}
TABLE = re.compile(
    r"<!-- log-kinds -->\n\| kind \| written when \|\n\| --- \| --- \|\n((?:\|.*\n)+)"
)
ROW = re.compile(r"^\| `([^`]+)` \|")


def documented_kinds(text: str) -> list[str]:
    found = TABLE.search(text)
    assert found is not None, "docs/runs.md lost its <!-- log-kinds --> table"
    rows = found.group(1).splitlines()
    kinds = [m.group(1) for m in map(ROW.match, rows) if m is not None]
    assert len(kinds) == len(rows), "every row of the log-kinds table starts with a `kind`"
    return kinds


def test_the_runs_guide_lists_exactly_the_enumeration() -> None:
    kinds = documented_kinds((ROOT / "docs" / "runs.md").read_text())
    assert len(kinds) == len(set(kinds)), "a kind is listed twice in docs/runs.md"
    enumerated = {kind.value for kind in LogKind}
    assert set(kinds) - enumerated == set(), "docs/runs.md lists kinds the code never writes"
    assert enumerated - set(kinds) == set(), "docs/runs.md leaves out kinds the code writes"


def test_the_table_parser_sees_a_missing_or_extra_kind() -> None:
    table = "<!-- log-kinds -->\n| kind | written when |\n| --- | --- |\n"
    text = table + "| `run.status` | x |\n| `run.nowhere` | y |\n\nAfter.\n"
    assert documented_kinds(text) == ["run.status", "run.nowhere"]
    assert set(documented_kinds(text)) != {kind.value for kind in LogKind}


def _string_literals(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]


def test_the_host_spells_a_kind_only_through_the_enumeration() -> None:
    values = {kind.value for kind in LogKind}
    spelt = [
        f"{path.relative_to(ROOT)}:{line} {value!r}"
        for path in sorted(HOST.rglob("*.py"))
        if path != ENUM_FILE
        for line, value in _string_literals(path)
        if value in values
    ]
    assert spelt == [], "use pageant.db.log_kinds.LogKind instead of a literal kind"


def test_every_kind_has_a_writer() -> None:
    host_code = "\n".join(
        path.read_text() for path in HOST.rglob("*.py") if path != ENUM_FILE and path not in READERS
    )
    # Core's actions reach the log through their step services, by the kind's value.
    builtin = {
        value
        for path in (ROOT / "builtin_plugins").rglob("*.py")
        for _, value in _string_literals(path)
    }
    unwritten = [
        kind.value
        for kind in LogKind
        if f"LogKind.{kind.name}" not in host_code and kind.value not in builtin
    ]
    assert unwritten == []
