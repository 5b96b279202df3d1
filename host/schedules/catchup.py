"""Catch-up: what becomes of the occurrences whose grace window passed while no host ran.

Without a policy (``catch_up`` absent, or ``{"policy": "none"}``) every such occurrence is
``missed``, visibly, as it always was. An event may instead say::

    "catch_up": {"policy": "one" | "all", "within": "3h"}

- ``one``: the latest of them inside the window starts late; the earlier ones are missed,
  each saying a later occurrence caught up;
- ``all``: each of them inside the window starts late, one after another in slot order;
- either way, one older than the window is missed with a reason naming the window.

The window is measured back from the instant the host decides (``now - within``), so a host
that was down longer than the window never replays a day of history.

This module is the arithmetic and the words, no database: the spec validator reads the
grammar from here, and the engine (:mod:`pageant.engine.catchup`) asks :func:`decide` what to
do with one event's late occurrences and writes what it answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from pageant.gates.durations import format_after, parse_after
from pageant.gates.phase import elapsed
from pageant.support.refusals import an_object, refuse_unknown, show

#: ``none`` first: it is the default, and what a spec without ``catch_up`` means.
POLICIES = ("none", "one", "all")
CATCH_UP_KEYS = ("policy", "within")
#: The shortest window: a minute (a window under the grace would catch nothing up).
MIN_WITHIN_SECONDS = 60
#: The longest window: a week. Past that a replay is no longer catching up, it is history.
MAX_WITHIN_SECONDS = 7 * 86_400


@dataclass(frozen=True)
class CatchUp:
    """An event's catch-up policy: ``policy`` and its window in seconds (0 with ``none``)."""

    policy: str = "none"
    within_seconds: int = 0

    @property
    def catches_up(self) -> bool:
        return self.policy != "none"

    @property
    def within(self) -> timedelta:
        return timedelta(seconds=self.within_seconds)

    def describe(self) -> str:
        """The policy as the spec says it: ``catch_up: one, within 3h``."""
        if not self.catches_up:
            return "catch_up: none"
        return f"catch_up: {self.policy}, within {format_after(self.within_seconds)}"


NONE = CatchUp()

#: ``catch_up`` as the HTTP API documents it (the validator says more: the bounds in seconds).
CATCH_UP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "what becomes of the occurrences whose grace window passed while no host "
    "ran: none (missed), one (the latest inside the window runs late) or all (each runs late, "
    'in order); within: the window, a duration such as "3h", from 1m to 7d, required for one '
    "and all (docs/schedules.md)",
    "properties": {
        "policy": {"enum": list(POLICIES)},
        "within": {"type": "string", "pattern": r"^[0-9]{1,6}[smhd]$"},
    },
    "required": ["policy"],
    "additionalProperties": False,
}


def of_spec(spec: Any) -> CatchUp:
    """The catch-up policy of a (validated) spec; :data:`NONE` when it has none or it cannot
    be read (a spec saved before the key existed)."""
    raw = spec.get("catch_up") if isinstance(spec, Mapping) else None
    if not isinstance(raw, Mapping) or raw.get("policy") not in POLICIES[1:]:
        return NONE
    seconds = parse_after(raw.get("within"))
    if seconds is None or not MIN_WITHIN_SECONDS <= seconds <= MAX_WITHIN_SECONDS:
        return NONE
    return CatchUp(str(raw["policy"]), seconds)


def validate_catch_up(raw: Any, path: str, errors: list[str]) -> dict[str, Any] | None:
    """The normalised ``catch_up`` (None when absent or ``none``: the spec then reads as it
    always did); appends each problem to ``errors``, prefixed by its path."""
    if raw is None:
        return None
    if (raw := an_object(raw, path, errors, "with a policy")) is None:
        return None
    if refuse_unknown(raw, CATCH_UP_KEYS, path, errors):
        return None
    policy = raw.get("policy")
    if policy not in POLICIES:
        errors.append(f"{path}.policy: expected one of {', '.join(POLICIES)}; got {show(policy)}")
        return None
    within = raw.get("within")
    if policy == "none":
        if within is not None:
            errors.append(f'{path}.within: only "one" and "all" have a window; remove it')
        return None
    if within is None or (isinstance(within, str) and not within.strip()):
        errors.append(f'{path}.within: required for "{policy}": a duration such as "3h"')
        return None
    seconds = parse_after(within)
    if seconds is None or not MIN_WITHIN_SECONDS <= seconds <= MAX_WITHIN_SECONDS:
        errors.append(
            f'{path}.within: expected a duration such as "3h" (a whole number of s, m, h or d) '
            f"from {format_after(MIN_WITHIN_SECONDS)} to {format_after(MAX_WITHIN_SECONDS)}; "
            f"got {show(within)}"
        )
        return None
    # Only the canonical spelling is stored, as for a gate's "after".
    return {"policy": policy, "within": format_after(seconds)}


# ── the decision ──


@dataclass(frozen=True)
class Late:
    """One occurrence whose grace passed before any host started it."""

    run_id: int
    scheduled_for: datetime


class Outcome(StrEnum):
    """What a catch-up decision makes of one late occurrence."""

    #: It starts late; its note is the words its start and its calendar row say.
    CATCH_UP = "catch_up"
    #: It is missed; its note is the reason.
    MISSED = "missed"


@dataclass(frozen=True)
class Decision:
    """What becomes of one late occurrence, and the words that say why (``note``)."""

    run_id: int
    outcome: Outcome
    note: str


def caught_up_note(policy: CatchUp) -> str:
    """What a run that starts late says of why: ``catching up after the host was down
    (catch_up: one, within 3h)``."""
    return f"catching up after the host was down ({policy.describe()})"


def started_late(policy_note: str, scheduled_for: datetime, now: datetime) -> str:
    """The sentence a catch-up's start writes: ``started 40 min late, catching up ...``."""
    return f"started {elapsed((now - scheduled_for).total_seconds())} late, {policy_note}"


def decide(policy: CatchUp, late: Sequence[Late], now: datetime) -> list[Decision]:
    """What becomes of one event's (one scope's) late occurrences under ``policy``, in slot
    order. ``none`` leaves them to the missed sweep, so it answers nothing."""
    if not policy.catches_up:
        return []
    ordered = sorted(late, key=lambda occ: (occ.scheduled_for, occ.run_id))
    start = now - policy.within
    inside = [occ for occ in ordered if occ.scheduled_for >= start]
    outside = [occ for occ in ordered if occ.scheduled_for < start]
    beyond = (
        f"the host was down past its grace window, and it is older than the catch-up window "
        f"({policy.describe()})"
    )
    decisions = [Decision(occ.run_id, Outcome.MISSED, beyond) for occ in outside]
    note = caught_up_note(policy)
    if policy.policy == "all":
        return [*decisions, *(Decision(occ.run_id, Outcome.CATCH_UP, note) for occ in inside)]
    if not inside:
        return decisions
    *earlier, latest = inside
    superseded = (
        f"the host was down past its grace window, and a later occurrence (run "
        f"{latest.run_id}) caught up instead ({policy.describe()})"
    )
    decisions += [Decision(occ.run_id, Outcome.MISSED, superseded) for occ in earlier]
    return [*decisions, Decision(latest.run_id, Outcome.CATCH_UP, note)]
