"""Per-run budgets and ``may_invoke``: enablement, the price, the cap, and that a cap holds
under real concurrency on both databases."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import delete, select

from pageant import hookimpl
from pageant.db import budgets
from pageant.db.tables import event_run_budget, event_run_steps
from pageant.engine import Engine
from pageant.engine.policy import may_invoke
from pageant.runs import controls
from pageant.runs.create import start_now
from pageant.switchboard import board
from tests.factories import (
    Probe,
    log_lines,
    make_host,
    phase,
    publish_event,
    run_row,
    spec,
    start_event,
    step,
    step_rows,
)


class Purse:
    """A game whose actions cost gold and silver (and one that names what nobody declares)."""

    PLUGIN_INFO = {"owner": "purse", "contract": "^1.0"}  # noqa: RUF012 - read by the loader

    def __init__(self) -> None:
        self.calls: list[Any] = []
        self.answers: list[dict[str, Any]] = []

    async def perform(self, ctx: Any) -> Any:
        self.calls.append(ctx)
        return self.answers.pop(0) if self.answers else {"ok": True}

    @hookimpl
    def pageant_actions(self) -> list[dict[str, Any]]:
        def param(name: str) -> dict[str, Any]:
            return {
                "name": name,
                "type": "integer",
                "required": False,
                "description": f"{name} to pay.",
                "example": 1,
            }

        base = {"perform": self.perform, "budget_ms": 5_000, "risk": "notify"}
        return [
            {
                "id": "purse.buy",
                "label": "Buy",
                "version": 2,
                "params": [param("gold")],
                "cost": lambda p: {"purse.gold": p.get("gold", 0)},
                **base,
            },
            {
                "id": "purse.trade",
                "label": "Trade",
                "params": [param("gold"), param("silver")],
                "cost": lambda p: {"purse.gold": p.get("gold", 0), "purse.silver": p["silver"]},
                **base,
            },
            {
                "id": "purse.ghost",
                "label": "Ghost",
                "params": [],
                "cost": lambda p: {"purse.nothing": 1},
                **base,
            },
            {
                "id": "purse.odd",
                "label": "Odd",
                "params": [
                    {
                        "name": "gold",
                        "type": "number",
                        "required": False,
                        "description": "gold to pay, in any fraction.",
                        "example": 1.5,
                    }
                ],
                "cost": lambda p: {"purse.gold": p.get("gold", 1.5)},
                **base,
            },
        ]

    @hookimpl
    def pageant_budgets(self) -> list[dict[str, Any]]:
        return [
            {"dimension": "purse.gold", "label": "Gold paid", "unit": "coins"},
            {"dimension": "purse.silver", "label": "Silver paid", "unit": "coins"},
        ]


@pytest.fixture
def purse() -> Purse:
    return Purse()


@pytest.fixture
async def purse_host(settings, db, clock, purse):
    h = make_host(settings, db, clock, [purse, Probe()])
    try:
        yield h
    finally:
        await h.close()


@pytest.fixture
async def purse_engine(purse_host):
    e = Engine(purse_host)
    try:
        yield e
    finally:
        await e.stop()


async def _cap(host, action_id: str, **caps: int | None) -> None:
    async with host.db.begin() as conn:
        await board.set_action(
            conn,
            host.registry,
            action_id,
            caps={k.replace("_", "."): v for k, v in caps.items()},
            actor="admin:test",
            now=host.clock.now(),
        )


async def _meters(host, run_id) -> dict[str, tuple[int | None, int, str | None]]:
    async with host.db.connect() as conn:
        rows = await budgets.budget_of(conn, run_id)
    return {r.dimension: (r.cap, r.consumed, r.cap_source_action) for r in rows}


def buy(gold: int, **kw: Any) -> dict[str, Any]:
    return step("purse.buy", gold=gold, **kw)


# ── pinning ───────────────────────────────────────────────────────────────────


async def test_a_run_is_pinned_one_row_per_dimension_with_the_tightest_cap(purse_host):
    await _cap(purse_host, "purse.buy", purse_gold=50)
    await _cap(purse_host, "purse.trade", purse_gold=20, purse_silver=None)
    run_id = await start_event(
        purse_host,
        spec(phase("a", buy(5)), phase("b", step("purse.trade", gold=1, silver=2))),
    )
    assert await _meters(purse_host, run_id) == {
        "purse.gold": (20, 0, "purse.trade"),
        "purse.silver": (None, 0, None),  # uncapped, still metered
    }


async def test_a_run_that_spends_nothing_has_no_budget_rows(purse_host):
    run_id = await start_event(purse_host, spec(phase("a", step("probe.step", name="x"))))
    assert await _meters(purse_host, run_id) == {}


async def test_raising_a_cap_reaches_runs_that_have_not_ended_only(purse_host, purse_engine):
    await _cap(purse_host, "purse.buy", purse_gold=10)
    done = await start_event(purse_host, spec(phase("a", buy(1))))
    await purse_engine.tick()
    assert (await run_row(purse_host.db, done)).status == "completed"
    live = await start_event(purse_host, spec(phase("a", buy(1))))
    await _cap(purse_host, "purse.buy", purse_gold=40)
    assert (await _meters(purse_host, live))["purse.gold"] == (40, 0, "purse.buy")
    assert (await _meters(purse_host, done))["purse.gold"] == (10, 1, "purse.buy")


# ── the cap at dispatch ──────────────────────────────────────────────────────


async def test_the_cap_refuses_with_the_numbers_and_the_run_goes_on_skip(
    purse_host, purse_engine, purse
):
    await _cap(purse_host, "purse.buy", purse_gold=30)
    run_id = await start_event(
        purse_host, spec(phase("a", buy(15), buy(15), buy(15, on_failure="skip"), buy(0)))
    )
    await purse_engine.tick()
    statuses = [s.status for s in await step_rows(purse_host.db, run_id)]
    assert statuses == ["done", "done", "refused", "done"]
    assert len(purse.calls) == 3  # the refused step never reached the plugin
    (refused,) = await log_lines(purse_host.db, run_id, "step.refused")
    assert refused.detail["code"] == "cap"
    assert refused.detail["error"] == (
        'asks for 15 of "purse.gold"; 30 of 30 is already spent this run'
    )
    assert (refused.detail["asked"], refused.detail["consumed"], refused.detail["cap"]) == (
        15,
        30,
        30,
    )
    run = await run_row(purse_host.db, run_id)
    assert (run.status, run.health) == ("completed", "degraded")
    assert await _meters(purse_host, run_id) == {"purse.gold": (30, 30, "purse.buy")}


async def test_a_spend_exactly_at_the_cap_passes_and_one_more_is_refused(purse_host, purse_engine):
    await _cap(purse_host, "purse.buy", purse_gold=10)
    run_id = await start_event(
        purse_host, spec(phase("a", buy(10, on_failure="skip"), buy(1, on_failure="skip")))
    )
    await purse_engine.tick()
    assert [s.status for s in await step_rows(purse_host.db, run_id)] == ["done", "refused"]
    assert (await _meters(purse_host, run_id))["purse.gold"][1] == 10


async def test_a_step_refused_on_its_second_dimension_gives_the_first_back(
    purse_host, purse_engine, purse
):
    await _cap(purse_host, "purse.trade", purse_gold=100, purse_silver=2)
    run_id = await start_event(
        purse_host, spec(phase("a", step("purse.trade", gold=7, silver=3, on_failure="pause")))
    )
    await purse_engine.tick()
    (made,) = await step_rows(purse_host.db, run_id)
    assert (made.status, made.spent) == ("refused", None)
    assert purse.calls == []
    assert await _meters(purse_host, run_id) == {
        "purse.gold": (100, 0, "purse.trade"),
        "purse.silver": (2, 0, "purse.trade"),
    }
    # Unwound for real: once the cap allows it, the same step pays in full and runs.
    await _cap(purse_host, "purse.trade", purse_gold=100, purse_silver=3)
    await controls.retry(purse_host, run_id, made.id, actor="admin:test")
    await purse_engine.tick()
    (made,) = await step_rows(purse_host.db, run_id)
    assert (made.status, made.spent) == ("done", {"purse.gold": 7, "purse.silver": 3})
    assert await _meters(purse_host, run_id) == {
        "purse.gold": (100, 7, "purse.trade"),
        "purse.silver": (3, 3, "purse.trade"),
    }


async def test_a_retry_does_not_pay_twice_and_a_failure_is_not_refunded(
    purse_host, purse_engine, purse, clock
):
    purse.answers = [
        {"ok": False, "retry": True, "error": "socket"},
        {"ok": False, "retry": True, "error": "socket"},
        {"ok": False, "retry": True, "error": "socket"},
        {"ok": True},
    ]
    await _cap(purse_host, "purse.buy", purse_gold=10)
    run_id = await start_event(purse_host, spec(phase("a", buy(6, on_failure="pause"))))
    for _ in range(3):
        await purse_engine.tick()
        clock.advance(purse_host.settings.retry_seconds)
    (made,) = await step_rows(purse_host.db, run_id)
    assert (made.status, made.attempts, made.spent) == ("failed", 3, {"purse.gold": 6})
    assert (await _meters(purse_host, run_id))["purse.gold"][1] == 6  # not refunded
    # A person's retry of the failed step: it runs again and does not pay again (6 + 6
    # would pass the cap of 10 and be refused).
    await controls.retry(purse_host, run_id, made.id, actor="admin:test")
    await purse_engine.tick()
    (made,) = await step_rows(purse_host.db, run_id)
    assert made.status == "done"
    assert (await _meters(purse_host, run_id))["purse.gold"][1] == 6
    assert len(purse.calls) == 4


@pytest.mark.parametrize(
    ("action", "code", "error"),
    [
        (
            "purse.ghost",
            "undeclared",
            'purse.ghost\'s cost names "purse.nothing", which no plugin declares as a budget '
            "dimension",
        ),
        (
            "purse.odd",
            "cost",
            'purse.odd\'s cost asks for -1 of "purse.gold"; expected a number from 0 to 2147483647',
        ),
    ],
)
async def test_a_cost_the_host_cannot_count_is_refused_before_any_arithmetic(
    purse_host, purse_engine, purse, action, code, error
):
    params = {"gold": -1} if action == "purse.odd" else {}
    run_id = await start_event(
        purse_host, spec(phase("a", step(action, on_failure="skip", **params)))
    )
    await purse_engine.tick()
    (refused,) = await log_lines(purse_host.db, run_id, "step.refused")
    assert (refused.detail["code"], refused.detail["error"]) == (code, error)
    assert purse.calls == []


@pytest.mark.parametrize(("gold", "second"), [(1.5, "refused"), (1.0, "done")])
async def test_a_fractional_amount_is_rounded_up_to_whole_units(
    purse_host, purse_engine, gold, second
):
    # A cap of 3: two payments of 1.5 count 2 + 2 and the second does not fit; two of 1.0 do.
    await _cap(purse_host, "purse.odd", purse_gold=3)
    odd = step("purse.odd", gold=gold, on_failure="skip")
    run_id = await start_event(purse_host, spec(phase("a", odd, odd)))
    await purse_engine.tick()
    assert [s.status for s in await step_rows(purse_host.db, run_id)] == ["done", second]
    assert (await _meters(purse_host, run_id))["purse.gold"][1] == 2  # 2 + refused, or 1 + 1


async def test_a_dimension_the_run_has_no_row_for_is_refused(purse_host, purse_engine, purse):
    run_id = await start_event(purse_host, spec(phase("a", buy(1, on_failure="skip"))))
    async with purse_host.db.begin() as conn:
        await conn.execute(delete(event_run_budget).where(event_run_budget.c.run_id == run_id))
    await purse_engine.tick()
    (refused,) = await log_lines(purse_host.db, run_id, "step.refused")
    assert refused.detail["code"] == "unbudgeted"
    assert purse.calls == []


async def test_an_admin_can_disable_a_notify_action_and_enable_it_again(
    purse_host, purse_engine, purse
):
    async with purse_host.db.begin() as conn:
        await board.set_action(
            conn,
            purse_host.registry,
            "purse.buy",
            enabled=False,
            actor="a",
            now=purse_host.clock.now(),
        )
    run_id = await start_event(purse_host, spec(phase("a", buy(1, on_failure="pause"))))
    await purse_engine.tick()
    assert (await run_row(purse_host.db, run_id)).status == "paused"
    (refused,) = await log_lines(purse_host.db, run_id, "step.refused")
    assert (refused.detail["code"], refused.detail["error"]) == (
        "disabled",
        "purse.buy is disabled on the switchboard",
    )
    assert (await _meters(purse_host, run_id))["purse.gold"][1] == 0  # disabled: nothing spent
    async with purse_host.db.begin() as conn:
        await board.set_action(
            conn,
            purse_host.registry,
            "purse.buy",
            enabled=True,
            actor="a",
            now=purse_host.clock.now(),
        )
    (made,) = await step_rows(purse_host.db, run_id)
    await controls.retry(purse_host, run_id, made.id, actor="admin:test")
    await purse_engine.tick()
    assert (await run_row(purse_host.db, run_id)).status == "completed"


async def test_an_unavailable_plugin_is_refused_until_it_is_back(purse_host, purse_engine, purse):
    purse_host.mark_unavailable("purse", "the shard is restarting")
    run_id = await start_event(
        purse_host, spec(phase("a", buy(1, on_failure="skip", hold_seconds=0), buy(1)))
    )
    await purse_engine.tick()
    refused = await log_lines(purse_host.db, run_id, "step.refused")
    assert refused[0].detail["code"] == "unavailable"
    assert refused[0].detail["error"] == "purse.buy is unavailable: the shard is restarting"
    purse_host.mark_unavailable("purse", None)
    assert purse_host.plugin_unavailable("purse") is None


# ── version drift ─────────────────────────────────────────────────────────────


async def test_a_step_written_for_an_older_declaration_is_flagged_and_logged_once(
    purse_host, purse_engine, purse, clock
):
    from pageant.events import definitions

    purse.answers = [{"ok": False, "retry": True, "error": "socket"}]
    old = {**buy(1), "action_version": 1}
    current = buy(2)
    event = await publish_event(purse_host.db, clock.now(), spec(phase("a", old, current)))
    async with purse_host.db.connect() as conn:
        shown = await definitions.render_event(
            conn, event.id, now=clock.now(), registry=purse_host.registry
        )
    assert shown["version_drift"] == [
        {
            "path": "spec.phases[0].steps[0]",
            "action": "purse.buy",
            "stored_version": 1,
            "declared_version": 2,
        }
    ]
    run_id, _ = await start_now(purse_host, event.id, scope="", actor="admin:test")
    await purse_engine.tick()
    clock.advance(purse_host.settings.retry_seconds)
    await purse_engine.tick()  # the retry of the drifted step logs nothing more
    assert [s.status for s in await step_rows(purse_host.db, run_id)] == ["done", "done"]
    (drift,) = await log_lines(purse_host.db, run_id, "step.version_drift")
    assert drift.detail == {"action": "purse.buy", "stored_version": 1, "declared_version": 2}


# ── concurrency: the cap holds with real, separate connections ───────────────


async def _two_steps(host, cap: int, asks: int, count: int = 2) -> tuple[int, list[dict]]:
    await _cap(host, "purse.buy", purse_gold=cap)
    run_id = await start_event(host, spec(phase("a", *[buy(asks) for _ in range(count)])))
    rows = await step_rows(host.db, run_id)
    return run_id, [dict(r._mapping) for r in rows]


async def _decide(host, made: dict[str, Any]) -> bool:
    async with host.db.begin() as conn:  # a connection (and transaction) of its own
        decision = await may_invoke(host, made, host.registry.actions["purse.buy"], conn=conn)
        await asyncio.sleep(0)  # hold the transaction open across a hand-over
    return decision.allowed


@pytest.mark.parametrize("iteration", range(12))
async def test_two_concurrent_steps_of_one_run_never_overspend_one_cap(purse_host, iteration):
    run_id, made = await _two_steps(purse_host, cap=30, asks=20)
    allowed = await asyncio.gather(*[_decide(purse_host, m) for m in made])
    assert sorted(allowed) == [False, True]
    assert (await _meters(purse_host, run_id))["purse.gold"][1] == 20


async def test_many_concurrent_steps_spend_exactly_up_to_the_cap(purse_host):
    run_id, made = await _two_steps(purse_host, cap=23, asks=5, count=8)
    allowed = await asyncio.gather(*[_decide(purse_host, m) for m in made])
    assert allowed.count(True) == 4
    assert (await _meters(purse_host, run_id))["purse.gold"][1] == 20
    async with purse_host.db.connect() as conn:
        paid = (
            await conn.execute(
                select(event_run_steps.c.spent).where(event_run_steps.c.run_id == run_id)
            )
        ).scalars()
        assert sorted(p is not None for p in paid) == [False] * 4 + [True] * 4


async def test_the_same_step_decided_twice_at_once_pays_once(purse_host):
    run_id, made = await _two_steps(purse_host, cap=100, asks=7, count=1)
    allowed = await asyncio.gather(*[_decide(purse_host, made[0]) for _ in range(4)])
    assert allowed == [True] * 4
    assert (await _meters(purse_host, run_id))["purse.gold"][1] == 7


# ── at save ───────────────────────────────────────────────────────────────────


@pytest.fixture
async def purse_client(purse_host, aiohttp_client):
    from pageant.api.app import make_app

    return await aiohttp_client(make_app(purse_host, run_engine=False))


async def test_a_cost_naming_an_undeclared_dimension_is_refused_at_save(purse_client, tokens):
    from tests.api.test_events_api import EVENTS, call, create

    event = await create(purse_client, tokens["admin"], title="Ghost market")
    body = {"spec": spec(phase("open", buy(1)), phase("haunt", step("purse.ghost")))}
    status, answer = await call(
        purse_client, "PUT", f"{EVENTS}/{event['id']}", tokens["admin"], body
    )
    assert status == 400
    assert answer["error"]["details"] == [
        'spec.phases[1].steps[0]: "purse.nothing" is not a budget dimension any installed '
        "plugin declares"
    ]
    status, stored = await call(purse_client, "GET", f"{EVENTS}/{event['id']}", tokens["admin"])
    assert stored["spec"] == event["spec"]  # nothing of the refused edit was written
    # The declared dimensions of the same spec save.
    body = {"spec": spec(phase("open", buy(1)), phase("trade", step("purse.trade", silver=2)))}
    status, saved = await call(
        purse_client, "PUT", f"{EVENTS}/{event['id']}", tokens["admin"], body
    )
    assert status == 200, saved
