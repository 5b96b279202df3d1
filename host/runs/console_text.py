"""The run console as text, for a terminal.

:func:`render_console` renders what :func:`pageant.runs.console.console` builds — the data
``GET /api/v1/admin/runs/{run_id}`` answers — and reads nothing else, so the terminal and
the API cannot tell two stories about one run. It accepts instants as datetimes (the
console as built) or as ISO strings (the console as the API sent it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pageant.runs import sentences
from pageant.runs.sentences import NO_CONTEXT, Context
from pageant.support.timefmt import instant_or_none

Detail = Mapping[str, Any]


def render_console(console: Mapping[str, Any]) -> str:
    """The console ``{run, steps, gate, log}`` as lines of text: the run (with what it left
    in the world, when the console says), its steps, the current phase's gate, and the log
    in order."""
    run = console["run"]
    sections = [
        _run(run, console.get("cleanup_summary")),
        _steps(console["steps"]),
        _gate(console["gate"], run["current_phase"]),
        *_outcome(console.get("participants") or [], console.get("results") or []),
        _log(console["log"], Context.of_console(console)),
    ]
    return "\n\n".join("\n".join(section) for section in sections)


# ── words ─────────────────────────────────────────────────────────────────────


def _when(value: Any) -> str:
    """``2027-03-05 20:01:07 UTC``."""
    at = instant_or_none(value)
    return "-" if at is None else at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _clock(value: Any) -> str:
    """``20:01:07.250``: a log line's time of day, to the millisecond."""
    at = instant_or_none(value)
    if at is None:
        return str(value)
    return at.astimezone(UTC).strftime("%H:%M:%S.%f")[:-3]


def _value(value: Any) -> str:
    if isinstance(value, str):
        # An instant reads as a time of day; anything else as its author would write it.
        at = instant_or_none(value) if len(value) >= 20 and value[4:5] == "-" else None
        return _clock(at) if at is not None else json.dumps(value, ensure_ascii=False)
    if isinstance(value, datetime):
        return _clock(value)
    return json.dumps(value, ensure_ascii=False, default=str)


def _pairs(values: Mapping[str, Any] | None, skip: tuple[str, ...] = ()) -> str:
    """``colour="north" weight=1.5``: a mapping as its keys and values."""
    return " ".join(f"{k}={_value(v)}" for k, v in (values or {}).items() if k not in skip)


def _table(rows: list[list[str]], indent: str = "  ") -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        indent + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


# ── the run ───────────────────────────────────────────────────────────────────


def _run(run: Mapping[str, Any], world: str | None = None) -> list[str]:
    lines = [
        f"Run {run['id']}: {run['definition_title']} ({run['definition_slug']}), "
        f"version {run['version_number']}"
    ]
    rows = [
        ["status", f"{run['status']} (health {run['health']})"],
        ["phase", run["current_phase"] or "-"],
        ["waiting", (run["waiting_on"] or {}).get("sentence") or "on nothing"],
        ["scheduled", f"{_when(run['scheduled_for'])} ({run['source']})"],
        *([["params", _pairs(run["params"])]] if run.get("params") else []),
        ["started", _when(run["started_at"])],
    ]
    started, ended = instant_or_none(run["started_at"]), instant_or_none(run["ended_at"])
    if ended is not None:
        took = f", {(ended - started).total_seconds():.1f} s after it started" if started else ""
        rows.append(["ended", _when(ended) + took])
    if run["last_error"]:
        rows.append(["last error", run["last_error"]])
    if run["cancel_reason"]:
        rows.append(["cancelled", run["cancel_reason"]])
    if world:
        rows.append(["world", f"{world} (cleanup {run['cleanup_status']})"])
    return lines + _table(rows)


def _steps(steps: list[Mapping[str, Any]]) -> list[str]:
    if not steps:
        return ["Steps: none"]
    rows = [["id", "phase", "action", "status", "tries", "params"]]
    for step in steps:
        status = "parked" if step["parked"] else step["status"]
        what = _pairs(step["params"])
        for key in ("last_error", "note"):
            if step[key]:
                what += f"  [{key.replace('_', ' ')}: {step[key]}]"
        rows.append(
            [str(step["id"]), step["phase"], step["action"], status, str(step["attempts"]), what]
        )
    return ["Steps", *_table(rows)]


def _gate(gate: Mapping[str, Any] | None, phase: str | None) -> list[str]:
    if gate is None:
        return [f"Gate of the current phase ({phase or 'none'}): none"]
    if gate["kind"] == "after":
        what = f"after, until {_when(gate['deadline'])}"
    else:
        what = f"on {gate['trigger_id']}"
        if gate["condition"]:
            what += f" where {gate['condition']}"
        what += f", {gate['tally']} of {gate['needed']}"
    if gate["satisfied_at"] is not None:
        state = f"satisfied by {gate['satisfied_by']} at {_when(gate['satisfied_at'])}"
    else:
        state = f"open since {_when(gate['entered_at'])}"
    lines = [f"Gate of the current phase ({gate['phase']}): {what}; {state}"]
    if gate["last_event_at"] is not None:
        counted = "counted" if gate["last_event_counted"] else "did not count"
        lines.append(f"  last firing at {_when(gate['last_event_at'])}: {counted}")
    return lines


# ── who took part, how it ended ───────────────────────────────────────────────


def _outcome(people: list[Mapping[str, Any]], tables: list[Mapping[str, Any]]) -> list[list[str]]:
    """The participants and results sections, each only when there is something in it."""
    sections = []
    if people:
        names = [f"{p['name']} ({p['role']})" if p.get("role") else p["name"] for p in people]
        sections.append([f"Participants ({len(people)})", "  " + ", ".join(names)])
    for table in tables:
        rows = [["rank", "name", "detail"]]
        for entry in table["entries"]:
            rank = entry.get("rank")
            rows.append(["-" if rank is None else str(rank), entry["name"], entry["detail"]])
        sections.append([f"Results: {table['title']} (phase {table['phase']})", *_table(rows)])
    return sections


# ── the log ───────────────────────────────────────────────────────────────────


def describe(line: Mapping[str, Any], context: Context = NO_CONTEXT) -> str:
    """What one log line says, in words (``“Spawn the guardians” done; made 6 creatures``):
    :func:`pageant.runs.sentences.text` on UTC's clock, without who did it."""
    return sentences.text({**line, "actor": None}, context)


def _log(log: list[Mapping[str, Any]], context: Context) -> list[str]:
    rows = [["at (UTC)", "phase", "what"]]
    for line in log:
        rows.append([_clock(line["at"]), line["phase"] or "-", sentences.text(line, context)])
    return [f"Log ({len(log)} lines)", *_table(rows)]


def log_sentence(line: Mapping[str, Any], context: Context = NO_CONTEXT) -> str:
    """What one log line says, without its time and phase, with who did it."""
    return sentences.text(line, context)


def render_log_line(line: Mapping[str, Any], context: Context = NO_CONTEXT) -> str:
    """One log line as the console's log shows it, for a terminal that follows a run: its
    time of day (UTC), its phase and its sentence."""
    return f"{_clock(line['at'])}  {line['phase'] or '-'}  {sentences.text(line, context)}"


#: What an envelope's ``resources`` made, in words (:func:`pageant.runs.sentences.resources_words`).
resources_sentence = sentences.resources_words
