"""The run console as text, for a terminal.

:func:`render_console` renders what :func:`pageant.runs.console.console` builds — the data
``GET /api/v1/admin/runs/{run_id}`` answers — and reads nothing else, so the terminal and
the API cannot tell two stories about one run. It accepts instants as datetimes (the
console as built) or as ISO strings (the console as the API sent it).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from pageant.db.log_kinds import LogKind
from pageant.gates.phase import elapsed
from pageant.timefmt import instant_or_none

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
        _log(console["log"]),
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


def describe(line: Mapping[str, Any]) -> str:
    """What one log line says, in words (``step 6: core.cue -> running``): the sentence
    every surface that shows a run's log prints for it, without who did it."""
    detail = line["detail"] or {}
    say = _SAY.get(line["kind"], _pairs)
    text = say(detail)
    if line["step_id"] is not None:
        text = f"step {line['step_id']}: {text}"
    return text


def _what(line: Mapping[str, Any]) -> str:
    text = describe(line)
    if line["actor"]:
        text += f"  (by {line['actor']})"
    return text


def _log(log: list[Mapping[str, Any]]) -> list[str]:
    rows = [["at (UTC)", "kind", "phase", "what"]]
    for line in log:
        rows.append([_clock(line["at"]), line["kind"], line["phase"] or "-", _what(line)])
    return [f"Log ({len(log)} lines)", *_table(rows)]


def log_sentence(line: Mapping[str, Any]) -> str:
    """What one log line says, without its time, kind and phase (``step 4: shard.spawn ->
    done  attempt=1; made 6 creatures (guardian, yew: c00001…c00006)``)."""
    return _what(line)


def render_log_line(line: Mapping[str, Any]) -> str:
    """One log line as the console's log shows it, for a terminal that follows a run."""
    return f"{_clock(line['at'])}  {line['kind']}  {line['phase'] or '-'}  {_what(line)}"


def _status(detail: Detail) -> str:
    text = f"{detail.get('from', '?')} -> {detail.get('to')}"
    rest = _pairs(detail, skip=("from", "to"))
    return f"{text}  {rest}" if rest else text


def _step_status(detail: Detail) -> str:
    text = f"{detail.get('action', '?')} -> {detail.get('to')}"
    rest = _pairs(detail, skip=("action", "to", "resources"))
    if rest:
        text += f"  {rest}"
    if detail.get("resources"):
        text += f"; made {resources_sentence(detail['resources'])}"
    return text


def _confirmed(detail: Detail) -> str:
    if "lease" in detail:
        return (
            f"borrowed {detail.get('target')} ({detail.get('lease')}): "
            f"{_value(detail.get('baseline'))} -> {_value(detail.get('applied'))}"
        )
    resources = detail.get("resources") or []
    return f"{detail.get('action', '?')}: recorded {resources_sentence(resources)}"


def _refs(refs: list[str]) -> str:
    """``c00001``, ``c00001, c00002`` or ``c00001…c00006``: a run of refs, shortened."""
    return ", ".join(refs) if len(refs) <= 2 else f"{refs[0]}…{refs[-1]}"


def _described(value: Any, key: str) -> str:
    at = instant_or_none(value) if isinstance(value, str) and len(value) >= 20 else None
    if at is not None:
        return f"{key.replace('_', ' ')} {at.astimezone(UTC).strftime('%H:%M')}"
    return str(value)


def resources_sentence(resources: Any) -> str:
    """What an envelope's ``resources`` made, as a person reads it: ``6 creatures (guardian,
    yew: c00001…c00006) and 1 gate (closes at 20:31: gate-7f3a)``. Resources of one kind
    and one description are counted together; the rest of each is its ``ref``."""
    groups: dict[tuple[str, str], list[str]] = {}
    for item in resources if isinstance(resources, list) else []:
        if not isinstance(item, Mapping):
            continue
        described = ", ".join(
            _described(value, key)
            for key, value in item.items()
            if key not in ("kind", "ref", "id") and not isinstance(value, (dict, list))
        )
        groups.setdefault((str(item.get("kind")), described), []).append(str(item.get("ref")))
    if not groups:
        return "nothing"
    parts = []
    for (kind, described), refs in groups.items():
        plural = "" if len(refs) == 1 or kind.endswith("s") else "s"
        what = f"{described}: {_refs(refs)}" if described else _refs(refs)
        parts.append(f"{len(refs)} {kind}{plural} ({what})")
    return ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1]


def _announce(detail: Detail) -> str:
    return f"{_value(detail.get('message'))} via {detail.get('leg')}"


def _waiting(detail: Detail) -> str:
    return str(detail.get("sentence") or _pairs(detail))


def _gate_words(gate: Detail) -> str:
    if gate.get("kind") == "after":
        return f"after {gate.get('after')}, until {_clock(gate.get('deadline'))}"
    where = f" where {gate['condition']}" if gate.get("condition") else ""
    return f"on {gate.get('trigger_id')}{where}, {gate.get('tally')} of {gate.get('needed')}"


def _entered(detail: Detail) -> str:
    count = detail.get("steps", 0)
    gate = detail.get("gate")
    steps = f"{count} step{'' if count == 1 else 's'}"
    return f"{steps}; gate {_gate_words(gate)}" if gate else f"{steps}; no gate"


def _evaluated(detail: Detail) -> str:
    values = _pairs(detail.get("values")) or "(no values)"
    tally = f"{detail.get('tally')} of {detail.get('needed')}"
    if detail.get("matched") and detail.get("sentence"):
        # The trigger's own words for the firing say who and how; the condition follows.
        where = f"; {detail['condition']}" if detail.get("condition") else ""
        return f"counted: {detail['sentence']} ({tally}{where})"
    if detail.get("matched"):
        return f"counted: {values} satisfies {detail.get('condition')} ({tally})"
    return f"near miss: {values} does not satisfy {detail.get('condition')} (still {tally})"


def _gate_closed(detail: Detail) -> str:
    return f"satisfied by {detail.get('satisfied_by')}: {_gate_words(detail)}"


def _advanced(detail: Detail) -> str:
    text = f"because {detail.get('because')}, after {elapsed(detail.get('waited_seconds', 0))}"
    return f"{text}: {detail['reason']}" if detail.get("reason") else text


def _completed(detail: Detail) -> str:
    return ""


#: How each kind of log line reads; any other kind shows its detail as ``key=value``.
_SAY: dict[str, Callable[[Detail], str]] = {
    LogKind.RUN_STATUS: _status,
    LogKind.STEP_STATUS: _step_status,
    LogKind.RESOURCE_CONFIRMED: _confirmed,
    LogKind.ANNOUNCE: _announce,
    LogKind.RUN_WAITING: _waiting,
    LogKind.PHASE_ENTERED: _entered,
    LogKind.PHASE_COMPLETED: _completed,
    LogKind.PHASE_GATE: _gate_closed,
    LogKind.PHASE_ADVANCED: _advanced,
    LogKind.CONDITION_EVALUATED: _evaluated,
}
