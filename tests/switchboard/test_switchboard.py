"""The switchboard through the admin API and the command line: its default posture, a
change and its audit, and every bad cap refused by name with nothing written."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from pageant.db.tables import event_action_settings, event_action_settings_history
from tests.api.test_events_api import call
from tests.cli.test_cli import empty_url, migrated_url, pageant  # noqa: F401 - fixtures, runner

ACTIONS = "/api/v1/admin/actions"
SUMMON = f"{ACTIONS}/wisps.summon"


async def _rows(db: Any) -> tuple[list[dict], list[dict]]:
    async with db.connect() as conn:
        settings = [dict(r._mapping) for r in await conn.execute(select(event_action_settings))]
        history = [
            dict(r._mapping) for r in await conn.execute(select(event_action_settings_history))
        ]
    return settings, history


async def test_with_no_rows_world_changing_actions_are_off_and_the_rest_on(client, tokens):
    status, data = await call(client, "GET", ACTIONS, tokens["moderator"])
    assert status == 200
    items = {item["id"]: item for item in data["items"]}
    assert [i["id"] for i in data["items"]] == sorted(items)
    assert items["wisps.summon"] == {
        "id": "wisps.summon",
        "label": "Summon wisps",
        "owner": "wisps",
        "plugin": items["wisps.summon"]["plugin"],
        "risk": "change",
        "reversible": "full",
        "enabled": False,
        "configured": False,
        "caps": {},
        "dimensions": [
            {
                "dimension": "wisps.wisps",
                "label": "Wisps summoned",
                "unit": "wisps",
                "usable": True,
            }
        ],
        "updated_by": None,
        "updated_at": None,
    }
    assert items["wisps.summon"]["plugin"].endswith("[wisps]")
    for core in ("core.announce", "core.wait", "core.cue"):
        assert (items[core]["enabled"], items[core]["configured"]) == (True, False)
        assert items[core]["dimensions"] == []


async def test_an_admin_enables_and_caps_an_action_and_the_change_is_audited(client, tokens, clock):
    status, item = await call(
        client, "PUT", SUMMON, tokens["admin"], {"enabled": True, "caps": {"wisps.wisps": 30}}
    )
    assert status == 200, item
    assert (item["enabled"], item["configured"], item["caps"]) == (True, True, {"wisps.wisps": 30})
    assert (item["updated_by"], item["updated_at"]) == ("admin:test-admin", "2027-03-01T12:00:00Z")
    clock.advance(60)
    status, item = await call(
        client, "PUT", SUMMON, tokens["admin"], {"caps": {"wisps.wisps": None}}
    )
    assert status == 200, item
    assert (item["enabled"], item["caps"]) == (True, {"wisps.wisps": None})  # enabled kept
    status, history = await call(client, "GET", f"{SUMMON}/history", tokens["editor"])
    assert status == 200
    assert [
        (h["enabled"], h["caps"], h["before"], h["actor"], h["at"]) for h in history["items"]
    ] == [
        (True, {"wisps.wisps": 30}, None, "admin:test-admin", "2027-03-01T12:00:00Z"),
        (
            True,
            {"wisps.wisps": None},
            {"enabled": True, "caps": {"wisps.wisps": 30}},
            "admin:test-admin",
            "2027-03-01T12:01:00Z",
        ),
    ]
    status, catalog = await call(client, "GET", "/api/v1/admin/catalog", tokens["moderator"])
    summon = next(a for a in catalog["actions"] if a["id"] == "wisps.summon")
    assert (summon["enabled"], summon["configured"]) == (True, True)


@pytest.mark.parametrize(
    ("body", "details"),
    [
        (
            {"caps": {"wisps.gold": 5}},
            ['body.caps.wisps.gold: "wisps.gold" is not a budget dimension any plugin declares'],
        ),
        (
            {"caps": {"wisps.wisps": -1}},
            ["body.caps.wisps.wisps: Input should be greater than or equal to 0"],
        ),
        (
            {"caps": {"wisps.wisps": 2**31}},
            ["body.caps.wisps.wisps: Input should be less than or equal to 2147483647"],
        ),
        ({"enabled": "yes"}, ["body.enabled: Input should be a valid boolean"]),
        ({"colour": "red"}, ["body.colour: is not a known field"]),
        ({}, ["body: empty change"]),
    ],
)
async def test_a_bad_change_is_a_400_naming_it_and_writes_nothing(
    client, tokens, db, body, details
):
    status, data = await call(client, "PUT", SUMMON, tokens["admin"], body)
    assert (status, data["error"]["code"]) == (400, "invalid"), data
    assert data["error"]["details"] == details
    assert await _rows(db) == ([], [])


async def test_a_cap_on_a_dimension_the_action_does_not_spend_is_refused(client, tokens, db):
    status, data = await call(
        client, "PUT", f"{ACTIONS}/core.announce", tokens["admin"], {"caps": {"wisps.wisps": 5}}
    )
    assert status == 400
    assert data["error"]["details"] == [
        'body.caps.wisps.wisps: core.announce does not spend "wisps.wisps"; it spends nothing'
    ]
    assert await _rows(db) == ([], [])


async def test_an_unknown_action_is_a_404(client, tokens):
    for method, path, body in [
        ("PUT", f"{ACTIONS}/wisps.nothing", {"enabled": True}),
        ("GET", f"{ACTIONS}/wisps.nothing/history", None),
    ]:
        status, data = await call(client, method, path, tokens["admin"], body)
        assert (status, data["error"]["code"]) == (404, "not_found")


# ── the command line ──────────────────────────────────────────────────────────


def test_pageant_actions_list_enable_cap_and_disable(migrated_url):  # noqa: F811 - the imported fixture
    url = ["--database-url", migrated_url]
    listed = pageant("actions", "list", *url)
    assert listed.exit_code == 0, listed.output
    assert "wisps.summon                 change       disabled (default)" in listed.output
    assert "    spends: wisps.wisps" in listed.output

    enabled = pageant("actions", "enable", "wisps.summon", *url)
    assert enabled.exit_code == 0, enabled.output
    capped = pageant("actions", "cap", "wisps.summon", "wisps.wisps", "30", *url)
    assert capped.exit_code == 0, capped.output
    assert "caps:   wisps.wisps=30" in capped.output
    as_json = pageant("actions", "list", "--json", *url)
    import json

    summon = next(i for i in json.loads(as_json.output)["items"] if i["id"] == "wisps.summon")
    assert (summon["enabled"], summon["caps"]) == (True, {"wisps.wisps": 30})
    assert summon["updated_by"].startswith("cli:")  # cli:<login>, as every staff command
    uncapped = pageant("actions", "cap", "wisps.summon", "wisps.wisps", "none", *url)
    assert "caps:   wisps.wisps=none" in uncapped.output
    disabled = pageant("actions", "disable", "wisps.summon", *url)
    assert "wisps.summon                 change       disabled\n" in disabled.output


def test_pageant_actions_refuses_a_bad_cap_by_name(migrated_url):  # noqa: F811 - the imported fixture
    url = ["--database-url", migrated_url]
    wrong = pageant("actions", "cap", "wisps.summon", "wisps.gold", "3", *url)
    assert wrong.exit_code == 1
    assert '"wisps.gold" is not a budget dimension any plugin declares' in wrong.output
    bad = pageant("actions", "cap", "wisps.summon", "wisps.wisps", "many", *url)
    assert bad.exit_code == 2
    assert "N must be a whole number of at least 0 or none" in bad.output
    unknown = pageant("actions", "enable", "wisps.nothing", *url)
    assert unknown.exit_code == 1
    assert "no loaded plugin registers the action 'wisps.nothing'" in unknown.output


def _seed(url: str, event_spec: dict[str, Any]) -> Any:
    import asyncio
    from datetime import UTC, datetime

    from pageant.db.engine import create_engine
    from tests.factories import publish_event

    async def _go() -> Any:
        engine = create_engine(url)
        try:
            return await publish_event(
                engine, datetime(2027, 3, 1, 12, tzinfo=UTC), event_spec, verified=False
            )
        finally:
            await engine.dispose()

    return asyncio.run(_go())


def test_pageant_verify_and_rehearse_an_event_by_slug(migrated_url, tmp_path):  # noqa: F811 - the imported fixture
    from tests.factories import announce, phase, spec, step, wait

    url = ["--database-url", migrated_url]
    good = _seed(migrated_url, spec(phase("main", announce("hi"), wait(60))))
    verified = pageant("verify", good.slug, *url)
    assert verified.exit_code == 0, verified.output
    assert verified.output == f"event {good.id} version 1: verified\n"

    import json

    again = pageant("verify", good.slug, "--json", *url)
    assert json.loads(again.output)["version"] == {"id": good.version_id, "number": 1}
    as_json = json.loads(pageant("rehearse", good.slug, "--json", *url).output)
    assert as_json["outcome"]["status"] == "completed"
    firings = tmp_path / "firings.json"
    firings.write_text(json.dumps([{"after": "30s", "trigger": "wisps.caught", "payload": {}}]))
    fed = json.loads(
        pageant("rehearse", good.slug, "--firings", str(firings), "--json", *url).output
    )
    assert fed["firings"] == [
        {"after_seconds": 30, "trigger": "wisps.caught", "gates_matched": 0, "gates_closed": 0}
    ]
    firings.write_text("[{")
    broken = pageant("rehearse", good.slug, "--firings", str(firings), *url)
    assert broken.exit_code == 2 and "--firings is not JSON" in broken.output

    rehearsed = pageant("rehearse", good.slug, *url)
    assert rehearsed.exit_code == 0, rehearsed.output
    assert rehearsed.output.splitlines() == [
        f"event {good.id} version 1, rehearsed",
        "       +0s  The run was made by hand, to start at +0 s (by rehearsal)",
        "       +0s  The run is starting (it was scheduled)",
        "       +0s  The run is running (it was starting)",
        "       +0s  Phase “Main” began with 2 steps",
        "       +0s  “Announce” is done",
        "       +0s  “Wait” is done; what follows waits 1 min",
        "       +0s  Holding until +1 min: a wait ended phase main, and what follows waits for it",
        "      +60s  No longer waiting",
        "      +60s  Phase “Main” finished its steps",
        "      +60s  The run is ending (it was running)",
        "      +60s  The run completed (it was ending)",
        "      +60s  run completed",
    ]

    bad = _seed(migrated_url, spec(phase("main", step("wisps.summon", colour="north", count=2))))
    refused = pageant("verify", str(bad.id), *url)
    assert refused.exit_code == 1
    assert "did not pass verification" in refused.output
    assert "spec.phases[0].steps[0]: wisps.summon is a change action, disabled by default" in (
        refused.output
    )
    unknown = pageant("rehearse", "no-such-event", *url)
    assert unknown.exit_code == 1
    assert "no event has the slug 'no-such-event'" in unknown.output


async def test_two_first_changes_of_one_action_at_once_never_answer_500(client, tokens, db):
    import asyncio

    body = {"enabled": True, "caps": {"wisps.wisps": 5}}
    answers = await asyncio.gather(
        *[call(client, "PUT", SUMMON, tokens["admin"], body) for _ in range(4)]
    )
    assert {status for status, _ in answers} <= {200, 409}
    assert any(status == 200 for status, _ in answers)
    settings, history = await _rows(db)
    assert len(settings) == 1
    assert len(history) == sum(1 for status, _ in answers if status == 200)
