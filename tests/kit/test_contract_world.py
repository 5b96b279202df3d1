"""contract-check misses nothing the host will meet: dry runs observed through the
plugin's ``observe`` and repeated on a fresh host, a revert of nothing, each lease walked
through read/apply/read/restore/read, each leg's send with verify, option sources within a
time bound, and ``--plugin NAME`` wherever it matters."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pageant.cli import main
from pageant.kit.check import contract_check
from pageant.plugins.loader import load_plugins
from pageant.support.settings import ENV_PREFIX, Settings
from tests.fixture_plugins import Site, fake_site, source
from tests.fixture_plugins.kitworld import PLUGINS


@pytest.fixture(autouse=True)
def no_settings_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [*Settings.model_fields, "config"]:
        monkeypatch.delenv(ENV_PREFIX + name.upper(), raising=False)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    with fake_site(tmp_path / "site", monkeypatch) as s:
        s.install(
            "pageant-kitworld",
            {name: f"kitworld:{cls}" for name, cls in PLUGINS.items()},
            {"kitworld": source("kitworld")},
        )
        yield s


def checks_of(name: str, *kinds: str) -> list[dict[str, Any]]:
    """Check the plugin once (writing its manifest) and answer its checks of ``kinds``."""
    result = CliRunner().invoke(main, ["contract-check", "--plugin", name, "--write", "--json"])
    report = json.loads(result.output)
    return [c for c in report["checks"] if c["check"] in kinds]


def outcome(checks: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(c["check"], c["outcome"]) for c in checks]


def test_a_dry_run_that_writes_to_its_world_fails(site: Site) -> None:
    found = checks_of("careless", "perform", "perform_fresh")
    assert outcome(found) == [("perform", "violation"), ("perform_fresh", "violation")]
    assert (
        'changed the world: observe() answered {} before and {"careless:contract-check:'
        in (found[0]["message"])
    )
    assert found[0]["message"].endswith("expected a dry run to write nothing")


def test_a_dry_run_that_honours_verify_passes_and_its_world_is_observed(site: Site) -> None:
    found = checks_of("careful", "perform", "perform_fresh", "revert", "world")
    assert outcome(found) == [
        ("perform", "pass"),
        ("revert", "pass"),
        ("world", "pass"),
        ("perform_fresh", "pass"),
    ]
    assert "revert of nothing (a fresh idempotency key) answered ok" in found[1]["message"]


def test_a_revert_of_nothing_must_succeed(site: Site) -> None:
    (found,) = checks_of("unforgiving", "revert")
    assert found["outcome"] == "violation"
    assert 'error: "nothing to revert"' in found["message"]
    assert "expected ok: reverting what was never done must succeed" in found["message"]


def test_a_revert_of_nothing_must_change_nothing(site: Site) -> None:
    (found,) = checks_of("scribbler", "revert")
    assert found["outcome"] == "violation"
    assert "changed the world" in found["message"]


def test_a_dry_run_that_passes_only_once_fails_on_the_fresh_host(site: Site) -> None:
    found = checks_of("once", "perform", "perform_fresh")
    assert outcome(found) == [("perform", "pass"), ("perform_fresh", "violation")]
    assert "already verified once" in found[1]["message"]


def test_a_lease_is_walked_through_read_apply_read_restore_read(site: Site) -> None:
    from tests.fixture_plugins import kitworld

    (found,) = checks_of("lamp", "lease")
    assert found["outcome"] == "pass", found["message"]
    assert found["message"] == (
        'lamp.brightness: read "dim", applied "bright", restored on "contract-check"'
    )
    import sys

    lamps = sys.modules["kitworld"].LAMPS
    assert lamps == {"contract-check": "dim"}  # put back as it was read
    assert kitworld.LAMPS == {}  # the test's own import is another module object


def test_a_lease_that_does_not_restore_fails(site: Site) -> None:
    (found,) = checks_of("sticky", "lease")
    assert found["outcome"] == "violation"
    assert (
        'read after restore answered "bright"; expected the original "dim" back' in found["message"]
    )


def test_each_leg_is_sent_with_verify_and_must_send_nothing(site: Site) -> None:
    found = {c["subject"]: c for c in checks_of("herald", "leg")}
    assert found["herald.quiet"]["outcome"] == "pass"
    assert found["herald.loud"]["outcome"] == "violation"
    assert (
        "posted to http://herald.invalid/loud; expected nothing sent"
        in found["herald.loud"]["message"]
    )


@pytest.mark.parametrize(("bound", "expected"), [(0.1, "violation"), (2.0, "pass")])
async def test_an_option_source_must_resolve_within_the_bound(
    site: Site, bound: float, expected: str
) -> None:
    report = await contract_check(
        ["slow"], manifest=Path("absent.json"), resolve_seconds=bound, manager=load_plugins()
    )
    (found,) = [c for c in report.checks if c.check == "option_source"]
    assert found.outcome == expected
    if expected == "violation":
        assert "slow.values did not answer within 0.1 s" in found.message


def test_a_non_mapping_and_a_missing_ok_read_as_the_host_reads_them(site: Site) -> None:
    found = {c["subject"]: c["message"] for c in checks_of("sloppy", "perform")}
    assert "answered ok: false, retry: true" in found["sloppy.listy"]
    assert "(read as a failure: not a mapping)" in found["sloppy.listy"]
    assert "(read as a failure: missing ok)" in found["sloppy.okless"]


def test_without_observe_the_report_says_what_the_kit_cannot_see(site: Site) -> None:
    (found,) = checks_of("blind", "world")
    assert found["outcome"] == "warning"
    assert (
        "the kit cannot see whether a dry run or a revert of nothing changed the game"
        in (found["message"])
    )


def test_an_observe_that_raises_is_a_violation_of_its_own_and_no_passing_world(site) -> None:
    found = checks_of("myopic", "perform", "revert", "observe", "world", "perform_fresh")
    assert outcome(found) == [
        ("perform", "pass"),
        ("observe", "violation"),
        ("revert", "pass"),  # no revert declared: nothing called, nothing observed
        ("world", "violation"),
        ("perform_fresh", "pass"),
        ("observe", "violation"),
    ]
    observed = found[1]
    assert observed["subject"] == "myopic.act"
    assert observed["message"].startswith(
        "myopic.act: observe() raised RuntimeError: the game's status page is down"
    )
    assert "before the call" in observed["message"] and "(check perform)" in observed["message"]
    assert "after the call" in observed["message"]
    assert found[3]["message"].startswith('PLUGIN_INFO["observe"] failed 2 time(s)')
    result = CliRunner().invoke(main, ["contract-check", "--plugin", "myopic"])
    assert result.exit_code == 1, result.output
    assert "observe() raised" in result.output


def test_an_observe_that_raises_is_named_even_when_the_action_fails_too(site: Site) -> None:
    found = checks_of("doomed", "perform", "observe", "world")
    assert outcome(found)[:2] == [("perform", "violation"), ("observe", "violation")]
    assert 'error: "no such arena"' in found[0]["message"]
    assert "observe() raised RuntimeError: the game's status page is down" in found[1]["message"]
    assert [c["outcome"] for c in found if c["check"] == "world"] == ["violation"]


def test_a_params_bounds_are_shown_and_recorded_in_the_manifest(site: Site) -> None:
    (found,) = checks_of("ranged", "bounds")
    assert (found["outcome"], found["subject"]) == ("pass", "ranged.act.count")
    assert found["message"] == (
        "ranged.act param count: integer, minimum 1, maximum 50; example 4 within them"
    )
    result = CliRunner().invoke(main, ["contract-check", "--plugin", "ranged"])
    assert "bounds          ranged.act param count: integer, minimum 1, maximum 50" in (
        result.output
    )
    (entry,) = json.loads(Path("contract-manifest.json").read_text())["plugins"]
    (param,) = entry["actions"][0]["params"]
    assert (param["minimum"], param["maximum"]) == (1, 50)
    assert "pattern" not in param and "enum" not in param  # only the bounds declared


def test_an_example_outside_its_own_bounds_is_a_violation(site: Site) -> None:
    result = CliRunner().invoke(main, ["contract-check", "--plugin", "astray", "--json"])
    assert result.exit_code == 1
    (load,) = [c for c in json.loads(result.output)["checks"] if c["check"] == "load"]
    assert load["outcome"] == "violation"
    assert "example 0 must be at least 1" in load["message"]


def test_write_without_plugin_refuses_when_more_than_one_plugin_is_installed(
    site: Site,
) -> None:
    result = CliRunner().invoke(main, ["contract-check", "--write"])
    assert result.exit_code == 2
    assert "--write without --plugin would record" in result.output
    assert "pageant contract-check --plugin NAME --write" in result.output
    assert not Path("contract-manifest.json").exists()


def test_write_without_plugin_is_fine_with_one_plugin_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only the host's own plugin and wisps are left installed here (the games are hidden).
    from pageant.plugins import loader

    installed = loader.entry_points
    monkeypatch.setattr(
        loader,
        "entry_points",
        lambda **kw: [
            ep
            for ep in installed(**kw)
            if ep.dist
            and ep.dist.name not in {"pageant-shard", "pageant-openarena", "pageant-luanti"}
        ],
    )
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["contract-check", "--write"])
    assert result.exit_code == 0, result.output
    recorded = json.loads((tmp_path / "contract-manifest.json").read_text())
    assert [p["plugin"] for p in recorded["plugins"]] == ["pageant-wisps[wisps]"]


def test_every_hint_names_the_plugin(site: Site) -> None:
    result = CliRunner().invoke(main, ["contract-check", "--plugin", "careful"])
    assert "pageant contract-check --plugin careful --write" in result.output
    assert "pageant contract-check --write" not in result.output
