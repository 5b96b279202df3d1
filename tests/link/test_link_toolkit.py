"""``pageant.link.toolkit``: what a plugin on the game link builds on, tested without a host
(a stand-in ``context.link`` that records each call and answers from a script). The Luanti
plugin's tests and walks exercise it again through the real sync route and a real world."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
from pydantic import Field, ValidationError

from pageant.hookspecs import ActionContext, HeldResource, LinkFailure, NotDelivered, Unanswered
from pageant.link.toolkit import LinkPlugin, LinkSettings

NOW = datetime(2030, 1, 1, 12, tzinfo=UTC)


class Weather(LinkSettings):
    LEASABLE: ClassVar[tuple[str, ...]] = ("weather",)
    settings: list[str] = Field(default_factory=lambda: ["weather"])


class Recorder:
    """``context.link``: each call kept; the answer is ``answers[command]`` (raised when it
    is an exception)."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, str, dict[str, Any], str, datetime]] = []

    async def call(
        self, server: str, command: str, payload: Any, *, key: str, deadline: datetime
    ) -> Any:
        self.calls.append((server, command, dict(payload), key, deadline))
        answer = self.answers[command]
        if isinstance(answer, Exception):
            raise answer
        return answer


def started(answers: dict[str, Any], **settings: Any) -> tuple[LinkPlugin, Recorder]:
    class Game(LinkPlugin):
        settings_model = Weather

    plugin, link = Game(), Recorder(answers)
    plugin.now = lambda: NOW
    filled = Weather(**{"servers": "world,world_b", "places": "altar=0,9,0", **settings})
    plugin.pageant_startup(SimpleNamespace(settings=filled, link=link))  # type: ignore[arg-type]  # a stand-in context: settings and link only
    return plugin, link


def step(verify: bool = False, **params: Any) -> ActionContext:
    return ActionContext(
        params=params, idempotency_key="k-1", run=None, verify=verify, deadline=NOW
    )


def test_settings_read_the_environments_forms_and_refuse_what_does_not_fit() -> None:
    filled = Weather(servers="a, b", places="altar=0,9,0;gate=1,-2,3@b", settings="weather")
    assert filled.servers == ["a", "b"]
    assert [(p.id, p.server, p.z) for p in filled.places] == [("altar", "a", 0), ("gate", "b", 3)]
    assert Weather(settings="weather,contract-check").settings == ["weather", "contract-check"]
    for bad, said in [
        ({"places": "altar=0,9"}, "'altar=0,9' is not name=x,y,z"),
        ({"places": "altar=0,9,0@c"}, "no server 'c'"),
        ({"places": "a=0,0,0;a=1,1,1"}, "id(s) given twice: a"),
        ({"settings": "fov"}, "not a setting the bridge can lease: fov"),
    ]:
        with pytest.raises(ValidationError, match=re.escape(said)):
            Weather(**bad)


async def test_a_step_is_called_under_its_key_and_deadline_and_its_failures_are_classified() -> (
    None
):
    plugin, link = started({"spawn": {"ids": ["k-1#1"]}})

    async def do() -> dict[str, Any]:
        said = await plugin.step(ctx, "world", "spawn", {"mob": "wisp"})
        return {"ok": True, "resources": plugin.listed("game.mob", "world", said["ids"])}

    ctx = step(place="altar")
    assert await plugin.guard(ctx, do) == {
        "ok": True,
        "resources": [{"kind": "game.mob", "ref": "world/k-1#1", "server": "world", "id": "k-1#1"}],
    }
    assert link.calls == [("world", "spawn", {"mob": "wisp"}, "k-1", NOW)]

    # A dry run runs only the check; a param the world cannot take is final.
    assert await plugin.guard(step(verify=True), do) == {"ok": True}
    checked = await plugin.guard(
        step(verify=True, place="moon"), do, lambda c: plugin.place("moon")
    )
    assert checked == {
        "ok": False,
        "retry": False,
        "error": "no place 'moon'; the places are altar",
    }
    assert len(link.calls) == 1
    # The agent's own error is final; nothing delivered, or no answer, may be retried.
    for failure, retry in [
        (LinkFailure("world", "spawn", "no room"), False),
        (NotDelivered("world", "spawn", "never delivered"), True),
        (Unanswered("world", "spawn", "no answer"), True),
    ]:
        link.answers["spawn"] = failure
        said = await plugin.guard(ctx, do)
        assert (said["ok"], said["retry"], said["error"]) == (False, retry, failure.message)


async def test_the_setting_lease_hands_the_world_its_until_and_names_a_bad_target() -> None:
    plugin, link = started(
        {
            "setting_get": {"value": "rain"},
            "setting_set": {"baseline": "rain"},
            "setting_restore": {},
        }
    )
    lease = plugin.setting_lease("game.weather", "The weather")
    assert await lease["read"]("weather") == "rain"
    assert await lease["apply"]("world_b:weather", "sun", NOW + timedelta(minutes=5)) == "rain"
    await lease["restore"]("weather", "rain", key="lease-7")
    (_, get), (server, set_), (_, restore) = [(c[0], c) for c in link.calls]
    assert get[4] == NOW + timedelta(seconds=20)  # command_seconds from the plugin's clock
    assert (server, set_[2], set_[3]) == (
        "world_b",
        {"name": "weather", "value": "sun", "until": "2030-01-01T12:05:00Z"},
        "lease/world_b:weather/sun/2030-01-01T12:05:00Z",
    )
    assert (restore[2], restore[3]) == ({"name": "weather", "baseline": "rain"}, "lease-7")
    with pytest.raises(ValueError, match=r"'fov' is not a setting game\.weather may lease"):
        await lease["read"]("fov")
    with pytest.raises(ValueError, match="no server 'world_c'"):
        await lease["read"]("world_c:weather")
    assert await plugin.setting_options() == [
        {"value": "weather", "label": "weather in world"},
        {"value": "world_b:weather", "label": "weather in world_b"},
    ]
    assert await plugin.place_options() == [{"value": "altar", "label": "altar (0, 9, 0 in world)"}]


async def test_reconcile_keeps_what_each_world_lists_and_every_other_kind() -> None:
    plugin, link = started({"entities": {"ids": ["a"]}})
    held = [
        HeldResource("game", "game.mob", "world/a", "confirmed"),
        HeldResource("game", "game.mob", "world/b", "confirmed"),
        HeldResource("game", "game.setting", "weather", "confirmed"),
    ]
    still = await plugin.reconcile_listed(held, "game.mob", "entities", lambda s: s["ids"])
    assert sorted(still) == ["weather", "world/a"]
    assert [c[:3] for c in link.calls] == [("world", "entities", {})]
