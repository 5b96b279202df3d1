"""Every hook of the contract has a test that exercises it.

A hookspec in ``hookspecs/`` is a promise to plugin authors; a hook no test implements or
calls is a promise nobody checks. A test names a hook when its code (not a comment, not a
string) defines ``def pageant_x`` (a test plugin implementing it) or reaches ``….pageant_x``
(a call through ``hook.pageant_x``). Test files are those under ``tests/`` and under each
example plugin's ``tests/``.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import pageant.hookspecs
from pageant.hookspecs.markers import PROJECT_NAME

ROOT = Path(__file__).resolve().parents[2]
#: The attribute pluggy's HookspecMarker sets on a function it marks.
SPEC_MARK = f"{PROJECT_NAME}_spec"


def hookspecs() -> set[str]:
    """The names of every function a module of ``pageant.hookspecs`` marks as a hookspec."""
    names: set[str] = set()
    for info in pkgutil.iter_modules(pageant.hookspecs.__path__):
        module = importlib.import_module(f"pageant.hookspecs.{info.name}")
        for _name, member in inspect.getmembers(module):
            holders = [member]
            if inspect.isclass(member) and member.__module__ == module.__name__:
                holders += [fn for _n, fn in inspect.getmembers(member, inspect.isfunction)]
            names |= {fn.__name__ for fn in holders if hasattr(fn, SPEC_MARK)}
    return names


def the_test_files() -> list[Path]:
    files = [p for p in (ROOT / "tests").rglob("*.py") if "vendor" not in p.parts]
    files += [p for p in (ROOT / "example_plugins").glob("*/tests/**/*.py")]
    return sorted(p for p in files if p.resolve() != Path(__file__).resolve())


def named_in(path: Path) -> set[str]:
    """The ``pageant_*`` names the code of ``path`` defines or reaches as an attribute."""
    named: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            named.add(node.name)
        elif isinstance(node, ast.Attribute):
            named.add(node.attr)
    return {name for name in named if name.startswith(f"{PROJECT_NAME}_")}


def untested(specs: set[str], files: list[Path]) -> list[str]:
    named: set[str] = set()
    for path in files:
        named |= named_in(path)
    return sorted(specs - named)


def test_the_contract_has_hooks_to_check() -> None:
    # An empty set would make the next test pass without checking anything.
    specs = hookspecs()
    assert {"pageant_actions", "pageant_startup", "pageant_reconcile"} <= specs
    assert all(name.startswith(f"{PROJECT_NAME}_") for name in specs)


def test_every_hook_has_a_test_that_implements_or_calls_it() -> None:
    missing = untested(hookspecs(), the_test_files())
    assert not missing, (
        f"hooks with no test that implements (def {PROJECT_NAME}_x) or calls (hook.x) them: "
        f"{', '.join(missing)}; expected a test for each"
    )


def test_a_hook_named_only_in_a_comment_or_string_counts_as_untested(tmp_path: Path) -> None:
    test = tmp_path / "test_x.py"
    test.write_text(
        "# pageant_new_hook is a comment\n"
        "NOTE = 'pageant_new_hook in a string'\n"
        "def pageant_actions():\n    return []\n"
        "def use(pm):\n    return pm.hook.pageant_startup(context=None)\n",
        encoding="utf-8",
    )
    specs = {"pageant_actions", "pageant_startup", "pageant_new_hook"}
    assert untested(specs, [test]) == ["pageant_new_hook"]
