"""``pageant.testing.FakeAgent``, driven as a plugin author's tests drive it: through the
``pageant_kit`` and ``pageant_client`` fixtures, over the real sync route, scripted."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from pageant.hookspecs import LinkFailure, NotDelivered, Unanswered
from pageant.testing import FakeAgent
from tests.fixture_plugins.lighthouse import Lighthouse

LIGHTHOUSE = Lighthouse()


@pytest.fixture
def pageant_plugins() -> list[Any]:
    return [LIGHTHOUSE]


def _call(kit: Any, command: str, key: str, seconds: float = 5) -> Any:
    assert LIGHTHOUSE.context is not None and LIGHTHOUSE.context.link is not None
    return LIGHTHOUSE.context.link.call(
        "world-a",
        command,
        {"colour": "red"},
        key=key,
        deadline=kit.clock.now() + timedelta(seconds=seconds),
    )


@pytest.fixture
async def agent(pageant_kit: Any, pageant_client: Any) -> Any:
    token = await pageant_kit.link_token(["world-a"], owners=["lighthouse"])
    fake = FakeAgent(
        pageant_client,
        token,
        "world-a",
        answers={"light": lambda payload: {"id": payload["colour"]}},
        wait=0.2,
    )
    yield fake
    await fake.stop()


async def test_a_scripted_answer_reaches_the_plugin(pageant_kit, agent):
    await agent.start()
    assert await asyncio.wait_for(_call(pageant_kit, "light", "k1"), 5) == {"id": "red"}
    assert agent.performed == {("light", "k1"): 1}


async def test_an_answer_that_raises_is_the_agents_error(pageant_kit, agent):
    def broken(payload: Any) -> Any:
        raise RuntimeError("the torch is wet")

    agent.answers["light"] = broken
    await agent.start()
    with pytest.raises(LinkFailure, match="answered light with an error: the torch is wet"):
        await asyncio.wait_for(_call(pageant_kit, "light", "k1"), 5)


async def test_a_dropped_command_is_unanswered_and_a_vanished_agent_delivers_nothing(
    pageant_kit, agent
):
    agent.drop.add("light")
    await agent.start()
    call = asyncio.create_task(_call(pageant_kit, "light", "k1", seconds=1))
    for _ in range(200):
        if agent.received:
            break
        await asyncio.sleep(0.01)
    pageant_kit.clock.advance(2)
    with pytest.raises(Unanswered):
        await asyncio.wait_for(call, 5)

    await agent.stop()
    call = asyncio.create_task(_call(pageant_kit, "light", "k2", seconds=1))
    await asyncio.sleep(0.1)
    pageant_kit.clock.advance(2)
    with pytest.raises(NotDelivered):
        await asyncio.wait_for(call, 5)
    assert [c["key"] for c in agent.received] == ["k1"]


async def test_a_restarted_agent_that_forgot_does_a_redelivered_command_again(pageant_kit, agent):
    agent.delay = 0.0
    agent.drop.add("light")
    await agent.start()
    call = asyncio.create_task(_call(pageant_kit, "light", "k1", seconds=30))
    for _ in range(200):
        if agent.received:
            break
        await asyncio.sleep(0.01)
    agent.drop.clear()
    await agent.restart(forget=True)
    pageant_kit.clock.advance(6)  # past the redelivery wait: handed out again
    assert await asyncio.wait_for(call, 5) == {"id": "red"}
    assert [c["key"] for c in agent.received] == ["k1", "k1"]
