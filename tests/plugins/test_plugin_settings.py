"""A plugin's own settings: a pydantic model in ``PLUGIN_INFO``, filled from
``PAGEANT_PLUGIN_<OWNER>_<NAME>`` over the settings file's ``[plugins.<owner>]`` table,
refused naming the field when it does not validate, and never shown when secret."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pageant.cli import main
from pageant.hosting import Host
from pageant.kit import manifest
from pageant.plugins.loader import candidate_for, load_plugins
from pageant.support.settings import Settings, load_settings
from tests.fixture_plugins import Site, fake_site

#: An installed plugin with settings: a server URL (required), an API key (secret,
#: required) and a number of retries (optional).
RAFFLE = """
from pydantic import BaseModel, SecretStr

from pageant import hookimpl


class RaffleSettings(BaseModel):
    server_url: str
    api_key: SecretStr
    retries: int = 3


PLUGIN_INFO = {"owner": "raffle", "contract": "^1.1", "settings": RaffleSettings}
STARTED = []


@hookimpl
def pageant_startup(context):
    STARTED.append(context.settings)
"""

SECRET = "hunter2-do-not-print"
ENV = {
    "PAGEANT_PLUGIN_RAFFLE_SERVER_URL": "http://shard:9000",
    "PAGEANT_PLUGIN_RAFFLE_API_KEY": SECRET,
}


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    for key in [*ENV, "PAGEANT_PLUGIN_RAFFLE_RETRIES"]:
        monkeypatch.delenv(key, raising=False)
    with fake_site(tmp_path / "site", monkeypatch) as s:
        s.install("pageant-raffle", {"raffle": "pageant_raffle"}, {"pageant_raffle": RAFFLE})
        yield s


def _raffle(manager: Any) -> Any:
    return next(r for r in manager.records if r.owner == "raffle")


def test_missing_required_settings_refuse_the_plugin_naming_each_field(site: Site) -> None:
    record = _raffle(load_plugins(environ={}))
    assert record.status == "refused"
    assert record.reason == (
        "pageant-raffle[raffle]: its settings are invalid: server_url: Field required (set "
        "PAGEANT_PLUGIN_RAFFLE_SERVER_URL, or server_url in [plugins.raffle] of the settings "
        "file); api_key: Field required (set PAGEANT_PLUGIN_RAFFLE_API_KEY, or api_key in "
        "[plugins.raffle] of the settings file)"
    )


def test_a_value_of_the_wrong_type_is_refused_naming_the_field(site: Site) -> None:
    record = _raffle(load_plugins(environ={**ENV, "PAGEANT_PLUGIN_RAFFLE_RETRIES": "many"}))
    assert record.status == "refused"
    assert "retries: Input should be a valid integer" in record.reason
    assert "PAGEANT_PLUGIN_RAFFLE_RETRIES" in record.reason


async def test_the_environment_fills_the_settings_handed_over_at_startup(site: Site) -> None:
    host = Host(Settings(), plugins=(), discover=True)
    try:
        assert _raffle(host.plugins).status == "refused"  # this process's environment
    finally:
        await host.close()
    manager = load_plugins(environ={**ENV, "PAGEANT_PLUGIN_RAFFLE_RETRIES": "5"})
    record = _raffle(manager)
    assert record.status == "loaded", record.reason
    manager.start(lambda r: type("Ctx", (), {"settings": r.settings})())
    import pageant_raffle

    (given,) = pageant_raffle.STARTED
    assert given.server_url == "http://shard:9000"
    assert given.api_key.get_secret_value() == SECRET
    assert given.retries == 5


def test_the_settings_file_table_fills_and_the_environment_wins(site: Site, tmp_path: Path) -> None:
    config = tmp_path / "pageant.toml"
    config.write_text(
        '[plugins.raffle]\nserver_url = "http://from-file"\napi_key = "file-key"\nretries = 2\n'
    )
    settings = load_settings(environ={}, config_path=config)
    record = _raffle(
        load_plugins(
            settings=settings, environ={"PAGEANT_PLUGIN_RAFFLE_SERVER_URL": "http://from-env"}
        )
    )
    assert record.status == "loaded", record.reason
    assert record.settings.server_url == "http://from-env"
    assert record.settings.retries == 2


def test_a_plugins_entry_that_is_not_a_table_is_a_clear_error(tmp_path: Path) -> None:
    from pageant.errors import Invalid

    config = tmp_path / "pageant.toml"
    config.write_text('plugins = "raffle"\n')
    with pytest.raises(Invalid, match=r"plugins must be tables, one per owner"):
        load_settings(environ={}, config_path=config)


def test_a_secret_is_never_printed(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    human = CliRunner().invoke(main, ["plugins", "--all"])
    assert human.exit_code == 0, human.output
    assert SECRET not in human.output
    assert (
        "           settings: server_url=http://shard:9000, api_key=**********, retries=3"
        in human.output.splitlines()
    )
    listed = CliRunner().invoke(main, ["plugins", "--json"])
    assert SECRET not in listed.output
    raffle = next(i for i in json.loads(listed.output)["items"] if i["name"] == "raffle")
    assert raffle["settings"] == {
        "server_url": "http://shard:9000",
        "api_key": "**********",
        "retries": 3,
    }


async def test_the_api_never_shows_a_secret(
    site: Site,
    monkeypatch: pytest.MonkeyPatch,
    settings: Settings,
    db: Any,
    clock: Any,
    aiohttp_client: Any,
) -> None:
    from pageant.access.tokens import create_token
    from pageant.api.app import make_app

    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    host = Host(settings, clock=clock, db=db)
    client = await aiohttp_client(make_app(host, run_engine=False))
    token = await create_token(db, role="admin", name="t", now=clock.now())
    response = await client.get(
        "/api/v1/admin/plugins", headers={"Authorization": f"Bearer {token}"}
    )
    text = await response.text()
    assert response.status == 200
    assert SECRET not in text
    raffle = next(i for i in json.loads(text)["items"] if i["name"] == "raffle")
    assert raffle["settings"]["api_key"] == "**********"


def test_the_manifest_records_the_settings_fields_never_their_values(site: Site) -> None:
    manager = load_plugins(environ=ENV)
    entry = manifest.plugin_entry(manager.registry, _raffle(manager))
    assert entry["settings"] == [
        {"name": "server_url", "type": "string", "required": True, "secret": False},
        {"name": "api_key", "type": "string", "required": True, "secret": True},
        {"name": "retries", "type": "integer", "required": False, "secret": False},
    ]
    assert SECRET not in json.dumps(entry)


def test_a_plugin_without_settings_has_none_and_no_manifest_key() -> None:
    class Plain:
        PLUGIN_INFO = {"owner": "plain", "contract": "^1.0"}  # noqa: RUF012 - read by the loader

    manager = load_plugins([candidate_for(Plain(), "plain")], discover=False)
    record = manager.records[-1]
    assert record.status == "loaded" and record.settings is None
    assert "settings" not in manifest.plugin_entry(manager.registry, record)
