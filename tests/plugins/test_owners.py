"""Owners are exclusive: an owner belongs to one distribution.

When two installed distributions claim one owner, both are refused, each reason naming the
other, and a published event's steps of that owner wait as ``unavailable`` — nothing of
either plugin runs. Discovery goes through real entry points (``importlib.metadata``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pageant.engine import Engine
from pageant.hosting import Host
from pageant.plugins.loader import candidate_for, load_plugins
from pageant.runs.console import console
from pageant.runs.create import start_now
from tests.factories import log_lines, phase, publish_event, spec, step, step_rows
from tests.fixture_plugins import Site, fake_site

#: A plugin module: one action, ``raffle.draw``, that records each call in ``CALLS``.
RAFFLE = """
from pageant import hookimpl

PLUGIN_INFO = {"owner": "raffle", "contract": "^1.0"}
CALLS = []


async def draw(ctx):
    CALLS.append(ctx.params)
    return {"ok": True}


@hookimpl
def pageant_actions():
    return [{"id": "raffle.draw", "label": "Draw", "risk": "notify", "budget_ms": 1000,
             "perform": draw}]
"""


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    with fake_site(tmp_path / "site", monkeypatch) as s:
        yield s


def _install_both(site: Site) -> None:
    site.install("pageant-raffle", {"raffle": "pageant_raffle"}, {"pageant_raffle": RAFFLE})
    site.install("pageant-lottery", {"raffle": "pageant_lottery"}, {"pageant_lottery": RAFFLE})


CONTESTED = (
    'owner "raffle" is claimed by pageant-lottery[raffle] and pageant-raffle[raffle]; '
    "expected each owner to belong to one distribution (uninstall one of them and restart "
    "the host)"
)


def test_two_distributions_claiming_one_owner_are_both_refused(site: Site) -> None:
    _install_both(site)
    manager = load_plugins()
    by_label = {r.label: r for r in manager.records}
    for label in ("pageant-lottery[raffle]", "pageant-raffle[raffle]"):
        assert by_label[label].status == "refused"
        assert by_label[label].reason == f"{label}: {CONTESTED}"
    assert "raffle.draw" not in manager.registry.actions
    assert manager.unavailable("raffle.draw") == CONTESTED
    # Everyone else loads as before.
    assert by_label["pageant-wisps[wisps]"].status == "loaded"
    assert manager.unavailable("wisps.summon") is None


def test_one_distribution_owns_its_owner_alone(site: Site) -> None:
    site.install("pageant-raffle", {"raffle": "pageant_raffle"}, {"pageant_raffle": RAFFLE})
    manager = load_plugins()
    assert manager.registry.owner_of("actions", "raffle.draw") == "pageant-raffle[raffle]"
    assert manager.unavailable("raffle.draw") is None


def test_a_contest_is_found_whatever_the_order() -> None:
    class Raffle:
        PLUGIN_INFO = {"owner": "raffle", "contract": "^1.0"}  # noqa: RUF012 - read by the loader

    a = candidate_for(Raffle(), "raffle", distribution="zeta")
    b = candidate_for(Raffle(), "raffle", distribution="alpha")
    for order in ([a, b], [b, a]):
        manager = load_plugins(order, discover=False)
        assert [r.status for r in manager.records[1:]] == ["refused", "refused"]


async def test_an_impostor_cannot_run_a_published_events_steps(
    site: Site, settings: Any, db: Any, clock: Any
) -> None:
    _install_both(site)
    host = Host(settings, clock=clock, db=db)
    engine = Engine(host)
    try:
        event = await publish_event(
            db, clock.now(), spec(phase("draw", step("raffle.draw", tier="gold")))
        )
        run_id, _ = await start_now(host, event.id, scope="", actor="admin:test")
        await engine.tick()
        await engine.tick()
        # Nothing of either plugin ran, and the step was not even claimed.
        assert sys.modules["pageant_raffle"].CALLS == []
        assert sys.modules["pageant_lottery"].CALLS == []
        (made,) = await step_rows(db, run_id)
        assert (made.status, made.attempts) == ("pending", 0)
        view = await console(host, run_id)
        assert view["run"]["status"] == "running"
        waiting_on = view["run"]["waiting_on"]
        assert waiting_on["reason"] == "unavailable"
        assert waiting_on["step_id"] == made.id
        assert CONTESTED in waiting_on["sentence"]
        # The wait is logged once, however many ticks look at it.
        lines = await log_lines(db, run_id, "run.waiting")
        assert [line.detail["reason"] for line in lines] == ["unavailable"]
        assert await log_lines(db, run_id, "step.refused") == []
    finally:
        await engine.stop()
        await host.close()
