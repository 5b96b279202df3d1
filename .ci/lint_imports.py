#!/usr/bin/env python3
"""Check pageant's import contracts (``[tool.importlinter]`` in pyproject.toml).

import-linter reads a package from the folder it is imported from, but pageant is three
folders mapped into one namespace (``host/`` is ``pageant``, ``hookspecs/`` is
``pageant.hookspecs``, ...), and the editable install maps them with an import hook that
import-linter cannot walk. So the folders are copied into one ``pageant`` tree as a plain
install lays them out (the ``package-dir`` mapping of pyproject.toml) and ``lint-imports``
runs over that copy, with the contracts of ``--root``'s pyproject.toml.

Usage: ``.venv/bin/python .ci/lint_imports.py [--root REPO]`` - the ``lint-imports`` beside
that interpreter is the one run; its exit status is this script's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path


def stage(root: Path, into: Path) -> None:
    """Copy ``root``'s package folders into ``into`` as one importable tree."""
    config = tomllib.loads((root / "pyproject.toml").read_text())
    mapping: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
    # Parents first, so that pageant.hookspecs lands inside the copied pageant.
    for package, folder in sorted(mapping.items(), key=lambda item: item[0].count(".")):
        shutil.copytree(
            root / folder,
            into.joinpath(*package.split(".")),
            ignore=shutil.ignore_patterns("__pycache__"),
            dirs_exist_ok=True,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    args = parser.parse_args()
    root = args.root.resolve()
    lint = Path(sys.executable).parent / "lint-imports"
    with tempfile.TemporaryDirectory(prefix="pageant-lint-imports-") as folder:
        stage(root, Path(folder))
        # The staged copy comes first on the path, ahead of the editable install's hook.
        env = {**os.environ, "PYTHONPATH": folder}
        command = [str(lint), "--no-cache", "--no-logo", str(root / "pyproject.toml")]
        return subprocess.call(command, cwd=folder, env=env)


if __name__ == "__main__":
    sys.exit(main())
