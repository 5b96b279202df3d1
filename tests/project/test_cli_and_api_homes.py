"""One home a concept: the CLI's commands are added to ``pageant`` one way, and the API
documents every answer from a pydantic model."""

from __future__ import annotations

from pathlib import Path

import click
from pydantic import BaseModel

from pageant.api.app import all_routes
from pageant.api.routes.runs import RunOut, RunsNow
from pageant.api.routes.system import Health
from pageant.cli import COMMANDS, main

CLI = Path(__file__).resolve().parents[2] / "host" / "cli"


def test_every_command_is_added_through_the_one_list() -> None:
    assert len({command.name for command in COMMANDS}) == len(COMMANDS)
    assert dict(main.commands) == {command.name: command for command in COMMANDS}


def test_no_module_adds_to_the_root_but_the_root() -> None:
    for module in sorted(CLI.glob("*.py")):
        text = module.read_text()
        assert "noqa: E402" not in text, module.name
        if module.name != "__init__.py":
            assert "@main." not in text and "main.add_command" not in text, module.name
            assert "def register(" not in text, module.name


def test_each_group_lives_in_its_own_module() -> None:
    groups = {c.name: c.callback.__module__ for c in COMMANDS if isinstance(c, click.Group)}
    assert len(set(groups.values())) == len(groups), groups
    assert groups["actions"] == "pageant.cli.switchboard"
    commands = {c.name: c.callback.__module__ for c in COMMANDS}
    assert commands["verify"] == "pageant.cli.verify"
    assert commands["rehearse"] == "pageant.cli.rehearse"


def test_every_answer_is_documented_by_a_model() -> None:
    found = set()
    for route in all_routes():
        if route.status == 101:
            # A WebSocket upgrade answers no body; its messages are documented in link.md.
            assert route.response is None, (route.method, route.path)
            continue
        shapes = [route.response, *route.also.values()]
        for shape in shapes:
            if isinstance(shape, dict):
                found.add(route.path)
            else:
                assert shape is not None, (route.method, route.path)
                assert issubclass(shape, BaseModel), (route.method, route.path)
    assert found == set(), f"answers described by hand-written JSON schema: {sorted(found)}"


def test_a_model_promises_only_what_every_answer_holds() -> None:
    assert "required" not in RunOut.model_json_schema()
    assert set(RunsNow.model_json_schema()["required"]) == {"items", "next_cursor", "summary"}
    health = Health.model_json_schema()
    assert set(health["required"]) == {"status", "schema", "engine"}
    engine = health["$defs"]["EngineOut"]
    assert engine["required"] == ["running"]
    assert all("default" not in field for field in engine["properties"].values())
