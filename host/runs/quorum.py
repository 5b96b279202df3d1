"""A run's quorum (its event's ``start_when``) in words: what it reads, what it waits for,
and why it started or was skipped.

The spec's grammar is :mod:`pageant.events.authoring.start_when`; the engine's decision is
:mod:`pageant.engine.start_when`; the run console says a waiting run's sentence from here
with the reading's last answer (:meth:`pageant.plugins.readings.Readings.last`), so the
engine's note and the console's agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pageant.gates.durations import parse_after
from pageant.runs import params as run_params
from pageant.runs.countdown import announce_rows, remaining_words
from pageant.states import WaitingReason

if TYPE_CHECKING:
    from pageant.plugins.readings import Read
    from pageant.plugins.registry import Registry

#: The phase of a run's call-off steps: never a phase of the spec, so its cursor never
#: reads one.
CALL_OFF_PHASE = "(call-off)"


def of_spec(spec: Any) -> dict[str, Any] | None:
    """The ``start_when`` of a (validated) spec, or None."""
    found = spec.get("start_when") if isinstance(spec, Mapping) else None
    return found if isinstance(found, dict) else None


def reading_params(start_when: Mapping[str, Any], run: Mapping[str, Any]) -> dict[str, Any]:
    """The reading's params for ``run``: each ``{"param": name}`` written out from the run's
    params (a fan-out's run reads its own server)."""
    values = run_params.with_scope(run.get("params") or {}, run.get("scope") or "")
    out: dict[str, Any] = {}
    for name, value in (start_when.get("params") or {}).items():
        out[name] = values.get(value["param"]) if run_params.is_reference(value) else value
    return out


def unit(start_when: Mapping[str, Any], registry: Registry) -> str:
    """The plural noun after the number ("players online"); the reading's id when no
    loaded plugin declares it."""
    declared = registry.readings.get(str(start_when.get("reading")))
    return declared.unit if declared is not None else str(start_when.get("reading"))


def wait_seconds(start_when: Mapping[str, Any]) -> int:
    return parse_after(start_when.get("wait")) or 0


def number(value: float) -> str:
    """A reading as a sentence says it: ``6``, ``2.5`` (never ``6.0``)."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def now_words(read: Read | None) -> str:
    """What the reading says now, in the brackets of a waiting sentence."""
    if read is None:
        return "not read yet"
    if read.amount is None:
        return f"reading unknown: {read.why}" if read.why else "reading unknown"
    return f"{number(read.amount)} now"


def waiting_for(start_when: Mapping[str, Any], registry: Registry, read: Read | None) -> str:
    """``waiting for 4 players online (2 now)``."""
    at_least = number(start_when["at_least"])
    return f"waiting for {at_least} {unit(start_when, registry)} ({now_words(read)})"


def waiting_note(
    start_when: Mapping[str, Any],
    registry: Registry,
    read: Read | None,
    *,
    since: datetime,
) -> dict[str, Any]:
    """What a run waiting on its quorum waits on (``waiting_on``), until ``since`` + wait."""
    until = since + timedelta(seconds=wait_seconds(start_when))
    return {
        "reason": WaitingReason.QUORUM,
        "since": since,
        "until": until,
        "sentence": f"{waiting_for(start_when, registry, read)}, until {until.isoformat()}",
    }


def short_words(start_when: Mapping[str, Any], registry: Registry, read: Read) -> str:
    """How far short the wait ended: ``2 of 4 players online after 10 minutes`` or
    ``reading unknown after 10 minutes (why)``."""
    after = remaining_words(wait_seconds(start_when))
    if read.amount is None:
        why = f" ({read.why})" if read.why else ""
        return f"reading unknown after {after}{why}"
    have = number(read.amount)
    return f"{have} of {number(start_when['at_least'])} {unit(start_when, registry)} after {after}"


def started_words(start_when: Mapping[str, Any], registry: Registry, read: Read) -> str:
    """``started with 6 players online``."""
    return f"started with {number(read.amount or 0)} {unit(start_when, registry)}"


@dataclass(frozen=True)
class CallOff:
    """The call-off on one leg, a notice of the run's (:class:`pageant.runs.countdown.Notice`)."""

    seq: int
    leg: str
    message: str

    @property
    def label(self) -> str:
        return f"Call-off ({self.leg})"


def call_off_rows(
    run_id: int, legs: list[str], message: str, *, registry: Registry, now: datetime
) -> list[dict[str, Any]]:
    """The call-off's steps, one ``core.announce`` a leg, due ``now``."""
    notices = [CallOff(seq, leg, message) for seq, leg in enumerate(legs)]
    return [
        {**row, "due_at": now} for row in announce_rows(run_id, CALL_OFF_PHASE, notices, registry)
    ]
