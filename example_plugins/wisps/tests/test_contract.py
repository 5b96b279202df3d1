"""wisps against the contract, as its CI runs it: ``pageant contract-check``."""

from __future__ import annotations

from pathlib import Path

from pageant.testing import contract_check

MANIFEST = Path(__file__).resolve().parents[1] / "contract-manifest.json"


def test_wisps_passes_the_contract_check_against_its_committed_manifest() -> None:
    code, report = contract_check("--plugin", "wisps", "--manifest", str(MANIFEST))
    assert code == 0, report
    (wisps,) = report["plugins"]
    assert {check["outcome"] for check in wisps["checks"]} == {"pass"}
