"""A game token speaks only for what it is for: bound to the owners whose triggers it may fire
(``--owner``) and the servers it speaks for on the game link (``--server``). A token made
before bindings keeps firing everything, and says so. Through the real app, both dialects."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from sqlalchemy import update

from pageant.cli import main
from pageant.db.tables import api_tokens
from tests.api.test_events_api import call

TOKENS = "/api/v1/admin/tokens"
BOSS = "/api/v1/triggers/shard.boss.spawned/fire"
JOINED = "/api/v1/triggers/openarena.player.joined/fire"
BATCH = "/api/v1/triggers/fire"
BOSS_PAYLOAD = {"region": "yew", "boss": "lich"}


async def _issue(client, tokens, **body):
    body.setdefault("name", "arena-1")
    body.setdefault("role", "game")
    status, data = await call(client, "POST", TOKENS, tokens["admin"], body)
    assert status == 201, data
    return data


def _refused(host, reason: str) -> float:
    value = host.metrics.registry.get_sample_value(
        "pageant_game_tokens_refused_total", {"reason": reason}
    )
    return value or 0.0


async def test_a_token_bound_to_openarena_cannot_fire_shards_trigger(client, tokens, host):
    arena = await _issue(client, tokens, owners=["openarena"], servers=["world-a"])
    assert (arena["owners"], arena["servers"]) == (["openarena"], ["world-a"])

    status, data = await call(client, "POST", BOSS, arena["token"], BOSS_PAYLOAD)

    assert status == 403, data
    assert data["error"]["message"] == (
        "this token may fire only the triggers of openarena; shard.boss.spawned belongs to 'shard'"
    )
    assert _refused(host, "owner") == 1
    # Its own owner's trigger it fires.
    status, data = await call(client, "POST", JOINED, arena["token"], {"name": "Sarge"})
    assert status == 200, data
    assert _refused(host, "owner") == 1


async def test_a_token_made_before_bindings_still_fires_everything(client, tokens, host, db):
    old = await _issue(client, tokens, name="from-last-year")
    # As a token made before the migration reads: no binding at all.
    async with db.begin() as conn:
        await conn.execute(
            update(api_tokens).where(api_tokens.c.id == old["id"]).values(owners=None)
        )
    status, data = await call(client, "POST", BOSS, old["token"], BOSS_PAYLOAD)
    assert status == 200, data
    status, data = await call(client, "POST", JOINED, old["token"], {"name": "Sarge"})
    assert status == 200, data
    assert _refused(host, "owner") == 0
    _, listing = await call(client, "GET", TOKENS, tokens["admin"])
    mine = next(item for item in listing["items"] if item["id"] == old["id"])
    assert (mine["owners"], mine["servers"]) == (None, None)


async def test_a_batch_refuses_only_the_firings_outside_the_binding(client, tokens, host):
    arena = await _issue(client, tokens, owners=["openarena"])
    status, answers = await call(
        client,
        "POST",
        BATCH,
        arena["token"],
        [
            {"trigger": "openarena.player.joined", "payload": {"name": "Sarge"}},
            {"trigger": "shard.boss.spawned", "payload": BOSS_PAYLOAD},
        ],
    )
    assert status == 200, answers
    assert [a["status"] for a in answers] == [200, 403]
    assert "belongs to 'shard'" in answers[1]["error"]["message"]
    assert _refused(host, "owner") == 1


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({"role": "moderator", "owners": ["shard"]}, "owners: only a game token is bound"),
        ({"servers": ["world a"]}, "servers[0]: 'world a' is not valid"),
        ({"owners": ["Shard"]}, "owners[0]: 'Shard' is not valid"),
        ({"owners": ["core"]}, "owners[0]: core's triggers are fired by the host alone"),
        ({"servers": ["x"] * 101}, "servers"),
    ],
)
async def test_a_bad_binding_is_refused_naming_it(client, tokens, db, body, detail):
    body = {"name": "arena-2", "role": "game", **body}
    status, data = await call(client, "POST", TOKENS, tokens["admin"], body)
    assert status == 400, data
    assert any(detail in d for d in data["error"]["details"]), data
    _, listing = await call(client, "GET", TOKENS, tokens["admin"])
    assert "arena-2" not in [item["name"] for item in listing["items"]]


def test_the_cli_binds_a_token_and_lists_what_it_is_bound_to(tmp_path, monkeypatch):
    monkeypatch.setenv("PAGEANT_DATABASE_URL", f"sqlite+aiosqlite:///{tmp_path / 'p.db'}")
    runner = CliRunner()
    assert runner.invoke(main, ["db", "upgrade"]).exit_code == 0
    made = runner.invoke(
        main,
        [
            *("token", "create", "--role", "game", "--name", "arena-1"),
            *("--server", "world-a", "--server", "world-b", "--owner", "openarena", "--json"),
        ],
    )
    assert made.exit_code == 0, made.output
    assert '"servers": [\n    "world-a",\n    "world-b"\n  ]' in made.output
    unbound = runner.invoke(main, ["token", "create", "--role", "game", "--name", "old"])
    assert unbound.exit_code == 0, unbound.output
    listing = runner.invoke(main, ["token", "list"])
    assert "servers world-a, world-b; owners openarena" in listing.output
    assert "every owner's triggers" in listing.output
    refused = runner.invoke(
        main, ["token", "create", "--role", "admin", "--name", "x", "--owner", "shard"]
    )
    assert refused.exit_code == 2
    assert "owners: only a game token is bound; this one is admin" in refused.output


async def test_the_tokens_page_binds_a_game_token_and_says_which_fire_everything(
    client, tokens, db
):
    import re

    from tests.console.test_console import form_of, sign_in

    await sign_in(client, tokens["admin"])
    html = await (await client.get("/tokens")).text()
    fields = dict(form_of(html, "new-token-form"))
    fields.update({"name": "arena-1", "role": "game", "servers": "world-a, world-b"})
    fields["owners"] = "openarena"
    answer = await client.post("/tokens", data=fields)
    assert answer.status == 201, await answer.text()
    html = await (await client.get("/tokens")).text()
    _, listing = await call(client, "GET", TOKENS, tokens["admin"])
    made = next(item for item in listing["items"] if item["name"] == "arena-1")
    assert (made["servers"], made["owners"]) == (["world-a", "world-b"], ["openarena"])
    row = re.search(rf'<tr data-token="{made["id"]}">(.*?)</tr>', html, re.S).group(1)
    assert "servers world-a, world-b; fires only openarena" in row
    old = re.search(r'<tr data-token="\d+">((?:(?!</tr>).)*test-game.*?)</tr>', html, re.S)
    assert "fires every plugin's triggers" in old.group(1)
    # A bad binding is shown at its field, and nothing is made.
    fields.update({"name": "arena-2", "owners": "Open Arena"})
    answer = await client.post("/tokens", data=fields)
    assert answer.status == 400
    assert 'id="err-owners-1">⚠ &#39;Open&#39; is not valid' in await answer.text()
