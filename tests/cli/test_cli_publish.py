"""``pageant events publish`` and its ``--preview``, through the real entry point on a real
database of each dialect: the preview's table and JSON, a preview that writes nothing, and
the reason a publish gives to move or remove what people rely on."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from sqlalchemy import select, update

from pageant.db.engine import create_engine
from pageant.db.tables import event_definitions, event_run_log, event_runs, event_versions
from pageant.support.clock import SystemClock
from tests.cli.test_cli import pageant, query
from tests.cli.test_cli_staff import (  # noqa: F401 - fixtures used by name
    as_json,
    migrated_url,
    no_settings_in_the_environment,
    ok,
)
from tests.factories import publish_event
from tests.scheduling import MAIN, spec_with, weekly

BERLIN = "Europe/Berlin"


def seed_friday_event(url: str) -> Any:
    """An event published (version 1, never expanded) for Fridays at 20:00 in Berlin."""

    async def go() -> Any:
        engine = create_engine(url)
        try:
            friday = spec_with(weekly("friday", at="20:00"), MAIN)
            return await publish_event(
                engine, SystemClock().now(), friday, title="Wisp Night", timezone=BERLIN
            )
        finally:
            await engine.dispose()

    return asyncio.run(go())


def change(url: str, definition_id: int, **values: Any) -> None:
    async def go() -> None:
        engine = create_engine(url)
        try:
            async with engine.begin() as conn:
                await conn.execute(
                    update(event_definitions)
                    .where(event_definitions.c.id == definition_id)
                    .values(**values)
                )
        finally:
            await engine.dispose()

    asyncio.run(go())


def written(url: str) -> list[Any]:
    """Every run, version and log line: what a preview must leave as it was."""
    return [
        query(url, select(table).order_by(*table.primary_key.columns))
        for table in (event_runs, event_versions, event_run_log)
    ]


def test_publish_preview_shows_the_table_writes_nothing_and_a_reason_lets_it_through(
    migrated_url: str,  # noqa: F811 - the fixture imported above
) -> None:
    event = seed_friday_event(migrated_url)
    first = ok("events", "publish", event.slug, url=migrated_url)
    assert first.stdout == f"published {event.slug} as version 2\n"
    fridays = [
        r
        for r in query(migrated_url, select(event_runs).order_by(event_runs.c.scheduled_for))
        if r.status == "scheduled"
    ]
    assert len(fridays) == 2
    saturday = spec_with(weekly("saturday", at="19:00"), MAIN)
    change(migrated_url, event.id, spec=saturday)
    before = written(migrated_url)

    answer = as_json("events", "publish", event.slug, "--preview", url=migrated_url)
    text = ok("events", "publish", event.slug, "--preview", url=migrated_url).stdout

    assert answer["version"] == 3
    assert [r["run_id"] for r in answer["removed"]] == [r.id for r in fridays]
    assert len(answer["added"]) == 2
    for added in answer["added"]:
        local = datetime.fromisoformat(added["local_time"])
        assert (local.strftime("%A %H:%M"), added["run_id"]) == ("Saturday 19:00", None)
    lines = text.splitlines()
    assert lines[0] == (
        "publishing would make version 3: 2 added, 2 removed, 0 moved, 0 blacked out, "
        "0 newly in a DST gap or fold; 0 under way keep their version"
    )
    assert lines[1].split() == [
        "change",
        "run",
        "scope",
        "slot",
        "now",
        "would",
        "be",
        "held",
        "by",
    ]
    assert [line.split()[:2] for line in lines[2:]] == [
        ["removed", str(fridays[0].id)],
        ["removed", str(fridays[1].id)],
        ["added", "new"],
        ["added", "new"],
    ]
    assert written(migrated_url) == before  # the previews wrote nothing

    change(migrated_url, event.id, visibility="public")
    refused = pageant("events", "publish", event.slug, "--database-url", migrated_url)
    assert refused.exit_code == 1
    assert refused.stderr.startswith(
        f"error: publishing event {event.id} would move or remove occurrences people rely on"
    )
    assert f"  run {fridays[0].id} (" in refused.stderr
    assert written(migrated_url) == before
    public = ok("events", "publish", event.slug, "--preview", url=migrated_url).stdout
    assert public.splitlines()[-1].startswith("a reason is required")

    done = ok("events", "publish", event.slug, "--reason", "Saturdays now", url=migrated_url)
    assert done.stdout == f"published {event.slug} as version 3\n"
    lines_of = query(
        migrated_url,
        select(event_run_log.c.detail).where(
            event_run_log.c.run_id == fridays[0].id, event_run_log.c.kind == "run.status"
        ),
    )
    assert [line.detail["publish_reason"] for line in lines_of] == ["Saturdays now"]


def test_publish_flags_out_of_bounds_are_usage_errors(
    migrated_url: str,  # noqa: F811 - the fixture imported above
) -> None:
    event = seed_friday_event(migrated_url)
    for args in (
        ["--preview", "--occurrences", "0"],
        ["--preview", "--occurrences", "101"],
        ["--occurrences", "5"],
        ["--reason", "x" * 501],
    ):
        result = pageant("events", "publish", event.slug, *args, "--database-url", migrated_url)
        assert result.exit_code == 2, (args, result.output)
    for args in (["--preview", "--occurrences", "1"], ["--preview", "--occurrences", "100"]):
        ok("events", "publish", event.slug, *args, url=migrated_url)
