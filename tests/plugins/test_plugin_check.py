"""A plugin's own check at start (``PLUGIN_INFO["check"]``, contract 1.3): what it finds is
kept on the plugin's record, logged, listed by the API and shown in ``/healthz``'s detail,
never refusing the plugin; a check that raises, hangs or answers nonsense is a problem too."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from pageant import hookimpl
from pageant.api.app import make_app
from pageant.plugins import self_check
from tests.conftest import bearer
from tests.factories import make_host

WRONG = 'the game server arena2 refused the password: check its entry (id = "arena2")'


class Checked:
    """A plugin whose check answers ``answer`` (or runs it, when it is a callable)."""

    def __init__(self, owner: str, answer: Any) -> None:
        self.answer = answer
        self.PLUGIN_INFO = {"owner": owner, "contract": "^1.3", "check": self.check}

    async def check(self) -> Any:
        if callable(self.answer):
            return await self.answer()
        return self.answer

    @hookimpl
    def pageant_actions(self) -> list[dict[str, Any]]:
        return []


async def test_a_problem_is_kept_listed_and_shown_in_healthz_without_refusing_the_plugin(
    settings, db, clock, caplog, aiohttp_client, tokens
):
    caplog.set_level(logging.WARNING, logger="pageant.plugins")
    host = make_host(settings, db, clock, [Checked("game", [WRONG]), Checked("fine", [])])
    try:
        await host.start_plugins()
        by_owner = {r.owner: r for r in host.plugins.records}
        assert by_owner["game"].status == "loaded" and by_owner["game"].problems == [WRONG]
        assert by_owner["fine"].problems == []
        assert any(WRONG in r.getMessage() for r in caplog.records)

        client = await aiohttp_client(make_app(host, run_engine=False))
        listed = await (
            await client.get("/api/v1/admin/plugins", headers=bearer(tokens["admin"]))
        ).json()
        problems = {p["owner"]: p["problems"] for p in listed["items"]}
        assert problems["game"] == [WRONG] and problems["fine"] == []

        health = await client.get("/healthz?verbose")
        body = await health.json()
        assert health.status == 200
        assert body["plugins"] == {by_owner["game"].label: [WRONG]}
        assert "problems" not in body  # the host itself is healthy
    finally:
        await host.close()


async def test_no_problem_leaves_healthz_without_the_detail(settings, db, clock, aiohttp_client):
    host = make_host(settings, db, clock, [Checked("fine", [])])
    try:
        await host.start_plugins()
        client = await aiohttp_client(make_app(host, run_engine=False))
        assert "plugins" not in await (await client.get("/healthz?verbose")).json()
    finally:
        await host.close()


async def raises() -> Any:
    raise ConnectionError("the game is unreachable")


async def hangs() -> Any:
    await asyncio.sleep(60)


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (raises, "its check raised ConnectionError: the game is unreachable"),
        (hangs, "its check did not answer within 0.2 s"),
        ("all good", "its check answered 'all good'; expected a list of sentences"),
        ([1], "its check answered [1]; expected a list of sentences"),
    ],
)
async def test_a_check_that_fails_is_itself_the_problem(
    settings, db, clock, monkeypatch, answer, problem
):
    monkeypatch.setattr(self_check, "CHECK_SECONDS", 0.2)
    host = make_host(settings, db, clock, [Checked("game", answer)])
    try:
        await host.start_plugins()
        (record,) = [r for r in host.plugins.records if r.owner == "game"]
        assert (record.status, record.problems) == ("loaded", [problem])
    finally:
        await host.close()


def test_a_check_that_is_not_async_is_refused(settings, db, clock):
    plugin = Checked("game", [])
    plugin.PLUGIN_INFO["check"] = lambda: []
    host = make_host(settings, db, clock, [plugin])
    (record,) = [r for r in host.plugins.records if r.owner == "game" or "checked" in r.label]
    assert record.status == "refused"
    assert "check must be an async def function" in str(record.reason)
