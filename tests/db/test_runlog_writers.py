"""The run log is written through one typed writer a kind: each kind's detail has one shape,
built in one place, written down in docs/runs.md from the code, and nothing outside the
run-log module inserts a line by hand."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pageant.db import runlog
from pageant.db.log_kinds import LogKind
from pageant.kit import logdocs

ROOT = Path(__file__).resolve().parents[2]
RUNLOG = ROOT / "host" / "db" / "runlog.py"
#: Where the code that writes run logs lives (the host, the contract, the plugins).
CODE = ("host", "hookspecs", "builtin_plugins", "example_plugins")
#: ``runlog.write(`` or the insert imported by name.
BY_HAND = re.compile(r"\brunlog\.write\(|from pageant\.db\.runlog import[^\n]*\bwrite\b")

NOW = datetime(2030, 1, 1, 12, tzinfo=UTC)
#: The insert is replaced below (``written``): the writers are handed no connection.
NO_CONN: Any = None


def by_hand(text: str) -> bool:
    return BY_HAND.search(text) is not None


def test_every_kind_has_one_writer_of_its_own() -> None:
    assert set(runlog.WRITERS) == set(LogKind)
    assert len(set(runlog.WRITERS.values())) == len(LogKind), "two kinds share a writer"


def test_nothing_outside_the_run_log_module_writes_a_line_by_hand() -> None:
    found = [
        str(path.relative_to(ROOT))
        for top in CODE
        for path in sorted((ROOT / top).rglob("*.py"))
        if path != RUNLOG and ".venv" not in path.parts and by_hand(path.read_text())
    ]
    assert found == [], "write run log lines through the typed writers of pageant.db.runlog"


def test_the_check_sees_a_line_written_by_hand() -> None:
    assert by_hand("    await runlog.write(conn, run_id, LogKind.ANNOUNCE, at=now)")
    assert by_hand("from pageant.db.runlog import flush, write\n")
    assert not by_hand("await runlog.run_status(conn, run_id, at=now, to='failed')")
    assert not by_hand("from pageant.db.runlog import writers\n")


def test_the_runs_guide_shows_the_shapes_the_writers_build() -> None:
    text = (ROOT / "docs" / "runs.md").read_text()
    assert logdocs.rendered_into(text) == text, (
        "docs/runs.md is stale: regenerate it with `python -m pageant.kit.logdocs docs/runs.md`"
    )
    for kind in LogKind:
        assert f"| `{kind.value}` | `{runlog.WRITERS[kind].__name__}(" in text


def test_rendering_needs_the_markers() -> None:
    with pytest.raises(ValueError, match="log-details"):
        logdocs.rendered_into("# Runs\n\nNo block here.\n")


@pytest.fixture
def written(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []

    async def keep(conn: Any, run_id: int, kind: LogKind, **line: Any) -> None:
        lines.append({"run_id": run_id, "kind": kind, **line})

    monkeypatch.setattr(runlog, "write", keep)
    return lines


STEP = {"run_id": 7, "id": 70, "phase": "muster", "action": "core.cue", "on_failure": "pause"}


async def test_a_writer_leaves_out_what_was_not_given_and_keeps_the_order(
    written: list[dict[str, Any]],
) -> None:
    await runlog.run_status(NO_CONN, 7, at=NOW, to="failed", because="x", cancelled_steps=2)
    await runlog.run_status(NO_CONN, 7, at=NOW, from_="scheduled", to="starting")
    (failed, started) = [line["detail"] for line in written]
    assert list(failed.items()) == [("to", "failed"), ("because", "x"), ("cancelled_steps", 2)]
    assert list(started.items()) == [("from", "scheduled"), ("to", "starting")]


async def test_a_step_line_takes_its_place_and_action_from_the_step(
    written: list[dict[str, Any]],
) -> None:
    await runlog.step_status(
        NO_CONN, STEP, at=NOW, to="done", attempt=1, hold_seconds=5, hold_until=NOW
    )
    await runlog.step_refused(NO_CONN, STEP, at=NOW, attempt=1, error="no", more={"code": "cap"})
    done, refused = written
    assert (done["run_id"], done["phase"], done["step_id"]) == (7, "muster", 70)
    assert list(done["detail"]) == ["to", "action", "attempt", "hold_seconds", "hold_until"]
    assert refused["kind"] is LogKind.STEP_REFUSED
    assert refused["detail"] == {
        "to": "refused",
        "action": "core.cue",
        "attempt": 1,
        "on_failure": "pause",
        "error": "no",
        "code": "cap",
    }


async def test_a_forced_advance_says_its_reason_even_when_none_was_given(
    written: list[dict[str, Any]],
) -> None:
    gate = {"run_id": 7, "phase": "p"}
    summary = {"kind": "after", "after": "5m", "deadline": NOW}
    common: dict[str, Any] = {"at": NOW, "because": "deadline", "summary": summary}
    await runlog.phase_advanced(NO_CONN, gate, waited_seconds=3, **common)
    await runlog.phase_advanced(NO_CONN, gate, waited_seconds=3, actor="ann", **common)
    by_gate, by_person = (line["detail"] for line in written)
    assert "reason" not in by_gate
    assert list(by_person) == ["because", "kind", "after", "deadline", "waited_seconds", "reason"]
    assert by_person["reason"] is None
