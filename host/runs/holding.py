"""Holding a ``notify`` step while its plugin is down, rather than refusing it at once.

An announcement sent a minute late is worth more than one lost to a game server's restart.
So a ``notify`` step whose plugin reported itself down (``context.set_available(False, ...)``)
waits - unclaimed, spending no attempt, the run ``degraded`` and waiting on ``unavailable``
with a sentence saying so - for up to the step's ``hold_seconds`` (a spec key; default
:data:`DEFAULT_HOLD_SECONDS`). When its plugin is back it is dispatched; when the hold runs
out first it is dispatched anyway and refused with code ``unavailable``, as without a hold.
``hold_seconds: 0`` refuses at once. Either way the claim writes one ``step.held`` line
saying how long the step was held and how the hold ended.

The hold's clock is the run's: it begins when the run first waited on ``unavailable`` for
this step (``waiting_since``), so a restart or another host carries it on, not afresh.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pageant.db.engine_rows import RunState, StepRow
from pageant.support.timefmt import iso

if TYPE_CHECKING:
    from pageant.hosting import Host

#: How long a ``notify`` step of a plugin that is down waits for it, unless its spec says.
DEFAULT_HOLD_SECONDS = 120


@dataclass(frozen=True)
class NotifyHold:
    """A ``notify`` step held (or just released) because its plugin is down."""

    #: When the hold began.
    since: datetime
    #: The step's ``hold_seconds``.
    seconds: int
    #: How long it has been held so far.
    held: float
    #: Why the plugin is down now; None once it is back.
    down: str | None

    @property
    def waits(self) -> bool:
        """Whether the step waits on: its plugin is still down and the hold has time left."""
        return self.down is not None and self.held < self.seconds

    @property
    def until(self) -> datetime:
        return self.since + timedelta(seconds=self.seconds)

    def reason(self, action_id: str | None = None) -> str:
        """Why the step waits, as the run's ``waiting_on`` sentence ends (``action_id``, the
        step's, is there so this answers as :meth:`pageant.hosting.Host.unavailable` does)."""
        return (
            f"{self.down}; a notify step is held up to {self.seconds} s for its plugin, "
            f"until {iso(self.until)}"
        )


def hold_seconds_of(phase: Mapping[str, Any], seq: int) -> int:
    """The ``hold_seconds`` of step ``seq`` of ``phase`` (a pinned version's phase)."""
    authored = phase.get("steps") or []
    value = authored[seq].get("hold_seconds") if 0 <= seq < len(authored) else None
    return DEFAULT_HOLD_SECONDS if value is None else int(value)


def notify_hold(
    host: Host, step: StepRow, phase: Mapping[str, Any], state: RunState, now: datetime
) -> NotifyHold | None:
    """The hold on ``step`` (the run's next, due) at ``now``, or None when none applies: its
    action is not ``notify``, or its plugin is up and the run was not holding it, or its
    plugin is down and ``hold_seconds`` is 0 (refused at once)."""
    action = host.registry.actions.get(step["action"])
    if action is None or action.risk != "notify":
        return None
    down = host.plugin_unavailable(step["action"].split(".", 1)[0])
    since = state["waiting_since"] if state["waiting_reason"] == "unavailable" else None
    if down is None and since is None:
        return None
    seconds = hold_seconds_of(phase, step["seq"])
    if since is None:
        if seconds == 0:
            return None
        since = now
    return NotifyHold(since, seconds, max(0.0, (now - since).total_seconds()), down)
