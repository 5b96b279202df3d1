"""The docs cannot drift from the code: included examples equal their files, the hook
reference is the rendering of the docstrings, and every setting and hook is documented."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import SecretStr

import pageant.hookspecs
from pageant.hookspecs import CONTRACT_VERSION
from pageant.kit.hookdocs import (
    PROTOCOL_REQUIRED,
    PROTOCOLS,
    REQUIRED,
    UndocumentedHook,
    check_docstring,
    hooks,
    protocols,
    render,
)
from pageant.support.settings import ENV_PREFIX, Settings
from tests.cli.test_cli import pageant as run_pageant
from tests.cli.test_cli_staff import migrated_url, no_settings_in_the_environment, seed
from tests.factories import phase, spec

# Fixtures shared with the staff command line's tests (a migrated database of each dialect).
__all__ = ["migrated_url", "no_settings_in_the_environment"]

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
INCLUDE = re.compile(r"<!-- include: (?P<path>\S+) -->\n```\w*\n(?P<body>.*?)```\n", re.S)


def doc(name: str) -> str:
    return (DOCS / name).read_text()


def test_included_files_equal_their_source() -> None:
    included = {}
    for page in DOCS.glob("*.md"):
        for match in INCLUDE.finditer(page.read_text()):
            included[match.group("path")] = (page.name, match.group("body"))
    assert "example_plugins/wisps/pageant_wisps/__init__.py" in included
    for path, (page, body) in included.items():
        assert body == (ROOT / path).read_text(), (
            f"{page} includes an old copy of {path}: paste the file's current text"
        )


def test_the_plugin_guide_includes_the_whole_example_plugin() -> None:
    text = doc("plugin-authors.md")
    source = (ROOT / "example_plugins/wisps/pageant_wisps/__init__.py").read_text()
    assert f"```python\n{source}```" in text


def test_the_guides_test_examples_run_as_written() -> None:
    # As a plugin author runs them: pytest with only the configuration the guide shows
    # (wisps' pyproject.toml), on the tests the guide includes.
    text = doc("plugin-authors.md")
    wisps = ROOT / "example_plugins" / "wisps"
    examples = [
        "example_plugins/wisps/tests/test_wisps.py",
        "docs/examples/test_settings.py",
        "docs/examples/test_second_author.py",
    ]
    for path in [*examples, "example_plugins/wisps/pyproject.toml"]:
        assert f"<!-- include: {path} -->" in text, path
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PAGEANT_"))}
    ran = subprocess.run(
        [
            sys.executable,
            *("-m", "pytest", "-q", "-p", "no:cacheprovider"),
            *("-c", str(wisps / "pyproject.toml"), "--rootdir", str(wisps)),
            *(str(ROOT / path) for path in examples),
        ],
        cwd=wisps,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert " passed" in ran.stdout and "skipped" not in ran.stdout


def test_the_operators_guide_says_a_new_plugin_needs_a_restart() -> None:
    text = doc("operators.md")
    assert "restart" in text.split("## Plugins", 1)[1].split("\n## ", 1)[0]


def test_the_hook_reference_is_the_rendering_of_the_docstrings() -> None:
    assert doc("hooks.md") == render(), (
        "docs/hooks.md is stale: regenerate it with `python -m pageant.kit.hookdocs docs/hooks.md`"
    )


def test_every_hook_is_in_the_reference_and_the_guide() -> None:
    reference, guide = doc("hooks.md"), doc("plugin-authors.md")
    for hook in hooks():
        assert f"### `{hook.name}`" in reference
        assert f"`{hook.name}(" in guide or f"`async {hook.name}(" in guide, hook.name


def test_a_hook_docstring_without_the_template_is_refused() -> None:
    complete = (
        "Do a thing.\n\nWhen: now.\n\nReturns: x.\n\nOn failure: y.\n\n"
        "Example::\n\n    do_it()\n\nAdded in contract 1.0."
    )
    check_docstring("pageant_x", complete)
    for part in REQUIRED:
        broken = "\n\n".join(p for p in complete.split("\n\n") if not p.startswith(part))
        with pytest.raises(UndocumentedHook, match=f"pageant_x: the docstring lacks {part}"):
            check_docstring("pageant_x", broken)
    with pytest.raises(UndocumentedHook, match="lacks a summary"):
        check_docstring("pageant_x", complete.split("\n\n", 1)[1])
    with pytest.raises(UndocumentedHook):
        check_docstring("pageant_x", "")


def test_an_example_without_code_is_refused() -> None:
    with pytest.raises(UndocumentedHook, match="pageant_x: the docstring lacks Example: code"):
        check_docstring(
            "pageant_x",
            "Do a thing.\n\nWhen: now.\n\nReturns: x.\n\nOn failure: y.\n\n"
            "Example: none.\n\nAdded in contract 1.0.",
        )


def test_a_protocol_docstring_without_an_example_is_refused() -> None:
    complete = "A thing.\n\nWhen: always.\n\nExample::\n\n    use(it)\n\nAdded in contract 1.1."
    check_docstring("Thing", complete, PROTOCOL_REQUIRED)
    without = complete.replace("Example::\n\n    use(it)\n\n", "")
    with pytest.raises(UndocumentedHook, match="Thing: the docstring lacks Example:"):
        check_docstring("Thing", without, PROTOCOL_REQUIRED)


def test_every_hook_and_protocol_of_the_contract_shows_an_example() -> None:
    exported = [getattr(pageant.hookspecs, name) for name in pageant.hookspecs.__all__]
    contract_protocols = {o for o in exported if getattr(o, "_is_protocol", False)}
    # A protocol the reference does not list would escape the Example check.
    assert contract_protocols == set(PROTOCOLS)
    reference = doc("hooks.md")
    for name in [h.name for h in hooks()] + [p.name for p in protocols()]:
        section = reference.split(f"### `{name}`", 1)[1].split("\n### ", 1)[0]
        assert "**Example:**\n\n```python\n" in section, name


def test_the_rendering_turns_roles_into_code() -> None:
    text = render()
    assert ":class:" not in text and ":meth:" not in text
    assert re.search(r"``\w", text.replace("```python", "")) is None
    assert "a list of `Action` models" in text


def test_every_setting_is_documented_with_its_default() -> None:
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in doc("operators.md").splitlines()
        if re.match(r"^\| `[a-z_]+` \| `--", line)
    ]
    assert [row[0].strip("`") for row in rows] == list(Settings.model_fields)
    for name, flag, env, default, meaning in rows:
        name = name.strip("`")
        field = Settings.model_fields[name]
        assert flag == f"`--{name.replace('_', '-')}`"
        assert env == f"`{ENV_PREFIX}{name.upper()}`"
        unset = field.default in ((), "") or field.default == SecretStr("")
        expected = "none" if unset else f"`{field.default}`"
        assert default == expected, name
        assert meaning, name


def test_the_changelog_covers_the_current_contract() -> None:
    assert f"## {CONTRACT_VERSION}" in doc("contract-changelog.md")


def test_links_between_docs_resolve() -> None:
    for page in DOCS.glob("*.md"):
        for target in re.findall(r"\]\(([^)#:]+\.md)\)", page.read_text()):
            assert (DOCS / target).exists(), f"{page.name} links to missing {target}"


def test_the_hook_reference_shows_each_example_once() -> None:
    # An example with two blank lines between its functions was rendered a second time,
    # indented, after its code block.
    outside_code = []
    fenced = False
    for line in doc("hooks.md").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            outside_code.append(line)
    assert [line for line in outside_code if re.match(r"    \S", line)] == []
    assert doc("hooks.md").count("def pageant_actions() -> list[Action]:") == 1


def test_the_hook_reference_types_lease_values_as_core_lease_passes_them() -> None:
    section = doc("hooks.md").split("### `pageant_leases`", 1)[1].split("\n### ", 1)[0]
    assert "float" not in section
    assert "async def apply(target: str, value: str" in section


def test_the_switchboard_guides_firings_sample_rehearses(migrated_url: str, tmp_path) -> None:
    text = doc("switchboard.md").split("## Rehearsal", 1)[1]
    sample = re.search(r"simulated firings you give:\n\n```json\n(?P<body>.*?)```", text, re.S)
    assert sample is not None
    firings = tmp_path / "firings.json"
    firings.write_text(sample.group("body"))
    caught_twice = {"on": "wisps.caught", "where": {"var": "colour", "op": "eq", "value": "north"}}
    (event,) = seed(
        migrated_url, ("Wisp hunt", spec(phase("hunt", advance={**caught_twice, "count": 2})))
    )
    done = run_pageant(
        "rehearse", event.slug, "--firings", str(firings), "--database-url", migrated_url
    )
    assert done.exit_code == 0, done.output
    assert "run completed" in done.stdout


def _head_of_the_migrations_folder() -> str:
    """The revision no migration names as its ``down_revision``: read from the files, so a
    migration added (or renumbered) moves it with no edit here."""
    revisions, downs = set(), set()
    for path in (ROOT / "host" / "db" / "migrations" / "versions").glob("*.py"):
        source = path.read_text()
        revision = re.search(r'^revision = "(\w+)"', source, re.M)
        down = re.search(r'^down_revision = "(\w+)"', source, re.M)
        assert revision is not None, path.name
        revisions.add(revision.group(1))
        if down is not None:
            downs.add(down.group(1))
    heads = revisions - downs
    assert len(heads) == 1, f"the migrations have more than one head: {sorted(heads)}"
    return heads.pop()


SCHEMA_NUMBER = re.compile(
    r'(?:upgraded from empty to|schema already at|this pageant needs|"current": "|"head": ")'
    r"(?P<revision>\d{4})"
)


def test_the_docs_name_the_schema_head_of_the_migrations() -> None:
    head = _head_of_the_migrations_folder()
    from pageant.db.migrate import head_revision

    assert head_revision() == head
    named = {}
    for page in [*DOCS.glob("*.md"), ROOT / "README.md"]:
        for match in SCHEMA_NUMBER.finditer(page.read_text()):
            named.setdefault(page.name, set()).add(match.group("revision"))
    assert {"operators.md", "api.md"} <= set(named)
    stale = {page: sorted(found) for page, found in named.items() if found != {head}}
    assert stale == {}, f"the schema head is {head}; these pages name another: {stale}"


PYTEST_WITHOUT_THE_TEST_EXTRA = (sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider")
PYTEST_WITHOUT_THE_TEST_EXTRA += ("-p", "no:timeout")


def test_the_guides_examples_run_from_the_repository_root_without_the_test_extra() -> None:
    # Without the host's test extra there is no pytest-timeout: the root configuration's
    # ``timeout`` was an unknown option, and filterwarnings=error made that fatal.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PAGEANT_"))}
    for args in (["docs/examples/"], ["docs/examples/test_settings.py"]):
        ran = subprocess.run(
            [*PYTEST_WITHOUT_THE_TEST_EXTRA, *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert " passed" in ran.stdout and "skipped" not in ran.stdout
