"""How ``pageant demo`` reads in a terminal: one line per thing that happened while the run
goes, and a summary at the end that fits one screen (120 columns by 40 rows) and says what happened.

Everything here reads the run console (:func:`pageant.runs.console.console`, what
``GET /api/v1/admin/runs/{run_id}`` answers) and nothing else. The whole console, log
included, is what ``pageant demo --json`` prints.
"""

from __future__ import annotations

import shutil
import sys
import textwrap
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from pageant.db.log_kinds import LogKind
from pageant.gates.phase import elapsed
from pageant.runs import sentences
from pageant.runs.sentences import NO_CONTEXT, Context, resources_words
from pageant.support.timefmt import instant_or_none

#: The widest line the demo prints: a 120-column terminal shows each on one row.
WIDTH = 120
#: The log lines the stream leaves out, because the line after them says what came of it:
#: the ledger's record before a call (its step's line names what was made), and an action's
#: confirmation (the same resources, in the step's line).
QUIET = (LogKind.RESOURCE_PLACEHOLDER,)

Line = Mapping[str, Any]


def terminal_width() -> int:
    """The width to print at: the terminal's, up to :data:`WIDTH`; :data:`WIDTH` when
    standard output is not a terminal (a pipe, a file, a test)."""
    if not sys.stdout.isatty():
        return WIDTH
    return min(WIDTH, shutil.get_terminal_size((WIDTH, 40)).columns)


def hhmm(value: Any) -> str:
    at = instant_or_none(value)
    return "--:--" if at is None else at.astimezone(UTC).strftime("%H:%M")


def _hhmmss(value: Any) -> str:
    at = instant_or_none(value)
    return "--:--:--" if at is None else at.astimezone(UTC).strftime("%H:%M:%S")


def fit(text: str, width: int = WIDTH) -> str:
    """One row of a terminal ``width`` wide: a longer line is cut, and says so with ``…``."""
    return text if len(text) <= width else text[: width - 1] + "…"


# ── while the run goes ────────────────────────────────────────────────────────


def stream_lines(
    lines: Sequence[Line], width: int | None = None, context: Context = NO_CONTEXT
) -> list[str]:
    """New log lines as the demo prints them: the time, the phase and a sentence, one row
    each. The gives-back of one step's resources in a row are one line. ``context`` gives
    the steps' labels (:meth:`Context.of_console`)."""
    width = width or terminal_width()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        kind = line["kind"]
        if kind in QUIET or (kind == LogKind.RESOURCE_CONFIRMED and "resources" in line["detail"]):
            i += 1
            continue
        if kind == LogKind.RESOURCE_REVERTED:
            same = [line]
            while (
                i + len(same) < len(lines)
                and lines[i + len(same)]["kind"] == kind
                and lines[i + len(same)]["step_id"] == line["step_id"]
                and lines[i + len(same)]["detail"].get("kind") == line["detail"].get("kind")
            ):
                same.append(lines[i + len(same)])
            given = [{"kind": s["detail"].get("kind"), "ref": s["detail"].get("ref")} for s in same]
            given.sort(key=lambda r: str(r["ref"]))
            what = f"Gave back {resources_words(given)}"
            i += len(same)
        else:
            what = _sentence(line, context)
            i += 1
        phase = line["phase"] or "-"
        out.append(fit(f"{_hhmmss(line['at'])}  {phase:<10} {what}", width))
    return out


def _sentence(line: Line, context: Context) -> str:
    """A log line as the one renderer's sentence (:mod:`pageant.runs.sentences`), which
    says what it is about, so the stream needs no kind column."""
    return sentences.text(line, context)


# ── at the end ────────────────────────────────────────────────────────────────


def _of(log: Sequence[Line], kind: str) -> list[Line]:
    return [line for line in log if line["kind"] == kind]


def health_sentence(run: Mapping[str, Any], log: Sequence[Line]) -> str:
    """``ok throughout``, or when the run's health fell and when it went on again:
    ``degraded at 20:04 (shard.spawn is unavailable), recovered at 20:05``. Health only
    ever escalates, so recovering is read from the log: the first step done after it fell."""
    fell = [line for line in _of(log, LogKind.RUN_HEALTH) if line["detail"].get("to")]
    if not fell:
        return f"{run['health']} throughout"
    parts = []
    for line in fell:
        because = line["detail"].get("because")
        text = f"{line['detail']['to']} at {hhmm(line['at'])}" + (
            f" ({because})" if because else ""
        )
        after = instant_or_none(line["at"]) or datetime.max.replace(tzinfo=UTC)
        done = [
            s
            for s in _of(log, LogKind.STEP_STATUS)
            if s["detail"].get("to") == "done" and (instant_or_none(s["at"]) or after) > after
        ]
        text += f", recovered at {hhmm(done[0]['at'])}" if done else ", not recovered"
        parts.append(text)
    return "; ".join(parts)


def _phase_lines(run: Mapping[str, Any], log: Sequence[Line]) -> list[str]:
    entered = _of(log, LogKind.PHASE_ENTERED)
    advanced = {line["phase"]: line for line in _of(log, LogKind.PHASE_ADVANCED)}
    confirmed = _of(log, LogKind.CONTROL_CONFIRM)
    out = []
    for n, line in enumerate(entered):
        phase = line["phase"]
        text = f"{phase} {hhmm(line['at'])}"
        cues = [c for c in confirmed if c["phase"] == phase]
        for cue in cues:
            text += f", cue confirmed at {hhmm(cue['at'])} by {cue['actor']}"
        moved = advanced.get(phase)
        if moved is not None:
            detail = moved["detail"]
            if detail.get("kind") == "on":
                why = f"on {detail.get('trigger_id')}"
                if detail.get("condition"):
                    why += f" where {detail['condition']}"
                why += f", {detail.get('tally')} of {detail.get('needed')}"
            elif detail.get("kind") == "after":
                why = f"after {detail.get('after')}"
            else:
                why = f"because {detail.get('because')}"
            text += f", moved on at {hhmm(moved['at'])} {why}"
        elif n == len(entered) - 1 and run["ended_at"] is not None:
            text += f", {run['status']} at {hhmm(run['ended_at'])}"
        out.append(text)
    return out


def _steps_sentence(steps: Sequence[Mapping[str, Any]]) -> str:
    counts: dict[str, int] = {}
    for step in steps:
        status = "parked" if step["parked"] else step["status"]
        counts[status] = counts.get(status, 0) + 1
    text = ", ".join(f"{n} {status}" for status, n in counts.items()) or "none"
    troubled = [s for s in steps if s["status"] in ("failed", "refused") and s["last_error"]]
    for step in troubled[:2]:
        text += f"; step {step['id']} {step['action']} {step['status']}: {step['last_error']}"
    return text


def _spent(budget: Sequence[Mapping[str, Any]]) -> str:
    parts = []
    for row in budget:
        cap = "" if row["cap"] is None else f" of {row['cap']}"
        parts.append(f"{row['consumed']}{cap} {row['unit']} ({row['dimension']})")
    return ", ".join(parts) or "nothing"


def _made(resources: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[str]]:
    """What the run made (per step) and what it borrowed, as sentences."""
    made: dict[Any, list[dict[str, Any]]] = {}
    borrowed = []
    for res in resources:
        payload = res.get("payload") or {}
        if "lease" in payload:
            borrowed.append(
                f"{res['ref']} ({payload['lease']}): {payload.get('baseline')} -> "
                f"{payload.get('applied')}"
            )
            continue
        found = payload.get("detail")
        detail: dict[str, Any] = found if isinstance(found, dict) else {}
        made.setdefault(res["step_id"], []).append(
            {"kind": res["kind"], "ref": res["ref"], **detail}
        )
    sentences = [f"step {step}: {resources_words(items)}" for step, items in made.items()]
    return sentences, borrowed


def _given_back(console: Mapping[str, Any]) -> str:
    resources = console["resources"]
    back = [r for r in resources if r["status"] == "reverted"]
    text = f"{len(back)} of {len(resources)}"
    retried = [r for r in back if r["revert_attempts"] > 1]
    for res in retried[:2]:
        text += f"; {res['ref']} on attempt {res['revert_attempts']}"
    return f"{text}. {console['cleanup_summary']}"


def summary(console: Mapping[str, Any], wall_seconds: float, width: int | None = None) -> list[str]:
    """The end of the demo: what happened to the run, in at most a screen of lines."""
    width = width or terminal_width()
    run, log = console["run"], console["log"]
    started, ended = instant_or_none(run["started_at"]), instant_or_none(run["ended_at"])
    took = (
        f"{elapsed((ended - started).total_seconds())} on the event's clock, "
        if (started and ended)
        else ""
    )
    rows: list[tuple[str, list[str]]] = [
        ("took", [f"{took}{wall_seconds:.1f} s of wall time (cleanup included); times in UTC"]),
        ("health", [health_sentence(run, log)]),
        ("phases", _phase_lines(run, log) or ["none entered"]),
        ("steps", [_steps_sentence(console["steps"])]),
        ("spent", [_spent(console["budget"])]),
    ]
    made, borrowed = _made(console["resources"])
    if made:
        rows.append(("made", made))
    if borrowed:
        rows.append(("borrowed", borrowed))
    if console["resources"]:
        rows.append(("given back", [_given_back(console)]))
    if run["last_error"]:
        rows.append(("last error", [run["last_error"]]))
    waiting = (run["waiting_on"] or {}).get("sentence")
    if waiting:
        rows.append(("waiting", [waiting]))
    rule = "─" * min(width, WIDTH)
    out = [
        rule,
        fit(
            f"Run {run['id']}: {run['definition_title']}, version {run['version_number']}: "
            f"{run['status']} (health {run['health']})",
            width,
        ),
    ]
    for label, texts in rows:
        for n, text in enumerate(texts):
            wrapped = textwrap.wrap(text, width - 14) or [""]
            for m, part in enumerate(wrapped):
                head = label if n == 0 and m == 0 else ""
                indent = "" if m == 0 else "  "
                out.append(f"  {head:<11} {indent}{part}")
    out.append(rule)
    return out
