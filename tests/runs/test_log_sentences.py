"""A run-log record reads as a sentence for a person, on every surface, from one renderer
(:mod:`pageant.runs.sentences`): every kind the engine writes, with the details the engine
wrote; the step's label first; a firing's players; times drawn on the page's clock; and the
records as stored behind one switch for the whole log."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pageant.db.log_kinds import LogKind
from pageant.runs import sentences
from pageant.runs.console import console
from pageant.runs.console_text import render_console
from pageant.runs.create import start_now
from tests.api.test_events_api import EVENTS, call
from tests.console.test_console import sign_in
from tests.engine.test_rehearse import ACTIONS, THREE_PHASES, _event
from tests.factories import announce, phase, publish_event, spec, step

ROOT = Path(__file__).resolve().parents[2]

#: Tests of the engine, the gates, the ledger, the controls and the schedules that between
#: them make the engine write every kind of record (the test below checks that they do).
WRITERS_OF_EVERY_KIND = [
    "tests/gates/test_gates.py::test_a_gate_opens_when_its_phase_is_entered",
    "tests/gates/test_gates.py::test_opening_a_gate_twice_keeps_its_clock_and_tally",
    "tests/gates/test_gates.py::test_an_after_gate_holds_until_its_deadline_and_not_a_moment_less",
    "tests/gates/test_gates.py::test_a_held_gate_stalls_the_run_once_at_stall_seconds",
    "tests/gates/test_gates.py::test_a_deadline_that_passed_while_steps_ran_lets_the_phase_go_at_once",
    "tests/gates/test_gates.py::test_a_firing_counts_only_for_open_gates_of_live_runs",
    "tests/runs/test_controls.py::test_pause_stops_a_running_run_and_says_who",
    "tests/runs/test_controls.py::test_resume_steps_over_the_failed_step_it_stopped_at",
    "tests/runs/test_controls.py::test_retry_requeues_the_furthest_failed_step_and_resumes",
    "tests/runs/test_controls.py::test_retry_also_reruns_a_refused_step",
    "tests/runs/test_controls.py::test_skip_takes_a_pending_or_parked_step_out_of_the_way",
    "tests/runs/test_reschedule.py::test_a_moved_occurrence_stays_moved",
    "tests/runs/test_overlap.py::test_skip_ends_the_newcomer_as_skipped_and_says_why_on_both_runs",
    "tests/runs/test_overlap.py::test_replace_cancels_the_holder_naming_the_newcomer_and_starts_it",
    "tests/runs/test_overlap.py::test_allow_starts_the_newcomer_beside_the_holder",
    "tests/schedules/test_schedule_lifecycle.py::test_a_zone_change_moves_each_row_to_its_new_instant",
    "tests/ledger/test_ledger.py::test_a_placeholder_is_written_before_perform_and_resolved_by_the_answer",
    "tests/ledger/test_ledger.py::test_a_retry_reuses_its_own_placeholder",
    "tests/ledger/test_ledger.py::test_a_failing_revert_is_tried_exactly_three_times_then_the_run_is_incomplete",
    "tests/ledger/test_ledger.py::test_reconcile_marks_what_the_plugin_no_longer_reports_orphaned_never_reverted",
    "tests/ledger/test_ledger.py::test_a_reconcile_that_raises_changes_nothing_and_is_logged",
    "tests/ledger/test_ledger.py::test_a_failing_revert_is_rescued_by_the_cleanup_route_and_a_moderator_is_refused",
    "tests/ledger/test_ledger.py::test_a_lease_only_run_is_given_back",
    "tests/ledger/test_ledger.py::test_a_drifted_lease_leaves_the_world_alone_and_a_later_run_leases_it_again",
    "tests/engine/test_engine_steps.py::test_a_stale_answer_is_logged_and_dropped",
    "tests/engine/test_caps.py::test_the_cap_refuses_with_the_numbers_and_the_run_goes_on_skip",
    "tests/engine/test_caps.py::test_a_step_written_for_an_older_declaration_is_flagged_and_logged_once",
    "tests/engine/test_notify_hold.py::test_a_notify_step_is_held_while_its_plugin_is_down_and_sent_when_it_is_back",
    "tests/engine/test_notify_hold.py::test_a_hold_that_runs_out_is_refused_and_says_how_long_it_held",
]

#: What a sentence for a person never holds: Python's None, a question mark standing in for
#: a missing value, a dict's brace, or a ``key=value`` pair.
_NOT_FOR_A_PERSON = re.compile(r"\bNone\b|\?|\{|\w=\w")


def problems(record: dict[str, Any], said: str) -> list[str]:
    """What is wrong with ``said`` as the sentence of ``record`` (nothing: an empty list)."""
    found = []
    if not said.strip():
        found.append("empty")
    if m := _NOT_FOR_A_PERSON.search(said):
        found.append(f"holds {m.group(0)!r}")
    kind = record["kind"]
    if said.rstrip(" .").endswith(kind) or said.startswith(kind):
        found.append(f"leads or ends with its kind code {kind}")
    return found


def test_the_check_sees_each_thing_a_sentence_must_not_hold() -> None:
    record = {"kind": "phase.completed"}
    assert problems(record, "Phase “a” finished its steps") == []
    assert problems(record, "satisfies None (1 of 5)") == ["holds 'None'"]
    assert problems(record, "? -> paused") == ["holds '?'"]
    assert problems(record, 'made {"a": 1}') == ["holds '{'"]
    assert problems(record, "resource_id=15 kind") == ["holds 'd=1'"]
    code = ["leads or ends with its kind code phase.completed"]
    assert problems(record, "phase.completed") == code
    assert problems(record, " ") == ["empty"]


@pytest.fixture(scope="module")
def engine_records(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """Every record the engine wrote while :data:`WRITERS_OF_EVERY_KIND` ran (on SQLite, in
    a child pytest that keeps each record as it is written)."""
    path = tmp_path_factory.mktemp("records") / "records.jsonl"
    # SQLite alone is asked for, so CI's demand that MariaDB be in the run is not passed on.
    dropped = {"PAGEANT_TEST_MYSQL_URL", "CI"}
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env["PAGEANT_RECORDS"] = str(path)
    done = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-q", "-p", "tests.runs.record_every_line"),
            *("-p", "no:cacheprovider", *WRITERS_OF_EVERY_KIND),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_every_kind_the_engine_writes_reads_as_a_sentence(engine_records) -> None:
    assert {r["kind"] for r in engine_records} == {kind.value for kind in LogKind}
    wrong = []
    for record in engine_records:
        for said in (sentences.text(record), sentences.text(record, tz="Europe/Berlin")):
            for problem in problems(record, said):
                wrong.append(f"{record['kind']} ({record['test']}): {problem}: {said}")
    assert wrong == []


def test_a_time_inside_a_sentence_is_drawn_on_the_clock_asked_for(engine_records) -> None:
    # The record keeps the instant; the surface draws it (Berlin is an hour ahead in March).
    rescheduled = next(r for r in engine_records if r["kind"] == LogKind.CONTROL_RESCHEDULE)
    utc = sentences.text(rescheduled)
    berlin = sentences.text(rescheduled, tz="Europe/Berlin")
    assert re.search(r"from (\d\d):(\d\d) to", utc) and utc != berlin
    hour = int(re.search(r"from (\d\d)", utc).group(1))
    assert f"from {(hour + 1) % 24:02d}:" in berlin
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", rescheduled["detail"]["from"])


async def test_a_step_is_named_by_its_label_and_a_firing_by_its_players(host, engine) -> None:
    event = await publish_event(
        host.db,
        host.clock.now(),
        spec(
            phase(
                "warmup",
                announce("Fight!", label="Call the fight"),
                advance={"on": "openarena.frag", "count": 5, "dormant": False},
            ),
            phase("end", step("core.log", label="Say goodbye", message="bye")),
        ),
    )
    run_id, _ = await start_now(host, event.id, scope="", actor="admin:test")
    await engine.tick()
    frag = {"killer": "Major", "victim": "Sarge", "weapon": "MOD_ROCKET", "server": "arena1"}
    for _ in range(3):
        await host.emit("openarena.frag", frag)
    view = await console(host, run_id)
    text = render_console(view)
    assert "“Call the fight” is done" in text
    assert "Major fragged Sarge with a rocket — 3 of 5" in text
    assert "step.status" not in text and "=" not in text.split("Log (")[1]


async def test_the_run_page_shows_sentences_and_the_records_behind_one_switch(
    host, client, tokens, engine
) -> None:
    event = await publish_event(
        host.db, host.clock.now(), spec(phase("p", announce("hi", label="Greet the arena")))
    )
    run_id, _ = await start_now(host, event.id, scope="", actor="admin:test")
    await engine.tick()
    await sign_in(client, tokens["moderator"])
    html = await (await client.get(f"/runs/{run_id}")).text()
    log = html[html.index('id="log-h"') :]
    assert log.count('id="show-stored"') == 1 and "Show the records as stored" in log
    assert "<details" not in log and "The line as recorded" not in log
    assert "“Greet the arena” is done" in log
    assert '<code class="kind">' not in log
    # The record as stored is there for the switch, once a row.
    assert log.count('<code class="stored">step.status ') == 1


def test_a_firing_sentence_seam_is_asked_first_and_the_payload_after() -> None:
    record = {
        "kind": LogKind.CONDITION_EVALUATED.value,
        "detail": {
            "trigger_id": "shard.boss_up",
            "values": {},
            "payload": {"location": "Yew"},
            "tally": 1,
            "needed": 2,
        },
    }
    assert sentences.text(record) == "shard.boss_up fired — 1 of 2"
    told = sentences.Context(firing=lambda trigger, v: f"A boss rose in {v['location']}")
    assert sentences.text(record, told) == "A boss rose in Yew — 1 of 2"
    declined = sentences.Context(firing=lambda trigger, v: None)
    assert sentences.text(record, declined) == "shard.boss_up fired — 1 of 2"


async def test_the_rehearsal_tells_its_run_in_the_same_sentences(client, tokens) -> None:
    event_id = await _event(client, tokens, THREE_PHASES)
    status, _ = await call(
        client, "PUT", f"{ACTIONS}/wisps.summon", tokens["admin"], {"enabled": True}
    )
    assert status == 200
    firings = [
        {"after": f"{m}m", "trigger": "wisps.caught", "payload": {"colour": "north"}}
        for m in (12, 20)
    ]
    status, report = await call(
        client, "POST", f"{EVENTS}/{event_id}/rehearse", tokens["editor"], {"firings": firings}
    )
    assert status == 200, report
    told = [t["sentence"] for t in report["story"]]
    assert "Phase “Hunt” began with 1 step; it moves on when wisps.caught fires" in "\n".join(told)
    assert "wisps.caught fired with colour “north” — 2 of 2" in told
    # An instant inside a rehearsal's sentence is its offset from the virtual start.
    assert any(t.startswith("Waiting until +10 min") for t in told), told
    assert [p for t in report["story"] for p in problems({"kind": "x.y"}, t["sentence"])] == []
