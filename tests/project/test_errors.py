"""One exception family: every error the host raises at its callers is a ``PageantError``.

A few exceptions stay outside on purpose: signals the host raises and catches itself, and
``ValueError``s that code around them catches as ``ValueError``. Each is named below with
where it is caught; a new exception class outside the family fails the scan.
"""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import pytest

from pageant.cli.scaffold import ScaffoldError, scaffold
from pageant.errors import Invalid, PageantError
from pageant.kit.check import UnknownPlugin
from pageant.kit.manifest import ManifestError
from pageant.plugins.loader import Refusal

ROOT = Path(__file__).resolve().parents[2]

#: Exceptions outside the family, and why they stay there.
INTERNAL = {
    # Caught by advance.py: a lost compare-and-set, never seen by a caller.
    "host/engine/transitions.py:Lost",
    # Caught by batch.py: a kept step had moved, so the batch is retried one by one.
    "host/db/steps.py:Shortfall",
    # Caught by LinkWrites: a bulk compare-and-set came up short, so each write runs alone.
    "host/link/writes.py:Shortfall",
    # Caught by the engine's loop, which backs off.
    "host/engine/contention.py:ContentionPersisted",
    # A ValueError that api/window.py turns into a 400 and validators read as a ValueError.
    "host/support/timefmt.py:OutOfRange",
    # A ValueError the loader turns into a Refusal.
    "host/plugins/ranges.py:BadRange",
    # The docs check of the contract's hooks, run by the tests; a ValueError since it is one.
    "host/kit/hookdocs.py:UndocumentedHook",
    # The contract's link failures, raised to a plugin by context.link.call: the contract
    # imports nothing of the host, so they cannot be PageantErrors.
    "hookspecs/link.py:LinkFailure",
}


def exception_classes() -> dict[str, list[str]]:
    """``path:Class`` -> base names, for each class in host/ and hookspecs/ whose bases
    include a built-in exception (warnings left out: they are not raised)."""
    found: dict[str, list[str]] = {}
    for top in ("host", "hookspecs"):
        for path in sorted((ROOT / top).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for node in ast.walk(tree):
                if not isinstance(node, ast.ClassDef):
                    continue
                bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
                built_in = [getattr(builtins, b, None) for b in bases]
                if any(
                    isinstance(b, type)
                    and issubclass(b, BaseException)
                    and not issubclass(b, Warning)
                    for b in built_in
                ):
                    found[f"{path.relative_to(ROOT).as_posix()}:{node.name}"] = bases
    return found


def test_only_the_named_internal_exceptions_sit_outside_the_family() -> None:
    outside = set(exception_classes()) - {"host/errors.py:PageantError"}
    assert outside == INTERNAL, (
        f"outside PageantError: {sorted(outside - INTERNAL)}; expected a PageantError "
        f"subclass (or a reason in INTERNAL); named but gone: {sorted(INTERNAL - outside)}"
    )


@pytest.mark.parametrize("error", [UnknownPlugin, ManifestError, ScaffoldError])
def test_the_usage_errors_are_invalid(error: type[Exception]) -> None:
    assert issubclass(error, Invalid)


def test_a_plugin_refusal_is_a_pageant_error_keeping_its_message_and_detail() -> None:
    refused = Refusal("no PLUGIN_INFO; expected a dict", detail="frame")
    assert isinstance(refused, PageantError)
    assert (str(refused), refused.message, refused.detail) == (
        "no PLUGIN_INFO; expected a dict",
        "no PLUGIN_INFO; expected a dict",
        "frame",
    )


def test_a_scaffold_refusal_keeps_its_message(tmp_path: Path) -> None:
    with pytest.raises(PageantError, match=r'^"core" is the host.s own owner') as refused:
        scaffold("core", tmp_path)
    assert isinstance(refused.value, ScaffoldError)
    assert not any(tmp_path.iterdir())
