"""wisps against the contract, as its CI runs it: ``pageant contract-check``."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from pageant.cli import main

MANIFEST = Path(__file__).resolve().parents[1] / "contract-manifest.json"


def test_wisps_passes_the_contract_check_against_its_committed_manifest() -> None:
    result = CliRunner().invoke(
        main, ["contract-check", "--plugin", "wisps", "--manifest", str(MANIFEST)]
    )
    assert result.exit_code == 0, result.output
    outcomes = {line.split()[0] for line in result.output.splitlines() if line.startswith("  ")}
    assert outcomes == {"pass"}
    assert result.output.splitlines()[-1].startswith("contract-check passed")
