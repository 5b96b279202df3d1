"""Leases in contract 1.3: ``apply`` and ``restore`` are handed the lease's idempotency key,
the same on a retry, on the re-dispatch after a crash and on the restore, so a game whose
answer to an ``apply`` was lost answers the retry from what it remembers (a 1.2 or 1.1 lease
is called as before); and a lease found back at its baseline when the host comes to restore
it was restored by the game, not ``drifted``. Real engine, both databases."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from pageant import hookimpl
from pageant.db import resources
from pageant.engine import Engine
from pageant.runs import controls
from pageant.runs.console import cleanup_summary
from pageant.switchboard import board
from tests.factories import log_lines, make_host, phase, run_row, spec, start_event, step, step_rows


class Keyed:
    """A game that remembers each borrowing by its key: an ``apply`` it has seen under a key
    answers what it answered the first time, and a ``restore`` under a key makes a late
    ``apply`` under it change nothing. ``lose`` answers (an ``apply`` the game made, whose
    answer never reaches the host) are counted down one per call."""

    PLUGIN_INFO = {"owner": "keyed", "contract": "^1.3"}  # noqa: RUF012 - read by the loader

    def __init__(self) -> None:
        self.world: dict[str, str] = {"gravity": "800", "speed": "320"}
        self.applied: dict[str, str] = {}  # key -> the baseline answered
        self.restored: set[str] = set()
        self.calls: list[tuple[str, str, str]] = []
        self.lose = 0

    async def read(self, target: str) -> str:
        return self.world[target]

    async def apply(self, target: str, value: str, until: datetime, key: str) -> str:
        self.calls.append(("apply", target, key))
        if key in self.restored:
            return self.world[target]  # given back already: a late apply changes nothing
        if key not in self.applied:
            self.applied[key] = self.world[target]
            self.world[target] = value
        if self.lose:
            self.lose -= 1
            raise ConnectionError("the answer was lost on its way back")
        return self.applied[key]

    async def restore(self, target: str, baseline: str, key: str) -> None:
        self.calls.append(("restore", target, key))
        self.restored.add(key)
        self.world[target] = baseline

    async def apply_old(self, target: str, value: str) -> str:
        self.calls.append(("apply_old", target, ""))
        before, self.world[target] = self.world[target], value
        return before

    async def restore_old(self, target: str, baseline: str) -> None:
        self.calls.append(("restore_old", target, ""))
        self.world[target] = baseline

    @hookimpl
    def pageant_leases(self) -> list[dict[str, Any]]:
        return [
            {
                "id": "keyed.cvar",
                "label": "A setting, keyed",
                "read": self.read,
                "apply": self.apply,
                "restore": self.restore,
            },
            {
                "id": "keyed.old",
                "label": "A setting, as 1.1 wrote it",
                "read": self.read,
                "apply": self.apply_old,
                "restore": self.restore_old,
            },
        ]


def lease(lease_id: str, target: str, value: str, **kw: Any) -> dict[str, Any]:
    return step("core.lease", lease=lease_id, target=target, value=value, minutes=30, **kw)


@pytest.fixture
def game() -> Keyed:
    return Keyed()


@pytest.fixture
async def keyed_host(settings, db, clock, game):
    host = make_host(settings, db, clock, [game])
    async with host.db.begin() as conn:
        await board.set_action(
            conn, host.registry, "core.lease", enabled=True, actor="admin:test", now=clock.now()
        )
    try:
        yield host
    finally:
        await host.close()


async def _held(host: Any, spec_: dict[str, Any]) -> tuple[int, Engine]:
    """A run of ``spec_`` followed by an hour's wait, its leases applied."""
    engine = Engine(host)
    run_id = await start_event(host, spec_)
    await engine.tick()
    return run_id, engine


async def _cancel_and_clean(host: Any, engine: Engine, run_id: int) -> list[Any]:
    try:
        await controls.cancel(host, run_id, actor="admin:test", reason="done")
        await engine.tick()
    finally:
        await engine.stop()
    async with host.db.connect() as conn:
        return await resources.resources_of_run(conn, run_id)


async def _lease_rows(host: Any, run_id: int) -> list[Any]:
    async with host.db.connect() as conn:
        return [r for r in await resources.resources_of_run(conn, run_id) if r.kind != "@step"]


# ── the key ───────────────────────────────────────────────────────────────────


async def test_apply_and_restore_get_the_steps_key_and_an_older_lease_is_called_as_before(
    keyed_host, game
):
    wait = step("core.wait", seconds=3600)
    run_id, engine = await _held(
        keyed_host,
        spec(
            phase(
                "p", lease("keyed.cvar", "gravity", "200"), lease("keyed.old", "speed", "9"), wait
            )
        ),
    )
    assert game.world == {"gravity": "200", "speed": "9"}
    await _cancel_and_clean(keyed_host, engine, run_id)
    assert game.world == {"gravity": "800", "speed": "320"}
    borrowed = (await step_rows(keyed_host.db, run_id))[0]
    # Restored newest first; the keyed lease's two calls carry the step's key.
    assert game.calls == [
        ("apply", "gravity", borrowed.idempotency_key),
        ("apply_old", "speed", ""),
        ("restore_old", "speed", ""),
        ("restore", "gravity", borrowed.idempotency_key),
    ]


async def test_a_retry_after_a_lost_answer_is_answered_from_the_key(keyed_host, game, clock):
    game.lose = 1  # the game applies, and its answer never arrives
    wait = step("core.wait", seconds=3600)
    run_id, engine = await _held(
        keyed_host, spec(phase("p", lease("keyed.cvar", "gravity", "200"), wait))
    )
    try:
        (borrowed, _) = await step_rows(keyed_host.db, run_id)
        # Not taken to mean nothing happened: the reservation stays, and the step retries.
        assert (borrowed.status, borrowed.attempts) == ("pending", 1)
        assert game.world["gravity"] == "200"
        (row,) = await _lease_rows(keyed_host, run_id)
        assert (row.status, "baseline" in row.payload) == ("pending", False)
        clock.advance(seconds=keyed_host.settings.retry_seconds)
        await engine.tick()
        (borrowed, _) = await step_rows(keyed_host.db, run_id)
        assert (borrowed.status, borrowed.attempts) == ("done", 2)
    finally:
        await engine.stop()
    (row,) = await _lease_rows(keyed_host, run_id)
    # The retry's apply, under the same key, answered the baseline the first one replaced:
    # not the leased 200, which a restore would then have put "back".
    assert (row.status, row.payload["baseline"]) == ("confirmed", "800")
    assert [c for c in game.calls if c[0] == "apply"] == [
        ("apply", "gravity", borrowed.idempotency_key)
    ] * 2


async def test_an_apply_that_never_answers_is_not_forgotten(keyed_host, game, clock):
    game.lose = 99  # every answer is lost: the step fails for good
    run_id, engine = await _held(
        keyed_host, spec(phase("p", lease("keyed.cvar", "gravity", "200", on_failure="skip")))
    )
    try:
        for _ in range(keyed_host.settings.max_attempts):
            clock.advance(seconds=keyed_host.settings.retry_seconds)
            await engine.tick()
    finally:
        await engine.stop()
    (borrowed,) = await step_rows(keyed_host.db, run_id)
    assert borrowed.status == "failed"
    # What the game did under the key is found at the end: applied, with no baseline on
    # record, so it is left as it is and the run says so rather than "given back".
    (row,) = await _lease_rows(keyed_host, run_id)
    assert row.status == "revert_failed" and "baseline was never recorded" in row.last_error
    assert (await run_row(keyed_host.db, run_id)).cleanup_status == "incomplete"


# ── restored by the game, drifted, restored by the host ──────────────────────


async def test_a_lease_found_at_its_baseline_was_restored_by_the_game(keyed_host, game):
    wait = step("core.wait", seconds=3600)
    run_id, engine = await _held(
        keyed_host, spec(phase("p", lease("keyed.cvar", "gravity", "200"), wait))
    )
    game.world["gravity"] = "800"  # the game put it back itself (its until passed, it restarted)
    (row,) = await _cancel_and_clean(keyed_host, engine, run_id)
    assert [c[0] for c in game.calls] == ["apply"]  # no restore was called
    assert (row.status, row.revert_attempts) == ("reverted", 0)
    assert (row.payload["found"], row.payload["restored_by"]) == ("800", "game")
    (given,) = await log_lines(keyed_host.db, run_id, "resource.reverted")
    assert given.detail["by"] == "game"
    assert (await run_row(keyed_host.db, run_id)).cleanup_status == "complete"
    assert cleanup_summary([row], ended=True) == (
        "Everything this run created or borrowed has been given back; "
        "the game had already put back keyed.cvar for gravity itself"
    )


async def test_a_lease_found_at_neither_value_is_drifted_and_left_alone(keyed_host, game):
    wait = step("core.wait", seconds=3600)
    run_id, engine = await _held(
        keyed_host, spec(phase("p", lease("keyed.cvar", "gravity", "200"), wait))
    )
    game.world["gravity"] = "450"  # someone else set it
    (row,) = await _cancel_and_clean(keyed_host, engine, run_id)
    assert [c[0] for c in game.calls] == ["apply"] and game.world["gravity"] == "450"
    assert (row.status, row.payload["found"]) == ("drifted", "450")
    assert "restored_by" not in row.payload
    assert await log_lines(keyed_host.db, run_id, "resource.reverted") == []


async def test_a_lease_found_at_the_leased_value_is_restored_by_the_host(keyed_host, game):
    wait = step("core.wait", seconds=3600)
    run_id, engine = await _held(
        keyed_host, spec(phase("p", lease("keyed.cvar", "gravity", "200"), wait))
    )
    (row,) = await _cancel_and_clean(keyed_host, engine, run_id)
    assert [c[0] for c in game.calls] == ["apply", "restore"] and game.world["gravity"] == "800"
    assert (row.status, row.revert_attempts) == ("reverted", 1)
    assert "restored_by" not in row.payload
    (given,) = await log_lines(keyed_host.db, run_id, "resource.reverted")
    assert "by" not in given.detail
