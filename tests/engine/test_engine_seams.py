"""The engine's seams stay explicit: no hidden mode changes what a storage or engine function
does, the Host's attributes are typed, nothing reaches back into the engine by name, and a
function named ``claim_step`` always makes its compare-and-set."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from pageant.db import runlog, steps
from pageant.db.log_kinds import LogKind
from pageant.db.shared import Batch
from tests.engine.test_engine_batch import _claimed_steps

ROOT = Path(__file__).resolve().parents[2]
HOST = ROOT / "host"


def _sources(*folders: Path) -> list[Path]:
    return sorted(
        path
        for folder in folders
        for path in folder.rglob("*.py")
        if "__pycache__" not in path.parts
    )


def test_no_context_variable_changes_what_storage_or_the_engine_does():
    # A context variable is a mode a caller cannot see in the call; the batch is a value.
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in _sources(HOST / "db", HOST / "engine")
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if "ContextVar" in line or "contextvars" in line
    ]
    assert found == []


def test_nothing_reaches_back_into_the_engine_by_name():
    reach = re.compile(r"getattr\((self\.)?host\.engine\b|getattr\(engine\b")
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in _sources(HOST)
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if reach.search(line)
    ]
    assert found == []


def test_the_hosts_attributes_are_typed():
    tree = ast.parse((HOST / "hosting.py").read_text())
    (host,) = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Host"]
    untyped = [
        ast.unparse(node.target)
        for node in ast.walk(host)
        if isinstance(node, ast.AnnAssign)
        and ast.unparse(node.target).startswith("self.")
        and re.search(r"\bAny\b", ast.unparse(node.annotation))
    ]
    assert untyped == []


async def test_claim_step_makes_its_compare_and_set_while_a_batch_is_open(probe_host):
    (step_id,) = await _claimed_steps(probe_host, 1)
    now = probe_host.clock.now()
    fence = {"seen_attempts": 0, "owner": "me", "lease": now, "now": now}
    async with probe_host.db.begin() as conn:
        batch = Batch(conn)
        assert await steps.claim_step(conn, step_id, **fence)
        # The second claim of the same attempt loses at once: no batch turns it into a
        # promise, even with one open on the same connection.
        assert not await steps.claim_step(conn, step_id, **fence)
        assert batch.claims == []


async def test_a_kept_claim_and_line_are_made_only_when_the_batch_is_flushed(probe_host):
    (step_id,) = await _claimed_steps(probe_host, 1)
    now = probe_host.clock.now()
    async with probe_host.db.begin() as conn:
        batch = Batch(conn)
        steps.keep_claim(batch, step_id, seen_attempts=0, owner="me", lease=now, now=now)
        step = await steps.get_step(conn, step_id)
        await runlog.write(
            conn, step.run_id, LogKind.ANNOUNCE, at=now, detail={"message": "x"}, batch=batch
        )
        assert step.claimed_by is None and len(batch.lines) == 1
        assert await steps.flush_claims(batch) == 1
        assert await runlog.flush(batch) == 1
        assert (await steps.get_step(conn, step_id)).claimed_by == "me"
        assert batch.claims == [] and batch.lines == []
