"""A plugin that reads its own settings: the game server's URL and an API key."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, SecretStr

from pageant import hookimpl
from pageant.testing import Kit, assert_ok


class ShardSettings(BaseModel):
    url: str  # PAGEANT_PLUGIN_SHARD_URL, or url in [plugins.shard]
    api_key: SecretStr  # never printed by `pageant plugins --all` or the API
    timeout_seconds: float = 5.0


class ShardPlugin:
    PLUGIN_INFO = {"owner": "shard", "contract": "^1.1", "settings": ShardSettings}  # noqa: RUF012 - read by the loader

    def __init__(self) -> None:
        self.settings: ShardSettings | None = None

    @hookimpl
    def pageant_startup(self, context: Any) -> None:
        self.settings = context.settings  # filled and validated by the host

    async def ping(self, ctx: Any) -> dict[str, Any]:
        if self.settings is None:  # never started: answer so, rather than raise
            return {"ok": False, "retry": True, "error": "the shard plugin has not started"}
        return {"ok": True}

    @hookimpl
    def pageant_actions(self) -> list[dict[str, Any]]:
        return [
            {
                "id": "shard.ping",
                "label": "Ping the shard",
                "risk": "inspect",
                "budget_ms": 5_000,
                "perform": self.ping,
            }
        ]


@pytest.fixture(autouse=True)
def shard_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAGEANT_PLUGIN_SHARD_URL", "http://shard.test:9000")
    monkeypatch.setenv("PAGEANT_PLUGIN_SHARD_API_KEY", "s3cret")


@pytest.fixture
def pageant_plugins() -> list[Any]:
    return [ShardPlugin()]


async def test_the_plugin_reads_its_settings(pageant_kit: Kit, pageant_plugins: list[Any]) -> None:
    assert pageant_kit.refused() == {}
    (plugin,) = pageant_plugins
    assert plugin.settings.url == "http://shard.test:9000"
    assert plugin.settings.api_key.get_secret_value() == "s3cret"
    assert plugin.settings.timeout_seconds == 5.0
    assert_ok(await pageant_kit.perform("shard.ping", {}))
