"""An ``addbot`` that gets no answer is settled by reading ``status``, within the step:
a fake server that drops the request (its rcon ration spent) or loses only the answer
(the bot joined). Only the bots truly missing are added again; none is added twice. A bot
the server refuses (full) is not counted on the run's budget meter."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import pytest
from fake_rcon import Reply, fake_rcon, printed
from pageant_openarena.rcon import NoAnswer

from pageant.testing import assert_ok, kit_host

ENV = "PAGEANT_PLUGIN_OPENARENA_"


def arena(lose: Callable[[str], str | None]) -> tuple[Callable[[str, str, int], Reply], list[str]]:
    """A server that keeps its bots; ``lose(command)`` answers "request" (dropped unrun),
    "answer" (run, answer lost) or None (run and answered) for each ``addbot``."""
    bots: list[str] = []

    def script(password: str, command: str, nth: int) -> Reply:
        if command == "status":
            rows = "".join(
                f"{i:>3}     0    0 {name:<15} bot     16384\n" for i, name in enumerate(bots)
            )
            return [
                (0, printed(f"map: oa_dm1\nnum score ping name            address  rate\n{rows}"))
            ]
        if command.startswith("addbot "):
            what = lose(command)
            if what == "request":
                return []
            bots.append(command.split()[-1])
            return [] if what == "answer" else [(0, printed(f"ClientBegin: {len(bots) - 1}\n"))]
        if command.startswith("kick ") and command.split()[-1] in bots:
            bots.remove(command.split()[-1])
        return [(0, printed("\n"))]

    return script, bots


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(ENV):
            monkeypatch.delenv(name)


def point_at(monkeypatch: pytest.MonkeyPatch, port: int) -> None:
    for name, value in {
        "rcon_port": port,
        "rcon_password": "secret",
        "rcon_timeout_seconds": 0.4,
        "probe_seconds": 300,
    }.items():
        monkeypatch.setenv(ENV + name.upper(), str(value))


@pytest.mark.parametrize("lost", ["request", "answer"])
async def test_an_unanswered_addbot_is_settled_by_status_within_the_step(
    monkeypatch: pytest.MonkeyPatch, lost: str
) -> None:
    seen: list[str] = []

    def lose_the_second(command: str) -> str | None:
        seen.append(command)
        return lost if len(seen) == 2 else None

    script, bots = arena(lose_the_second)
    async with fake_rcon(script) as fake:
        point_at(monkeypatch, fake.port)
        async with kit_host(["pageant-openarena"]) as kit:
            began = time.monotonic()
            added = assert_ok(
                await kit.perform(
                    "openarena.bots.add", {"count": 3, "skill": 1}, idempotency_key="k"
                )
            )
            took = time.monotonic() - began
    names = sorted(r.detail["name"] for r in added.resources)
    assert sorted(bots) == names  # three bots, each once
    adds = [c for _, _, c in fake.asked if c.startswith("addbot ")]
    # A dropped add is sent again once status shows its bot missing; a lost answer is not.
    assert len(adds) == (4 if lost == "request" else 3)
    assert took < 5  # settled within the step, not by a retry a minute later


async def test_status_reads_asked_together_or_just_after_share_one_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import asyncio

    from pageant_openarena import servers
    from pageant_openarena.servers import Server
    from pageant_openarena.settings import OpenArenaSettings

    script, _ = arena(lambda command: "request" if command.endswith("Lost-1") else None)
    async with fake_rcon(script) as fake:
        settings = OpenArenaSettings(
            rcon_port=fake.port, rcon_password="secret", rcon_timeout_seconds=0.3
        )  # type: ignore[arg-type]  # pydantic takes the str
        (config,) = settings.resolved()
        server = Server(config, settings)
        await asyncio.gather(*(server.bot_names() for _ in range(5)))
        await server.bot_names()  # within the window: the same answer
        assert [c for _, _, c in fake.asked] == ["status"]
        # An add the server confirmed amends that answer: no status needed to know it.
        assert await server.add_bot("sarge", 1, "Sarge-1") is None
        assert await server.bot_names() == {"Sarge-1"}
        assert await server.kick("Sarge-1")
        assert await server.bot_names() == set()
        assert [c for _, _, c in fake.asked][-1] == "kick Sarge-1"
        # An add that got no answer leaves nothing known: the next read asks the server.
        with pytest.raises(NoAnswer):
            await server.add_bot("grunt", 1, "Lost-1")
        assert await server.bot_names() == set()
        assert [c for _, _, c in fake.asked][-1] == "status"
        # And past the window, the server is asked again.
        monkeypatch.setattr(servers, "STATUS_WINDOW", 0.0)
        await server.bot_names()
    asked = [c for _, _, c in fake.asked]
    assert asked.count("status") == 3


async def test_a_bot_the_server_refuses_is_not_counted_on_the_meter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A server with room for two: the third ``addbot`` is answered, and refused.
    bots: list[str] = []

    def keeping(password: str, command: str, nth: int) -> Reply:
        if command.startswith("addbot "):
            if len(bots) >= 2:
                return [(0, printed("Server is full.\n"))]
            bots.append(command.split()[-1])
            return [(0, printed(f"ClientBegin: {len(bots) - 1}\n"))]
        if command == "status":
            rows = "".join(
                f"{i:>3}     0    0 {name:<15} bot     16384\n" for i, name in enumerate(bots)
            )
            return [
                (0, printed(f"map: oa_dm1\nnum score ping name            address  rate\n{rows}"))
            ]
        if command.startswith("kick ") and command.split()[-1] in bots:
            bots.remove(command.split()[-1])
        return [(0, printed("\n"))]

    muster = {
        "phases": [
            {
                "key": "muster",
                "label": "Muster",
                "steps": [{"action": "openarena.bots.add", "params": {"count": 3, "skill": 1}}],
            }
        ]
    }
    async with fake_rcon(keeping) as fake:
        point_at(monkeypatch, fake.port)
        async with kit_host(["pageant-openarena"]) as kit:
            await kit.enable("openarena.bots.add", caps={"openarena.bots": 3})
            console = await kit.run_to_completion(muster)
    assert console["run"]["status"] == "completed"
    (meter,) = console["budget"]
    assert (meter["dimension"], meter["consumed"], meter["cap"]) == ("openarena.bots", 2, 3)
    (step,) = console["steps"]
    assert step["status"] == "done"
    adds = [c for _, _, c in fake.asked if c.startswith("addbot ")]
    assert len(adds) == 3  # the refused one is not sent again
