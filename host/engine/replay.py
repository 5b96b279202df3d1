"""A rehearsal from a run: the firings a finished run received, and where a version differs.

A real run keeps the firings its gates counted in its own log, one ``condition.evaluated``
line a gate a firing counted for (the trigger, its payload and the instant it was counted),
so they last exactly as long as the run's log (``log_retention_days``). :func:`recorded`
reads a finished run back: the firings at their offsets from the run's start, and its
phases' timeline (each phase's entry and end, and the instant its gate opened). After the
rehearsal of another version has replayed those firings at those offsets,
:func:`differences` says where the two runs part, in sentences and as a list.

Only what the real run counted was recorded: a firing that came while none of its gates was
open for it (before its phase, after its gate closed, or not matching the gate's condition)
is not in the log, so a version that opens a gate sooner, or waits for more, sees only the
firings the real run counted.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pageant.db import rehearsal as rows
from pageant.db import runlog
from pageant.db.log_kinds import LogKind
from pageant.errors import Conflict, Invalid, NotFound
from pageant.gates.phase import elapsed
from pageant.hosting import Host
from pageant.states import RUN_ENDED, RunStatus

#: A difference of an instant smaller than this is not reported: the real engine acts on
#: its tick, a rehearsal at the instant itself.
NOISE_SECONDS = 30.0


@dataclasses.dataclass(frozen=True)
class Recorded:
    """What a finished run leaves for a rehearsal: its firings (``after`` seconds from its
    start), its phases' timeline, its status and end, and the version it ran."""

    run_id: int
    version_number: int
    version_spec: dict[str, Any]
    status: str
    started_at: datetime
    ended_seconds: float | None
    params: dict[str, Any]
    firings: list[dict[str, Any]]
    phases: list[dict[str, Any]]


def _offset(at: datetime | None, start: datetime) -> float | None:
    return None if at is None else round((at - start).total_seconds(), 3)


async def recorded(host: Host, definition_id: int, run_id: int) -> Recorded:
    """The finished run ``run_id`` of event ``definition_id``, read back for a rehearsal.

    Raises :class:`NotFound` for no such run, :class:`Invalid` (``body.from_run``) for a run
    of another event, and :class:`Conflict` with a sentence for a run that has not ended,
    one that never started, or one whose log (and with it its firings) was pruned."""
    async with host.db.connect() as conn:
        run = await rows.recorded_run(conn, run_id)
        lines = await runlog.lines_of(conn, run_id) if run is not None else []
    if run is None:
        raise NotFound(f"no run {run_id}")
    if run.definition_id != definition_id:
        raise Invalid(
            f"run {run_id} is a run of another event",
            details=[
                f"body.from_run: run {run_id} is a run of event {run.definition_id} "
                f"({run.definition_title!r}), not of event {definition_id}"
            ],
        )
    if run.status not in RUN_ENDED:
        raise Conflict(
            f"run {run_id} is {run.status}: a rehearsal replays the firings of a run that "
            "has ended, so wait until it ends"
        )
    if run.started_at is None:
        raise Conflict(
            f"run {run_id} ended {run.status} without starting: it received no firings to replay"
        )
    kinds = {line.kind for line in lines}
    if LogKind.RUN_CREATED not in kinds or LogKind.PHASE_ENTERED not in kinds:
        ended = run.ended_at.strftime("%Y-%m-%d %H:%M UTC") if run.ended_at else "long ago"
        raise Conflict(
            f"run {run_id} ended {ended} and its log, with the firings recorded in it, has "
            f"been pruned (a run's log is kept {host.settings.log_retention_days} days after "
            "it ends): there is nothing left to replay"
        )
    start = run.started_at
    spec = run.version_spec if isinstance(run.version_spec, dict) else {}
    labels = {p.get("key"): p.get("label") for p in spec.get("phases") or []}
    return Recorded(
        run_id=run.id,
        version_number=run.version_number,
        version_spec=spec,
        status=run.status,
        started_at=start,
        ended_seconds=_offset(run.ended_at, start),
        params=dict(run.params or {}),
        firings=firings_of(lines, start),
        phases=phase_timeline(lines, start, labels),
    )


def firings_of(lines: Sequence[Any], start: datetime) -> list[dict[str, Any]]:
    """The firings a run's log recorded, each ``{"after", "trigger", "payload"}`` with
    ``after`` in seconds from ``start``, earliest first. A firing counted by two of the
    run's gates left a line on each: lines alike in instant, trigger, payload and key are
    one firing per gate that counted them."""
    seen: dict[tuple[Any, ...], dict[str | None, int]] = {}
    order: list[tuple[Any, ...]] = []
    for line in lines:
        if line.kind != LogKind.CONDITION_EVALUATED:
            continue
        detail = line.detail or {}
        payload = detail.get("payload") or {}
        key = (
            line.at,
            detail.get("trigger_id"),
            detail.get("fired_at"),
            detail.get("key"),
            json.dumps(payload, sort_keys=True),
        )
        per_gate = seen.setdefault(key, {})
        if not per_gate:
            order.append(key)
        per_gate[line.phase] = per_gate.get(line.phase, 0) + 1
    firings = []
    for key in order:
        at, trigger, _fired_at, _key, payload = key
        after = max(0.0, _offset(at, start) or 0.0)
        firings += [{"after": after, "trigger": trigger, "payload": json.loads(payload)}] * max(
            seen[key].values()
        )
    return sorted(firings, key=lambda f: f["after"])


def phase_timeline(
    lines: Sequence[Any], start: datetime, labels: Mapping[Any, Any]
) -> list[dict[str, Any]]:
    """Each phase a run's log entered, in order: ``key``, ``label``, ``entered_seconds``,
    ``left_seconds`` and ``gate_opened_seconds`` (None when it did not happen), offsets
    from ``start``."""
    phases: dict[str, dict[str, Any]] = {}
    for line in lines:
        if line.kind == LogKind.PHASE_ENTERED:
            phases[line.phase] = {
                "key": line.phase,
                "label": labels.get(line.phase),
                "entered_seconds": _offset(line.at, start),
                "left_seconds": None,
                "gate_opened_seconds": None,
            }
        elif line.kind == LogKind.PHASE_COMPLETED and line.phase in phases:
            phases[line.phase]["left_seconds"] = _offset(line.at, start)
        elif line.kind == LogKind.PHASE_GATE and line.phase in phases:
            phases[line.phase]["gate_opened_seconds"] = _offset(line.at, start)
    return list(phases.values())


def _at(seconds: float | None) -> str:
    """An offset as the sentences say it (``+25 min``); the callers pass a known one."""
    return f"+{elapsed(seconds or 0)}"


def _apart(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and abs(a - b) >= NOISE_SECONDS


def _difference(
    phase: str | None, what: str, real: Any, rehearsed: Any, sentence: str
) -> dict[str, Any]:
    return {
        "phase": phase,
        "what": what,
        "real": real,
        "rehearsed": rehearsed,
        "sentence": sentence,
    }


def differences(
    real: Recorded, report: Mapping[str, Any], spec: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Where the rehearsal of ``spec`` (``report``) parts from the real run: each phase's
    gate, entry and end, a phase one of them never reached, and how and when the run
    ended; each ``{phase, what, real, rehearsed, sentence}``, instants as offsets in
    seconds. Instants closer than :data:`NOISE_SECONDS` are taken as the same."""
    new_keys = [p.get("key") for p in spec.get("phases") or []]
    old_keys = [p.get("key") for p in real.version_spec.get("phases") or []]
    version = report["version"]["number"]
    was = {p["key"]: p for p in real.phases}
    now = {p["key"]: p for p in report["timeline"]["phases"]}
    keys = list(dict.fromkeys([*was, *(k for k in new_keys if k in now)]))
    found: list[dict[str, Any]] = []
    for key in keys:
        number = (new_keys.index(key) if key in new_keys else old_keys.index(key)) + 1
        name = f"phase {number} `{key}`"
        old, new = was.get(key), now.get(key)
        if old is not None and new is None:
            entered = old["entered_seconds"] or 0
            if key not in new_keys:
                said = (
                    f"{name} would have been skipped: version {version} has no such phase "
                    f"(the real run entered it at {_at(entered)})"
                )
                found.append(_difference(key, "removed", entered, None, said))
            else:
                said = (
                    f"{name} would not have been reached "
                    f"(the real run entered it at {_at(entered)})"
                )
                found.append(_difference(key, "not_reached", entered, None, said))
            continue
        if new is not None and old is None:
            entered = new["entered_seconds"] or 0
            if key not in old_keys:
                said = f"{name} is new in version {version}: it would have begun at {_at(entered)}"
            else:
                said = (
                    f"{name} would have been reached at {_at(entered)}; "
                    "the real run never reached it"
                )
            found.append(_difference(key, "reached", None, entered, said))
            continue
        assert old is not None and new is not None
        found += _phase_differences(key, name, old, new)
    found += _outcome_differences(real, report)
    return found


def _phase_differences(
    key: str, name: str, old: Mapping[str, Any], new: Mapping[str, Any]
) -> list[dict[str, Any]]:
    found = []
    was_open, now_open = old["gate_opened_seconds"], new["gate_opened_seconds"]
    if _apart(was_open, now_open):
        assert was_open is not None and now_open is not None
        sooner = "earlier" if now_open < was_open else "later"
        said = (
            f"the new version's gate `{key}` would have opened {elapsed(abs(was_open - now_open))} "
            f"{sooner} (at {_at(now_open)} instead of {_at(was_open)})"
        )
        found.append(_difference(key, "gate_opened", was_open, now_open, said))
    elif was_open is not None and now_open is None:
        said = (
            f"the new version's gate `{key}` would not have opened on the recorded firings "
            f"(the real one opened at {_at(was_open)})"
        )
        found.append(_difference(key, "gate_opened", was_open, None, said))
    elif was_open is None and now_open is not None:
        said = f"the new version's gate `{key}` would have opened at {_at(now_open)}"
        found.append(_difference(key, "gate_opened", None, now_open, said))
    if _apart(old["entered_seconds"], new["entered_seconds"]):
        said = (
            f"{name} would have begun at {_at(new['entered_seconds'])} instead of "
            f"{_at(old['entered_seconds'])}"
        )
        found.append(
            _difference(key, "entered", old["entered_seconds"], new["entered_seconds"], said)
        )
    was_left, now_left = old["left_seconds"], new["left_seconds"]
    if _apart(was_left, now_left):
        said = f"{name} would have ended at {_at(now_left)} instead of {_at(was_left)}"
        found.append(_difference(key, "ended", was_left, now_left, said))
    elif was_left is not None and now_left is None:
        said = f"{name} would not have ended (the real one ended at {_at(was_left)})"
        found.append(_difference(key, "ended", was_left, None, said))
    elif was_left is None and now_left is not None:
        said = f"{name} would have ended at {_at(now_left)}; in the real run it never did"
        found.append(_difference(key, "ended", None, now_left, said))
    return found


def _outcome_differences(real: Recorded, report: Mapping[str, Any]) -> list[dict[str, Any]]:
    outcome = report["outcome"]
    status, ended = outcome["status"], outcome["ended_seconds"]
    if status != real.status:
        if status in RUN_ENDED:
            how = f"the run would have ended {status}"
        elif report["stalls"]:
            stall = report["stalls"][-1]
            how = (
                f"the run would have stalled in phase `{stall['phase']}` at "
                f"{_at(stall['stalled_seconds'] or 0)}"
            )
        else:
            how = f"the run would have stopped {status}"
        said = f"{how}, where the real run ended {real.status}"
        if real.status == RunStatus.CANCELLED:
            said += " (the rehearsal does not replay a person's cancel)"
        return [_difference(None, "outcome", real.status, status, said)]
    if _apart(real.ended_seconds, ended):
        said = f"the run would have ended at {_at(ended)} instead of {_at(real.ended_seconds)}"
        return [_difference(None, "run_ended", real.ended_seconds, ended, said)]
    return []
