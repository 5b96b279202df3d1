"""A trigger's ``sentence`` (contract 1.3): checked against its variables when declared, and
the words of each counted firing in the run log (``detail.sentence``) and in the console's
line for it, instead of the bare values."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from pydantic import ValidationError

from pageant import hookimpl
from pageant.engine import Engine
from pageant.hookspecs import Trigger
from pageant.runs.console_text import describe
from pageant.runs.create import start_now
from tests.factories import announce, log_lines, make_host, phase, publish_event, spec

FRAG = "arena.frag"
VARIABLES = [
    {"name": "killer", "type": "string", "description": "who", "example": "Sarge"},
    {"name": "victim", "type": "string", "description": "whom", "example": "Grunt"},
    {"name": "means", "type": "string", "description": "how", "example": "a rocket"},
]


class Arena:
    PLUGIN_INFO: ClassVar[dict[str, str]] = {"owner": "arena", "contract": "^1.3"}

    @hookimpl
    def pageant_triggers(self) -> list[dict[str, Any]]:
        return [
            {
                "id": FRAG,
                "label": "A frag",
                "variables": VARIABLES,
                "sentence": "{killer} fragged {victim} with {means}",
            }
        ]


@pytest.mark.parametrize(
    ("sentence", "error"),
    [
        ("{killer} fragged {weapon}", "names {weapon}, which is not a variable"),
        ("{killer!r} fragged", "may not carry a format spec or a conversion"),
        ("{killer:>10} fragged", "may not carry a format spec or a conversion"),
        ("{killer fragged", "sentence '{killer fragged'"),
        ("", "at least 1 character"),
    ],
)
def test_a_sentence_naming_what_is_not_a_variable_is_refused(sentence: str, error: str) -> None:
    with pytest.raises(ValidationError, match=error.replace("{", r"\{").replace("(", r"\(")):
        Trigger.model_validate(
            {"id": FRAG, "label": "x", "variables": VARIABLES, "sentence": sentence}
        )


async def test_a_counted_firing_is_said_in_its_triggers_words(settings, db, clock) -> None:
    host = make_host(settings, db, clock, [Arena()])
    try:
        await host.start_plugins()
        gate = {"on": FRAG, "count": 2, "dormant": False}
        event = await publish_event(
            host.db,
            clock.now(),
            spec(phase("hunt", announce("fight"), advance=gate), phase("end", announce("x"))),
        )
        run_id, _ = await start_now(host, event.id, scope="", actor="admin:test")
        engine = Engine(host)
        try:
            await engine.tick()
            payload = {"killer": "Major-4abc", "victim": "Sarge-4abd", "means": "a rocket"}
            assert (await host.emit(FRAG, payload))["gates_matched"] == 1
        finally:
            await engine.stop()
        (line,) = await log_lines(host.db, run_id, "condition.evaluated")
        assert line.detail["sentence"] == "Major-4abc fragged Sarge-4abd with a rocket"
        said = describe({"kind": line.kind, "detail": line.detail, "step_id": None})
        assert said == "Major-4abc fragged Sarge-4abd with a rocket — 1 of 2"
    finally:
        await host.close()


def test_a_firing_missing_a_named_variable_is_not_said_with_a_placeholder() -> None:
    trigger = Trigger.model_validate(
        {"id": FRAG, "label": "x", "variables": VARIABLES, "sentence": "{killer} fragged {victim}"}
    )
    assert trigger.say({"killer": "Major", "victim": "Sarge"}) == "Major fragged Sarge"
    assert trigger.say({"killer": "Major"}) is None
    assert trigger.say({"killer": "Major", "victim": ""}) is None
    assert Trigger.model_validate({"id": FRAG, "label": "x"}).say({}) is None
