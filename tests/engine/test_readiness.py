"""One readiness rule, one table: whether a run's next step may be dispatched, and the first
thing in its way, for every case the run's loop, the claim ahead and the set-wise claim ask."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from pageant.engine.readiness import readiness, run_may_move
from pageant.states import Readiness

NOW = datetime(2026, 12, 4, 19, 0, tzinfo=UTC)
SOON = NOW + timedelta(minutes=1)
AGO = NOW - timedelta(minutes=1)


@dataclass
class _Host:
    """The three things the rule asks of the host, and nothing else."""

    contested: set[str] = field(default_factory=set)
    down: set[str] = field(default_factory=set)
    stopping: bool = False

    @property
    def engine(self) -> Any:
        """The host's engine, which says whether it began a clean stop."""
        return SimpleNamespace(stopping=self.stopping)

    def unavailable(self, action_id: str) -> str | None:
        return "contested" if action_id in self.contested else None

    def plugin_unavailable(self, owner: str) -> str | None:
        return "down" if owner in self.down else None


def _state(**over: Any) -> dict[str, Any]:
    return {"status": "running", "hold_until": None, "waiting_reason": None, **over}


def _step(**over: Any) -> dict[str, Any]:
    return {"status": "pending", "lease_until": None, "due_at": None, "action": "game.x", **over}


CASES = [
    ("a pending due step of a running run", _Host(), _state(), _step(), Readiness.READY),
    ("due exactly now", _Host(), _state(), _step(due_at=NOW), Readiness.READY),
    ("due a minute ago", _Host(), _state(), _step(due_at=AGO), Readiness.READY),
    ("due in a minute", _Host(), _state(), _step(due_at=SOON), Readiness.NOT_DUE),
    ("the run is paused", _Host(), _state(status="paused"), _step(), Readiness.NOT_RUNNING),
    ("the run is starting", _Host(), _state(status="starting"), _step(), Readiness.NOT_RUNNING),
    ("the run carries a wait", _Host(), _state(hold_until=SOON), _step(), Readiness.HELD),
    ("a wait that ran out", _Host(), _state(hold_until=AGO), _step(), Readiness.HELD),
    ("no step left in the phase", _Host(), _state(), None, Readiness.NO_STEP),
    (
        "a step under a live claim",
        _Host(),
        _state(),
        _step(status="running", lease_until=SOON),
        Readiness.IN_FLIGHT,
    ),
    ("a parked step", _Host(), _state(), _step(status="running"), Readiness.PARKED),
    (
        "a contested action",
        _Host(contested={"game.x"}),
        _state(),
        _step(),
        Readiness.UNAVAILABLE,
    ),
    (
        "a contested action on a stopping host",
        _Host(contested={"game.x"}, stopping=True),
        _state(),
        _step(),
        Readiness.UNAVAILABLE,
    ),
    ("a stopping host", _Host(stopping=True), _state(), _step(), Readiness.STOPPING),
    ("its plugin is down", _Host(down={"game"}), _state(), _step(), Readiness.PLUGIN_DOWN),
    (
        "another plugin is down",
        _Host(down={"other"}),
        _state(),
        _step(),
        Readiness.READY,
    ),
    (
        "the run holds the step for its plugin",
        _Host(),
        _state(waiting_reason="unavailable"),
        _step(),
        Readiness.PLUGIN_DOWN,
    ),
    (
        "a note of another wait does not stop it",
        _Host(),
        _state(waiting_reason="not_due"),
        _step(),
        Readiness.READY,
    ),
]


@pytest.mark.parametrize(
    ("host", "state", "step", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_the_readiness_of_a_runs_next_step(
    host: _Host, state: dict[str, Any], step: dict[str, Any] | None, expected: Readiness
) -> None:
    assert readiness(host, state, step, NOW) is expected  # type: ignore[arg-type]  # a stand-in Host: the rule asks it three things


@pytest.mark.parametrize(
    ("state", "moves"),
    [
        (_state(), True),
        (_state(hold_until=SOON), False),
        (_state(status="paused"), False),
        (_state(status="scheduled"), False),
    ],
)
def test_the_runs_half_of_the_rule(state: dict[str, Any], moves: bool) -> None:
    assert run_may_move(state) is moves
