"""The layering holds: SQL lives in ``db/`` alone, and the import contracts of
pyproject.toml are kept - and broken the moment a forbidden import appears."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: The package folders that are not storage: everything a plugin, the domain, the engine,
#: the API and the CLI are made of.
SCANNED = [ROOT / "host", ROOT / "hookspecs", ROOT / "builtin_plugins"]
DB = ROOT / "host" / "db"

#: What may be imported from SQLAlchemy outside db/: names for type annotations, none of
#: which builds or runs a statement.
TYPE_NAMES = {
    "sqlalchemy.engine": {"Row"},
    "sqlalchemy.ext.asyncio": {"AsyncConnection", "AsyncEngine"},
}
#: Calls that run SQL; outside db/ nothing calls them.
RUNS_SQL = {"execute", "exec_driver_sql", "scalar", "scalars", "stream", "run_sync"}
#: (module path relative to the repository, what) - each with its reason. Empty: nothing
#: outside db/ needs an exception today.
ALLOWED: dict[tuple[str, str], str] = {}


def _outside_db() -> list[Path]:
    return sorted(
        path
        for folder in SCANNED
        for path in folder.rglob("*.py")
        if DB not in path.parents and "__pycache__" not in path.parts
    )


def _sql_in(path: Path, rel: str) -> list[str]:
    """Each import of a statement builder or of the tables, and each SQL-running call, but
    what :data:`ALLOWED` lets ``rel`` (the module's repository path) do."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "sqlalchemy" or alias.name.startswith("sqlalchemy."):
                    found.append(f"line {node.lineno}: import {alias.name}")
                if alias.name == "pageant.db.tables":
                    found.append(f"line {node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            names = {alias.name for alias in node.names}
            if node.module == "sqlalchemy" or node.module.startswith("sqlalchemy."):
                extra = names - TYPE_NAMES.get(node.module, set())
                if extra:
                    found.append(f"line {node.lineno}: from {node.module} import {sorted(extra)}")
            if node.module == "pageant.db.tables" or (
                node.module == "pageant.db" and "tables" in names
            ):
                found.append(f"line {node.lineno}: the tables, from {node.module}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in RUNS_SQL
        ):
            found.append(f"line {node.lineno}: .{node.func.attr}(...)")
    return [what for what in found if (rel, what.split(": ", 1)[1]) not in ALLOWED]


def test_no_module_outside_db_builds_or_runs_sql() -> None:
    offenders = {
        path.relative_to(ROOT).as_posix(): found
        for path in _outside_db()
        if (found := _sql_in(path, path.relative_to(ROOT).as_posix()))
    }
    assert offenders == {}, "SQL belongs in a named function of a host/db/ module"


def test_the_scan_sees_sql_where_there_is_some(tmp_path: Path) -> None:
    # The scan itself is proven on a module that does everything it forbids.
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from sqlalchemy import select\n"
        "from sqlalchemy.ext.asyncio import AsyncConnection\n"
        "from pageant.db.tables import event_runs\n"
        "async def f(conn: AsyncConnection):\n"
        "    return await conn.execute(select(event_runs))\n"
    )
    found = _sql_in(sample, "sample.py")
    assert [f.split(": ", 1)[0] for f in found] == ["line 1", "line 3", "line 5"], found


# ── import-linter ───────────────────────────────────────────────────────────────────────────

LINT = ROOT / ".ci" / "lint_imports.py"
needs_linter = pytest.mark.skipif(
    not (Path(sys.executable).parent / "lint-imports").exists(),
    reason="import-linter is not installed beside this interpreter (pip install -e '.[test]')",
)


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(LINT), "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _copy_of_the_tree(into: Path) -> Path:
    for name in ("host", "hookspecs", "builtin_plugins"):
        shutil.copytree(ROOT / name, into / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", into / "pyproject.toml")
    return into


@needs_linter
def test_the_import_contracts_are_kept() -> None:
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@needs_linter
def test_a_route_importing_the_tables_breaks_a_contract(tmp_path: Path) -> None:
    tree = _copy_of_the_tree(tmp_path)
    route = tree / "host" / "api" / "routes" / "runs.py"
    route.write_text(route.read_text() + "\nfrom pageant.db.tables import event_runs  # noqa\n")
    result = _lint(tree)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "api never imports the tables BROKEN" in result.stdout
    assert "pageant.api.routes.runs -> pageant.db.tables" in result.stdout


@needs_linter
def test_the_engine_importing_the_api_breaks_a_contract(tmp_path: Path) -> None:
    tree = _copy_of_the_tree(tmp_path)
    tick = tree / "host" / "engine" / "tick.py"
    tick.write_text(tick.read_text() + "\nimport pageant.api.app  # noqa\n")
    result = _lint(tree)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "engine never imports api, cli or kit BROKEN" in result.stdout
    assert "no import cycles between siblings BROKEN" in result.stdout
