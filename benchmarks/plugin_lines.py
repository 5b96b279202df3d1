#!/usr/bin/env python3
"""How many lines of code a plugin's Python is: the figure the game link's promise is
measured by (a game that calls out needs a small plugin, the link doing the rest).

The rule: every ``*.py`` file directly in the plugin's package folder (not its tests, not
its game-side mod, not its ``pyproject.toml``) is read with Python's tokenizer, and a line
counts when it holds at least one token that is code. Blank lines and comment-only lines do
not count, and neither do docstrings (the string that opens a module, a class or a
function), however many lines they take. A statement over several lines counts each line.

Usage: ``python benchmarks/plugin_lines.py example_plugins/luanti/pageant_luanti`` prints
each file's count and the total; ``--total`` prints the total alone.
"""

from __future__ import annotations

import argparse
import ast
import io
import sys
import tokenize
from pathlib import Path

#: Tokens that are not code: a line made of these alone does not count.
NOT_CODE = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENCODING,
    tokenize.ENDMARKER,
}


def docstring_lines(tree: ast.AST) -> set[int]:
    """The line numbers every docstring in ``tree`` covers."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                first = body[0]
                lines.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return lines


def code_lines(source: str) -> int:
    """The lines of ``source`` that hold code, by the rule in this module's docstring."""
    skip = docstring_lines(ast.parse(source))
    counted: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in NOT_CODE:
            continue
        for line in range(token.start[0], token.end[0] + 1):
            if line not in skip:
                counted.add(line)
    return len(counted)


def count(package: Path) -> dict[str, int]:
    """Each ``*.py`` file directly in ``package`` and its code lines, sorted by name."""
    return {path.name: code_lines(path.read_text()) for path in sorted(package.glob("*.py"))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("package", type=Path, help="the plugin's package folder")
    parser.add_argument("--total", action="store_true", help="print the total alone")
    args = parser.parse_args(argv)
    if not args.package.is_dir():
        parser.error(f"{args.package} is not a folder")
    counts = count(args.package)
    total = sum(counts.values())
    if args.total:
        print(total)
        return 0
    for name, lines in counts.items():
        print(f"{lines:5d}  {name}")
    print(f"{total:5d}  total")
    return 0


if __name__ == "__main__":
    sys.exit(main())
