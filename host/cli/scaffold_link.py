"""The templates of ``pageant new-plugin NAME --link``: a plugin whose game can only call
out, reached through the host's game link, tested with ``pageant.testing.FakeAgent``."""

from __future__ import annotations

LINK_MODULE = '''\
"""OWNER: a pageant plugin for a game that calls out, through pageant's game link.

One action (``OWNER.spawn``), one trigger (``OWNER.spawned``) and one option source
(``OWNER.options.servers``). The game runs an agent that syncs with
``POST /api/v1/link/{server}/sync`` with a game token bound to its server
(``pageant token create --role game --name NAME --server world-a --owner OWNER``);
pageant's docs/link.md has the wire format. The plugin opens no port of its own.
"""

from __future__ import annotations

from typing import Any

from pageant import hookimpl
from pageant.hookspecs import LinkFailure, PluginContext

SERVERS = ("world-a",)
PLUGIN_INFO = {
    "owner": "OWNER",
    "contract": "RANGE",
    "link": {"servers": list(SERVERS), "commands": ["spawn", "despawn"]},
}
#: The context the host hands over at startup: the way to the game link.
CONTEXT: dict[str, PluginContext] = {}


@hookimpl
def pageant_startup(context: PluginContext) -> None:
    CONTEXT["context"] = context


async def _call(command: str, ctx: Any) -> dict[str, Any]:
    """The agent's answer to ``command``, or a retryable failure saying why not."""
    link = CONTEXT["context"].link
    if link is None:
        return {"ok": False, "retry": True, "error": "no game link here"}
    try:
        said = await link.call(
            ctx.params["server"],
            command,
            {"mob": ctx.params.get("mob", "")},
            key=ctx.idempotency_key,
            deadline=ctx.deadline,
        )
    except LinkFailure as exc:
        # NotDelivered, Down: nothing happened; Unanswered: it may have (the host
        # reverts under the same key); the agent's own error: the game said why not.
        return {"ok": False, "retry": True, "error": exc.message}
    return said if isinstance(said, dict) else {}


async def spawn(ctx: Any) -> dict[str, Any]:
    """Spawn ``mob`` on ``server``: the agent answers ``{"id": ...}``; spawning twice
    under one key spawns once (the agent remembers the keys it did)."""
    if ctx.params["server"] not in SERVERS:
        return {
            "ok": False,
            "retry": False,
            "error": f"no such server {ctx.params['server']!r}",
        }
    if ctx.verify:  # a dry run sends the game nothing
        return {"ok": True}
    said = await _call("spawn", ctx)
    if said.get("ok") is False:
        return said
    if "id" not in said:
        return {"ok": True}
    return {"ok": True, "resources": [{"kind": "mob", "ref": str(said["id"])}]}


async def despawn(ctx: Any) -> dict[str, Any]:
    """Take back what was spawned under the step's key (there may be nothing)."""
    said = await _call("despawn", ctx)
    return said if said.get("ok") is False else {"ok": True}


async def servers() -> list[dict[str, str]]:
    return [{"value": s, "label": s} for s in SERVERS]


@hookimpl
def pageant_actions() -> list[dict[str, Any]]:
    server = {
        "name": "server",
        "type": "string",
        "required": True,
        "description": "Which game server.",
        "example": "world-a",
        "option_source": "OWNER.options.servers",
    }
    mob = {
        "name": "mob",
        "type": "string",
        "description": "What to spawn.",
        "example": "wisp",
    }
    return [
        {
            "id": "OWNER.spawn",
            "label": "Spawn a mob",
            "risk": "change",
            "reversible": "full",
            "budget_ms": 5_000,
            "params": [server, mob],
            "perform": spawn,
            "revert": despawn,
        }
    ]


@hookimpl
def pageant_option_sources() -> list[dict[str, Any]]:
    source = {"id": "OWNER.options.servers", "label": "Servers", "resolve": servers}
    return [source]


@hookimpl
def pageant_triggers() -> list[dict[str, Any]]:
    mob = {
        "name": "mob",
        "type": "string",
        "description": "What spawned.",
        "example": "wisp",
    }
    trigger = {"id": "OWNER.spawned", "label": "A mob spawned", "variables": [mob]}
    return [trigger]
'''

LINK_TESTS = '''\
"""OWNER, tested with pageant.testing: a real host and a FakeAgent syncing with it
over the real game-link route, standing in for the game."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pageant.testing import (
    FakeAgent,
    Kit,
    assert_contract_holds,
    assert_failed,
    assert_ok,
)

WISP = {"server": "world-a", "mob": "wisp"}


@pytest.fixture
def pageant_plugins() -> list[str]:
    return ["DIST"]


@pytest.fixture
async def agent(pageant_kit: Kit, pageant_client: Any) -> Any:
    token = await pageant_kit.link_token(["world-a"], owners=["OWNER"])
    fake = FakeAgent(
        pageant_client, token, "world-a", answers={"spawn": {"id": 7}}, wait=0.2
    )
    await fake.start()
    yield fake
    await fake.stop()


async def test_a_spawn_reaches_the_game_once_by_its_key(
    pageant_kit: Kit, agent: Any
) -> None:
    first = await pageant_kit.perform("OWNER.spawn", WISP, idempotency_key="k")
    again = await pageant_kit.perform("OWNER.spawn", WISP, idempotency_key="k")
    assert assert_ok(first).resources == assert_ok(again).resources
    assert agent.performed == {("spawn", "k"): 1}


async def test_an_unknown_server_fails_for_good(pageant_kit: Kit) -> None:
    answer = await pageant_kit.perform("OWNER.spawn", {**WISP, "server": "nowhere"})
    assert_failed(answer, retry=False)


async def test_an_error_from_the_game_is_a_failure_saying_so(
    pageant_kit: Kit, agent: Any
) -> None:
    def full(payload: Any) -> Any:
        raise RuntimeError("the world is full")

    agent.answers["spawn"] = full
    answer = await pageant_kit.perform("OWNER.spawn", WISP)
    assert_failed(answer, retry=True, error="the world is full")


def test_the_contract_holds() -> None:
    # On a difference, the failure shows contract-check's report, one line per change.
    manifest = Path(__file__).resolve().parents[1] / "contract-manifest.json"
    assert_contract_holds("--plugin", "OWNER", "--manifest", str(manifest))
'''
