"""``pageant rehearse`` as a CI runs it: the firings file in either shape, and exit codes
that tell a plan that holds from one that stalls, pauses or overspends."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pageant.engine import Engine
from pageant.events import definitions
from pageant.hosting import Host
from pageant.runs.create import start_now
from pageant.support.clock import FakeClock
from pageant.support.settings import Settings
from tests.cli.test_cli import pageant
from tests.cli.test_cli_staff import migrated_url, no_settings_in_the_environment, seed
from tests.factories import announce, phase, publish_event, spec, step

# Fixtures shared with the staff command line's tests.
__all__ = ["migrated_url", "no_settings_in_the_environment"]

CAUGHT_TWICE = {
    "on": "wisps.caught",
    "where": {"var": "colour", "op": "eq", "value": "north"},
    "count": 2,
}
FIRINGS = [
    {"after": "12m", "trigger": "wisps.caught", "payload": {"colour": "north"}},
    {"after": "20m", "trigger": "wisps.caught", "payload": {"colour": "north"}},
]


def rehearse(url: str, *args: str) -> Any:
    return pageant("rehearse", *args, "--database-url", url)


def firings_file(tmp_path: Path, body: Any) -> str:
    path = tmp_path / f"firings-{len(list(tmp_path.iterdir()))}.json"
    path.write_text(body if isinstance(body, str) else json.dumps(body))
    return str(path)


def test_a_firings_file_is_read_as_the_object_or_the_list(migrated_url, tmp_path) -> None:
    (event,) = seed(migrated_url, ("Wisp hunt", spec(phase("hunt", advance=CAUGHT_TWICE))))
    for body in ({"firings": FIRINGS}, FIRINGS):
        done = rehearse(migrated_url, event.slug, "--firings", firings_file(tmp_path, body))
        assert done.exit_code == 0, done.output
        assert "run completed" in done.stdout


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ("{not json", "--firings is not JSON"),
        ({"firing": FIRINGS}, "found firing"),
        ({"firings": FIRINGS, "extra": 1}, "found extra"),
        ({"firings": "12m"}, "each firing an object"),
        ([1, 2], "each firing an object"),
    ],
)
def test_a_firings_file_of_another_shape_is_a_usage_error(
    migrated_url, tmp_path, body: Any, error: str
) -> None:
    (event,) = seed(migrated_url, ("Wisp hunt", spec(phase("hunt", advance=CAUGHT_TWICE))))
    refused = rehearse(migrated_url, event.slug, "--firings", firings_file(tmp_path, body))
    assert refused.exit_code == 2
    assert error in refused.stderr


def test_exit_codes_tell_a_plan_that_holds_from_one_that_does_not(migrated_url) -> None:
    holds, stalls, pauses, overspends = seed(
        migrated_url,
        ("Holds", spec(phase("p", announce("Gather")))),
        ("Stalls", spec(phase("p", advance=CAUGHT_TWICE))),
        # A change step is disabled until an admin enables it: refused, and by its risk the
        # run pauses; with on_failure skip the run completes past the refusal.
        ("Pauses", spec(phase("p", step("wisps.summon", count=3, colour="north")))),
        (
            "Overspends",
            spec(phase("p", step("wisps.summon", on_failure="skip", count=3, colour="north"))),
        ),
    )
    assert rehearse(migrated_url, holds.slug).exit_code == 0
    stalled = rehearse(migrated_url, stalls.slug)
    assert stalled.exit_code == 3 and "never opens" in stalled.stdout
    assert rehearse(migrated_url, pauses.slug).exit_code == 3
    refused = rehearse(migrated_url, overspends.slug)
    assert (
        refused.exit_code == 4 and "refused" in refused.stdout and "run completed" in refused.stdout
    )
    # The JSON answer exits the same way, so a CI may read both.
    assert rehearse(migrated_url, stalls.slug, "--json").exit_code == 3
    unknown = rehearse(migrated_url, "nowhere")
    assert unknown.exit_code == 1 and unknown.stderr.startswith("error:")


def test_a_cap_overspent_in_the_worst_case_exits_four(migrated_url) -> None:
    (event,) = seed(
        migrated_url,
        (
            "Wisp hunt",
            spec(phase("p", step("wisps.summon", on_failure="skip", count=20, colour="north"))),
        ),
    )
    assert (
        pageant("actions", "enable", "wisps.summon", "--database-url", migrated_url).exit_code == 0
    )
    within = rehearse(migrated_url, event.slug)
    assert within.exit_code == 0, within.output
    capped = pageant(
        "actions", "cap", "wisps.summon", "wisps.wisps", "19", "--database-url", migrated_url
    )
    assert capped.exit_code == 0, capped.output
    over = rehearse(migrated_url, event.slug)
    assert over.exit_code == 4 and "OVER THE CAP" in over.stdout


def test_rehearse_takes_params_as_a_run_would_have(migrated_url, tmp_path) -> None:
    declared = [
        {"name": "colour", "type": "string", "label": "Server", "required": True},
        {"name": "rounds", "type": "integer", "label": "Rounds", "required": False},
    ]
    where = {"var": "colour", "op": "eq", "value": {"param": "colour"}}
    (event,) = seed(
        migrated_url,
        (
            "Hunt",
            {
                **spec(
                    phase("hunt", advance={"on": "wisps.caught", "where": where, "count": 2}),
                ),
                "params": declared,
            },
        ),
    )
    refused = rehearse(migrated_url, event.slug)
    assert refused.exit_code == 1 and "params.colour: required (Server)" in refused.output
    unread = rehearse(migrated_url, event.slug, "--param", "colour=north", "--param", "rounds=x")
    assert unread.exit_code == 1 and "--param rounds: 'x' is not integer" in unread.output
    # The gate counts the rehearsed server's firings only: north's two complete the run.
    path = firings_file(tmp_path, FIRINGS)
    done = rehearse(migrated_url, event.slug, "--param", "colour=north", "--firings", path)
    assert done.exit_code == 0, done.output
    assert "run completed" in done.stdout
    stalled = rehearse(migrated_url, event.slug, "--param", "colour=south", "--firings", path)
    assert stalled.exit_code == 3, stalled.output


def test_the_countdown_is_printed_before_the_run(migrated_url) -> None:
    first = phase("muster", announce("Gather"))
    first["countdown"] = {"before": ["15m"], "legs": ["core.log"], "message": "In {remaining}"}
    (event,) = seed(migrated_url, ("Counted", spec(first)))
    done = rehearse(migrated_url, event.slug)
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    assert lines[1] == "     -900s  countdown on core.log: In 15 minutes"


def real_run_then_edit(url: str, hunt: dict[str, Any], edited: dict[str, Any]) -> tuple[Any, int]:
    """A published event of ``hunt``, run for real on an injected clock (north wisps caught
    at +10 and +25 minutes, counted by its gate), then ``edited`` published as version 2.
    Answers the event and the finished run's id."""

    async def go() -> tuple[Any, int]:
        clock = FakeClock(datetime(2027, 3, 1, 20, 0, tzinfo=UTC))
        host = Host(Settings(database_url=url), clock=clock)
        engine = Engine(host)
        try:
            event = await publish_event(host.db, clock.now(), hunt, title="Wisp hunt")
            run_id, _ = await start_now(host, event.id, actor="admin:test")
            await engine.tick()
            for minute in (10, 25):
                clock.set(datetime(2027, 3, 1, 20, minute, tzinfo=UTC))
                await host.emit("wisps.caught", {"colour": "north"}, actor="game:test")
                await engine.tick()
                await engine.tick()
            async with host.db.begin() as conn:
                await definitions.update_definition(
                    conn, event.id, {"spec": edited}, now=clock.now()
                )
                await definitions.publish_definition(
                    conn,
                    event.id,
                    host.registry,
                    now=clock.now(),
                    actor="admin:test",
                    horizon_days=14,
                )
            return event, run_id
        finally:
            await engine.stop()
            await host.close()

    return asyncio.run(go())


def test_rehearse_from_run_prints_the_replay_and_the_differences(migrated_url) -> None:
    hunt = spec(phase("hunt", advance=CAUGHT_TWICE), phase("after", announce("Done")))
    edited = spec(
        phase("hunt", advance={**CAUGHT_TWICE, "count": 1}), phase("after", announce("Done"))
    )
    event, run_id = real_run_then_edit(migrated_url, hunt, edited)
    done = rehearse(migrated_url, event.slug, "--from-run", str(run_id))
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    assert (
        f"replayed  1 of the 2 firings run {run_id} (version 1, completed) recorded, "
        "at their offsets from its start" in lines
    )
    assert (
        "differs   the new version's gate `hunt` would have opened 15 min earlier "
        "(at +10 min instead of +25 min)"
    ) in lines
    as_json = rehearse(
        migrated_url, event.slug, "--from-run", str(run_id), "--version", "1", "--json"
    )
    report = json.loads(as_json.stdout)
    assert report["replayed"]["firings"] == 2 and report["differences"] == []
    assert [f["after_seconds"] for f in report["firings"]] == [600, 1500]


def test_rehearse_from_run_refuses_what_it_cannot_replay(migrated_url, tmp_path) -> None:
    hunt = spec(phase("hunt", advance=CAUGHT_TWICE))
    event, run_id = real_run_then_edit(migrated_url, hunt, hunt)
    (other,) = seed(migrated_url, ("Other", hunt))
    elsewhere = rehearse(migrated_url, other.slug, "--from-run", str(run_id))
    assert elsewhere.exit_code == 1
    assert f"run {run_id} is a run of event {event.id}" in elsewhere.stderr
    unknown = rehearse(migrated_url, event.slug, "--from-run", "999999")
    assert unknown.exit_code == 1 and "no run 999999" in unknown.stderr
    both = rehearse(
        migrated_url,
        event.slug,
        "--from-run",
        str(run_id),
        "--firings",
        firings_file(tmp_path, FIRINGS),
    )
    assert both.exit_code == 2 and "give --firings or --from-run, not both" in both.stderr
    assert rehearse(migrated_url, event.slug, "--from-run", "0").exit_code == 2
