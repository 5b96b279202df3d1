"""Every silenced check says why.

A ``# noqa`` names its codes and a reason after `` - ``: ``# noqa: F401 - re-exported``.
A ``# type: ignore`` names its codes and a reason in a comment of its own after it (mypy
reads nothing else on that line): ``# type: ignore[arg-type]  # the wrong type is the point``.
Only real comments count (tokenize finds them), not text that merely contains the words.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TREES = (
    "host",
    "hookspecs",
    "builtin_plugins",
    "tests",
    "example_plugins",
    "benchmarks",
    ".ci",
    "docs",
)
CODES = r"[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*"
NOQA = re.compile(rf"#\s*noqa\b(?P<codes>:\s*{CODES})?(?P<rest>.*)$", re.IGNORECASE)
IGNORE = re.compile(r"#\s*type:\s*ignore(?P<codes>\[[^\]]*\])?(?P<rest>.*)$")


def bare(source: str) -> list[tuple[int, str]]:
    """(line, comment) for each ``noqa`` or ``type: ignore`` without codes and a reason."""
    found = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        for pattern, reason in ((NOQA, r"\s+-\s+\S"), (IGNORE, r"\s*#\s*\S")):
            match = pattern.search(token.string)
            if match and not (match["codes"] and re.match(reason, match["rest"])):
                found.append((token.start[0], token.string))
    return found


def sources() -> list[Path]:
    return sorted(
        path
        for tree in TREES
        for path in (ROOT / tree).rglob("*.py")
        if not any(_not_ours(part) for part in path.parts)
    )


def _not_ours(part: str) -> bool:
    """Vendored code, builds and virtualenvs (``.venv``, and the benchmarks'
    ``.venv-apscheduler`` that ``throughput.py --setup`` makes): other projects' lines."""
    return part in {"vendor", "build"} or part.startswith(".venv")


def test_every_noqa_and_type_ignore_carries_its_codes_and_a_reason() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {comment}"
        for path in sources()
        for line, comment in bare(path.read_text(encoding="utf-8"))
    ]
    assert not found, "without a code and a reason:\n" + "\n".join(found)


def test_the_scan_reads_the_tree() -> None:
    assert ROOT / "host" / "errors.py" in sources()
    # The tree has reasoned ignores, so the scan must see them as comments.
    assert any("# noqa: E402 - " in path.read_text(encoding="utf-8") for path in sources())


def test_a_bare_or_codeless_ignore_is_found_and_a_reasoned_one_is_not() -> None:
    source = (
        "import os  # noqa\n"
        "import re  # noqa: F401\n"
        "import io  # noqa: F401 - re-exported\n"
        "x: int = None  # type: ignore\n"
        "y: int = None  # type: ignore[assignment]\n"
        "z: int = None  # type: ignore[assignment]  # None means absent\n"
        "w: int = None  # type: ignore  # a reason but no code\n"
        "s = '# noqa'\n"
    )
    assert [line for line, _comment in bare(source)] == [1, 2, 4, 5, 7]
