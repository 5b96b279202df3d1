"""Packaging: what reaches a wheel, and what ``import pageant`` costs.

An editable install imports a package that pyproject.toml forgot; a wheel does not carry it.
These tests read pyproject.toml against the tree so the gap shows here, not on an
operator's machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import textwrap
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]
#: package name -> folder, as pyproject.toml maps them.
PACKAGE_DIRS: dict[str, str] = SETUPTOOLS["package-dir"]


def package_of(folder: Path) -> str | None:
    """The import name setuptools gives ``folder`` under the package-dir mapping."""
    relative = folder.relative_to(ROOT)
    for package, base in sorted(PACKAGE_DIRS.items(), key=lambda kv: -len(kv[1])):
        try:
            rest = relative.relative_to(base)
        except ValueError:
            continue
        return ".".join([package, *rest.parts]) if rest.parts else package
    return None


def shipped_roots() -> list[Path]:
    return [ROOT / base for base in PACKAGE_DIRS.values()]


def python_run(script: str) -> Any:
    # Run in an empty folder, so what is imported is what is installed: neither the source
    # tree nor its parent (where a clone named "pageant" would be found as the package).
    with tempfile.TemporaryDirectory() as empty:
        out = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(script)],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
            cwd=empty,
        ).stdout
    return json.loads(out)


def test_the_contract_version_file_equals_the_constant() -> None:
    from pageant.hookspecs import CONTRACT_VERSION

    recorded = json.loads((ROOT / "contract-version.json").read_text())
    assert recorded == {"version": CONTRACT_VERSION}


def test_the_contract_version_is_semver() -> None:
    from semver import Version

    from pageant.hookspecs import CONTRACT_VERSION

    assert str(Version.parse(CONTRACT_VERSION)) == CONTRACT_VERSION


def test_import_pageant_stays_light() -> None:
    found = python_run(
        """
        import json, sys
        import pageant
        from pageant import hookimpl, hookspec, CONTRACT_VERSION
        import pageant.hookspecs
        heavy = ("aiohttp", "sqlalchemy", "alembic", "aiosqlite", "aiomysql", "asyncmy", "click")
        print(json.dumps(sorted({m.split(".")[0] for m in sys.modules} & set(heavy))))
        """
    )
    assert found == []


def test_the_lightness_check_would_see_a_heavy_import() -> None:
    found = python_run(
        """
        import json, sys
        import pageant.api.app
        print(json.dumps(sorted({m.split(".")[0] for m in sys.modules} & {"aiohttp"})))
        """
    )
    assert found == ["aiohttp"]


def test_version_is_the_installed_distributions() -> None:
    import pageant

    assert pageant.__version__ == PYPROJECT["project"]["version"]
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        pageant.nope  # noqa: B018 - the lazy __getattr__ must refuse unknown names


def test_every_package_folder_is_listed() -> None:
    listed = set(SETUPTOOLS["packages"])
    on_disk = {
        package_of(init.parent)
        for root in shipped_roots()
        for init in root.rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    missing = sorted(p for p in on_disk if p not in listed)
    assert missing == [], f"add these to [tool.setuptools] packages in pyproject.toml: {missing}"
    stale = sorted(listed - on_disk)
    assert stale == [], f"listed in pyproject.toml but not on disk: {stale}"


def folder_of(package: str) -> Path:
    """The folder setuptools reads ``package`` from, under the package-dir mapping."""
    parts = package.split(".")
    for i in range(len(parts), 0, -1):
        base = PACKAGE_DIRS.get(".".join(parts[:i]))
        if base is not None:
            return ROOT / base / Path(*parts[i:])
    return ROOT / Path(*parts)


def package_data() -> set[Path]:
    """Every file the package-data globs select (a glob's "*" stays within one folder)."""
    data: dict[str, list[str]] = SETUPTOOLS.get("package-data", {})
    return {
        path
        for package, patterns in data.items()
        for pattern in patterns
        for path in folder_of(package).glob(pattern)
        if path.is_file()
    }


def test_every_other_file_is_package_data() -> None:
    # Files in folders without __init__.py (the Alembic scripts) and files that are not Python
    # reach a wheel only through package-data.
    listed = set(SETUPTOOLS["packages"])
    shipped = package_data()
    unshipped = sorted(
        str(path.relative_to(ROOT))
        for root in shipped_roots()
        for path in root.rglob("*")
        if path.is_file()
        and "__pycache__" not in path.parts
        and not (path.suffix == ".py" and package_of(path.parent) in listed)
        and path not in shipped
    )
    assert unshipped == [], f"declare these as package-data in pyproject.toml: {unshipped}"


def test_the_alembic_scripts_are_package_data() -> None:
    migrations = ROOT / "host" / "db" / "migrations"
    scripts = {
        path for path in migrations.rglob("*") if path.is_file() and "__pycache__" not in path.parts
    }
    assert migrations / "env.py" in scripts
    assert migrations / "script.py.mako" in scripts
    assert any(path.parent.name == "versions" for path in scripts)
    assert scripts <= package_data()


def test_the_installed_package_finds_its_migrations() -> None:
    from pageant.db.migrate import MIGRATIONS, head_revision

    assert (MIGRATIONS / "env.py").is_file()
    assert head_revision() is not None


def test_the_console_script_names_the_cli() -> None:
    import click

    from pageant import cli

    assert PYPROJECT["project"]["scripts"] == {"pageant": "pageant.cli:main"}
    assert isinstance(cli.main, click.Group)


def test_setuptools_is_new_enough_for_the_package_dir_mapping() -> None:
    requires = PYPROJECT["build-system"]["requires"]
    assert any(r.replace(" ", "").startswith("setuptools>=") for r in requires)
    from packaging.version import Version

    pinned = next(r for r in requires if r.replace(" ", "").startswith("setuptools>="))
    assert Version(pinned.split(">=")[1]) >= Version("69")


def test_pageant_testing_imports_without_pytest() -> None:
    # A plain install (no test extra) imports every module, pageant.testing included; only
    # its fixtures need pytest.
    found = python_run(
        """
        import json, sys
        sys.modules["pytest"] = None  # as if pytest were not installed
        import pageant.testing as kit
        print(json.dumps({"kit_host": callable(kit.kit_host),
                          "fixtures": hasattr(kit, "pageant_kit")}))
        """
    )
    assert found == {"kit_host": True, "fixtures": False}


def test_pageant_testing_is_a_pytest11_entry_point_named_as_its_module() -> None:
    plugins = PYPROJECT["project"]["entry-points"]["pytest11"]
    assert plugins == {"pageant.testing": "pageant.testing"}
    assert set(PYPROJECT["project"]["optional-dependencies"]["testing"]) >= {
        "pytest>=8",
        "pytest-asyncio>=0.23",
        "pytest-aiohttp>=1.0",
    }
