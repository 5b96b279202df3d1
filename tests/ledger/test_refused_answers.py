"""Answers the database could not store, against the real engine on both databases: the
envelope refuses each at once as the plugin's error, naming the field and its limit; the
step goes the way of any failed attempt (retry, then fail), nothing loops, nothing is
logged at ERROR, and the placeholder keeps what the answer did not say given back."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from tests.factories import (
    log_lines,
    phase,
    run_row,
    spec,
    start_event,
    step_rows,
)
from tests.ledger.games import forge

ANSWERS = [
    ({"ok": False, "retry": True, "error": "x" * 70_000}, '"error" is 70,000 bytes'),
    (
        {"ok": True, "resources": [{"kind": "sword", "ref": "r" * 201}]},
        "resources[0].ref is 201 characters; the most is 200",
    ),
    (
        {"ok": True, "resources": [{"kind": "sword", "ref": "a", "at": {1.5, 2.5}}]},
        "resources[0] detail is not JSON",
    ),
    (
        {"ok": True, "resources": [{"kind": 3, "ref": "a"}]},
        "resources[0].kind must be text",
    ),
    ({"ok": True, "hold_for": 86_401}, '"hold_for" must be a number of seconds from 0 to 86,400'),
]


@pytest.mark.parametrize(("answer", "named"), ANSWERS)
async def test_an_answer_the_database_could_not_store_is_refused_at_once(
    smith_host, smith_engine, smith, clock, caplog, answer: Any, named: str
):
    caplog.set_level(logging.INFO, logger="pageant")
    max_attempts = smith_host.settings.max_attempts
    smith.answers = [answer] * max_attempts
    run_id = await start_event(smith_host, spec(phase("p", forge(1, on_failure="abort_run"))))
    for _ in range(max_attempts):
        await smith_engine.tick()
        clock.advance(smith_host.settings.retry_seconds)
    (row,) = await step_rows(smith_host.db, run_id)
    assert row.status == "failed"
    assert row.attempts == max_attempts
    assert named in row.last_error
    retries = await log_lines(smith_host.db, run_id, "step.retry")
    assert len(retries) == max_attempts - 1
    assert all(named in line.detail["error"] for line in retries)
    assert (await run_row(smith_host.db, run_id)).status == "failed"
    # Each attempt was answered and recorded: no lease ran out, nothing was logged at ERROR.
    assert not await log_lines(smith_host.db, run_id, "step.stale")
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert (await run_row(smith_host.db, run_id)).cleanup_status == "complete"
    assert len(smith.reverts) == 1 and smith.reverts[0].resources == ()


async def test_an_answer_at_every_limit_is_stored_and_given_back(smith_host, smith_engine, smith):
    longest = {"kind": "k" * 120, "ref": "r" * 200, "detail": {"hp": 3}}
    smith.answers = [{"ok": True, "resources": [longest], "hold_for": 0}]
    run_id = await start_event(smith_host, spec(phase("p", forge(1))))
    await smith_engine.tick()
    (row,) = await step_rows(smith_host.db, run_id)
    assert row.status == "done"
    (revert,) = smith.reverts
    assert [(r.kind, r.ref) for r in revert.resources] == [("k" * 120, "r" * 200)]
    assert (await run_row(smith_host.db, run_id)).cleanup_status == "complete"
