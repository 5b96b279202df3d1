"""pageant.testing: a plugin's own tests build a host with exactly its plugins, run events to
completion on a virtual clock, fire triggers, perform actions and get the classified
envelope, and drive the real API with a token per role."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pageant import hookimpl
from pageant.errors import Forbidden
from pageant.testing import Kit, assert_failed, assert_log_kinds, assert_ok, kit_host


class Bell:
    """A tiny plugin: an action that answers what its params ask, and a trigger."""

    PLUGIN_INFO = {"owner": "bell", "contract": "^1.0"}  # noqa: RUF012 - read by the loader

    def __init__(self) -> None:
        self.rung: list[str] = []

    async def ring(self, ctx: Any) -> Any:
        how = ctx.params["how"]
        if how == "raise":
            raise KeyError("tier")
        if how == "list":
            return ["not", "a", "mapping"]
        if how == "no-ok":
            return {"done": True}
        if how == "log":
            await ctx.services.write_log("announce", {"message": "ding"})
        if how == "odd-log":
            await ctx.services.write_log("bell.rang", {})
        if how == "prize":
            return {"ok": True, "resources": [{"kind": "prize", "ref": "p-1"}]}
        if not ctx.verify:
            self.rung.append(ctx.idempotency_key)
        return {"ok": True}

    @hookimpl
    def pageant_actions(self) -> list[dict[str, Any]]:
        how = {
            "name": "how",
            "type": "string",
            "required": True,
            "example": "ok",
            "description": "How.",
        }
        return [
            {
                "id": "bell.ring",
                "label": "Ring",
                "risk": "notify",
                "budget_ms": 1_000,
                "params": [how],
                "perform": self.ring,
            }
        ]

    @hookimpl
    def pageant_triggers(self) -> list[dict[str, Any]]:
        loud = {"name": "loud", "type": "boolean", "example": True, "description": "Loud?"}
        return [{"id": "bell.heard", "label": "Heard", "variables": [loud]}]


BELL = Bell()


@pytest.fixture
def pageant_plugins() -> list[Any]:
    return [BELL]


def test_the_host_loads_exactly_the_given_plugins(pageant_kit: Kit) -> None:
    assert pageant_kit.refused() == {}
    labels = [r.label for r in pageant_kit.host.plugins.records]
    assert labels == ["pageant[core]", "inline[bell]"]
    assert "wisps.summon" not in pageant_kit.registry.actions  # installed, but not given


async def test_installed_plugins_are_chosen_by_name(tmp_path: Path) -> None:
    async with kit_host(["pageant-wisps"], folder=tmp_path) as kit:
        assert [r.label for r in kit.host.plugins.records] == [
            "pageant[core]",
            "pageant-wisps[wisps]",
        ]
    with pytest.raises(LookupError, match="no installed plugin is named 'nothing-here'"):
        async with kit_host(["nothing-here"], folder=tmp_path):
            pass


async def test_a_change_action_runs_once_enabled_on_the_switchboard(tmp_path: Path) -> None:
    summon = {"action": "wisps.summon", "params": {"colour": "north", "count": 2}}
    event = {"phases": [{"key": "summon", "label": "Summon", "steps": [summon]}]}
    async with kit_host(["pageant-wisps"], folder=tmp_path) as kit:
        refused = await kit.run_to_completion(event)
        (line,) = [line for line in refused["log"] if line["kind"] == "step.refused"]
        assert line["detail"]["code"] == "disabled"
        assert refused["steps"][0]["status"] == "refused"
        await kit.enable("wisps.summon", caps={"wisps.wisps": 10})
        done = await kit.run_to_completion(event)
        assert done["run"]["status"] == "completed", done["run"]
        assert [s["status"] for s in done["steps"]] == ["done"]


async def test_perform_answers_the_classified_envelope(pageant_kit: Kit) -> None:
    assert_ok(await pageant_kit.perform("bell.ring", {"how": "ok"}, idempotency_key="k"))
    assert BELL.rung[-1] == "k"
    raised = await pageant_kit.perform("bell.ring", {"how": "raise"})
    assert_failed(raised, retry=True, error="KeyError: 'tier'")
    assert raised.malformed == "exception"
    assert (await pageant_kit.perform("bell.ring", {"how": "list"})).malformed == "not a mapping"
    assert (await pageant_kit.perform("bell.ring", {"how": "no-ok"})).malformed == "missing ok"
    before = len(BELL.rung)
    assert_ok(await pageant_kit.perform("bell.ring", {"how": "ok"}, verify=True))
    assert len(BELL.rung) == before


async def test_perform_warns_when_a_notify_action_reports_resources_no_run_would_record(
    pageant_kit: Kit,
) -> None:
    from pageant.testing import UnrecordedResourcesWarning

    with pytest.warns(UnrecordedResourcesWarning, match=r"bell.ring \(risk notify\).*prize:p-1"):
        assert_ok(await pageant_kit.perform("bell.ring", {"how": "prize"}))
    # Nothing reported, nothing said: the warning is about resources only.
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_ok(await pageant_kit.perform("bell.ring", {"how": "ok"}))


async def test_perform_keeps_log_lines_and_refuses_a_kind_a_run_would_refuse(
    pageant_kit: Kit,
) -> None:
    assert_ok(await pageant_kit.perform("bell.ring", {"how": "log"}))
    assert pageant_kit.logged == [("announce", {"message": "ding"})]
    refused = await pageant_kit.perform("bell.ring", {"how": "odd-log"})
    assert_failed(refused, retry=True, error="'bell.rang' is not a valid LogKind")


def test_the_assertions_fail_with_a_reason() -> None:
    with pytest.raises(AssertionError, match="expected ok, got a failure: busy"):
        assert_ok({"ok": False, "error": "busy"})
    with pytest.raises(AssertionError, match="expected a failure, got ok"):
        assert_failed({"ok": True})
    with pytest.raises(AssertionError, match="expected retry=False, got retry=True"):
        assert_failed({"ok": False, "retry": True}, retry=False)
    console = {"log": [{"kind": "a"}, {"kind": "b"}]}
    assert_log_kinds(console, ["a", "b"])
    with pytest.raises(AssertionError, match="missing 'a' after position 2"):
        assert_log_kinds(console, ["b", "a"])


async def test_a_run_goes_to_completion_on_virtual_time(pageant_kit: Kit) -> None:
    start = pageant_kit.clock.now()
    event = {
        "phases": [
            {
                "key": "wait",
                "label": "Wait",
                "steps": [
                    {"action": "bell.ring", "params": {"how": "ok"}},
                    {"action": "core.wait", "params": {"seconds": 3600}},
                ],
                "advance": {
                    "on": "bell.heard",
                    "where": {"var": "loud", "op": "eq", "value": True},
                },
            },
            {
                "key": "end",
                "label": "End",
                "steps": [{"action": "bell.ring", "params": {"how": "ok"}}],
            },
        ]
    }
    console = await pageant_kit.run_to_completion(event, firings=[("bell.heard", {"loud": True})])
    assert console["run"]["status"] == "completed"
    assert [s["status"] for s in console["steps"]] == ["done", "done", "done"]
    assert_log_kinds(console, ["phase.entered", "phase.gate", "phase.entered", "run.status"])
    # The hour's wait passed on the kit's clock, not the wall clock.
    assert (pageant_kit.clock.now() - start).total_seconds() >= 3600


async def test_a_timed_gate_passes_on_the_kits_clock(pageant_kit: Kit) -> None:
    start = pageant_kit.clock.now()
    ring = {"action": "bell.ring", "params": {"how": "ok"}}
    event = {
        "phases": [
            {"key": "wait", "label": "Wait", "steps": [ring], "advance": {"after": "10m"}},
            {"key": "end", "label": "End", "steps": [ring]},
        ]
    }
    console = await pageant_kit.run_to_completion(event)
    assert console["run"]["status"] == "completed"
    assert (pageant_kit.clock.now() - start).total_seconds() >= 600


async def test_a_parked_step_is_confirmed_unless_asked_not_to(pageant_kit: Kit) -> None:
    cue = {"action": "core.cue", "params": {"message": "open the gates"}}
    event = {"phases": [{"key": "cue", "label": "Cue", "steps": [cue]}]}
    confirmed = await pageant_kit.run_to_completion(event)
    assert confirmed["run"]["status"] == "completed"
    assert_log_kinds(confirmed, ["step.parked", "control.confirm", "run.status"])
    left = await pageant_kit.run_to_completion(event, confirm_parked=False)
    assert left["run"]["status"] == "running"
    assert left["run"]["waiting_on"]["reason"] == "parked"


async def test_a_gate_without_its_firing_is_answered_as_it_stands(pageant_kit: Kit) -> None:
    event = {
        "phases": [
            {
                "key": "wait",
                "label": "Wait",
                "steps": [{"action": "bell.ring", "params": {"how": "ok"}}],
                "advance": {"on": "bell.heard"},
            }
        ]
    }
    console = await pageant_kit.run_to_completion(event)
    assert console["run"]["status"] == "running"
    assert console["run"]["waiting_on"]["reason"] == "gate"


async def test_fire_goes_through_the_emit_path(pageant_kit: Kit) -> None:
    from pageant.errors import Invalid

    assert await pageant_kit.fire("bell.heard", {"loud": False}) == {
        "gates_matched": 0,
        "gates_closed": 0,
    }
    with pytest.raises(Invalid):
        await pageant_kit.fire("bell.heard", {"loud": "very"})


async def test_the_client_drives_the_real_api_with_a_token_per_role(
    pageant_kit: Kit, pageant_client: Any
) -> None:
    listed = await pageant_client.get("/api/v1/admin/plugins", headers=pageant_kit.headers())
    assert listed.status == 200
    names = [item["name"] for item in (await listed.json())["items"]]
    assert names == ["core", "bell"]
    assert set(pageant_kit.tokens) == {"admin", "editor", "moderator", "game"}
    anonymous = await pageant_client.get("/api/v1/admin/plugins")
    assert anonymous.status == 401


def test_the_pytest_plugin_is_found_through_its_entry_point(tmp_path: Path) -> None:
    # A plugin author's project: no conftest, no -p; the fixtures come from the entry point.
    (tmp_path / "test_author.py").write_text(
        textwrap.dedent(
            """
            async def test_kit(pageant_kit):
                assert pageant_kit.refused() == {}
            """
        )
    )
    (tmp_path / "pytest.ini").write_text("[pytest]\nasyncio_mode = auto\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    found = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert found.returncode == 0, found.stdout + found.stderr
    assert "1 passed" in found.stdout
    opted_out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:pageant.testing", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert opted_out.returncode != 0
    assert "fixture 'pageant_kit' not found" in opted_out.stdout


async def test_kit_fire_refuses_cores_lifecycle_triggers_as_the_api_does(
    pageant_kit: Kit,
) -> None:
    with pytest.raises(Forbidden, match=r"core\.run\.completed is one of pageant's own"):
        await pageant_kit.fire("core.run.completed", {"event": "x"})
