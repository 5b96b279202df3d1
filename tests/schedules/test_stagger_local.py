"""``"stagger": "local"``: a fan-out over servers starts each server's run at the schedule's
wall time in that server's own zone, the zone its option source gives (the shard plugin's
servers: eu-1 in Europe/Berlin, sa-1 in America/Santiago, ap-1 in Asia/Tokyo).

The instants below are worked out by hand. Friday 20:00 is, in March 2027 before the 28th,
19:00Z in Berlin (CET, +01), 23:00Z in Santiago (-03) and 11:00Z in Tokyo (+09, no DST).
Berlin moves to CEST (+02) on 28 March, so 2 April is 18:00Z there; Santiago falls back to
-04 on 4 April, so 9 April is 20:00 -04, 00:00Z on the 10th.
"""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import timedelta
from typing import Any

import pageant_shard
import pytest
from pageant_shard import world
from pydantic import ValidationError

from pageant.engine import Engine
from pageant.hookspecs import OptionItem
from pageant.schedules import reconcile, stagger
from pageant.schedules.reconcile import Plan
from tests.api.test_events_api import EVENTS, call, create, snapshot
from tests.scheduling import MAIN, runs_of, utc

SERVER = {
    "name": "server",
    "type": "string",
    "label": "Server",
    "required": True,
    "option_source": "shard.options.servers",
}
SETS = [{"server": "eu-1"}, {"server": "sa-1"}, {"server": "ap-1"}]
ZONES = {
    "server=eu-1": "Europe/Berlin",
    "server=sa-1": "America/Santiago",
    "server=ap-1": "Asia/Tokyo",
}

#: Hand-computed: each Friday's 20:00 on each server, in UTC.
EXPECTED = {
    "2027-03-05T20:00": {
        "eu-1": utc(2027, 3, 5, 19),
        "sa-1": utc(2027, 3, 5, 23),
        "ap-1": utc(2027, 3, 5, 11),
    },
    "2027-03-12T20:00": {
        "eu-1": utc(2027, 3, 12, 19),
        "sa-1": utc(2027, 3, 12, 23),
        "ap-1": utc(2027, 3, 12, 11),
    },
    "2027-03-19T20:00": {
        "eu-1": utc(2027, 3, 19, 19),
        "sa-1": utc(2027, 3, 19, 23),
        "ap-1": utc(2027, 3, 19, 11),
    },
    "2027-03-26T20:00": {
        "eu-1": utc(2027, 3, 26, 19),
        "sa-1": utc(2027, 3, 26, 23),
        "ap-1": utc(2027, 3, 26, 11),
    },
    # Berlin is on summer time.
    "2027-04-02T20:00": {
        "eu-1": utc(2027, 4, 2, 18),
        "sa-1": utc(2027, 4, 2, 23),
        "ap-1": utc(2027, 4, 2, 11),
    },
    # And Santiago has left its summer time.
    "2027-04-09T20:00": {
        "eu-1": utc(2027, 4, 9, 18),
        "sa-1": utc(2027, 4, 10, 0),
        "ap-1": utc(2027, 4, 9, 11),
    },
}


def spec(
    sets: list[dict[str, Any]] | None = None, param: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    schedule = {
        "kind": "weekly",
        "days": ["friday"],
        "time": "20:00",
        "params": SETS if sets is None else sets,
        "stagger": "local",
        **extra,
    }
    return {"params": [param or SERVER], "schedule": schedule, "phases": [MAIN]}


async def published(client: Any, tokens: dict[str, str], body: dict[str, Any], zone: str) -> int:
    event = await create(client, tokens["admin"], title="Frenzy", timezone=zone, spec=body)
    status, data = await call(client, "POST", f"{EVENTS}/{event['id']}/publish", tokens["admin"])
    assert status == 200, data
    return int(event["id"])


def by_slot(rows: list[Any]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = defaultdict(dict)
    for row in rows:
        found[row.occurrence_local][row.params["server"]] = row.scheduled_for
    return dict(found)


async def weeks_pass(host: Any, clock: Any, weeks: int) -> None:
    engine = Engine(host)
    try:
        for _ in range(weeks):
            clock.advance(timedelta(days=7).total_seconds())
            await engine.tick()
    finally:
        await engine.stop()


# ── the contract: an option's zone ─────────────────────────────────────────────────────────


@pytest.mark.parametrize("zone", ["Europe/Berlin", "America/Santiago", "UTC", None])
def test_an_option_item_takes_an_iana_zone_or_none(zone):
    assert OptionItem(value="eu-1", label="Europe", zone=zone).zone == zone


@pytest.mark.parametrize("zone", ["Mars/Olympus", "localtime", "europe/berlin", "+01:00", ""])
def test_an_option_item_refuses_a_zone_that_is_not_an_iana_name(zone):
    with pytest.raises(ValidationError, match="not an IANA time zone name"):
        OptionItem(value="eu-1", label="Europe", zone=zone)


def test_a_sets_zone_falls_back_to_the_events_without_local_or_without_its_own():
    schedule = {"stagger": "local", "zones": {"server=eu-1": "Europe/Berlin"}}
    assert stagger.zone_of(schedule, "server=eu-1", "Asia/Tokyo") == "Europe/Berlin"
    assert stagger.zone_of(schedule, "server=lab-1", "Asia/Tokyo") == "Asia/Tokyo"
    assert stagger.zone_of({**schedule, "stagger": "5m"}, "server=eu-1", "Asia/Tokyo") == (
        "Asia/Tokyo"
    )


# ── the runs ───────────────────────────────────────────────────────────────────────────────


async def test_each_server_starts_at_twenty_hundred_its_own_time_across_the_dst_changes(
    client, tokens, host, db, clock
):
    event_id = await published(client, tokens, spec(), "Europe/Berlin")
    status, event = await call(client, "GET", f"{EVENTS}/{event_id}", tokens["admin"])
    assert status == 200, event
    assert event["spec"]["schedule"]["zones"] == ZONES  # read from the shard at save

    # The horizon (14 days from 1 March, 12:00Z) holds two Fridays.
    first = by_slot(await runs_of(db, event_id))
    assert first == {slot: EXPECTED[slot] for slot in ("2027-03-05T20:00", "2027-03-12T20:00")}

    # Five weeks of expansion reach past both zones' DST changes; every server stays at
    # 20:00 its own time, and no occurrence is made twice.
    await weeks_pass(host, clock, 5)
    rows = await runs_of(db, event_id)
    assert len(rows) == len({(r.occurrence_local, r.params["server"]) for r in rows})
    found = by_slot(rows)
    assert {slot: found[slot] for slot in EXPECTED} == EXPECTED
    assert all(row.dst_adjusted is None for row in rows)


async def test_a_republish_and_a_re_expansion_keep_every_row_where_it_is(
    client, tokens, host, db, clock
):
    event_id = await published(client, tokens, spec(), "Europe/Berlin")
    before = {(r.id, r.scheduled_for, r.status) for r in await runs_of(db, event_id)}
    assert len(before) == 6

    status, data = await call(client, "POST", f"{EVENTS}/{event_id}/publish", tokens["admin"])
    assert status == 200, data
    engine = Engine(host)
    try:
        await engine.tick()  # the expansion, over the same window
    finally:
        await engine.stop()
    assert {(r.id, r.scheduled_for, r.status) for r in await runs_of(db, event_id)} == before


async def test_switching_an_event_to_local_moves_each_servers_runs_to_its_own_time(
    client, tokens, db
):
    body = spec()
    del body["schedule"]["stagger"]
    event_id = await published(client, tokens, body, "Europe/Berlin")
    assert {r.scheduled_for for r in await runs_of(db, event_id)} == {
        utc(2027, 3, 5, 19),
        utc(2027, 3, 12, 19),
    }
    status, data = await call(
        client, "PUT", f"{EVENTS}/{event_id}", tokens["admin"], {"spec": spec()}
    )
    assert status == 200, data
    # The preview names the moves the publish makes: sa-1's and ap-1's runs, not eu-1's.
    preview = f"{EVENTS}/{event_id}/publish?preview=1"
    status, data = await call(client, "POST", preview, tokens["admin"])
    assert status == 200, data
    assert sorted((m["scope"], m["to"]) for m in data["moved"]) == [
        ("server=ap-1", "2027-03-05T11:00:00Z"),
        ("server=ap-1", "2027-03-12T11:00:00Z"),
        ("server=sa-1", "2027-03-05T23:00:00Z"),
        ("server=sa-1", "2027-03-12T23:00:00Z"),
    ]
    status, data = await call(client, "POST", f"{EVENTS}/{event_id}/publish", tokens["admin"])
    assert status == 200, data
    live = [r for r in await runs_of(db, event_id) if r.status == "scheduled"]
    assert by_slot(live) == {s: EXPECTED[s] for s in ("2027-03-05T20:00", "2027-03-12T20:00")}
    assert len(live) == 6


async def test_a_server_its_source_gives_no_zone_keeps_the_events_zone(
    client, tokens, db, monkeypatch
):
    monkeypatch.setitem(world.SERVERS, "lab-1", ("The lab", None))
    sets = [{"server": "eu-1"}, {"server": "lab-1"}]
    event_id = await published(client, tokens, spec(sets), "America/New_York")
    status, event = await call(client, "GET", f"{EVENTS}/{event_id}", tokens["admin"])
    assert status == 200, event
    assert event["spec"]["schedule"]["zones"] == {"server=eu-1": "Europe/Berlin"}
    # 20:00 in New York (EST, -05, until 14 March) is 01:00Z the next day.
    assert by_slot(await runs_of(db, event_id)) == {
        "2027-03-05T20:00": {"eu-1": utc(2027, 3, 5, 19), "lab-1": utc(2027, 3, 6, 1)},
        "2027-03-12T20:00": {"eu-1": utc(2027, 3, 12, 19), "lab-1": utc(2027, 3, 13, 1)},
    }


async def test_the_calendar_forecasts_each_server_at_its_own_time(client, tokens):
    event_id = await published(client, tokens, spec(), "Europe/Berlin")
    window = "from=2027-03-01T00:00:00Z&to=2027-04-12T00:00:00Z"
    query = f"/api/v1/admin/calendar?{window}&definition={event_id}"
    status, data = await call(client, "GET", query, tokens["admin"])
    assert status == 200, data
    found: dict[str, dict[str, str]] = defaultdict(dict)
    kinds: dict[str, set[str]] = defaultdict(set)
    for item in data["items"]:
        slot = item["local_time"][:16] if item["kind"] == "projected" else None
        server = item["params"]["server"]
        at = item["scheduled_for"]
        found[slot or _slot_of(at, server)][server] = at
        kinds[item["kind"]].add(at)
    assert len(data["items"]) == 18  # six Fridays, three servers, none twice
    expected = {
        slot: {server: f"{at:%Y-%m-%dT%H:%M:%S}Z" for server, at in servers.items()}
        for slot, servers in EXPECTED.items()
    }
    assert dict(found) == expected
    assert len(kinds["materialised"]) == 6 and len(kinds["projected"]) == 12
    projected = [i for i in data["items"] if i["kind"] == "projected"]
    assert {(i["params"]["server"], i["timezone"]) for i in projected} == {
        ("eu-1", "Europe/Berlin"),
        ("sa-1", "America/Santiago"),
        ("ap-1", "Asia/Tokyo"),
    }


def _slot_of(at: str, server: str) -> str:
    """The slot a materialised item's instant is, on its server."""
    for slot, servers in EXPECTED.items():
        if f"{servers[server]:%Y-%m-%dT%H:%M:%S}Z" == at:
            return slot
    raise AssertionError(f"{server} at {at} is no expected instant")


# ── refusals ───────────────────────────────────────────────────────────────────────────────


async def refused(client: Any, tokens: dict[str, str], db: Any, body: dict[str, Any]) -> list[str]:
    before = await snapshot(db)
    status, data = await call(client, "POST", EVENTS, tokens["admin"], {"title": "X", "spec": body})
    assert status == 400, data
    assert await snapshot(db) == before
    return list(data["error"]["details"])


async def test_local_without_a_fan_out_is_a_400_naming_the_stagger(client, tokens, db):
    body = spec()
    del body["schedule"]["params"]
    assert await refused(client, tokens, db, body) == [
        "spec.schedule.stagger: a stagger spreads the runs of a fan-out; this schedule "
        "has no params (spec.schedule.params)"
    ]


async def test_local_over_a_param_without_an_option_source_is_a_400(client, tokens, db):
    plain = {k: v for k, v in SERVER.items() if k != "option_source"}
    assert await refused(client, tokens, db, spec(param=plain)) == [
        'spec.schedule.stagger: "local" starts each param set at the schedule\'s time in its '
        "own zone, read from the option source of a param the set names; no param of "
        "spec.schedule.params takes its values from an option source"
    ]


async def test_local_over_a_fan_out_over_a_source_is_a_400(client, tokens, db):
    # A for_each fan-out's sets are made only when expanded: no zones are read at save.
    body = spec()
    body["schedule"]["params"] = {"for_each": {"server": "shard.options.servers"}}
    assert await refused(client, tokens, db, body) == [
        'spec.schedule.stagger: "local" reads each server\'s zone when the event is saved, '
        "from its listed param sets; a fan-out over an option source (for_each) makes its "
        'sets only when expanded: list the sets, or stagger by a duration such as "5m"'
    ]


async def test_local_over_a_source_that_gives_no_zones_is_a_400(client, tokens, db):
    region = {**SERVER, "name": "region", "option_source": "shard.options.regions"}
    sets = [{"region": "yew"}, {"region": "vesper"}]
    assert await refused(client, tokens, db, spec(sets, param=region)) == [
        'spec.schedule.stagger: "local" starts each param set at the schedule\'s time in the '
        "zone its option source gives it; the option source shard.options.regions gives no "
        "zone for any of its values"
    ]


async def test_a_written_zone_that_is_not_one_is_a_400_naming_it(client, tokens, db):
    body = spec(zones={"server=eu-1": "Mars/Olympus"})
    assert await refused(client, tokens, db, body) == [
        'spec.schedule.zones.server=eu-1: "Mars/Olympus" is not an IANA time zone'
    ]


async def test_a_written_zone_is_replaced_by_the_sources_at_save(client, tokens):
    body = spec(zones={"server=eu-1": "Asia/Tokyo", "server=gone": "UTC"})
    event = await create(client, tokens["admin"], title="X", spec=body)
    assert event["spec"]["schedule"]["zones"] == ZONES


async def test_a_duration_stagger_carries_no_zones(client, tokens):
    body = spec(zones={"server=eu-1": "Asia/Tokyo"})
    body["schedule"]["stagger"] = "5m"
    event = await create(client, tokens["admin"], title="X", spec=body)
    assert "zones" not in event["spec"]["schedule"]


def test_the_expansion_bookkeeping_waits_for_the_earliest_servers_next_run():
    schedule = {**spec()["schedule"], "zones": ZONES}
    plan = Plan(1, 1, {"schedule": schedule}, "Europe/Berlin", 0)
    # After the second Friday's runs: Tokyo's 20:00 on the 19th is the first still to make.
    assert reconcile.expanded_until(plan, utc(2027, 3, 13)) == utc(2027, 3, 19, 11)
    # Past Tokyo's and Berlin's, Santiago's is next.
    assert reconcile.expanded_until(plan, utc(2027, 3, 19, 19, 1)) == utc(2027, 3, 19, 23)
    # Without zones every set keeps the event's: Berlin's 20:00.
    bare = Plan(1, 1, {"schedule": {**schedule, "zones": {}}}, "Europe/Berlin", 0)
    assert reconcile.expanded_until(bare, utc(2027, 3, 13)) == utc(2027, 3, 19, 19)


class _Down(dict):
    """The shard's server list while the game does not answer."""

    def items(self) -> Any:
        raise ConnectionError("the shard does not answer")


async def test_a_save_while_the_source_is_down_keeps_the_zones_saved_before(
    client, tokens, db, monkeypatch
):
    event = await create(client, tokens["admin"], title="X", timezone="Europe/Berlin", spec=spec())
    assert event["spec"]["schedule"]["zones"] == ZONES
    monkeypatch.setattr(pageant_shard, "SERVERS", _Down())
    # A save from a form that does not carry the zones: they are kept, not dropped.
    path = f"{EVENTS}/{event['id']}"
    status, data = await call(client, "PUT", path, tokens["admin"], {"spec": spec()})
    assert status == 200, data
    assert data["spec"]["schedule"]["zones"] == ZONES
    # A new event has nothing saved before: its sets keep the event's zone for now.
    status, data = await call(
        client, "POST", EVENTS, tokens["admin"], {"title": "Y", "spec": spec()}
    )
    assert status == 201, data
    assert "zones" not in data["spec"]["schedule"]


async def test_the_openapi_document_describes_local_and_the_zones(client):
    response = await client.get("/api/v1/openapi.json")
    assert response.status == 200
    shapes = _schedule_shapes(await response.json())
    assert {kind for kind, _ in shapes} == {"once", "weekly", "monthly"}
    for _, shape in shapes:
        pattern = shape["properties"]["stagger"]["pattern"]
        assert re.fullmatch(pattern, "local") and re.fullmatch(pattern, "5m")
        assert not re.fullmatch(pattern, "locally")
        zones = shape["properties"]["zones"]
        assert zones["type"] == "object" and "written by the host" in zones["description"]


def _schedule_shapes(doc: Any) -> list[tuple[str, dict[str, Any]]]:
    """Each schedule shape that may stagger, with its kind, wherever the document has one."""
    found: list[tuple[str, dict[str, Any]]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            properties = node.get("properties")
            if isinstance(properties, dict) and "stagger" in properties:
                found.append((properties["kind"]["const"], node))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(doc)
    return found
