"""``pageant contract-check``: what a plugin's CI runs.

Fixture plugins are installed as real distributions (``tests/fixture_plugins``: ``glimmer`` passes
everything, each class of ``kitfaults`` is one defect) and found through real entry points,
exactly as ``serve`` finds them. Exit 0 pass, 1 violations, 2 usage.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from pageant.cli import main
from pageant.errors import Invalid, NotFound
from pageant.hookspecs import CONTRACT_VERSION
from pageant.kit import manifest
from pageant.kit.check import UnknownPlugin, select
from pageant.kit.exercise import KitContext
from pageant.plugins.loader import PluginRecord, load_plugins
from pageant.support.settings import ENV_PREFIX, Settings
from tests.fixture_plugins import Site, fake_site, source
from tests.fixture_plugins.kitfaults import PLUGINS as FAULTS

ROOT = Path(__file__).resolve().parents[2]
WISPS_MANIFEST = ROOT / "example_plugins" / "wisps" / "contract-manifest.json"


@pytest.fixture(autouse=True)
def no_settings_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [*Settings.model_fields, "config"]:
        monkeypatch.delenv(ENV_PREFIX + name.upper(), raising=False)


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The plugin's checkout: where the default ``contract-manifest.json`` lives."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workdir: Path) -> Iterator[Site]:
    with fake_site(tmp_path / "site", monkeypatch) as s:
        s.install("pageant-glimmer", {"glimmer": "glimmer"}, {"glimmer": source("glimmer")})
        s.install(
            "pageant-kitfaults",
            {name: f"kitfaults:{cls}" for name, cls in FAULTS.items()},
            {"kitfaults": source("kitfaults")},
        )
        yield s


def check(*args: str) -> Result:
    return CliRunner().invoke(main, ["contract-check", *args], catch_exceptions=False)


def check_json(*args: str) -> tuple[int, dict[str, Any]]:
    result = check(*args, "--json")
    return result.exit_code, json.loads(result.output)


def lines(result: Result, outcome: str) -> list[str]:
    """The check lines with ``outcome`` (``pass``, ``warning``, ``violation``), squeezed."""
    return [
        re.sub(r"\s+", " ", line.strip())
        for line in result.output.splitlines()
        if line.strip().startswith(outcome + " ")
    ]


#: Checks every plugin gets besides the one a test is about: the dry runs repeated on a
#: fresh host, and whether the world could be observed (tested on their own below).
ALWAYS = ("perform_fresh", "world")


def only_violations(name: str) -> tuple[int, list[dict[str, Any]], list[dict[str, Any]]]:
    """Record the plugin's manifest, then check it: its exit code, violations and warnings
    (leaving out the checks of :data:`ALWAYS`)."""
    check("--plugin", name, "--write")
    code, report = check_json("--plugin", name)
    return (
        code,
        [v for v in report["violations"] if v["check"] not in ALWAYS],
        [w for w in report["warnings"] if w["check"] not in ALWAYS],
    )


# ── the example plugin ────────────────────────────────────────────────────────


def test_wisps_passes_against_its_committed_manifest(workdir: Path) -> None:
    result = check("--plugin", "wisps", "--manifest", str(WISPS_MANIFEST))
    assert result.exit_code == 0, result.output
    assert lines(result, "violation") == [] and lines(result, "warning") == []
    passed = lines(result, "pass")
    checks = {line.split(" ")[1] for line in passed}
    assert checks == {
        "load",
        "option_source",
        "perform",
        "cost",
        "revert",
        "revert_final",
        "option_example",
        "trigger",
        "world",
        "perform_fresh",
        "manifest",
        "lease",
    }
    assert any("wisps.summon: perform(verify=True)" in line for line in passed)
    assert any("wisps.summon: revert of nothing" in line for line in passed)
    assert any(
        "wisps.summon: perform after a revert under the same idempotency key answered ok and "
        "made nothing" in line
        for line in passed
    )
    assert any(line.split(" ")[1:3] == ["lease", "wisps.weather:"] for line in passed)
    assert result.output.splitlines()[-1].startswith("contract-check passed: 1 plugin, 12 checks")


def test_the_committed_wisps_manifest_is_what_write_produces(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh.json"
    assert check("--plugin", "wisps", "--manifest", str(fresh), "--write").exit_code == 0
    assert fresh.read_text() == WISPS_MANIFEST.read_text()


# ── the manifest ──────────────────────────────────────────────────────────────


def test_a_missing_manifest_is_a_violation_naming_write(site: Site) -> None:
    result = check("--plugin", "glimmer")
    assert result.exit_code == 1
    assert lines(result, "violation") == [
        "violation manifest contract-manifest.json does not exist; run `pageant contract-check "
        "--plugin glimmer --write` to record the contract, and commit the file"
    ]
    assert "contract-check FAILED" in result.output


def test_write_regenerates_and_then_the_check_passes(site: Site, workdir: Path) -> None:
    written = check("--plugin", "glimmer", "--write")
    assert written.exit_code == 0, written.output
    assert "written to contract-manifest.json" in written.output
    text = (workdir / "contract-manifest.json").read_text()
    assert text.endswith("}\n")
    data = json.loads(text)
    assert text == json.dumps(data, indent=2, sort_keys=True) + "\n"
    (entry,) = data["plugins"]
    assert entry["plugin"] == "pageant-glimmer[glimmer]"
    assert (entry["owner"], entry["contract"]) == ("glimmer", "^1.0")
    (action,) = entry["actions"]
    assert {k: action[k] for k in ("id", "version", "risk", "reversible", "budget_ms")} == {
        "id": "glimmer.kindle",
        "version": 1,
        "risk": "change",
        "reversible": "full",
        "budget_ms": 4000,
    }
    assert [p["name"] for p in action["params"]] == ["shade", "sparks"]
    assert "perform" not in action and "cost" not in action  # no callables
    assert [b["dimension"] for b in entry["budgets"]] == ["glimmer.sparks"]

    again = check("--plugin", "glimmer")
    assert again.exit_code == 0, again.output
    assert "pass manifest matches contract-manifest.json" in lines(again, "pass")
    # Writing again changes nothing: the file is stable.
    assert check("--plugin", "glimmer", "--write").exit_code == 0
    assert (workdir / "contract-manifest.json").read_text() == text


def test_a_changed_declaration_fails_naming_each_change(site: Site) -> None:
    assert check("--plugin", "glimmer", "--write").exit_code == 0
    changed = (
        source("glimmer")
        .replace('"budget_ms": 4_000', '"budget_ms": 45_000')
        .replace('"example": 2,', '"example": 7,')
        .replace(
            'return [{"dimension": "glimmer.sparks", "label": "Sparks", "unit": "sparks"}]',
            'return [{"dimension": "glimmer.sparks", "label": "Sparks", "unit": "sparks"},'
            ' {"dimension": "glimmer.embers", "label": "Embers", "unit": "embers"}]',
        )
        .replace('"id": "glimmer.flare"', '"id": "glimmer.signal"')
    )
    assert changed.count("45_000") == 1 and "glimmer.embers" in changed
    (site.root / "glimmer.py").write_text(changed)
    site.forget_modules()  # the next load imports the changed module

    result = check("--plugin", "glimmer")
    assert result.exit_code == 1
    against = " (against contract-manifest.json)"
    # Sorted by path, each naming what changed and how.
    assert lines(result, "violation") == [
        "violation manifest changed actions/glimmer.kindle/budget_ms: 4000 -> 45000" + against,
        "violation manifest changed actions/glimmer.kindle/params/sparks/example: 2 -> 7" + against,
        "violation manifest added budgets/glimmer.embers" + against,
        "violation manifest removed legs/glimmer.flare" + against,
        "violation manifest added legs/glimmer.signal" + against,
    ]
    assert (
        "run `pageant contract-check --plugin glimmer --write` and commit the manifest"
        in result.output
    )

    code, report = check_json("--plugin", "glimmer")
    assert code == 1
    assert {v["subject"] for v in report["violations"]} == {
        "budgets/glimmer.embers",
        "actions/glimmer.kindle/budget_ms",
        "actions/glimmer.kindle/params/sparks/example",
        "legs/glimmer.flare",
        "legs/glimmer.signal",
    }

    assert check("--plugin", "glimmer", "--write").exit_code == 0
    assert check("--plugin", "glimmer").exit_code == 0


def test_a_manifest_recording_a_plugin_not_checked_names_its_removal(site: Site) -> None:
    assert check("--plugin", "glimmer", "--plugin", "wisps", "--write").exit_code == 0
    result = check("--plugin", "glimmer")
    assert result.exit_code == 1
    assert lines(result, "violation") == [
        "violation manifest removed plugin pageant-wisps[wisps]: contract-manifest.json "
        "records it, but it is not installed or not selected"
    ]


def test_a_manifest_without_the_plugin_names_it_added(site: Site, workdir: Path) -> None:
    assert check("--plugin", "wisps", "--write").exit_code == 0
    result = check("--plugin", "wisps", "--plugin", "glimmer")
    assert result.exit_code == 1
    assert lines(result, "violation") == [
        "violation manifest added plugin pageant-glimmer[glimmer]: "
        "contract-manifest.json does not record it"
    ]


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("{not json", "is not JSON"),
        ('{"format": 1}', 'has no "plugins" list'),
        ('{"format": 99, "plugins": []}', "is in format 99; this pageant writes format 1"),
    ],
)
def test_an_unreadable_manifest_is_a_violation_saying_why(
    site: Site, workdir: Path, text: str, why: str
) -> None:
    (workdir / "contract-manifest.json").write_text(text)
    result = check("--plugin", "glimmer")
    assert result.exit_code == 1
    (line,) = lines(result, "violation")
    assert f"contract-manifest.json {why}" in line


def test_write_refuses_when_a_checked_plugin_did_not_load(site: Site, workdir: Path) -> None:
    result = check("--plugin", "glimmer", "--plugin", "future", "--write")
    assert result.exit_code == 1
    assert not (workdir / "contract-manifest.json").exists()
    assert (
        "contract-manifest.json not written: pageant-kitfaults[future] did not load"
        in result.output
    )


def test_write_still_reports_the_other_checks(site: Site, workdir: Path) -> None:
    result = check("--plugin", "balky", "--write")
    assert result.exit_code == 1
    assert (workdir / "contract-manifest.json").exists()
    assert [line.split(" ")[1] for line in lines(result, "violation")] == [
        "perform",
        "perform_fresh",
    ]


def test_the_diff_ignores_order_and_tells_numbers_from_booleans() -> None:
    recorded = {"actions": [{"id": "a.x", "budget_ms": 1}, {"id": "a.y", "params": []}]}
    reordered = {"actions": [{"id": "a.y", "params": []}, {"id": "a.x", "budget_ms": 1}]}
    assert manifest.compare(recorded, reordered) == []
    for other in (1.0, True, "1"):
        changed = {"actions": [{"id": "a.x", "budget_ms": other}, {"id": "a.y", "params": []}]}
        (difference,) = manifest.compare(recorded, changed)
        assert difference.path == ("actions", "a.x", "budget_ms")


# ── the kit's dry runs ────────────────────────────────────────────────────────


def test_a_perform_failing_its_dry_run_is_a_violation_naming_action_and_answer(
    site: Site,
) -> None:
    code, violations, _ = only_violations("balky")
    assert code == 1
    (v,) = violations
    assert (v["plugin"], v["check"], v["subject"]) == (
        "pageant-kitfaults[balky]",
        "perform",
        "balky.stomp",
    )
    assert v["message"].startswith(
        "balky.stomp: perform(verify=True) with {} answered ok: false, retry: false, "
        'error: "dry runs are not supported"'
    )


@pytest.mark.parametrize(
    ("name", "action", "reading"),
    [
        (
            "brittle",
            "brittle.shatter",
            'error: "RuntimeError: the shard handle is None" (it raised at kitfaults.py:',
        ),
        ("dawdle", "dawdle.linger", "(it outlived budget_ms 50)"),
    ],
)
def test_a_perform_that_raises_or_times_out_reads_as_the_host_reads_it(
    site: Site, name: str, action: str, reading: str
) -> None:
    code, violations, _ = only_violations(name)
    assert code == 1
    (v,) = violations
    assert v["subject"] == action
    assert "answered ok: false, retry: true, " in v["message"] and reading in v["message"]


def test_perform_must_cope_with_optional_params_left_out(site: Site) -> None:
    code, report = check_json("--plugin", "fussy")
    assert code == 1
    performs = [c for c in report["plugins"][0]["checks"] if c["check"] == "perform"]
    assert [c["outcome"] for c in performs] == ["pass", "violation"]
    assert 'with {"text": "hello", "volume": 3} answered ok' in performs[0]["message"]
    assert "KeyError: 'volume'" in performs[1]["message"]
    assert 'with {"text": "hello"} answered' in performs[1]["message"]


def test_a_dry_run_that_posts_is_a_violation(site: Site) -> None:
    code, violations, _ = only_violations("leaky")
    assert code == 1
    (v,) = violations
    assert v["subject"] == "leaky.drip"
    assert "posted to http://game.invalid/hook; expected a dry run to send nothing" in v["message"]


def test_a_perform_that_makes_something_after_its_keys_revert_is_a_violation(
    site: Site,
) -> None:
    code, violations, _ = only_violations("revenant")
    assert code == 1
    (v,) = violations
    assert (v["check"], v["subject"]) == ("revert_final", "revenant.haunt")
    assert "answered ok with 1 resource(s)" in v["message"]
    assert "a revert is final for its key" in v["message"]


def test_a_dry_run_answering_resources_is_only_a_warning(site: Site) -> None:
    code, violations, warnings = only_violations("hoarder")
    assert (code, violations) == (0, [])
    stash, tally = sorted(warnings, key=lambda w: w["subject"])
    assert stash["subject"] == "hoarder.stash" and "resources chest:c-1" in stash["message"]
    assert "never recorded" not in stash["message"]  # a change action's are recorded
    assert tally["subject"] == "hoarder.tally"
    assert "a notify action's resources are never recorded" in tally["message"]


def test_a_cost_naming_an_undeclared_dimension_or_a_negative_amount_is_a_violation(
    site: Site,
) -> None:
    code, violations, _ = only_violations("spendthrift")
    assert code == 1
    by_action = {v["subject"]: v["message"] for v in violations if v["check"] == "cost"}
    assert len(violations) == 2
    assert (
        "names 'spendthrift.gold', which no plugin declares as a budget"
        in by_action["spendthrift.buy"]
    )
    assert (
        "gives spendthrift.silver -1; expected a non-negative finite number"
        in by_action["spendthrift.refund"]
    )


def test_a_declared_cost_within_declared_dimensions_passes(site: Site) -> None:
    code, report = check_json("--plugin", "glimmer", "--write")
    assert code == 0
    costs = [c["message"] for c in report["plugins"][0]["checks"] if c["check"] == "cost"]
    assert costs == [
        'glimmer.kindle: cost({"shade": "amber", "sparks": 2}) = {"glimmer.sparks": 2}',
        'glimmer.kindle: cost({"shade": "amber"}) = {"glimmer.sparks": 1}',
    ]


def test_an_option_source_that_raises_is_a_violation_naming_it(site: Site) -> None:
    code, violations, warnings = only_violations("murk")
    assert code == 1
    (v,) = violations
    assert (v["check"], v["subject"]) == ("option_source", "murk.options.regions")
    assert "murk.options.regions raised ConnectionError: shard unreachable" in v["message"]
    # The param's example cannot be checked against a source that did not resolve.
    (w,) = warnings
    assert w["subject"] == "murk.fog.region" and "could not be checked" in w["message"]


def test_an_example_missing_from_its_source_is_a_warning_not_a_violation(site: Site) -> None:
    code, violations, warnings = only_violations("picky")
    assert (code, violations) == (0, [])
    (w,) = warnings
    assert (w["check"], w["subject"]) == ("option_example", "picky.choose.size")
    assert '"medium" is not among the values picky.options.sizes resolved' in w["message"]
    assert '("small", "large")' in w["message"]


def test_a_model_built_without_validation_is_refused_at_load(site: Site) -> None:
    # model_construct skips every check the contract makes; the loader validates again.
    code, violations, _ = only_violations("hollow")
    assert code == 1
    (v,) = violations
    assert (v["check"], v["subject"]) == ("load", "pageant-kitfaults[hollow]")
    assert 'reversible is "full" but no revert is declared' in v["message"]
    assert "example 'heavy' must be a number" in v["message"]


# ── loading ───────────────────────────────────────────────────────────────────


def test_an_unmet_contract_range_is_a_violation_with_the_loaders_reason(site: Site) -> None:
    (record,) = [r for r in load_plugins().records if r.name == "future"]
    assert record.status == "refused"
    code, report = check_json("--plugin", "future")
    assert code == 1
    (v,) = report["violations"]
    assert (v["check"], v["message"]) == ("load", record.reason)
    assert v["message"] == (
        f"pageant-kitfaults[future]: needs contract ^2.0; this host implements {CONTRACT_VERSION}"
    )
    # Nothing else is exercised for a plugin that did not load.
    assert [c["check"] for c in report["plugins"][0]["checks"]] == ["load"]


def test_a_startup_that_raises_is_a_violation(site: Site) -> None:
    code, report = check_json("--plugin", "stalls")
    assert code == 1
    (v,) = report["violations"]
    assert v["check"] == "startup"
    assert "pageant_startup raised RuntimeError: no game server configured" in v["message"]


async def test_the_startup_context_checks_an_emit_and_writes_nothing() -> None:
    context = KitContext(load_plugins().registry, "pageant-wisps[wisps]", "wisps")
    assert await context.emit("wisps.caught", {"colour": "north", "weight": 2}) == {
        "gates_matched": 0,
        "gates_closed": 0,
    }
    with pytest.raises(Invalid) as refused:
        await context.emit("wisps.caught", {"weight": "heavy"})
    assert any("weight" in detail for detail in refused.value.details)
    with pytest.raises(NotFound, match=r"wisps\.dropped"):
        await context.emit("wisps.dropped", {})
    assert context.emitted == [("wisps.caught", {"colour": "north", "weight": 2})]


def test_the_host_plugin_passes_when_named(workdir: Path) -> None:
    # core's announce reaches the registry through ctx.services, and its legs source answers
    # only after startup: both are here as under serve.
    result = check("--plugin", "core", "--write")
    assert result.exit_code == 0, result.output
    assert lines(result, "warning") == []
    assert "pass option_example core.announce param leg" in " | ".join(lines(result, "pass"))


# ── choosing plugins, output, usage ──────────────────────────────────────────


def test_by_default_every_installed_plugin_but_the_hosts_own_is_checked(site: Site) -> None:
    code, report = check_json()
    assert code == 1
    labels = {p["distribution"] + "[" + p["name"] + "]" for p in report["plugins"]}
    assert labels == {
        "pageant-glimmer[glimmer]",
        "pageant-openarena[openarena]",
        "pageant-luanti[luanti]",
        "pageant-shard[shard]",
        "pageant-wisps[wisps]",
        *(f"pageant-kitfaults[{name}]" for name in FAULTS),
    }


def test_a_distribution_name_selects_each_of_its_entry_points(site: Site) -> None:
    _, report = check_json("--plugin", "pageant-kitfaults")
    assert sorted(p["name"] for p in report["plugins"]) == sorted(FAULTS)
    _, report = check_json("--plugin", "pageant_wisps", "--plugin", "wisps")
    assert [p["name"] for p in report["plugins"]] == ["wisps"]


def test_json_output_shape(site: Site) -> None:
    code, report = check_json("--plugin", "glimmer", "--plugin", "balky")
    assert code == 1
    assert set(report) == {"plugins", "checks", "violations", "warnings", "ok"}
    # Every check, with its status, once: the plugins' own lists and the flat one agree.
    assert len(report["checks"]) == sum(len(p["checks"]) for p in report["plugins"]) + sum(
        1 for c in report["checks"] if c["plugin"] is None
    )
    assert {c["outcome"] for c in report["checks"]} <= {"pass", "warning", "violation"}
    assert report["ok"] is False
    assert [p["name"] for p in report["plugins"]] == ["glimmer", "balky"]
    for plugin in report["plugins"]:
        assert {"name", "distribution", "version", "entry_point", "owner", "contract"} <= set(
            plugin
        )
        assert plugin["status"] == "loaded" and plugin["checks"]
        for item in plugin["checks"]:
            assert set(item) == {"check", "subject", "outcome", "message"}
    for v in report["violations"]:
        assert set(v) == {"plugin", "check", "subject", "outcome", "message"}
        assert v["outcome"] == "violation"
    assert {v["check"] for v in report["violations"]} == {"perform", "perform_fresh", "manifest"}


def test_an_unknown_plugin_is_a_usage_error(site: Site) -> None:
    result = CliRunner().invoke(main, ["contract-check", "--plugin", "nosuch"])
    assert result.exit_code == 2
    assert "no installed plugin is named 'nosuch'" in result.output
    assert "pageant-glimmer" in result.output  # it says what is installed


def test_a_bad_flag_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["contract-check", "--frobnicate"])
    assert result.exit_code == 2


def test_with_nothing_but_the_host_installed_there_is_nothing_to_check() -> None:
    core = PluginRecord(
        "core", "pageant", "0", "pageant.builtin_plugins.core:CorePlugin", status="loaded"
    )
    with pytest.raises(UnknownPlugin, match="no plugin is installed besides the host's own"):
        select([core], [])
    assert select([core], ["core"]) == [core]


def test_it_needs_no_database(site: Site, workdir: Path) -> None:
    unreachable = "mysql+aiomysql://nobody@127.0.0.1:1/none"
    result = check("--plugin", "glimmer", "--write", "--database-url", unreachable)
    assert result.exit_code == 0, result.output
    assert check("--plugin", "glimmer").exit_code == 0
    assert sorted(p.name for p in workdir.iterdir()) == ["contract-manifest.json"]


# ── the real command ──────────────────────────────────────────────────────────


def pageant_process(
    *args: str, site: Path, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).with_name("pageant")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "pageant.cli"]
    clean = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
    return subprocess.run(
        [*command, *args],
        env={**clean, "PYTHONPATH": str(site), **(env or {})},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_console_script_writes_checks_and_fails(tmp_path: Path) -> None:
    # A process of its own, finding the fixture distributions on PYTHONPATH as installed ones.
    installed = Site(tmp_path / "site")
    installed.root.mkdir()
    installed.install("pageant-glimmer", {"glimmer": "glimmer"}, {"glimmer": source("glimmer")})
    installed.install(
        "pageant-kitfaults",
        {"balky": "kitfaults:RefusesVerify"},
        {"kitfaults": source("kitfaults")},
    )
    work = tmp_path / "work"
    work.mkdir()

    written = pageant_process(
        "contract-check", "--plugin", "glimmer", "--write", site=installed.root, cwd=work
    )
    assert written.returncode == 0, written.stderr
    assert (work / "contract-manifest.json").exists()

    passed = pageant_process(
        "contract-check", "--plugin", "glimmer", "--json", site=installed.root, cwd=work
    )
    assert passed.returncode == 0, passed.stderr
    report = json.loads(passed.stdout)
    assert report["ok"] is True and report["violations"] == []

    failed = pageant_process("contract-check", "--plugin", "balky", site=installed.root, cwd=work)
    assert failed.returncode == 1
    assert "violation  perform         balky.stomp: perform(verify=True)" in failed.stdout

    unknown = pageant_process("contract-check", "--plugin", "nosuch", site=installed.root, cwd=work)
    assert unknown.returncode == 2
    assert "no installed plugin is named 'nosuch'" in unknown.stderr


# ── the guide ─────────────────────────────────────────────────────────────────


def test_the_guides_failure_shapes_hold() -> None:
    guide = (ROOT / "docs" / "plugin-authors.md").read_text()
    section = guide.split("## Checking your plugin in CI", 1)[1]
    (snippet,) = [
        block for block in re.findall(r"```python\n(.*?)```", section, re.S) if "classify(" in block
    ]
    exec(compile(snippet, "docs/plugin-authors.md", "exec"), {})
