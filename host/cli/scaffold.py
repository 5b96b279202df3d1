"""``pageant new-plugin NAME``: a working plugin distribution in a new folder.

Plain files, filled in with the plugin's name and the contract of the host that writes
them: ``pyproject.toml`` (the entry point, the test extra, pytest's asyncio mode), a module
with one action, one trigger and one option source, tests written with
:mod:`pageant.testing`, the contract manifest of exactly that module (written by loading
it through the real loader), a README and a CI workflow that runs the tests and
``pageant contract-check --plugin NAME``.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

from pageant.errors import Invalid
from pageant.hookspecs import CONTRACT_VERSION

NAME = re.compile(r"^[a-z][a-z0-9_]*$")


class ScaffoldError(Invalid):
    """A name or folder the scaffold cannot use (a usage error)."""


def contract_range() -> str:
    """The range a new plugin declares: this host's major.minor and anything after it."""
    major, minor, _ = CONTRACT_VERSION.split(".")
    return f"^{major}.{minor}"


def _files(owner: str, link: bool = False) -> dict[str, str]:
    from pageant import __version__
    from pageant.cli.scaffold_link import LINK_MODULE, LINK_TESTS

    dist = f"pageant-{owner.replace('_', '-')}"
    module = f"pageant_{owner}"
    code, tests = (LINK_MODULE, LINK_TESTS) if link else (MODULE, TESTS)
    return {
        "pyproject.toml": PYPROJECT.format(dist=dist, owner=owner, module=module, host=__version__),
        f"{module}/__init__.py": code.replace("OWNER", owner).replace("RANGE", contract_range()),
        "tests/test_plugin.py": tests.replace("OWNER", owner).replace("DIST", dist),
        "README.md": README.format(dist=dist, owner=owner, module=module),
        ".github/workflows/contract.yml": WORKFLOW.format(owner=owner),
    }


def scaffold(name: str, where: Path, *, link: bool = False) -> Path:
    """Write the plugin ``name`` into the new folder ``where / name``; answers the folder.
    ``link``: a plugin whose game calls out, reached through the host's game link."""
    if not NAME.match(name):
        raise ScaffoldError(
            f"{name!r} is not a plugin name; expected lowercase letters, digits and "
            "underscores, starting with a letter (it becomes the owner of every id)"
        )
    if name == "core":
        raise ScaffoldError('"core" is the host\'s own owner; expected a name of your own')
    folder = where / name
    if folder.exists():
        raise ScaffoldError(f"{folder} already exists; expected a new folder")
    for relative, text in _files(name, link).items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    write_manifest(folder, name)
    return folder


def write_manifest(folder: Path, owner: str) -> None:
    """Load the new module through the real loader and record its contract manifest."""
    from pageant.kit import manifest as manifests
    from pageant.plugins.loader import candidate_for, load_plugins

    module_name = f"pageant_{owner}"
    init = folder / module_name / "__init__.py"
    spec = importlib.util.spec_from_file_location(module_name, init)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    previous = sys.modules.get(module_name)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
        dist = f"pageant-{owner.replace('_', '-')}"
        manager = load_plugins([candidate_for(module, owner, distribution=dist)], discover=False)
    finally:
        if previous is None:
            sys.modules.pop(module_name, None)
        else:
            sys.modules[module_name] = previous
    record = manager.records[-1]
    if record.status != "loaded":  # the template itself is broken: a defect of pageant
        raise RuntimeError(f"the scaffolded plugin did not load: {record.reason}")
    manifests.write(folder / "contract-manifest.json", manifests.build(manager.registry, [record]))


PYPROJECT = """\
[build-system]
requires = ["setuptools>=69"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "0.1.0"
description = "A pageant plugin"
requires-python = ">=3.11"
dependencies = ["pageant>={host}"]

[project.optional-dependencies]
# pageant.testing's fixtures, and the pytest plugins they run under.
test = ["pageant[testing]>={host}"]

[project.entry-points.pageant]
{owner} = "{module}"

[tool.setuptools]
packages = ["{module}"]

[tool.pytest.ini_options]
# pageant.testing's fixtures and tests are async: pytest-asyncio runs them without markers.
asyncio_mode = "auto"
asyncio_default_fixture_loop_scope = "function"
testpaths = ["tests"]
"""

MODULE = '''\
"""OWNER: a pageant plugin.

One action (``OWNER.draw``), one trigger (``OWNER.drawn``) and one option
source (``OWNER.options.tiers``). The game is the dictionary ``WORLD``: a real
plugin talks to its game server where this one reads and writes it.
"""

from __future__ import annotations

from typing import Any

from pageant import hookimpl

TIERS = ("bronze", "silver", "gold")
#: The stand-in for a game world: idempotency key -> the prize drawn under it.
WORLD: dict[str, str] = {}
#: The keys a revert was asked for. A revert is final for its key: a draw under one that
#: arrives later (a retry, a request still on its way) draws nothing. Bookkeeping, not a
#: part of the world players see, so ``observe`` leaves it out.
REVERTED: set[str] = set()


async def observe() -> dict[str, str]:
    """The world as it stands: contract-check compares it around every dry run."""
    return dict(WORLD)


PLUGIN_INFO = {"owner": "OWNER", "contract": "RANGE", "observe": observe}


async def draw(ctx: Any) -> dict[str, Any]:
    """Draw a prize of ``tier``; drawing twice under one key draws once. The prize is a
    resource: the host records it (a ``change`` action's resources are recorded; a
    ``notify`` action's would be dropped) and gives it back at the run's end."""
    tier = ctx.params["tier"]
    if tier not in TIERS:
        return {"ok": False, "retry": False, "error": f"no such tier {tier!r}"}
    if ctx.verify or ctx.idempotency_key in REVERTED:
        # A dry run changes nothing; nor does a draw after its key's revert.
        return {"ok": True}
    prize = WORLD.setdefault(ctx.idempotency_key, f"{tier}-{ctx.idempotency_key[:8]}")
    return {"ok": True, "resources": [{"kind": "prize", "ref": prize}]}


async def take_back(ctx: Any) -> dict[str, Any]:
    """Take back the prize drawn under the step's key (there may be none: a revert of
    nothing must succeed, and a revert may be repeated); a later draw under it draws
    nothing."""
    REVERTED.add(ctx.idempotency_key)
    WORLD.pop(ctx.idempotency_key, None)
    return {"ok": True}


async def tiers() -> list[dict[str, str]]:
    return [{"value": t, "label": t.title()} for t in TIERS]


@hookimpl
def pageant_actions() -> list[dict[str, Any]]:
    tier = {
        "name": "tier",
        "type": "string",
        "required": True,
        "description": "Which tier of prize to draw.",
        "example": "gold",
        "option_source": "OWNER.options.tiers",
    }
    return [
        {
            "id": "OWNER.draw",
            "label": "Draw a prize",
            "risk": "change",
            "reversible": "full",
            "budget_ms": 5_000,
            "params": [tier],
            "perform": draw,
            "revert": take_back,
        }
    ]


@hookimpl
def pageant_option_sources() -> list[dict[str, Any]]:
    return [{"id": "OWNER.options.tiers", "label": "Prize tiers", "resolve": tiers}]


@hookimpl
def pageant_triggers() -> list[dict[str, Any]]:
    tier = {
        "name": "tier",
        "type": "string",
        "description": "The tier drawn.",
        "example": "gold",
    }
    return [{"id": "OWNER.drawn", "label": "A prize was drawn", "variables": [tier]}]
'''

TESTS = '''\
"""OWNER, tested with pageant.testing: a real host over a throwaway database."""

from __future__ import annotations

from pathlib import Path

import pytest
from pageant.testing import Kit, assert_contract_holds, assert_failed, assert_ok

GOLD = {"tier": "gold"}


@pytest.fixture
def pageant_plugins() -> list[str]:
    return ["DIST"]


async def test_a_draw_under_one_key_draws_once(pageant_kit: Kit) -> None:
    first = await pageant_kit.perform("OWNER.draw", GOLD, idempotency_key="k")
    again = await pageant_kit.perform("OWNER.draw", GOLD, idempotency_key="k")
    assert assert_ok(first).resources == assert_ok(again).resources


async def test_a_draw_after_its_revert_draws_nothing(pageant_kit: Kit) -> None:
    await pageant_kit.perform_after_revert("OWNER.draw", GOLD)


async def test_an_unknown_tier_fails_for_good(pageant_kit: Kit) -> None:
    answer = await pageant_kit.perform("OWNER.draw", {"tier": "tin"})
    assert_failed(answer, retry=False)


async def test_the_tiers_are_the_options(pageant_kit: Kit) -> None:
    assert [i["value"] for i in await pageant_kit.resolve("OWNER.options.tiers")] == [
        "bronze",
        "silver",
        "gold",
    ]


async def test_a_drawn_prize_opens_the_gate_and_is_taken_back(pageant_kit: Kit) -> None:
    # A change action is off until an admin enables it.
    await pageant_kit.enable("OWNER.draw")
    event = {
        "phases": [
            {
                "key": "draw",
                "label": "Draw",
                "steps": [{"action": "OWNER.draw", "params": GOLD}],
                "advance": {"on": "OWNER.drawn"},
            }
        ]
    }
    firings = [("OWNER.drawn", GOLD)]
    console = await pageant_kit.run_to_completion(event, firings=firings)
    assert console["run"]["status"] == "completed"
    (prize,) = console["resources"]
    assert (prize["kind"], prize["status"]) == ("prize", "reverted")


def test_the_contract_holds() -> None:
    # On a difference, the failure shows contract-check's report, one line per change.
    manifest = Path(__file__).resolve().parents[1] / "contract-manifest.json"
    assert_contract_holds("--plugin", "OWNER", "--manifest", str(manifest))
'''

README = """\
# {dist}

A pageant plugin (owner `{owner}`).

    pip install -e '.[test]'
    pytest                                        # the tests, with pageant.testing
    pageant contract-check --plugin {owner}       # what CI runs
    pageant contract-check --plugin {owner} --write   # after an intended contract change

The code is in `{module}/__init__.py`; `contract-manifest.json` records what it declares and
is committed. A running `pageant serve` picks up a newly installed plugin only when it is
restarted.
"""

WORKFLOW = """\
name: contract
on: [push, pull_request]
jobs:
  check:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      - run: pip install -e '.[test]'
      - run: pytest
      - run: pageant contract-check --plugin {owner}
"""
