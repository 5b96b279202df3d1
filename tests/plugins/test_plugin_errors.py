"""Plugin errors point at the line: the server log keeps the whole traceback naming the
plugin, the run and the step; the step's log line carries the exception's type, message and
the plugin's innermost frame."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pageant.engine import Engine
from pageant.hosting import Host
from pageant.runs.create import start_now
from tests.factories import log_lines, phase, publish_event, spec, step, step_rows
from tests.fixture_plugins import Site, fake_site

TESTS = Path(__file__).resolve().parents[1]

#: An installed plugin package whose action fails at line 9 of its ``__init__.py``.
RAFFLE = """from pageant import hookimpl

PLUGIN_INFO = {"owner": "raffle", "contract": "^1.0"}
PRIZES = {"gold": "a golden wisp"}


async def draw(ctx):
    tier = ctx.params.get("tier")
    return {"ok": True, "prize": PRIZES[tier]}


@hookimpl
def pageant_actions():
    return [{"id": "raffle.draw", "label": "Draw", "risk": "notify", "budget_ms": 1000,
             "perform": draw}]
"""


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    with fake_site(tmp_path / "site", monkeypatch) as s:
        package = s.root / "pageant_raffle"
        package.mkdir()
        (package / "__init__.py").write_text(RAFFLE)
        s.modules.add("pageant_raffle")
        s.install("pageant-raffle", {"raffle": "pageant_raffle"}, {})
        yield s


async def test_an_exception_in_perform_points_at_the_plugins_line(
    site: Site, settings: Any, db: Any, clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    host = Host(settings, clock=clock, db=db)
    engine = Engine(host)
    try:
        event = await publish_event(
            db, clock.now(), spec(phase("draw", step("raffle.draw", tier="silver")))
        )
        run_id, _ = await start_now(host, event.id, scope="", actor="admin:test")
        with caplog.at_level(logging.ERROR, logger="pageant.engine"):
            await engine.tick()
        where = "pageant_raffle/__init__.py:9 in draw"
        (made,) = await step_rows(db, run_id)
        assert made.last_error == f"KeyError: 'silver' at {where}"
        (retry,) = await log_lines(db, run_id, "step.retry")
        assert retry.detail["exception"] == {"type": "KeyError", "message": "'silver'", "at": where}
        assert retry.detail["plugin"] == "pageant-raffle[raffle]"
        assert retry.detail["error"] == f"KeyError: 'silver' at {where}"
        # The server log: the plugin, the run and the step named, the whole traceback kept.
        (logged,) = [r for r in caplog.records if r.name == "pageant.engine"]
        message = logged.getMessage()
        assert "plugin pageant-raffle[raffle] raised in raffle.draw.perform" in message
        assert f"run {run_id} step {made.id}" in message
        assert logged.exc_info is not None
        text = caplog.text
        assert 'pageant_raffle/__init__.py", line 9, in draw' in text
        assert 'return {"ok": True, "prize": PRIZES[tier]}' in text
    finally:
        await engine.stop()
        await host.close()


async def test_a_failure_without_an_exception_carries_no_frame(probe_host, engine, probe) -> None:
    probe.script["a"] = [{"ok": False, "retry": True, "error": "shard busy"}]
    event = await publish_event(
        probe_host.db, probe_host.clock.now(), spec(phase("p", step("probe.step", name="a")))
    )
    run_id, _ = await start_now(probe_host, event.id, scope="", actor="admin:test")
    await engine.tick()
    (retry,) = await log_lines(probe_host.db, run_id, "step.retry")
    assert retry.detail["error"] == "shard busy"
    assert "exception" not in retry.detail


#: An installed plugin whose announce leg raises, reached through core.announce.
HORN = """from pageant import hookimpl

PLUGIN_INFO = {"owner": "horn", "contract": "^1.0"}


async def blow(message, ctx):
    raise ConnectionError("the horn is cracked")


@hookimpl
def pageant_announce_legs():
    return [{"id": "horn.blow", "label": "Horn", "send": blow}]
"""


async def test_a_leg_raising_inside_core_announce_is_the_legs_plugins_exception(
    site: Site, settings: Any, db: Any, clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    package = site.root / "pageant_horn"
    package.mkdir()
    (package / "__init__.py").write_text(HORN)
    site.modules.add("pageant_horn")
    site.install("pageant-horn", {"horn": "pageant_horn"}, {})
    host = Host(settings, clock=clock, db=db)
    engine = Engine(host)
    try:
        announce = step("core.announce", leg="horn.blow", message="to arms")
        event = await publish_event(db, clock.now(), spec(phase("p", announce)))
        run_id, _ = await start_now(host, event.id, scope="", actor="admin:test")
        with caplog.at_level(logging.ERROR, logger="pageant.engine"):
            await engine.tick()
        (retry,) = await log_lines(db, run_id, "step.retry")
        assert retry.detail["plugin"] == "pageant-horn[horn]"
        assert retry.detail["exception"]["at"] == "pageant_horn/__init__.py:7 in blow"
        (logged,) = [r for r in caplog.records if r.name == "pageant.engine"]
        assert logged.getMessage().startswith(
            "plugin pageant-horn[horn] raised in core.announce.perform (called through "
            "pageant[core])"
        )
    finally:
        await engine.stop()
        await host.close()


async def test_an_option_source_that_raises_is_logged_and_named_at_its_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from pageant.hookspecs import OptionSource
    from pageant.plugins.options import resolve_options

    async def resolve() -> list[dict[str, str]]:
        raise LookupError("no tiers today")

    line = resolve.__code__.co_firstlineno + 1
    source = OptionSource(id="raffle.options.tiers", label="Tiers", resolve=resolve)
    with caplog.at_level(logging.ERROR, logger="pageant.plugins"):
        answer = await resolve_options(source, [TESTS])
    where = f"tests/plugins/test_plugin_errors.py:{line} in resolve"
    assert answer == {
        "ok": False,
        "reason": f"raffle.options.tiers raised LookupError: no tiers today at {where}",
    }
    (logged,) = caplog.records
    assert logged.exc_info is not None and "raffle.options.tiers" in logged.getMessage()
