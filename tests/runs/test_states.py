"""One state machine: the status words live in ``pageant.states``, its table of moves is
what the compare-and-sets act from, the contract's risks agree with its Risk, and
``docs/runs.md`` shows the same table."""

from __future__ import annotations

import ast
import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, get_args

import pytest
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pageant import states
from pageant.db import runs
from pageant.hookspecs import models
from pageant.states import (
    PARKED,
    RUN_CANCEL,
    RUN_MOVES,
    RUN_PAUSE,
    RUN_RESCHEDULE,
    RUN_RESUME,
    STEP_MOVES,
    CleanupStatus,
    Health,
    Move,
    Risk,
    RunStatus,
    StepStatus,
)
from tests.factories import publish_event, run_row

ROOT = Path(__file__).resolve().parents[2]
HOME = ROOT / "host" / "db" / "states.py"
RUNS_GUIDE = ROOT / "docs" / "runs.md"
NOW = datetime(2027, 3, 1, 12, 0, tzinfo=UTC)

#: Every word a status, a health, a cleanup status or a risk is spelt with.
WORDS = {m.value for e in (RunStatus, StepStatus, Health, CleanupStatus, Risk) for m in e}
#: The collections of status words still written out outside the states module, and why:
#: the plugin contract declares its own risks (plugin authors import them, and it imports
#: nothing of the host); the plugin-author kit names the ends of a run it drives; the demo's
#: and the showcase's texts name the words they print.
LEFT = {
    "hookspecs/models.py": 2,
    "host/testing.py": 1,
    "host/cli/demo_text.py": 1,
    "host/cli/showcase.py": 1,
}
#: The most such collections allowed outside the contract.
BOUND = 3


def status_collections(path: Path) -> list[str]:
    """``line: words`` of each tuple, list or set (a ``Literal[...]`` too) of two or more
    string literals in ``path`` that are all status words."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Tuple | ast.List | ast.Set) and len(node.elts) >= 2:
            values = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
            if all(isinstance(v, str) and v in WORDS for v in values):
                found.append(f"{node.lineno}: {', '.join(map(str, values))}")
    return found


def collections_outside_home() -> dict[str, list[str]]:
    return {
        str(path.relative_to(ROOT)): found
        for top in ("host", "hookspecs", "builtin_plugins")
        for path in sorted((ROOT / top).rglob("*.py"))
        if path != HOME and "migrations" not in path.parts
        if (found := status_collections(path))
    }


def test_status_words_are_not_listed_outside_the_states_module() -> None:
    found = collections_outside_home()
    where = "; ".join(f"{path} {lines}" for path, lines in found.items())
    outside_contract = sum(len(v) for k, v in found.items() if not k.startswith("hookspecs/"))
    assert outside_contract <= BOUND, (
        f"{outside_contract} lists of status words outside pageant.states ({where}); "
        "name the statuses through its enumerations and sets"
    )
    assert {path: len(lines) for path, lines in found.items()} == LEFT, where


def test_a_list_of_status_words_is_found(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        'A = ("paused", "running")\nB: Literal["ok", "stalled"]\nC = ("paused", "x")\n'
        "D = (RunStatus.PAUSED, RunStatus.RUNNING)\n"
    )
    assert status_collections(module) == ["1: paused, running", "2: ok, stalled"]


# ── the contract's risks ───────────────────────────────────────────────────────


def test_the_risks_are_the_contracts_in_its_order() -> None:
    assert tuple(r.value for r in Risk) == get_args(models.Risk)


@pytest.mark.parametrize("risk", list(Risk))
def test_a_risk_changes_the_world_as_the_contract_says(risk: Risk) -> None:
    assert risk.changes_world is models.changes_world(risk.value)
    assert (risk in models.WORLD_CHANGING_RISKS) is risk.changes_world


# ── the table ─────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("moves", "words"),
    [(RUN_MOVES, {s.value for s in RunStatus}), (STEP_MOVES, {*StepStatus, PARKED})],
)
def test_every_move_is_named_once_between_statuses(moves: Any, words: set[str]) -> None:
    assert len({m.name for m in moves}) == len(moves)
    for move in moves:
        assert move.froms, move.name
        assert set(move.froms) | set(move.to) <= words, move.name


def test_an_ended_run_is_never_moved_again() -> None:
    # Written once: from an end a move leaves the status as it is (a cleanup). The one
    # exception is the schedule's own mark: a blacked-out run is given back (lift) or
    # withdrawn by the schedule that marked it, and by nothing else.
    for move in RUN_MOVES:
        if set(move.froms) & (set(states.RUN_ENDED) - {RunStatus.BLACKED_OUT}):
            assert not move.to, move.name
    taken_back = [m for m in RUN_MOVES if RunStatus.BLACKED_OUT in m.froms and m.to]
    assert [(m.name, m.by) for m in taken_back] == [
        ("lift", "the schedule"),
        ("withdraw", "the schedule"),
    ]


def test_the_sets_agree_with_the_enumerations() -> None:
    assert set(states.RUN_NOT_ENDED) == {s for s in RunStatus if not s.ended}
    assert set(states.RUN_LIVE) == set(states.RUN_NOT_ENDED) - {RunStatus.SCHEDULED}
    assert set(states.RUN_ACTIVE) == set(states.RUN_LIVE) - {RunStatus.PAUSED}
    assert [h.below for h in Health] == [(), (Health.OK,), (Health.OK, Health.DEGRADED)]
    assert {s.value: s.public.value for s in RunStatus}["paused"] == "running"
    assert states.OUTCOME_FINISHED == ("completed", "failed")


def test_a_move_says_what_it_acts_on() -> None:
    assert RUN_CANCEL.acts_on("run") == "a scheduled, starting, running or paused run"
    assert states.STEP_CONFIRM.acts_on("step") == "a parked step"
    assert states.either(("a", "b"), "and") == "a and b"


# Each run control's compare-and-set, and the move it makes: it changes a run exactly when
# the run is in one of the move's statuses.
CONTROLS: list[tuple[Move, Callable[[AsyncConnection, int], Awaitable[bool]]]] = [
    (RUN_PAUSE, lambda conn, run_id: runs.pause_run(conn, run_id)),
    (RUN_RESUME, lambda conn, run_id: runs.resume_run(conn, run_id)),
    (RUN_CANCEL, lambda conn, run_id: runs.cancel_run(conn, run_id, reason="x", now=NOW)),
    (
        RUN_RESCHEDULE,
        lambda conn, run_id: runs.reschedule(conn, run_id, NOW + timedelta(days=1)),
    ),
]


@pytest.mark.parametrize(("move", "cas"), CONTROLS, ids=[m.name for m, _ in CONTROLS])
async def test_a_compare_and_set_acts_from_its_moves_statuses(
    db: AsyncEngine, move: Move, cas: Callable[[AsyncConnection, int], Awaitable[bool]]
) -> None:
    event = await publish_event(db, NOW)
    for status in RunStatus:
        async with db.begin() as conn:
            run_id, _ = await runs.insert_run(
                conn,
                {
                    "definition_id": event.id,
                    "version_id": event.version_id,
                    "scope": status.value,
                    "scheduled_for": NOW,
                    "source": "manual",
                    "status": status,
                    "created_at": NOW,
                },
            )
            changed = await cas(conn, run_id)
        assert changed is (status in move.froms), (move.name, status)
        after = (await run_row(db, run_id)).status
        assert (after != status) is (changed and bool(move.to)), (move.name, status)
        assert after in {status, *move.to}, (move.name, status)


#: A move the table does not have: completed runs are written once.
_UNDONE = states.Move("undo", (RunStatus.COMPLETED,), (RunStatus.FAILED,), "nobody", "never")


@pytest.mark.parametrize(
    "move",
    [_UNDONE, states.RUN_PAUSE, states.RUN_START, states.RUN_RESCHEDULE, states.RUN_END],
    ids=lambda move: move.name,
)
async def test_an_ending_the_table_does_not_allow_is_refused(
    db: AsyncEngine, move: states.Move
) -> None:
    event = await publish_event(db, NOW)
    async with db.begin() as conn:
        run_id, _ = await runs.insert_run(
            conn,
            {
                "definition_id": event.id,
                "version_id": event.version_id,
                "scheduled_for": NOW,
                "source": "manual",
                "status": move.froms[0],
                "created_at": NOW,
            },
        )
    with pytest.raises(ValueError, match=f"{move.name} is not an ending of a run"):
        async with db.begin() as conn:
            await runs.end_run(conn, run_id, move, now=NOW)
    assert (await run_row(db, run_id)).status == move.froms[0]


@pytest.mark.parametrize(
    "move",
    [states.RUN_MISS, states.RUN_REFUSE, states.RUN_FAIL, states.RUN_ABORT, states.RUN_COMPLETE],
    ids=lambda move: move.name,
)
async def test_the_engines_endings_are_moves_of_the_table(
    db: AsyncEngine, move: states.Move
) -> None:
    event = await publish_event(db, NOW)
    async with db.begin() as conn:
        run_id, _ = await runs.insert_run(
            conn,
            {
                "definition_id": event.id,
                "version_id": event.version_id,
                "scheduled_for": NOW,
                "source": "manual",
                "status": move.froms[-1],
                "created_at": NOW,
            },
        )
        assert await runs.end_run(conn, run_id, move, now=NOW)
        assert not await runs.end_run(conn, run_id, move, now=NOW)  # written once
    assert (await run_row(db, run_id)).status == move.to[0]


# ── the runs guide ─────────────────────────────────────────────────────────────


def test_the_runs_guide_shows_the_table_of_moves() -> None:
    text = RUNS_GUIDE.read_text(encoding="utf-8")
    assert states.render_doc(text) == text, (
        "docs/runs.md's tables of moves differ from pageant.states; write them again "
        "with `python -m pageant.states docs/runs.md`"
    )


def test_a_changed_table_is_seen() -> None:
    text = RUNS_GUIDE.read_text(encoding="utf-8")
    stale = text.replace("| pause | `starting`, `running` |", "| pause | `running` |")
    assert stale != text
    assert states.render_doc(stale) == text


@pytest.mark.parametrize(
    ("header", "enum"),
    [
        ("| status | meaning |", RunStatus),
        ("| step status | meaning |", StepStatus),
        ("| `cleanup_status` | means |", CleanupStatus),
    ],
)
def test_the_runs_guide_explains_every_status(header: str, enum: Any) -> None:
    text = RUNS_GUIDE.read_text(encoding="utf-8")
    rows = text[text.index(header) :].split("\n\n")[0].split("\n")[2:]
    named = re.findall(r"`([a-z_]+)`", "\n".join(row.split(" | ")[0] for row in rows))
    assert named == [s.value for s in enum]
