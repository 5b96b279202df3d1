"""``pageant new-plugin NAME``: the scaffold is a working plugin distribution. It installs
into a fresh virtual environment, its own tests (written with pageant.testing) pass there,
and so does ``pageant contract-check`` against the manifest it was born with."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from click.testing import CliRunner

from pageant.cli import main
from pageant.hookspecs import CONTRACT_VERSION


def _venv_seeing_this_environment(where: Path) -> Path:
    """A new venv whose site-packages also reads this environment's (pageant, pytest,
    pip): the plugin is installed into it for real, without downloading anything."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ours = sysconfig.get_paths()["purelib"]
    # A .pth line starting with "import" runs: addsitedir also reads our .pth files, which
    # is where an editable pageant is found.
    (Path(purelib) / "this_environment.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    return python


def _run(python: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PAGEANT_"))}
    return subprocess.run(
        [str(python), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_a_scaffolded_plugin_installs_and_passes_its_tests_and_the_contract_check(
    tmp_path: Path,
) -> None:
    made = CliRunner().invoke(main, ["new-plugin", "raffle", "--directory", str(tmp_path)])
    assert made.exit_code == 0, made.output
    folder = tmp_path / "raffle"
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) == [
        ".github/workflows/contract.yml",
        "README.md",
        "contract-manifest.json",
        "pageant_raffle/__init__.py",
        "pyproject.toml",
        "tests/test_plugin.py",
    ]
    major, minor, _ = CONTRACT_VERSION.split(".")
    assert f'"contract": "^{major}.{minor}"' in (folder / "pageant_raffle/__init__.py").read_text()
    assert (
        "pageant contract-check --plugin raffle"
        in (folder / ".github/workflows/contract.yml").read_text()
    )

    # What a new author starts from is clean and formatted by ruff's defaults.
    for ruff in (["check", "--select", "E,F,W,I,B,UP"], ["format", "--check"]):
        linted = subprocess.run(
            [sys.executable, "-m", "ruff", *ruff, "--isolated", "."],
            cwd=folder,
            capture_output=True,
            text=True,
        )
        assert linted.returncode == 0, linted.stdout + linted.stderr

    python = _venv_seeing_this_environment(tmp_path / "venv")
    # --no-deps: pageant comes from this environment. The build is isolated, as an author's
    # is: pip brings the setuptools the scaffold's pyproject.toml asks for.
    installed = _run(
        python,
        *("-m", "pip", "install", "-q", "--no-deps", "-e", "."),
        cwd=folder,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr

    tests = _run(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=folder)
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "6 passed" in tests.stdout

    checked = _run(
        python, "-m", "pageant.cli", "contract-check", "--plugin", "raffle", "--json", cwd=folder
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    report = json.loads(checked.stdout)
    (raffle,) = report["plugins"]
    assert raffle["distribution"] == "pageant-raffle"
    assert {check["outcome"] for check in raffle["checks"]} == {"pass"}

    # An unintended contract change fails the plugin's own contract test with the report
    # contract-check prints, each difference named on its line, not a truncated dict.
    manifest = folder / "contract-manifest.json"
    manifest.write_text(manifest.read_text().replace('"risk": "change"', '"risk": "notify"'))
    failed = _run(
        python,
        *("-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "contract_holds"),
        cwd=folder,
    )
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert 'changed actions/raffle.draw/risk: "notify" -> "change"' in failed.stdout
    assert "pageant contract-check --plugin raffle --write" in failed.stdout
    assert "truncated" not in failed.stdout


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("Raffle", "is not a plugin name"),
        ("core", "the host's own owner"),
        ("2dice", "is not a plugin name"),
    ],
)
def test_a_name_that_cannot_be_an_owner_is_refused(tmp_path: Path, name: str, why: str) -> None:
    made = CliRunner().invoke(main, ["new-plugin", name, "--directory", str(tmp_path)])
    assert made.exit_code == 2
    assert why in made.output
    assert list(tmp_path.iterdir()) == []


def test_an_existing_folder_is_never_overwritten(tmp_path: Path) -> None:
    (tmp_path / "raffle").mkdir()
    made = CliRunner().invoke(main, ["new-plugin", "raffle", "--directory", str(tmp_path)])
    assert made.exit_code == 2
    assert "already exists" in made.output
    assert list((tmp_path / "raffle").iterdir()) == []


def test_a_scaffolded_link_plugin_passes_its_tests_against_a_fake_agent_and_the_check(
    tmp_path: Path,
) -> None:
    made = CliRunner().invoke(
        main, ["new-plugin", "beacons", "--link", "--directory", str(tmp_path)]
    )
    assert made.exit_code == 0, made.output
    folder = tmp_path / "beacons"
    module = (folder / "pageant_beacons/__init__.py").read_text()
    assert '"link": {"servers": list(SERVERS)' in module and "link.call(" in module
    for ruff in (["check", "--select", "E,F,W,I,B,UP"], ["format", "--check"]):
        linted = subprocess.run(
            [sys.executable, "-m", "ruff", *ruff, "--isolated", "."],
            cwd=folder,
            capture_output=True,
            text=True,
        )
        assert linted.returncode == 0, linted.stdout + linted.stderr
    python = _venv_seeing_this_environment(tmp_path / "venv")
    installed = _run(python, *("-m", "pip", "install", "-q", "--no-deps", "-e", "."), cwd=folder)
    assert installed.returncode == 0, installed.stdout + installed.stderr

    tests = _run(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=folder)
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "4 passed" in tests.stdout

    checked = _run(
        python, "-m", "pageant.cli", "contract-check", "--plugin", "beacons", "--json", cwd=folder
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    (beacons,) = json.loads(checked.stdout)["plugins"]
    # Its world is the game's, out of the check's reach: the one warning says so.
    not_passed = [(c["check"], c["outcome"]) for c in beacons["checks"] if c["outcome"] != "pass"]
    assert not_passed == [("world", "warning")]
