"""luanti against the contract, as its CI runs it: ``pageant contract-check`` against its
committed manifest. The check lends the plugin a game link with no world behind it (every
command answered ``{"ok": true}`` at once), so it proves the plugin's shape and its
answers to a world that says nothing; the real world is walked in tests/walks, where
tests/walks/test_luanti_contract_live.py runs this same check with ``--live-link`` against a
real minetestserver. The lease is
walked through the check's own target, ``contract-check``, which the allowlist must name."""

from __future__ import annotations

from pathlib import Path

import pytest

from pageant.testing import contract_check

MANIFEST = Path(__file__).resolve().parents[1] / "contract-manifest.json"


def test_luanti_passes_the_contract_check_against_its_committed_manifest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PAGEANT_PLUGIN_LUANTI_PLACES", "altar=0,9,0")
    monkeypatch.setenv("PAGEANT_PLUGIN_LUANTI_SETTINGS", "time_speed,gravity,contract-check")
    code, report = contract_check("--plugin", "luanti", "--manifest", str(MANIFEST))
    assert code == 0, [c for c in report.get("checks", [report]) if c.get("outcome") != "pass"]
    (plugin,) = report["plugins"]
    assert {check["outcome"] for check in plugin["checks"]} == {"pass", "warning"}
