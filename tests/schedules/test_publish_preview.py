"""A publish's preview (``POST .../publish?preview=1``): what publishing would add, remove,
move, black out, put in a DST gap or fold, and keep — the publish's own reconcile, rolled
back — and the reason a publish must give to move or remove what people rely on. Through the
real API on both dialects, with time injected; every instant below is worked out by hand."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import select

from pageant.db import runlog
from pageant.db.log_kinds import LogKind
from pageant.db.tables import (
    event_definitions,
    event_run_log,
    event_run_steps,
    event_runs,
    event_versions,
)
from pageant.engine import Engine
from tests.api.test_events_api import EVENTS, call, create
from tests.factories import log_lines, phase, wait
from tests.scheduling import MAIN, runs_of, spec_with, utc, weekly

BERLIN = "Europe/Berlin"
# Monday 25 October 2027, 12:00Z: summer time (CEST, +02:00) ends on Sunday the 31st at
# 03:00, so the fortnight ahead (to Monday 8 November, 12:00Z) holds both offsets.
MONDAY = datetime(2027, 10, 25, 12, 0, tzinfo=UTC)
FRIDAY_20 = weekly("friday", at="20:00")
SATURDAY_19 = weekly("saturday", at="19:00")


@pytest.fixture
def before_the_october_change(clock: Any) -> None:
    clock.set(MONDAY)


async def rows_of_every_table(db: Any) -> dict[str, list[dict[str, Any]]]:
    """Every row a publish writes, to prove a preview wrote none."""
    out = {}
    async with db.connect() as conn:
        for table in (
            event_definitions,
            event_versions,
            event_runs,
            event_run_steps,
            event_run_log,
        ):
            rows = await conn.execute(select(table).order_by(*table.primary_key.columns))
            out[table.name] = [dict(r._mapping) for r in rows]
        await conn.rollback()
    return out


async def weekly_event(
    client: Any, tokens: dict[str, str], schedule: dict[str, Any], **fields: Any
) -> int:
    """An event published with ``schedule`` in Berlin: its runs of the fortnight made."""
    event = await create(
        client, tokens["admin"], timezone=BERLIN, spec=spec_with(schedule), **fields
    )
    status, data = await call(client, "POST", f"{EVENTS}/{event['id']}/publish", tokens["admin"])
    assert status == 200, data
    return event["id"]


async def edit_schedule(client: Any, tokens: dict[str, str], event_id: int, **body: Any) -> None:
    status, data = await call(client, "PUT", f"{EVENTS}/{event_id}", tokens["admin"], body)
    assert status == 200, data


async def preview(
    client: Any, tokens: dict[str, str], event_id: int, query: str = ""
) -> dict[str, Any]:
    path = f"{EVENTS}/{event_id}/publish?preview=1{query}"
    status, data = await call(client, "POST", path, tokens["admin"])
    assert status == 200, data
    return data


def occurrence(
    run_id: int | None, slot: str, at: str, local: str, status: str = "scheduled", **more: Any
) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "scope": "",
        "slot": slot,
        "scheduled_for": at,
        "local_time": local,
        "timezone": BERLIN,
        "status": status,
        "dst_adjusted": None,
        **more,
    }


# ── the hand-computed table ─────────────────────────────────────────────────


async def test_friday_20_to_saturday_19_across_the_october_change_is_the_hand_computed_diff(
    client, tokens, db, before_the_october_change
):
    event_id = await weekly_event(client, tokens, FRIDAY_20)
    fri_29, fri_5 = await runs_of(db, event_id)
    # Friday 29 October 20:00 is summer time (+02:00), Friday 5 November winter time (+01:00).
    assert [fri_29.scheduled_for, fri_5.scheduled_for] == [
        utc(2027, 10, 29, 18),
        utc(2027, 11, 5, 19),
    ]
    await edit_schedule(client, tokens, event_id, spec=spec_with(SATURDAY_19))
    untouched = await rows_of_every_table(db)

    answer = await preview(client, tokens, event_id)

    # A new day is another slot: the Fridays are superseded and the Saturdays made, not moved.
    friday_29 = ("2027-10-29T20:00", "2027-10-29T18:00:00Z", "2027-10-29T20:00:00+02:00")
    friday_5 = ("2027-11-05T20:00", "2027-11-05T19:00:00Z", "2027-11-05T20:00:00+01:00")
    saturday_30 = ("2027-10-30T19:00", "2027-10-30T17:00:00Z", "2027-10-30T19:00:00+02:00")
    saturday_6 = ("2027-11-06T19:00", "2027-11-06T18:00:00Z", "2027-11-06T19:00:00+01:00")
    assert answer["event_id"] == event_id and answer["version"] == 2
    assert answer["removed"] == [
        occurrence(fri_29.id, *friday_29, status="cancelled", held_by=[]),
        occurrence(fri_5.id, *friday_5, status="cancelled", held_by=[]),
    ]
    assert answer["added"] == [
        occurrence(None, *saturday_30, held_by=[]),
        occurrence(None, *saturday_6, held_by=[]),
    ]
    assert answer["moved"] == answer["blacked_out"] == answer["dst"] == answer["kept"] == []
    assert answer["counts"] == {
        "added": 2,
        "removed": 2,
        "moved": 0,
        "blacked_out": 0,
        "dst": 0,
        "kept": 0,
    }
    assert answer["reason_required"] is False
    assert answer["upcoming"] == [
        {
            "scope": "",
            "before": [
                occurrence(fri_29.id, *friday_29, held_by=[]),
                occurrence(fri_5.id, *friday_5, held_by=[]),
            ],
            "after": [
                occurrence(None, *saturday_30, held_by=[]),
                occurrence(None, *saturday_6, held_by=[]),
            ],
        }
    ]
    # The preview published nothing: every row as it was.
    assert await rows_of_every_table(db) == untouched

    # And the publish does what its preview said.
    status, data = await call(client, "POST", f"{EVENTS}/{event_id}/publish", tokens["admin"])
    assert status == 200, data
    rows = {r.id: r for r in await runs_of(db, event_id)}
    assert (rows[fri_29.id].status, rows[fri_29.id].cancel_reason) == ("cancelled", "superseded")
    assert (rows[fri_5.id].status, rows[fri_5.id].cancel_reason) == ("cancelled", "superseded")
    assert sorted(r.scheduled_for for r in rows.values() if r.status == "scheduled") == [
        utc(2027, 10, 30, 17),
        utc(2027, 11, 6, 18),
    ]


async def test_a_new_zone_moves_each_occurrence_with_its_old_and_new_times(
    client, tokens, db, before_the_october_change
):
    event_id = await weekly_event(client, tokens, FRIDAY_20)
    fri_29, fri_5 = await runs_of(db, event_id)
    await edit_schedule(client, tokens, event_id, timezone="Europe/London")

    answer = await preview(client, tokens, event_id)

    # 20:00 in London: BST (+01:00) on the 29th, GMT (+00:00) on 5 November.
    assert answer["moved"] == [
        {
            "run_id": fri_29.id,
            "scope": "",
            "slot": "2027-10-29T20:00",
            "from": "2027-10-29T18:00:00Z",
            "to": "2027-10-29T19:00:00Z",
            "from_local": "2027-10-29T20:00:00+02:00",
            "to_local": "2027-10-29T20:00:00+01:00",
            "from_timezone": BERLIN,
            "timezone": "Europe/London",
            "dst_adjusted": None,
            "held_by": [],
        },
        {
            "run_id": fri_5.id,
            "scope": "",
            "slot": "2027-11-05T20:00",
            "from": "2027-11-05T19:00:00Z",
            "to": "2027-11-05T20:00:00Z",
            "from_local": "2027-11-05T20:00:00+01:00",
            "to_local": "2027-11-05T20:00:00+00:00",
            "from_timezone": BERLIN,
            "timezone": "Europe/London",
            "dst_adjusted": None,
            "held_by": [],
        },
    ]
    assert answer["added"] == answer["removed"] == []


async def test_an_occurrence_put_in_the_october_fold_is_listed_under_dst(
    client, tokens, db, before_the_october_change
):
    event_id = await weekly_event(client, tokens, weekly("sunday", at="04:00"))
    await edit_schedule(client, tokens, event_id, spec=spec_with(weekly("sunday", at="02:30")))

    answer = await preview(client, tokens, event_id)

    # 02:30 on Sunday 31 October happens twice; the first (summer time, 00:30Z) is taken.
    fold = {"kind": "fold", "shift_minutes": 0}
    assert answer["dst"] == [
        occurrence(
            None,
            "2027-10-31T02:30",
            "2027-10-31T00:30:00Z",
            "2027-10-31T02:30:00+02:00",
            dst_adjusted=fold,
            held_by=[],
        )
    ]
    assert [a["scheduled_for"] for a in answer["added"]] == [
        "2027-10-31T00:30:00Z",
        "2027-11-07T01:30:00Z",
    ]


async def test_the_preview_of_a_first_publish_adds_every_occurrence_and_leaves_a_draft(
    client, tokens, db, before_the_october_change
):
    event = await create(client, tokens["admin"], timezone=BERLIN, spec=spec_with(FRIDAY_20))
    untouched = await rows_of_every_table(db)

    answer = await preview(client, tokens, event["id"])

    assert answer["version"] == 1
    assert [(a["run_id"], a["scheduled_for"]) for a in answer["added"]] == [
        (None, "2027-10-29T18:00:00Z"),
        (None, "2027-11-05T19:00:00Z"),
    ]
    assert answer["upcoming"] == [
        {"scope": "", "before": [], "after": answer["added"]},
    ]
    assert await rows_of_every_table(db) == untouched
    status, data = await call(client, "GET", f"{EVENTS}/{event['id']}", tokens["admin"])
    assert (status, data["state"], data["current_version"]) == (200, "draft", None)


# ── what runs keep ──────────────────────────────────────────────────────────


async def test_a_run_under_way_is_reported_as_kept_on_its_version(
    client, tokens, host, db, before_the_october_change
):
    long_wait = phase("main", wait(3600))
    event = await create(
        client, tokens["admin"], timezone=BERLIN, spec=spec_with(FRIDAY_20, long_wait)
    )
    path = f"{EVENTS}/{event['id']}"
    assert (await call(client, "POST", f"{path}/publish", tokens["admin"]))[0] == 200
    assert (await call(client, "POST", f"{path}/verify", tokens["admin"]))[0] == 200
    status, run = await call(client, "POST", f"{path}/runs", tokens["admin"])
    assert status == 201, run
    engine = Engine(host)
    try:
        await engine.tick()
    finally:
        await engine.stop()
    (started,) = [r for r in await runs_of(db, event["id"]) if r.id == run["id"]]
    await edit_schedule(client, tokens, event["id"], spec=spec_with(SATURDAY_19, long_wait))

    answer = await preview(client, tokens, event["id"])

    (kept,) = answer["kept"]
    assert (kept["run_id"], kept["status"], kept["version"]) == (run["id"], "running", 1)
    assert kept["scheduled_for"] == "2027-10-25T12:00:00Z"
    status, _ = await call(client, "POST", f"{path}/publish", tokens["admin"])
    assert status == 200
    (row,) = [r for r in await runs_of(db, event["id"]) if r.id == run["id"]]
    assert (row.status, row.version_id) == ("running", started.version_id)


# ── per scope ───────────────────────────────────────────────────────────────


async def test_each_list_shows_the_first_n_occurrences_of_each_scope(
    client, tokens, db, before_the_october_change
):
    declared = [{"name": "server", "type": "string", "label": "Server", "required": True}]
    sets = [{"server": "eu-1"}, {"server": "eu-2"}]
    body = {"params": declared, "schedule": {**FRIDAY_20, "params": sets}, "phases": [MAIN]}
    event = await create(client, tokens["admin"], timezone=BERLIN, spec=body)
    assert (await call(client, "POST", f"{EVENTS}/{event['id']}/publish", tokens["admin"]))[
        0
    ] == 200
    moved_on = {**body, "schedule": {**SATURDAY_19, "params": sets}}
    await edit_schedule(client, tokens, event["id"], spec=moved_on)

    answer = await preview(client, tokens, event["id"], "&occurrences=1")

    assert [(o["scope"], o["scheduled_for"]) for o in answer["removed"]] == [
        ("server=eu-1", "2027-10-29T18:00:00Z"),
        ("server=eu-2", "2027-10-29T18:00:00Z"),
    ]
    assert [(o["scope"], o["scheduled_for"]) for o in answer["added"]] == [
        ("server=eu-1", "2027-10-30T17:00:00Z"),
        ("server=eu-2", "2027-10-30T17:00:00Z"),
    ]
    assert (answer["counts"]["removed"], answer["counts"]["added"]) == (4, 4)
    assert [(s["scope"], len(s["before"]), len(s["after"])) for s in answer["upcoming"]] == [
        ("server=eu-1", 1, 1),
        ("server=eu-2", 1, 1),
    ]
    everything = await preview(client, tokens, event["id"], "&occurrences=100")
    assert len(everything["removed"]) == len(everything["added"]) == 4


# ── the reason ──────────────────────────────────────────────────────────────


async def test_a_public_events_occurrences_are_not_removed_without_a_reason(
    client, tokens, db, before_the_october_change
):
    event_id = await weekly_event(client, tokens, FRIDAY_20, visibility="public")
    fri_29, fri_5 = await runs_of(db, event_id)
    await edit_schedule(client, tokens, event_id, spec=spec_with(SATURDAY_19))

    answer = await preview(client, tokens, event_id)
    assert answer["reason_required"] is True
    assert [r["held_by"] for r in answer["removed"]] == [["public"], ["public"]]

    untouched = await rows_of_every_table(db)
    path = f"{EVENTS}/{event_id}/publish"
    status, data = await call(client, "POST", path, tokens["admin"])
    assert status == 409, data
    assert data["error"]["code"] == "conflict"
    assert "reason" in data["error"]["message"]
    assert data["error"]["details"] == [
        f"run {fri_29.id} (2027-10-29T20:00:00+02:00): the publish would remove it, and it is "
        "on the public calendar",
        f"run {fri_5.id} (2027-11-05T20:00:00+01:00): the publish would remove it, and it is "
        "on the public calendar",
    ]
    assert await rows_of_every_table(db) == untouched

    why = "The tournament moved to Saturdays"
    status, data = await call(client, "POST", path, tokens["admin"], {"reason": why})
    assert status == 200, data
    assert data["current_version"]["number"] == 2
    for run in (fri_29, fri_5):
        (line,) = await log_lines(db, run.id, "run.status")
        assert (line.detail["reason"], line.detail["publish_reason"]) == ("superseded", why)


async def test_a_staff_event_with_nothing_confirmed_or_announced_needs_no_reason(
    client, tokens, db, before_the_october_change
):
    event_id = await weekly_event(client, tokens, FRIDAY_20)
    await edit_schedule(client, tokens, event_id, spec=spec_with(SATURDAY_19))
    status, data = await call(client, "POST", f"{EVENTS}/{event_id}/publish", tokens["admin"])
    assert status == 200, data
    superseded = [r for r in await runs_of(db, event_id) if r.status == "cancelled"]
    assert len(superseded) == 2
    for run in superseded:
        (line,) = await log_lines(db, run.id, "run.status")
        assert "publish_reason" not in line.detail


@pytest.mark.parametrize(
    ("kind", "word"), [(LogKind.CONTROL_CONFIRM, "confirmed"), (LogKind.ANNOUNCE, "announced")]
)
async def test_moving_an_occurrence_whose_log_records_a_confirmation_or_an_announcement_asks_why(
    client, tokens, db, before_the_october_change, kind, word
):
    event_id = await weekly_event(client, tokens, FRIDAY_20)
    fri_29, fri_5 = await runs_of(db, event_id)
    # What a person's confirmation or a sent announcement leaves in a run's log.
    async with db.begin() as conn:
        await runlog.write(conn, fri_29.id, kind, at=MONDAY, detail={}, actor="admin:test-admin")
    await edit_schedule(client, tokens, event_id, timezone="Europe/London")

    answer = await preview(client, tokens, event_id)
    assert [(m["run_id"], m["held_by"]) for m in answer["moved"]] == [
        (fri_29.id, [word]),
        (fri_5.id, []),
    ]
    assert answer["reason_required"] is True

    path = f"{EVENTS}/{event_id}/publish"
    status, data = await call(client, "POST", path, tokens["admin"])
    assert status == 409, data
    (detail,) = data["error"]["details"]
    assert detail.startswith(f"run {fri_29.id} (2027-10-29T20:00:00+02:00): the publish would move")
    status, data = await call(client, "POST", path, tokens["admin"], {"reason": "Now in London"})
    assert status == 200, data
    for run in (fri_29, fri_5):
        (line,) = await log_lines(db, run.id, "run.moved")
        assert line.detail["publish_reason"] == "Now in London"


# ── bad input ───────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("query", "body", "detail"),
    [
        ("?preview=yes", None, "query.preview: expected 1 or 0 (true or false); got 'yes'"),
        (
            "?preview=1&occurrences=0",
            None,
            "query.occurrences: expected a whole number from 1 to 100; got '0'",
        ),
        (
            "?preview=1&occurrences=101",
            None,
            "query.occurrences: expected a whole number from 1 to 100; got '101'",
        ),
        (
            "?preview=1&occurrences=ten",
            None,
            "query.occurrences: expected a whole number from 1 to 100; got 'ten'",
        ),
        ("?occurrences=5", None, "query.occurrences: only read with preview=1"),
        ("", {"reason": "  "}, "body.reason: "),
        ("", {"reason": "x" * 501}, "body.reason: "),
        ("", {"why": "because"}, "body.why: "),
    ],
)
async def test_bad_query_params_and_bodies_are_400s_naming_them_and_change_nothing(
    client, tokens, db, before_the_october_change, query, body, detail
):
    event_id = await weekly_event(client, tokens, FRIDAY_20, visibility="public")
    await edit_schedule(client, tokens, event_id, spec=spec_with(SATURDAY_19))
    untouched = await rows_of_every_table(db)
    path = f"{EVENTS}/{event_id}/publish{query}"
    status, data = await call(client, "POST", path, tokens["admin"], body)
    assert status == 400, data
    (given,) = data["error"]["details"]
    assert given.startswith(detail), given
    assert await rows_of_every_table(db) == untouched


async def test_the_bounds_of_occurrences_and_of_a_reason_are_accepted(
    client, tokens, db, before_the_october_change
):
    event_id = await weekly_event(client, tokens, FRIDAY_20, visibility="public")
    await edit_schedule(client, tokens, event_id, spec=spec_with(SATURDAY_19))
    assert len((await preview(client, tokens, event_id, "&occurrences=1"))["removed"]) == 1
    assert len((await preview(client, tokens, event_id, "&occurrences=100"))["removed"]) == 2
    status, data = await call(
        client,
        "POST",
        f"{EVENTS}/{event_id}/publish?preview=0",
        tokens["admin"],
        {"reason": "x" * 500},
    )
    assert status == 200, data


async def test_a_preview_is_refused_as_the_publish_would_be(client, tokens, db):
    event = await create(client, tokens["admin"])
    status, data = await call(client, "POST", f"{EVENTS}/{event['id']}/archive", tokens["admin"])
    assert status == 200, data
    status, data = await call(
        client, "POST", f"{EVENTS}/{event['id']}/publish?preview=1", tokens["admin"]
    )
    assert status == 409, data
    assert (
        data["error"]["message"]
        == f"event {event['id']} is archived; an archived event cannot be published"
    )
    status, data = await call(client, "POST", f"{EVENTS}/999999/publish?preview=1", tokens["admin"])
    assert status == 404, data
    status, data = await call(
        client, "POST", f"{EVENTS}/{event['id']}/publish?preview=1", tokens["editor"]
    )
    assert status == 403, data


# ── the document ────────────────────────────────────────────────────────────


async def test_the_openapi_document_describes_the_preview_the_route_serves(
    client, tokens, db, before_the_october_change
):
    response = await client.get("/api/v1/openapi.json")
    doc = await response.json()
    operation = doc["paths"]["/api/v1/admin/events/{id}/publish"]["post"]
    params = {p["name"]: p for p in operation["parameters"] if p["in"] == "query"}
    assert params["occurrences"]["schema"] == {"type": "integer", "minimum": 1, "maximum": 100}
    assert set(params["preview"]["schema"]["enum"]) == {"0", "1", "false", "true"}
    body = operation["requestBody"]["content"]["application/json"]["schema"]
    assert set(body["properties"]) == {"reason"} and body["additionalProperties"] is False
    schemas = doc["components"]["schemas"]
    answers = operation["responses"]["200"]["content"]["application/json"]["schema"]["anyOf"]
    named = {ref["$ref"].rsplit("/", 1)[-1] for ref in answers}
    assert named == {"EventOut", "PublishPreview"}

    event_id = await weekly_event(client, tokens, FRIDAY_20)
    await edit_schedule(client, tokens, event_id, timezone="Europe/London")
    answer = await preview(client, tokens, event_id)
    assert set(schemas["PublishPreview"]["properties"]) == set(answer)
    assert set(schemas["PreviewMove"]["properties"]) == set(answer["moved"][0])
    assert set(schemas["PreviewScope"]["properties"]) == set(answer["upcoming"][0])
    assert set(schemas["PreviewOccurrence"]["properties"]) == set(
        answer["upcoming"][0]["before"][0]
    )


# ── blackouts ────────────────────────────────────────────────────────────────


async def test_a_move_into_a_blackout_is_listed_as_newly_blacked_out(
    client, tokens, db, before_the_october_change
):
    event_id = await weekly_event(client, tokens, FRIDAY_20)
    saturday_nights = {
        "slug": "saturday-nights",
        "name": "Saturday nights",
        "timezone": BERLIN,
        "periods": [{"kind": "weekly", "days": ["saturday"], "start": "18:00", "end": "23:00"}],
    }
    status, data = await call(
        client, "POST", "/api/v1/admin/blackouts", tokens["admin"], saturday_nights
    )
    assert status == 201, data
    moved = {**spec_with(SATURDAY_19), "blackouts": ["saturday-nights"]}
    await edit_schedule(client, tokens, event_id, spec=moved)
    untouched = await rows_of_every_table(db)

    answer = await preview(client, tokens, event_id)

    # Both Saturdays fall inside the blackout: they would be made blacked out, never run.
    assert [(i["slot"], i["status"]) for i in answer["blacked_out"]] == [
        ("2027-10-30T19:00", "blacked_out"),
        ("2027-11-06T19:00", "blacked_out"),
    ]
    assert answer["counts"]["blacked_out"] == 2
    assert await rows_of_every_table(db) == untouched
