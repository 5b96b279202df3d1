"""Campaigns: an event whose occurrences start only after another event's outcome.

An event's spec may say::

    "requires": {"event": "champion-muster", "outcome": "completed", "within": "7d"}

When one of its occurrences is due, the engine looks at the runs of the required event
(any scope):

- one that ended with the outcome asked for, at most ``within`` before the occurrence's
  instant (or since) — the occurrence **starts**, its start saying which run let it
  (``started: champion-muster completed 2 d ago (run 17)``);
- else one that is still going, or due inside the window and not started yet — the
  occurrence is **held**, ``scheduled``, waiting on that run
  (``waiting for champion-muster (run 18) to complete``); its grace window bounds the wait;
- else the occurrence is **skipped**, the reason naming what was found: the latest run of the
  window ended otherwise (``skipped: champion-muster run 18 was cancelled``), or none ran
  (``skipped: no completed champion-muster in the last 7d``).

``outcome`` is one of :data:`OUTCOMES`: a run status (``completed``, ``failed``,
``cancelled``), or ``ended``, any of the three — the required event ran and is over.

This module is the grammar, the decision and the words: the spec validator reads the
grammar from here; the engine (:mod:`pageant.engine.requires`) asks :func:`read_decision`
and writes what it answers, and the run console derives a held run's ``waiting_on`` with
the same function.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from pageant.db import campaigns as campaign_rows
from pageant.db import slugs
from pageant.gates.durations import format_after, parse_duration
from pageant.gates.phase import elapsed
from pageant.states import RunStatus, WaitingReason
from pageant.support.refusals import an_object, refuse_unknown, show

if TYPE_CHECKING:
    from sqlalchemy.engine import Row
    from sqlalchemy.ext.asyncio import AsyncConnection

REQUIRES_KEYS = ("event", "outcome", "within")
#: ``completed`` first: it is the default.
OUTCOMES = ("completed", "failed", "cancelled", "ended")
#: The run statuses each outcome is met by.
MET_BY: dict[str, tuple[RunStatus, ...]] = {
    "completed": (RunStatus.COMPLETED,),
    "failed": (RunStatus.FAILED,),
    "cancelled": (RunStatus.CANCELLED,),
    "ended": (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED),
}
#: The longest slug (an event's slugs are at most this long; the save asks the database
#: whether one is an event's).
MAX_EVENT = 100
#: The shortest window: a minute.
MIN_WITHIN_SECONDS = 60
#: The longest window: thirty days (a monthly campaign's step).
MAX_WITHIN_SECONDS = 30 * 86_400

#: ``requires`` as the HTTP API documents it.
REQUIRES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "start an occurrence only after another event's outcome: event (its "
    "slug), outcome (completed, failed, cancelled or ended; default completed) and within "
    '(how long before the occurrence it may have ended, a duration such as "7d", from 1m '
    "to 30d). An occurrence is held while a run of that event is going, and skipped when "
    "none ended so (docs/schedules.md)",
    "properties": {
        "event": {"type": "string", "minLength": 1, "maxLength": MAX_EVENT},
        "outcome": {"enum": list(OUTCOMES)},
        "within": {"type": "string", "pattern": r"^[0-9]{1,6}[smhd]$"},
    },
    "required": ["event", "within"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class Requirement:
    """What an event requires: another event's ``outcome`` within ``within_seconds``."""

    event: str
    outcome: str
    within_seconds: int

    @property
    def within(self) -> timedelta:
        return timedelta(seconds=self.within_seconds)

    def as_json(self) -> dict[str, Any]:
        """The requirement as the spec and the calendars say it."""
        return {
            "event": self.event,
            "outcome": self.outcome,
            "within": format_after(self.within_seconds),
        }

    def describe(self) -> str:
        """In words: ``requires champion-muster completed within 7d``."""
        return f"requires {self.event} {self.outcome} within {format_after(self.within_seconds)}"


def of_spec(spec: Any) -> Requirement | None:
    """The requirement of a (validated) spec; None when it has none or it cannot be read."""
    raw = spec.get("requires") if isinstance(spec, Mapping) else None
    if not isinstance(raw, Mapping):
        return None
    event, outcome = raw.get("event"), raw.get("outcome", OUTCOMES[0])
    seconds = parse_duration(raw.get("within"), least=MIN_WITHIN_SECONDS, most=MAX_WITHIN_SECONDS)
    if not isinstance(event, str) or outcome not in OUTCOMES or seconds is None:
        return None
    return Requirement(event, str(outcome), seconds)


def applies_to(run: Mapping[str, Any]) -> bool:
    """Whether a run's start waits on its event's requirement: an occurrence of the
    schedule does; a person's start-now does not (that person decided it runs, as a
    start-now is not held for verification either)."""
    return run.get("source") == "schedule"


def validate_requires(raw: Any, path: str, errors: list[str]) -> dict[str, Any] | None:
    """The normalised ``requires`` (None when absent); appends each problem to ``errors``,
    prefixed by its path. Whether the event exists is asked of the database by the caller
    (:func:`pageant.events.campaigns.unknown_required`)."""
    if raw is None:
        return None
    if (raw := an_object(raw, path, errors, "with event and within")) is None:
        return None
    unknown = refuse_unknown(raw, REQUIRES_KEYS, path, errors)
    event = raw.get("event")
    if not isinstance(event, str) or not 0 < len(event) <= MAX_EVENT:
        errors.append(f"{path}.event: expected the slug of another event; got {show(event)}")
    outcome = raw.get("outcome", OUTCOMES[0])
    if outcome not in OUTCOMES:
        errors.append(f"{path}.outcome: expected one of {', '.join(OUTCOMES)}; got {show(outcome)}")
    within = raw.get("within")
    seconds = parse_duration(within, least=MIN_WITHIN_SECONDS, most=MAX_WITHIN_SECONDS)
    if seconds is None:
        errors.append(
            f'{path}.within: expected a duration such as "7d" (a whole number of s, m, h or d) '
            f"from {format_after(MIN_WITHIN_SECONDS)} to {format_after(MAX_WITHIN_SECONDS)}; "
            f"got {show(within)}"
        )
    if unknown or seconds is None or outcome not in OUTCOMES or not isinstance(event, str):
        return None
    # Only the canonical spelling is stored, as for a gate's "after".
    return Requirement(event, str(outcome), seconds).as_json()


# ── the decision ──


@dataclass(frozen=True)
class Seen:
    """A run of the required event, as the decision reads it."""

    id: int
    status: str
    scheduled_for: datetime
    ended_at: datetime | None


class Verdict(StrEnum):
    """What a requirement makes of a due occurrence."""

    START = "start"
    HOLD = "hold"
    SKIP = "skip"


@dataclass(frozen=True)
class Decision:
    """A verdict and the words that say why (``note``); ``run_id``: the required event's run
    it rests on (None when none ran)."""

    verdict: Verdict
    note: str
    run_id: int | None = None


def decide(
    requirement: Requirement,
    *,
    met: Seen | None,
    going: Seen | None,
    last: Seen | None,
    now: datetime,
) -> Decision:
    """What becomes of an occurrence at ``now``, from the required event's runs: ``met``, the
    latest that ended with the outcome inside the window; ``going``, one live or due inside
    the window; ``last``, the latest that ended inside the window, however."""
    slug = requirement.event
    if met is not None and met.ended_at is not None:
        ago = elapsed((now - met.ended_at).total_seconds())
        return Decision(Verdict.START, f"{slug} {met.status} {ago} ago (run {met.id})", met.id)
    if going is not None:
        return Decision(
            Verdict.HOLD, f"waiting for {slug} (run {going.id}) to {_end(requirement)}", going.id
        )
    if last is not None:
        return Decision(Verdict.SKIP, f"{slug} run {last.id} was {last.status}", last.id)
    window = format_after(requirement.within_seconds)
    return Decision(Verdict.SKIP, f"no {requirement.outcome} {slug} in the last {window}")


def started_note(decision: Decision) -> str:
    """What the occurrence's start says: ``started: champion-muster completed 2 d ago (run
    17)``."""
    return f"started: {decision.note}"


def skipped_note(decision: Decision) -> str:
    """The reason of a skipped occurrence: ``skipped: champion-muster run 18 was cancelled``."""
    return f"skipped: {decision.note}"


def gave_up_note(requirement: Requirement) -> str:
    """The reason of an occurrence whose grace window ended while it was held: ``skipped:
    the grace window ended while waiting for champion-muster to complete``."""
    return (
        "skipped: the grace window ended while waiting for "
        f"{requirement.event} to {_end(requirement)}"
    )


def _end(requirement: Requirement) -> str:
    if requirement.outcome == "completed":
        return "complete"
    return "end" if requirement.outcome == "ended" else f"end {requirement.outcome}"


async def read_decision(
    conn: AsyncConnection, requirement: Requirement, run: Mapping[Any, Any], now: datetime
) -> Decision:
    """What ``requirement`` makes of the due ``run`` at ``now``, from the required event's
    runs (:mod:`pageant.db.campaigns`)."""
    required_id = await slugs.slug_owner(conn, "event_definitions", requirement.event)
    if required_id is None:
        # Renamed or gone since the publish that checked it: nothing of it can ever end.
        return Decision(Verdict.SKIP, f"no event {requirement.event!r}")
    since = run["scheduled_for"] - requirement.within
    statuses = MET_BY[requirement.outcome]
    met = _seen(await campaign_rows.latest_ended(conn, required_id, since, statuses))
    going = last = None
    if met is None:
        until = run["scheduled_for"]
        going = _seen(await campaign_rows.going_or_due(conn, required_id, run["id"], since, until))
        if going is None:
            last = _seen(await campaign_rows.latest_ended(conn, required_id, since, ()))
    return decide(requirement, met=met, going=going, last=last, now=now)


def waiting_on(decision: Decision, run: Mapping[Any, Any], now: datetime) -> dict[str, Any]:
    """The ``waiting_on`` of a run held for its requirement (:func:`pageant.runs.waiting.describe`'s
    shape, with ``required_run_id``: the run it waits for)."""
    held = run.get("waiting_reason") == WaitingReason.REQUIRES
    since = run.get("waiting_since") if held else None
    return {
        "reason": WaitingReason.REQUIRES.value,
        "since": since or now,
        "required_run_id": decision.run_id,
        "sentence": decision.note,
    }


def _seen(row: Row | None) -> Seen | None:
    if row is None:
        return None
    return Seen(row.id, row.status, row.scheduled_for, row.ended_at)
