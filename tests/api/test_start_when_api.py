"""A quorum (``start_when``) through the HTTP API: the catalog lists the readings, a good one
saves normalised, each mistake is a 400 naming its field and writes nothing, and a walk from
authoring to a run that waits for the shard's players, starts when they come, and another
that is skipped when they do not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.api.test_events_api import EVENTS, call, create, snapshot
from tests.factories import announce, phase, spec

RUNS = "/api/v1/admin/runs"
READING = "shard.players_online"


def quorum(**start_when: Any) -> dict[str, Any]:
    """A one-phase spec with a ``start_when`` (its keys as given, over sensible defaults)."""
    body = spec(phase("main", announce("The muster begins")))
    body["start_when"] = {
        "reading": READING,
        "params": {"server": "eu-1"},
        "at_least": 4,
        "wait": "10m",
        "else": "skip",
        **start_when,
    }
    return body


@pytest.fixture
def engine(host_engine: Any) -> Any:
    return host_engine


@pytest.fixture
def shard(host: Any) -> Any:
    """The shard plugin's game: the world whose players the reading counts."""
    [record] = [r for r in host.plugins.loaded() if r.owner == "shard"]
    return record.plugin


async def test_the_catalog_lists_the_readings_of_the_three_games(client, tokens):
    status, catalog = await call(client, "GET", "/api/v1/admin/catalog", tokens["moderator"])
    assert status == 200, catalog
    readings = {item["id"]: item for item in catalog["readings"]}
    assert {"shard.players_online", "openarena.players_online", "luanti.players_online"} <= set(
        readings
    )
    arena = readings["openarena.players_online"]
    assert arena["unit"] == "players online"
    assert [p["name"] for p in arena["params"]] == ["server", "bots"]
    assert arena["plugin"].startswith("pageant-openarena")
    assert "read" not in arena


async def test_a_start_when_saves_normalised_and_reads_back_unchanged(client, tokens):
    event = await create(client, tokens["editor"], spec=quorum(wait="600s", at_least=2.5))
    assert event["spec"]["start_when"] == {
        "reading": READING,
        "params": {"server": "eu-1"},
        "at_least": 2.5,
        "wait": "10m",
        "else": "skip",
    }
    status, again = await call(
        client, "PUT", f"{EVENTS}/{event['id']}", tokens["editor"], {"spec": event["spec"]}
    )
    assert (status, again["spec"]) == (200, event["spec"])


async def test_start_when_mistakes_are_named_by_their_field_and_write_nothing(client, tokens, db):
    where = "spec.start_when"
    cases: list[tuple[dict[str, Any], str]] = [
        (
            {"reading": "shard.players"},
            f'{where}.reading: "shard.players" is not a reading; expected one of '
            "luanti.players_online, openarena.players_online, shard.players_online",
        ),
        (
            {"at_least": 0},
            f"{where}.at_least: expected a number above 0 and at most 1000000; got 0",
        ),
        (
            {"at_least": "four"},
            f'{where}.at_least: expected a number above 0 and at most 1000000; got "four"',
        ),
        (
            {"at_least": True},
            f"{where}.at_least: expected a number above 0 and at most 1000000; got true",
        ),
        (
            {"wait": "59s"},
            f'{where}.wait: expected a duration such as "10m" (a whole number of s, m, h or d) '
            'from 1m to 1d; got "59s"',
        ),
        (
            {"wait": "25h"},
            f'{where}.wait: expected a duration such as "10m" (a whole number of s, m, h or d) '
            'from 1m to 1d; got "25h"',
        ),
        (
            {"else": "cancel"},
            f'{where}.else: expected one of skip, start, announce_and_skip; got "cancel"',
        ),
        (
            {"else": "announce_and_skip"},
            f'{where}.legs: "announce_and_skip" needs a list of 1 to 5 announce legs such as '
            '["core.log"]; got null',
        ),
        (
            {"legs": ["core.log"]},
            f'{where}.legs: only "else": "announce_and_skip" announces; remove it',
        ),
        (
            {"params": {"server": "eu-1", "region": "yew"}},
            f'{where}.params: shard.players_online has no param "region"; it takes server',
        ),
        ({"params": {}}, f'{where}.params: "server" is required by shard.players_online'),
        ({"params": {"server": 7}}, f"{where}.params.server: must be a string"),
        (
            {"colour": "red"},
            f'{where}: unknown key "colour"; expected reading, params, '
            "at_least, wait, else, legs, message",
        ),
    ]
    before = await snapshot(db)
    for change, expected in cases:
        body = {"title": "x", "spec": quorum(**change)}
        status, data = await call(client, "POST", EVENTS, tokens["admin"], body)
        assert (status, data["error"]["details"]) == (400, [expected]), change
    assert await snapshot(db) == before


@pytest.mark.parametrize(
    ("change", "ok"),
    [
        ({"wait": "1m"}, True),
        ({"wait": "1d"}, True),
        ({"at_least": 1_000_000}, True),
        ({"at_least": 1_000_001}, False),
        ({"at_least": 0.5}, True),
        ({"at_least": -1}, False),
    ],
)
async def test_start_when_bounds_hold_on_both_sides(client, tokens, change, ok):
    status, data = await call(
        client, "POST", EVENTS, tokens["admin"], {"title": "x", "spec": quorum(**change)}
    )
    assert status == (201 if ok else 400), data


async def test_a_quorum_walk_from_authoring_to_a_start_and_a_skip(
    client, tokens, engine, clock, shard
):
    """Two events published through the API, due at 13:00 and waiting for 4 players on the
    shard: the players come for the first within its wait, and it starts saying with how
    many; the second waits for more than ever come and is skipped, saying how far short."""
    admin = tokens["admin"]
    clock.set(datetime(2027, 3, 1, 12, 0, tzinfo=UTC))
    start = datetime(2027, 3, 1, 13, 0, tzinfo=UTC)
    runs = {}
    for title, at_least in (("Muster", 4), ("Grand muster", 8)):
        body = quorum(at_least=at_least)
        body["schedule"] = {"kind": "once", "at": "2027-03-01T13:00"}
        event = await create(client, admin, title=title, spec=body)
        status, data = await call(client, "POST", f"{EVENTS}/{event['id']}/publish", admin)
        assert status == 200, data
        status, data = await call(client, "POST", f"{EVENTS}/{event['id']}/verify", admin, {})
        assert status == 200, data
        await engine.tick()
        status, listed = await call(client, "GET", f"{RUNS}?definition={event['id']}", admin)
        assert status == 200, listed
        [runs[title]] = [item["id"] for item in listed["items"]]

    async def view(title: str) -> dict[str, Any]:
        status, found = await call(client, "GET", f"{RUNS}/{runs[title]}", admin)
        assert status == 200, found
        return found

    shard.world.players.clear()
    shard.world.players.update({"ana": "yew", "bo": "yew"})
    clock.set(start)
    await engine.tick()
    waiting = (await view("Muster"))["run"]
    assert waiting["status"] == "scheduled"
    assert waiting["waiting_on"]["reason"] == "quorum"
    assert waiting["waiting_on"]["sentence"].startswith("waiting for 4 players online (2 now)")

    shard.world.players.update({"cy": "moonglow", "di": "moonglow", "ed": "yew", "fi": "yew"})
    clock.set(start + timedelta(minutes=4))
    await engine.tick()
    await engine.tick()
    started = await view("Muster")
    assert started["run"]["status"] == "completed"
    becauses = [
        line["detail"].get("because")
        for line in started["log"]
        if line["kind"] == "run.status" and line["detail"]["to"] == "starting"
    ]
    assert becauses == ["started with 6 players online"]
    assert (await view("Grand muster"))["run"]["status"] == "scheduled"

    clock.set(start + timedelta(minutes=10))
    await engine.tick()
    skipped = (await view("Grand muster"))["run"]
    assert skipped["status"] == "skipped"
    assert skipped["cancel_reason"] == "skipped: 6 of 8 players online after 10 minutes"


def gated(**gate: Any) -> dict[str, Any]:
    """A spec whose first phase waits for a quorum (its keys as given, over defaults)."""
    advance = {
        "reading": READING,
        "params": {"server": "eu-1"},
        "at_least": 4,
        "wait": "30m",
        "else": "advance",
        **gate,
    }
    return spec(phase("muster", announce("Gather"), advance=advance))


async def test_a_reading_gate_saves_normalised_and_its_mistakes_are_named(client, tokens, db):
    event = await create(client, tokens["editor"], spec=gated(wait="1800s"))
    assert event["spec"]["phases"][0]["advance"] == {
        "reading": READING,
        "params": {"server": "eu-1"},
        "at_least": 4,
        "wait": "30m",
        "else": "advance",
    }
    where = "spec.phases[0].advance"
    before = await snapshot(db)
    for change, expected in [
        ({"else": "skip"}, f'{where}.else: expected one of advance, fail; got "skip"'),
        (
            {"count": 2},
            f'{where}: unknown key "count" for a "reading" gate; expected reading, '
            "params, at_least, wait, else",
        ),
        (
            {"at_least": 0},
            f"{where}.at_least: expected a number above 0 and at most 1000000; got 0",
        ),
        (
            {"reading": "shard.nope"},
            f'{where}.reading: "shard.nope" is not a reading; expected '
            "one of luanti.players_online, openarena.players_online, shard.players_online",
        ),
    ]:
        body = {"title": "x", "spec": gated(**change)}
        status, data = await call(client, "POST", EVENTS, tokens["admin"], body)
        assert (status, data["error"]["details"]) == (400, [expected]), change
    assert await snapshot(db) == before
