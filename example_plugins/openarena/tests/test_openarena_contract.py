"""openarena against the contract, as its CI runs it: ``pageant contract-check`` with a
private server to talk to (the kit walks the lease through a cvar of its own,
``contract-check``, which the allowlist must name)."""

from __future__ import annotations

from pathlib import Path

import pytest
from arena_server import arena  # noqa: F401 - a fixture, used by name
from pageant_openarena.dedicated import Dedicated

from pageant.testing import contract_check

MANIFEST = Path(__file__).resolve().parents[1] / "contract-manifest.json"
CVARS = "g_gravity,g_speed,g_knockback,g_quadfactor,timelimit,contract-check"


async def test_openarena_passes_the_contract_check_against_its_committed_manifest(
    arena: Dedicated,  # noqa: F811 - the imported fixture
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PAGEANT_PLUGIN_OPENARENA_CVARS", CVARS)
    # The kit's observations need the server's rcon ration; the plugin's probe can wait.
    monkeypatch.setenv("PAGEANT_PLUGIN_OPENARENA_PROBE_SECONDS", "60")
    # A busy machine can keep the server from answering within the tests' usual second.
    monkeypatch.setenv("PAGEANT_PLUGIN_OPENARENA_RCON_TIMEOUT_SECONDS", "3")
    code, report = contract_check("--plugin", "openarena", "--manifest", str(MANIFEST))
    assert code == 0, [c for c in report.get("checks", [report]) if c.get("outcome") != "pass"]
    (plugin,) = report["plugins"]
    assert {check["outcome"] for check in plugin["checks"]} == {"pass"}
