"""The walks go through the routes people use: no test under ``tests/walks/`` imports the
domain or the storage (``pageant.events``, ``pageant.runs``, ``pageant.db``) to author,
publish, start or read an event. A walk that called the validator and the publisher
directly once claimed a multi-server event worked while the API refused it; a walk authors
through the HTTP API (or the console in a browser) and reads what the API, the run console
or the command line shows."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WALKS = ROOT / "tests" / "walks"
#: The packages a walk must not import: what it would author, publish, start or read with,
#: past the routes.
FORBIDDEN = ("pageant.events", "pageant.runs", "pageant.db")


def _forbidden(module: str) -> bool:
    return any(module == name or module.startswith(name + ".") for name in FORBIDDEN)


def forbidden_imports(source: str) -> list[str]:
    """Each import in ``source`` of a forbidden package, as ``line N: module``: ``import
    pageant.db``, ``from pageant.runs.console import console``, ``from pageant import
    events`` (a package named as a name of ``pageant``), and ``importlib.import_module`` or
    ``__import__`` of such a name written out."""
    found = []
    for node in ast.walk(ast.parse(source)):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif (
            isinstance(node, ast.Call)
            and (
                (isinstance(node.func, ast.Name) and node.func.id == "__import__")
                or (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
            )
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            modules = [node.args[0].value]
        for module in modules:
            if _forbidden(module):
                found.append(f"line {node.lineno}: {module}")
                break
    return found


def test_no_walk_imports_the_domain_or_the_storage() -> None:
    walks = sorted(WALKS.rglob("*.py"))
    assert walks, "no walks found"
    offences = {
        str(path.relative_to(ROOT)): found
        for path in walks
        if (found := forbidden_imports(path.read_text()))
    }
    assert offences == {}, (
        "a walk authors, publishes, starts and reads through the HTTP API, the console or "
        f"the command line, never by importing {', '.join(FORBIDDEN)}: {offences}"
    )


@pytest.mark.parametrize(
    "source",
    [
        "import pageant.db",
        "import pageant.db.engine as engine",
        "from pageant.runs.console import console",
        "from pageant.events.authoring import validator",
        "from pageant import events",
        "from pageant import hookimpl, runs",
        "def f():\n    from pageant.db.tables import event_runs",
        "import importlib\nimportlib.import_module('pageant.runs.create')",
        "__import__('pageant.events')",
    ],
)
def test_the_rule_finds_each_way_of_importing_them(source: str) -> None:
    assert forbidden_imports(source) != []


@pytest.mark.parametrize(
    "source",
    [
        "from pageant import hookimpl",
        "import pageant",
        "from pageant.access.tokens import create_token",
        "from pageant.hosting import Host",
        "from pageant.dbx import thing",
        "import pageant_shard.world",
        "from . import events",
        "from tests.processes import Serve",
    ],
)
def test_the_rule_leaves_the_rest_alone(source: str) -> None:
    assert forbidden_imports(source) == []
