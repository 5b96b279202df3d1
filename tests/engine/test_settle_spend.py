"""A step's charge settled to what the game made: the envelope's ``spent`` (contract 1.3)
lowers the reservation taken at dispatch, the rest goes back to the run for later steps,
and nothing a plugin answers raises a charge past what was reserved — on both databases,
read through the API's run console and the console's budget meter."""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest

from pageant.api.app import make_app
from pageant.engine import Engine
from pageant.hookspecs.envelope import classify
from tests.api.test_events_api import call
from tests.console.test_console import sign_in
from tests.engine.test_caps import Purse, _cap, _meters, buy
from tests.factories import Probe, make_host, phase, spec, start_event, step, step_rows


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


async def test_a_step_that_made_fewer_is_charged_what_it_made_and_a_later_step_uses_the_rest(
    purse_host, purse_engine, purse, tokens, aiohttp_client
):
    # A cap of 10: 6 reserved and 8 more would not fit; 2 made and 8 more do, exactly.
    await _cap(purse_host, "purse.buy", purse_gold=10)
    purse.answers = [{"ok": True, "spent": {"purse.gold": 2}}, {"ok": True}]
    run_id = await start_event(purse_host, spec(phase("a", buy(6), buy(8, on_failure="skip"))))
    await purse_engine.tick()
    first, second = await step_rows(purse_host.db, run_id)
    assert (first.status, first.spent) == ("done", {"purse.gold": 2})
    assert (second.status, second.spent) == ("done", {"purse.gold": 8})
    assert await _meters(purse_host, run_id) == {"purse.gold": (10, 10, "purse.buy")}

    client = await aiohttp_client(make_app(purse_host, run_engine=False))
    status, console = await call(client, "GET", f"/api/v1/admin/runs/{run_id}", tokens["moderator"])
    assert status == 200, console
    (meter,) = console["budget"]
    assert (meter["dimension"], meter["consumed"], meter["cap"]) == ("purse.gold", 10, 10)
    await sign_in(client, tokens["moderator"])
    html = await (await client.get(f"/runs/{run_id}")).text()
    row = re.search(r'<tr data-dimension="purse.gold">(.*?)</tr>', html, re.S).group(1)
    assert "10 of 10 coins" in row


async def test_the_meter_shows_what_was_made_not_what_was_asked(
    purse_host, purse_engine, purse, tokens, aiohttp_client
):
    await _cap(purse_host, "purse.buy", purse_gold=30)
    purse.answers = [{"ok": True, "spent": {"purse.gold": 2}}]
    run_id = await start_event(purse_host, spec(phase("a", buy(3))))
    await purse_engine.tick()
    client = await aiohttp_client(make_app(purse_host, run_engine=False))
    status, console = await call(client, "GET", f"/api/v1/admin/runs/{run_id}", tokens["moderator"])
    assert status == 200, console
    assert [(m["dimension"], m["consumed"]) for m in console["budget"]] == [("purse.gold", 2)]
    await sign_in(client, tokens["moderator"])
    html = await (await client.get(f"/runs/{run_id}")).text()
    row = re.search(r'<tr data-dimension="purse.gold">(.*?)</tr>', html, re.S).group(1)
    assert "2 of 30 coins" in row and 'value="2"' in row


@pytest.mark.parametrize(
    ("reported", "charged", "warned"),
    [
        (None, 6, False),  # no spent: the reservation is taken as spent
        (5, 5, False),
        (6, 6, False),  # exactly the reservation
        (7, 6, True),  # one past it: cut to the reservation, with a warning
        (0, 0, False),
        (1.5, 2, False),  # whole units, rounded up as a price is
    ],
)
async def test_spent_settles_down_to_the_reservation_and_never_past_it(
    purse_host, purse_engine, purse, caplog, reported, charged, warned
):
    await _cap(purse_host, "purse.buy", purse_gold=10)
    answer: dict[str, Any] = {"ok": True}
    if reported is not None:
        answer["spent"] = {"purse.gold": reported}
    purse.answers = [answer]
    run_id = await start_event(purse_host, spec(phase("a", buy(6))))
    with caplog.at_level(logging.WARNING, logger="pageant.engine.policy"):
        await purse_engine.tick()
    (made,) = await step_rows(purse_host.db, run_id)
    assert (made.status, made.spent) == ("done", {"purse.gold": charged})
    assert (await _meters(purse_host, run_id))["purse.gold"][1] == charged
    warnings = [r.getMessage() for r in caplog.records if r.name == "pageant.engine.policy"]
    if warned:
        (line,) = warnings
        assert line.endswith(
            f'purse.buy reports {reported!r} of "purse.gold", more than the 6 its cost '
            "reserved; 6 stays spent"
        )
        assert line.startswith(f"run {run_id} step {made.id}: ")
    else:
        assert warnings == []


async def test_a_dimension_not_reported_stays_charged_and_one_not_reserved_is_ignored(
    purse_host, purse_engine, purse, caplog
):
    purse.answers = [{"ok": True, "spent": {"purse.silver": 1, "purse.copper": 4}}]
    run_id = await start_event(purse_host, spec(phase("a", step("purse.trade", gold=3, silver=2))))
    with caplog.at_level(logging.WARNING, logger="pageant.engine.policy"):
        await purse_engine.tick()
    (made,) = await step_rows(purse_host.db, run_id)
    assert made.spent == {"purse.gold": 3, "purse.silver": 1}
    meters = await _meters(purse_host, run_id)
    assert (meters["purse.gold"][1], meters["purse.silver"][1]) == (3, 1)
    (line,) = [r.getMessage() for r in caplog.records if r.name == "pageant.engine.policy"]
    assert line.endswith('reports 4 of "purse.copper", which its cost did not reserve; ignored')


async def test_a_parked_answer_settles_at_once_not_when_a_person_confirms(
    purse_host, purse_engine, purse
):
    purse.answers = [{"ok": True, "park": True, "spent": {"purse.gold": 1}}]
    run_id = await start_event(purse_host, spec(phase("a", buy(4))))
    await purse_engine.tick()
    (made,) = await step_rows(purse_host.db, run_id)
    assert (made.status, made.lease_until, made.spent) == ("running", None, {"purse.gold": 1})
    assert (await _meters(purse_host, run_id))["purse.gold"][1] == 1


async def test_a_failure_keeps_its_reservation_whatever_it_says_it_spent(
    purse_host, purse_engine, purse
):
    # A failed attempt may be performed again; only the final, done answer settles.
    purse.answers = [{"ok": False, "retry": False, "error": "full", "spent": {"purse.gold": 0}}]
    run_id = await start_event(purse_host, spec(phase("a", buy(4, on_failure="skip"))))
    await purse_engine.tick()
    (made,) = await step_rows(purse_host.db, run_id)
    assert (made.status, made.spent) == ("failed", {"purse.gold": 4})
    assert (await _meters(purse_host, run_id))["purse.gold"][1] == 4


@pytest.mark.parametrize(
    ("spent", "error"),
    [
        ("2", '"spent" must be a mapping of at most 100 dimensions to amounts'),
        ({"purse.gold": -1}, '"spent.purse.gold" must be a number from 0 up, not -1'),
        ({"purse.gold": True}, '"spent.purse.gold" must be a number from 0 up, not True'),
        ({"purse.gold": float("nan")}, '"spent.purse.gold" must be a number from 0 up, not nan'),
    ],
)
def test_a_spent_the_host_cannot_count_is_the_plugins_retryable_failure(spent, error):
    envelope = classify({"ok": True, "spent": spent})
    assert (envelope.ok, envelope.retry, envelope.malformed) == (False, True, "bad spent")
    assert envelope.error == error


def test_a_spent_the_host_can_count_is_read_as_given():
    assert classify({"ok": True, "spent": {"a.b": 2, "a.c": 0.5}}).spent == {"a.b": 2, "a.c": 0.5}
    assert classify({"ok": True}).spent is None
