"""shard against the contract, as its CI runs it: ``pageant contract-check``."""

from __future__ import annotations

from pathlib import Path

from pageant.testing import contract_check

MANIFEST = Path(__file__).resolve().parents[1] / "contract-manifest.json"


def test_shard_passes_the_contract_check_against_its_committed_manifest() -> None:
    code, report = contract_check("--plugin", "shard", "--manifest", str(MANIFEST))
    assert code == 0, report
    (shard,) = report["plugins"]
    assert {check["outcome"] for check in shard["checks"]} == {"pass"}
