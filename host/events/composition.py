"""Events that compose: one event's gate waits on another's lifecycle trigger
(``on: core.run.completed where event eq "champion-muster"``).

What composition must never allow is an event waiting on *itself*: a phase whose gate waits
for its own event's run to complete, fail or be cancelled, or to enter a phase, waits on
something that run cannot do while it waits. Such a spec is refused when it is saved (and
again when it is published), naming the phase and the trigger.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pageant.errors import Invalid
from pageant.runs.lifecycle import TRIGGERS


def _pins(condition: Any, slug: str) -> bool:
    """True when ``condition`` can only match a firing whose ``event`` is ``slug``: an
    ``event eq slug`` (or ``in [slug]``) comparison, alone or inside an ``all``."""
    if not isinstance(condition, dict):
        return False
    if "all" in condition:
        return any(_pins(part, slug) for part in condition.get("all") or [])
    if condition.get("var") != "event":
        return False
    op, value = condition.get("op"), condition.get("value")
    return (op == "eq" and value == slug) or (op == "in" and value == [slug])


def self_waits(spec: dict[str, Any] | None, slug: str) -> Iterator[str]:
    """A problem, with its path, for each phase of ``spec`` that waits on its own event."""
    for i, phase in enumerate((spec or {}).get("phases") or []):
        advance = phase.get("advance") or {}
        trigger = advance.get("on")
        if trigger in TRIGGERS and _pins(advance.get("where"), slug):
            yield (
                f'spec.phases[{i}].advance: waits on {trigger} where event eq "{slug}" — this '
                "event itself; its run would wait on its own lifecycle and never advance"
            )


def refuse_self_waits(spec: dict[str, Any] | None, slug: str) -> None:
    """Raise :class:`Invalid` naming every phase of ``spec`` that waits on its own event."""
    problems = list(self_waits(spec, slug))
    if problems:
        raise Invalid("invalid spec: an event cannot wait on itself", details=problems)
