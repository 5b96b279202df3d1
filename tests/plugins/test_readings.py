"""Readings (contract 1.5): declared through the real loader and checked there, read through
the host's one cache — at most once per interval for the same params, one read shared by
everyone asking meanwhile, and anything but a number answered in time is unknown."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any

import pytest

from pageant import hookimpl
from pageant.hookspecs import UNKNOWN
from tests.factories import make_host


def reading(read: Any, **more: Any) -> dict[str, Any]:
    return {
        "id": "dial.players_online",
        "label": "Players online",
        "unit": "players online",
        "params": [
            {
                "name": "server",
                "type": "string",
                "required": True,
                "description": "Which server.",
                "example": "a",
            }
        ],
        "read": read,
        **more,
    }


class Dial:
    """A reading whose answers the test gives, one per read."""

    PLUGIN_INFO = {"owner": "dial", "contract": "^1.5"}  # noqa: RUF012 - read by the loader

    def __init__(self, declared: dict[str, Any] | None = None) -> None:
        self.answers: list[Any] = []
        self.calls: list[dict[str, Any]] = []
        self.gate: asyncio.Event | None = None
        self.declared = declared

    async def read(self, params: dict[str, Any], ctx: Any) -> Any:
        self.calls.append(params)
        assert ctx.reading == "dial.players_online"
        if self.gate is not None:
            await self.gate.wait()
        answer = self.answers.pop(0) if self.answers else 3
        if isinstance(answer, Exception):
            raise answer
        return answer

    @hookimpl
    def pageant_readings(self) -> list[dict[str, Any]]:
        return [self.declared or reading(self.read)]


@pytest.fixture
async def dial_host(settings: Any, db: Any, clock: Any) -> Any:
    dial = Dial()
    h = make_host(settings, db, clock, [dial])
    try:
        yield h, dial
    finally:
        await h.close()


async def test_a_reading_is_read_once_per_interval_for_the_same_params(dial_host: Any) -> None:
    host, dial = dial_host
    readings = host.readings
    first = await readings.read("dial.players_online", {"server": "a"})
    assert (first.value, first.known) == (3, True)
    dial.answers = [5, 7]
    host.clock.advance(seconds=9.9)
    assert (await readings.read("dial.players_online", {"server": "a"})).value == 3
    assert (await readings.read("dial.players_online", {"server": "b"})).value == 5
    assert len(dial.calls) == 2
    host.clock.advance(seconds=0.1)
    assert (await readings.read("dial.players_online", {"server": "a"})).value == 7
    assert dial.calls == [{"server": "a"}, {"server": "b"}, {"server": "a"}]


async def test_askers_during_a_read_share_it(dial_host: Any) -> None:
    host, dial = dial_host
    dial.gate = asyncio.Event()
    asked = [
        asyncio.ensure_future(host.readings.read("dial.players_online", {"server": "a"}))
        for _ in range(5)
    ]
    await asyncio.sleep(0)
    dial.gate.set()
    answers = await asyncio.gather(*asked)
    assert [a.value for a in answers] == [3] * 5
    assert len(dial.calls) == 1


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (UNKNOWN, "dial.players_online answered unknown"),
        (RuntimeError("no rcon"), "dial.players_online raised RuntimeError: no rcon"),
        (True, "dial.players_online answered True; expected a number or UNKNOWN"),
        ("4", "dial.players_online answered '4'; expected a number or UNKNOWN"),
        (float("nan"), "dial.players_online answered nan; expected a number or UNKNOWN"),
        (None, "dial.players_online answered None; expected a number or UNKNOWN"),
    ],
)
async def test_anything_but_a_number_is_unknown_with_the_reason(
    dial_host: Any, answer: Any, why: str, caplog: pytest.LogCaptureFixture
) -> None:
    host, dial = dial_host
    dial.answers = [answer]
    with caplog.at_level(logging.WARNING, logger="pageant.plugins"):
        read = await host.readings.read("dial.players_online", {"server": "a"})
    assert read.value is UNKNOWN and read.amount is None
    assert read.why == why
    if answer is not UNKNOWN:
        assert "dial.players_online" in caplog.text  # logged, naming the reading


async def test_a_read_past_its_budget_is_unknown(settings: Any, db: Any, clock: Any) -> None:
    dial = Dial()
    dial.declared = reading(dial.read, budget_ms=1)
    dial.gate = asyncio.Event()  # never set: the read never answers
    host = make_host(settings, db, clock, [dial])
    try:
        read = await host.readings.read("dial.players_online", {"server": "a"})
    finally:
        await host.close()
    assert read.value is UNKNOWN
    assert read.why == "dial.players_online did not answer within 0.001 s"


async def test_a_reading_nobody_declares_is_unknown(dial_host: Any) -> None:
    host, _ = dial_host
    read = await host.readings.read("dial.players", {})
    assert read.value is UNKNOWN
    assert read.why == "no loaded plugin declares the reading dial.players"


def _refusal(settings: Any, db: Any, clock: Any, declared: dict[str, Any]) -> str:
    dial = Dial(declared)
    host = make_host(settings, db, clock, [dial])
    [record] = [r for r in host.plugins.records if r.owner == "dial"]
    assert record.status == "refused"
    assert "dial.players_online" not in host.registry.readings
    return str(record.reason)


async def test_a_bad_reading_declaration_refuses_its_plugin_naming_it(
    settings: Any, db: Any, clock: Any
) -> None:
    def plain(params: Any, ctx: Any) -> int:
        return 1

    async def fine(params: Any, ctx: Any) -> int:
        return 1

    reason = _refusal(settings, db, clock, reading(plain))
    assert "pageant_readings[0] (dial.players_online) is invalid" in reason
    assert "read must be an async def function" in reason
    reason = _refusal(settings, db, clock, {**reading(fine), "id": "other.players"})
    assert "id 'other.players' is outside the plugin's namespace" in reason
    sourced = reading(fine)
    sourced["params"] = [{**sourced["params"][0], "option_source": "dial.options.servers"}]
    reason = _refusal(settings, db, clock, sourced)
    assert "names option source 'dial.options.servers', which nobody declares" in reason
    reason = _refusal(settings, db, clock, {**reading(fine), "budget_ms": 60_001})
    assert "budget_ms" in reason


async def test_a_reading_is_read_after_the_interval_moved_by_the_setting(
    settings: Any, db: Any, clock: Any
) -> None:
    dial = Dial()
    host = make_host(
        settings.model_copy(update={"reading_interval_seconds": 60}), db, clock, [dial]
    )
    try:
        await host.readings.read("dial.players_online", {"server": "a"})
        clock.advance(seconds=59)
        await host.readings.read("dial.players_online", {"server": "a"})
        assert len(dial.calls) == 1
        clock.advance(seconds=1)
        await host.readings.read("dial.players_online", {"server": "a"})
        assert len(dial.calls) == 2
    finally:
        await host.close()
    assert timedelta(seconds=60) == host.readings.interval
