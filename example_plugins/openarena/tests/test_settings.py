"""The plugin's settings: the password required and named when missing, several servers,
the cvar allowlist from the environment."""

from __future__ import annotations

import os

import pytest
from pageant_openarena.settings import OpenArenaSettings
from pydantic import ValidationError

from pageant.testing import assert_failed, kit_host

ENV = "PAGEANT_PLUGIN_OPENARENA_"


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(ENV):
            monkeypatch.delenv(name)


async def test_without_a_password_it_loads_and_every_action_names_the_setting() -> None:
    # Installed beside other plugins and not yet pointed at a server, it refuses nothing.
    async with kit_host(["pageant-openarena"]) as kit:
        assert kit.refused() == {}
        failed = assert_failed(
            await kit.perform("openarena.bots.add", {"count": 1, "skill": 1}, verify=True),
            retry=False,
        )
    assert failed.error == (
        "rcon_password is not set for main: set PAGEANT_PLUGIN_OPENARENA_RCON_PASSWORD, or "
        "rcon_password in [plugins.openarena] (or in the server's [[plugins.openarena.servers]] "
        "table) of the settings file"
    )


async def test_with_a_password_from_the_environment_it_loads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ENV + "RCON_PASSWORD", "secret")
    monkeypatch.setenv(ENV + "RCON_PORT", "27999")
    async with kit_host(["pageant-openarena"]) as kit:
        assert kit.refused() == {}
        assert await kit.resolve("openarena.options.servers") == [
            {"value": "main", "label": "main (127.0.0.1:27999)"}
        ]


def test_several_servers_take_what_they_do_not_say_from_the_top_level() -> None:
    settings = OpenArenaSettings.model_validate(
        {
            "rcon_password": "shared",
            "servers": [
                {"id": "arena1", "rcon_port": 27960},
                {
                    "id": "arena2",
                    "rcon_port": 27961,
                    "rcon_password": "own",
                    "rcon_host": "10.0.0.2",
                },
            ],
        }
    )
    first, second = settings.resolved()
    assert (first.id, first.rcon_host, first.rcon_port) == ("arena1", "127.0.0.1", 27960)
    assert first.rcon_password is not None and first.rcon_password.get_secret_value() == "shared"
    assert (second.rcon_host, second.rcon_port) == ("10.0.0.2", 27961)
    assert second.rcon_password is not None and second.rcon_password.get_secret_value() == "own"


def test_a_server_id_given_twice_is_refused() -> None:
    with pytest.raises(ValidationError, match="id\\(s\\) given twice: arena1"):
        OpenArenaSettings.model_validate(
            {"rcon_password": "x", "servers": [{"id": "arena1"}, {"id": "arena1"}]}
        )


def test_the_cvar_allowlist_reads_a_comma_separated_list_and_refuses_a_bad_name() -> None:
    settings = OpenArenaSettings.model_validate(
        {"rcon_password": "x", "cvars": "g_gravity, g_speed"}
    )
    assert settings.cvars == ["g_gravity", "g_speed"]
    with pytest.raises(ValidationError, match="not a cvar name: 'g_gravity;quit'"):
        OpenArenaSettings.model_validate({"rcon_password": "x", "cvars": "g_gravity;quit"})
