"""The staff's daily command line — events, runs, steps, fire, tokens — through the real entry
point, on a real database of each dialect, with the real engine advancing the runs."""

from __future__ import annotations

import asyncio
import getpass
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from pageant.db.engine import create_engine
from pageant.db.tables import event_run_log
from pageant.engine import Engine
from pageant.hosting import Host
from pageant.support.clock import SystemClock
from pageant.support.settings import ENV_PREFIX, Settings
from tests.cli.test_cli import pageant, pageant_process, query
from tests.databases import empty_database
from tests.factories import announce, phase, publish_event, spec, step, wait

ME = f"cli:{getpass.getuser()}"
CUE = step("core.cue", message="Open the arena gate")


@pytest.fixture(autouse=True)
def no_settings_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The commands read PAGEANT_* settings; the caller's own must not leak in."""
    for name in [*Settings.model_fields, "config"]:
        monkeypatch.delenv(ENV_PREFIX + name.upper(), raising=False)


@pytest.fixture
def migrated_url(dialect: str, tmp_path: Path) -> Iterator[str]:
    """A database of its own, migrated by ``pageant db upgrade``."""
    with empty_database(dialect, tmp_path) as url:
        assert pageant("db", "upgrade", "--database-url", url).exit_code == 0
        yield url


def seed(url: str, *specs: tuple[str, dict[str, Any]]) -> list[Any]:
    """Publish one event per (title, spec); answers them."""

    async def go() -> list[Any]:
        engine = create_engine(url)
        try:
            now = SystemClock().now()
            return [await publish_event(engine, now, s, title=title) for title, s in specs]
        finally:
            await engine.dispose()

    return asyncio.run(go())


def tick(url: str, times: int = 1) -> None:
    """Let the real engine advance every due run, ``times`` times."""

    async def go() -> None:
        host = Host(Settings(database_url=url))
        engine = Engine(host)
        try:
            for _ in range(times):
                await engine.tick()
        finally:
            await engine.stop()
            await host.close()

    asyncio.run(go())


def ok(*args: str, url: str) -> Any:
    result = pageant(*args, "--database-url", url)
    assert result.exit_code == 0, result.output
    return result


def as_json(*args: str, url: str) -> Any:
    return json.loads(ok(*args, "--json", url=url).stdout)


# ── settings help ─────────────────────────────────────────────────────────────


def test_settings_help_is_shown_once_under_pageant_help() -> None:
    top = pageant("--help").stdout
    assert "--database-url" in top and "PAGEANT_DATABASE_URL" in top
    for command in (("serve",), ("runs", "list"), ("token", "create"), ("fire",)):
        text = pageant(*command, "--help").stdout
        assert "--database-url" not in text and "--poll-seconds" not in text, command
        assert "--config" in text


# ── events ────────────────────────────────────────────────────────────────────


def test_events_list_and_show(migrated_url: str) -> None:
    muster, _ = seed(
        migrated_url,
        ("Champion muster", spec(phase("gather", announce("Gather")))),
        ("Boss rush", spec(phase("rush", CUE))),
    )
    listed = ok("events", "list", url=migrated_url).stdout
    assert "Champion muster" in listed and "Boss rush" in listed
    items = as_json("events", "list", url=migrated_url)["items"]
    assert [item["title"] for item in items] == ["Champion muster", "Boss rush"]
    shown = ok("events", "show", muster.slug, url=migrated_url).stdout
    assert shown.startswith(f"Champion muster ({muster.slug}, id {muster.id})")
    assert "phase gather: core.announce" in shown
    assert as_json("events", "show", str(muster.id), url=migrated_url)["slug"] == muster.slug
    missing = pageant("events", "show", "nowhere", "--database-url", migrated_url)
    assert missing.exit_code == 1
    assert missing.stderr.startswith("error: no event has the slug 'nowhere'")


# ── runs ──────────────────────────────────────────────────────────────────────


def test_runs_start_list_and_show_across_events(migrated_url: str) -> None:
    a, b, c = seed(
        migrated_url,
        ("Muster", spec(phase("p", CUE))),
        ("Boss rush", spec(phase("p", CUE))),
        ("Lantern walk", spec(phase("p", announce("lit")))),
    )
    started = ok("runs", "start", a.slug, url=migrated_url).stdout
    assert started.startswith("run ") and f"of {a.slug} started (scheduled)" in started
    north = as_json("runs", "start", str(b.id), "--scope", "north", url=migrated_url)
    as_json("runs", "start", c.slug, url=migrated_url)
    tick(migrated_url)

    listed = as_json("runs", "list", "--waiting", "parked", url=migrated_url)
    assert [item["definition_title"] for item in listed["items"]] == ["Boss rush", "Muster"]
    assert listed["summary"]["waiting_on_person"] == 2
    text = ok("runs", "list", url=migrated_url).stdout
    assert text.splitlines()[0] == "2 running, 2 waiting on a person, 0 stalled, 0 degraded"
    assert "waiting for a person to confirm" in text
    scoped = as_json("runs", "list", "--scope", "north", url=migrated_url)["items"]
    assert [item["id"] for item in scoped] == [north["id"]]
    done = as_json("runs", "list", "--status", "completed", "--event", c.slug, url=migrated_url)
    assert [item["definition_slug"] for item in done["items"]] == [c.slug]

    shown = ok("runs", "show", str(north["id"]), url=migrated_url).stdout
    assert "Steps" in shown and "waiting for a person to confirm" in shown
    console = as_json("runs", "show", str(north["id"]), url=migrated_url)
    assert set(console) == {
        "run",
        "phases",
        "steps",
        "gate",
        "participants",
        "results",
        "budget",
        "resources",
        "cleanup_summary",
        "log",
    }

    bad = pageant("runs", "list", "--status", "asleep", "--database-url", migrated_url)
    assert bad.exit_code == 1
    assert "--status: 'asleep' is not one of" in bad.stderr
    gone = pageant("runs", "show", "999", "--database-url", migrated_url)
    assert (gone.exit_code, gone.stderr) == (1, "error: no such run: 999\n")


def test_runs_start_takes_params_read_as_their_declared_types(migrated_url: str) -> None:
    declared = [
        {"name": "colour", "type": "string", "label": "Server", "required": True},
        {"name": "rounds", "type": "integer", "label": "Rounds", "required": False},
    ]
    (event,) = seed(
        migrated_url,
        (
            "Hunt",
            {
                **spec(phase("p", step("core.announce", leg="core.log", message="go"))),
                "params": declared,
            },
        ),
    )
    refused = pageant(
        "runs",
        "start",
        str(event.id),
        "--param",
        "colour=north",
        "--param",
        "rounds=x",
        "--database-url",
        migrated_url,
    )
    assert refused.exit_code != 0 and "--param rounds: 'x' is not integer" in refused.output
    run = as_json(
        "runs",
        "start",
        str(event.id),
        "--param",
        "colour=north",
        "--param",
        "rounds=5",
        url=migrated_url,
    )
    assert run["params"] == {"colour": "north", "rounds": 5}
    listed = ok("runs", "list", url=migrated_url).stdout
    assert "colour=north rounds=5" in listed


def test_verify_takes_params_as_a_run_would_have(migrated_url: str) -> None:
    declared = [{"name": "colour", "type": "string", "label": "Server", "required": True}]
    message = {"param": "colour"}
    (event,) = seed(
        migrated_url,
        (
            "Hunt",
            {
                **spec(phase("p", step("core.announce", leg="core.log", message=message))),
                "params": declared,
            },
        ),
    )
    refused = pageant("verify", str(event.id), "--database-url", migrated_url)
    assert refused.exit_code != 0 and "params.colour: required (Server)" in refused.output
    verified = ok("verify", str(event.id), "--param", "colour=north", url=migrated_url)
    assert verified.stdout.startswith(f"event {event.id} version 1: verified")


def test_run_and_step_controls_act_as_the_cli_user(migrated_url: str) -> None:
    (event,) = seed(migrated_url, ("Boss rush", spec(phase("p", CUE, CUE, announce("end")))))
    run = as_json("runs", "start", event.slug, url=migrated_url)
    tick(migrated_url)
    console = as_json("runs", "show", str(run["id"]), url=migrated_url)
    first, second = console["steps"][0]["id"], console["steps"][1]["id"]

    assert ok("steps", "confirm", str(first), "--note", "gate open", url=migrated_url).stdout == (
        f"step {first} (Cue a person) is done\n"
    )
    tick(migrated_url)
    skipped = as_json("steps", "skip", str(second), "--reason", "no need", url=migrated_url)
    assert skipped["status"] == "skipped"
    again = pageant("steps", "skip", str(second), "--database-url", migrated_url)
    assert again.exit_code == 1 and again.stderr.startswith("error: ")

    (other,) = seed(migrated_url, ("Muster", spec(phase("p", wait(600), announce("x")))))
    live = as_json("runs", "start", str(other.id), url=migrated_url)
    tick(migrated_url)
    paused = ok("runs", "pause", str(live["id"]), "--reason", "lunch", url=migrated_url)
    assert paused.stdout == f"run {live['id']} is paused\n"
    assert as_json("runs", "resume", str(live["id"]), url=migrated_url)["status"] == "running"
    no_reason = pageant("runs", "cancel", str(live["id"]), "--database-url", migrated_url)
    assert no_reason.exit_code == 2 and "--reason" in no_reason.stderr
    cancelled = ok("runs", "cancel", str(live["id"]), "--reason", "storm", url=migrated_url)
    assert cancelled.stdout == f"run {live['id']} is cancelled\n"

    lines = query(migrated_url, select(event_run_log.c.kind, event_run_log.c.actor))
    controls = {(kind, actor) for kind, actor in lines if kind.startswith("control.")}
    assert controls == {
        ("control.confirm", ME),
        ("control.skip", ME),
        ("control.pause", ME),
        ("control.resume", ME),
        ("control.cancel", ME),
    }
    created = {actor for kind, actor in lines if kind == "run.created"}
    assert created == {ME}


def test_runs_show_follow_shows_a_live_run_to_completion(migrated_url: str) -> None:
    (event,) = seed(
        migrated_url,
        ("Muster", spec(phase("gather", announce("Gather"), wait(1)), phase("go", announce("Go")))),
    )
    run = as_json("runs", "start", event.slug, url=migrated_url)
    stop = threading.Event()

    def engine() -> None:
        async def go() -> None:
            host = Host(Settings(database_url=migrated_url))
            ticking = Engine(host)
            try:
                while not stop.is_set():
                    await ticking.tick()
                    await asyncio.sleep(0.1)
            finally:
                await ticking.stop()
                await host.close()

        asyncio.run(go())

    worker = threading.Thread(target=engine)
    worker.start()
    try:
        result = pageant(
            "runs", "show", str(run["id"]), "--follow", "--interval", "0.1",
            "--database-url", migrated_url,
        )  # fmt: skip
    finally:
        stop.set()
        worker.join(timeout=30)
    assert result.exit_code == 0, result.output
    out = result.stdout
    # The log arrives line by line as the run goes, and the console closes it.
    made, entered = out.index("The run was made by hand"), out.index("Phase “Gather” began")
    assert made < entered < out.index("The run completed")
    assert "run.created" not in out and "phase.entered" not in out
    assert out.count("Gather") >= 2  # once as it happened, once in the closing console
    assert "Log (" in out


# ── fire ──────────────────────────────────────────────────────────────────────


def test_fire_counts_for_a_waiting_gate(migrated_url: str) -> None:
    gate = {"on": "wisps.caught", "where": {"var": "weight", "op": "gt", "value": 2}, "count": 1}
    (event,) = seed(
        migrated_url, ("Hunt", spec(phase("hunt", announce("Go"), advance=gate), phase("end")))
    )
    as_json("runs", "start", event.slug, url=migrated_url)
    tick(migrated_url)
    light = ok("fire", "wisps.caught", "colour=north", "weight=1.5", url=migrated_url)
    assert light.stdout == "wisps.caught: counted by 0 gate(s), closed 0\n"
    heavy = as_json("fire", "wisps.caught", "colour=north", "weight=2.25", url=migrated_url)
    assert heavy == {"gates_matched": 1, "gates_closed": 1}
    evaluated = query(
        migrated_url,
        select(event_run_log.c.actor).where(event_run_log.c.kind == "condition.evaluated"),
    )
    assert {row.actor for row in evaluated} == {ME}


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("wisps.caught", "weight=heavy"), "payload.weight: 'heavy' is not a number"),
        (("wisps.caught", "weight"), "'weight': expected KEY=VALUE"),
        (("wisps.caught", "size=3"), "size"),
        (("nobody.nothing",), "error: no such trigger: 'nobody.nothing'"),
    ],
)
def test_fire_refuses_what_does_not_fit(migrated_url: str, args: tuple[str, ...], error: str):
    result = pageant("fire", *args, "--database-url", migrated_url)
    assert result.exit_code == 1
    assert error in result.stderr


# ── tokens ────────────────────────────────────────────────────────────────────


def test_token_list_and_revoke_never_show_a_token(migrated_url: str) -> None:
    first = ok("token", "create", "--role", "moderator", "--name", "night", url=migrated_url)
    token = first.stdout.strip()
    made = as_json(
        "token", "create", "--role", "game", "--name", "shard", "--expires", "30d", url=migrated_url
    )
    assert made["token"].startswith("pgt_") and made["created_by"] == ME
    ok("token", "create", "--role", "game", "--name", "shard", url=migrated_url)

    listed = ok("token", "list", url=migrated_url).stdout
    assert "night" in listed and token not in listed
    items = as_json("token", "list", url=migrated_url)["items"]
    assert [(i["name"], i["created_by"]) for i in items] == [
        ("night", ME),
        ("shard", ME),
        ("shard", ME),
    ]
    assert items[1]["expires_at"] is not None and items[2]["expires_at"] is None
    assert all("token" not in item and "token_hash" not in item for item in items)

    shared = pageant("token", "revoke", "shard", "--database-url", migrated_url)
    assert shared.exit_code == 1
    assert f"ids {items[1]['id']}, {items[2]['id']}" in shared.stderr
    revoked = ok("token", "revoke", "night", url=migrated_url)
    assert revoked.stdout == f"token {items[0]['id']} (night, moderator) revoked\n"
    by_id = as_json("token", "revoke", str(items[1]["id"]), url=migrated_url)
    assert (by_id["status"], by_id["revoked_by"]) == ("revoked", ME)
    assert [i["name"] for i in as_json("token", "list", url=migrated_url)["items"]] == ["shard"]
    every = as_json("token", "list", "--revoked", url=migrated_url)["items"]
    assert len(every) == 3
    twice = pageant("token", "revoke", str(items[0]["id"]), "--database-url", migrated_url)
    assert twice.exit_code == 1 and "already revoked" in twice.stderr
    bad = pageant("token", "create", "--role", "game", "--name", "x", "--expires", "soon")
    assert bad.exit_code == 2 and "'soon' is not a duration" in bad.stderr


def test_the_console_script_lists_runs(migrated_url: str) -> None:
    done = pageant_process("runs", "list", "--json", env={"PAGEANT_DATABASE_URL": migrated_url})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["items"] == []
