"""``pageant contract-check`` passes a link plugin with no game and no agent: the kit lends a
link that answers every command, and the plugin, started twice in one process (once per
host the check builds), binds nothing of its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixture_plugins import Site, fake_site, source
from tests.kit.test_contract_check import check, check_json, no_settings_in_the_environment

__all__ = ["no_settings_in_the_environment"]


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    with fake_site(tmp_path / "site", monkeypatch) as s:
        s.install(
            "pageant-lighthouse",
            {"lighthouse": "lighthouse:Lighthouse"},
            {"lighthouse": source("lighthouse")},
        )
        yield s


def test_a_link_plugin_passes_contract_check_without_a_game(site: Site) -> None:
    assert check("--plugin", "lighthouse", "--write").exit_code == 0
    code, report = check_json("--plugin", "lighthouse")
    assert report["violations"] == [], report["violations"]
    assert code == 0
    checks = {c["check"] for c in report["plugins"][0]["checks"]}
    assert {"load", "perform", "perform_fresh", "revert"} <= checks
