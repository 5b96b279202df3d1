"""A run-log record as a sentence a person reads: the one renderer every surface uses.

The console's log, ``pageant runs show``, ``pageant demo`` (every game) and the rehearsal's
timeline all print what :func:`words` answers for a record, so no surface tells its own
story about a line. A sentence leads with what it is about — the step's label, the phase's
label, the run — never with the record's kind code; it names amounts with their units and
the players a firing carries, and leaves out what the record does not have rather than
printing ``None`` or ``?``.

A sentence is a list of :data:`Part`: words, and instants left as instants. The surface
draws each instant on its own clock when it shows the sentence (:func:`text` for a
terminal, the console's ``<time>`` elements for a page), so a record stores instants and the
page's "Show times in my zone" switch moves the times inside sentences with every other.

**A firing's sentence** goes through one seam, :data:`FiringWords`: it is handed the
trigger's id and the firing's named values and answers the words, or None for the generic
sentence (:func:`generic_firing`), which reads the conventional variable names — ``killer``
and ``victim``, ``player``, ``weapon`` — when the payload has them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from pageant.db.log_kinds import LogKind
from pageant.gates.phase import elapsed
from pageant.support.timefmt import instant_or_none

#: One piece of a sentence: words, or an instant the surface draws on its own clock.
Part = str | datetime
Detail = Mapping[str, Any]

#: Answers a counted firing's words from its trigger's id and its named values, or None to
#: leave it to :func:`generic_firing`. A trigger declaration that gives its firing's sentence
#: plugs in here.
FiringWords = Callable[[str, Mapping[str, Any]], "str | None"]

# An instant written inside a stored sentence (``waiting_on``'s): ISO 8601 with an offset.
_ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})")


def generic_firing(trigger_id: str, values: Mapping[str, Any]) -> str | None:
    """A firing's words from its payload's conventional names: ``Major fragged Sarge with a
    rocket``, ``Major did it``; None when the payload names no player."""
    killer, victim = values.get("killer"), values.get("victim")
    weapon = values.get("weapon")
    with_ = f" with {_weapon(weapon)}" if weapon not in (None, "") else ""
    if killer not in (None, "") and victim not in (None, ""):
        verb = "fragged" if trigger_id.split(".", 1)[0] == "openarena" else "beat"
        return f"{killer} {verb} {victim}{with_}"
    player = values.get("player") or values.get("name")
    if player not in (None, ""):
        return f"{player}{with_ or ''} set it off"
    return None


def _weapon(value: Any) -> str:
    """A game's means of death as words: ``MOD_ROCKET`` -> ``rocket``."""
    name = str(value).lower().removeprefix("mod_").replace("_", " ")
    return _article(name)


@dataclass(frozen=True)
class Context:
    """What a record's sentence reads beside the record: the run's steps' labels (by id),
    its phases' labels (by key), each budget dimension's unit, and the firing seam."""

    step_labels: Mapping[int, str] = field(default_factory=dict)
    phase_labels: Mapping[str, str] = field(default_factory=dict)
    units: Mapping[str, str] = field(default_factory=dict)
    firing: FiringWords | None = None

    @classmethod
    def of_console(cls, console: Mapping[str, Any], firing: FiringWords | None = None) -> Context:
        """The context of a run console (:func:`pageant.runs.console.console`'s answer)."""
        steps = {int(s["id"]): str(s["label"]) for s in console.get("steps") or [] if s["label"]}
        units = {b["dimension"]: b["unit"] for b in console.get("budget") or [] if b.get("unit")}
        phases = {p["key"]: p.get("label") or p["key"] for p in console.get("phases") or []}
        return cls(step_labels=steps, phase_labels=phases, units=units, firing=firing)

    def step(self, line: Mapping[str, Any], detail: Detail) -> str:
        """How a record names its step: its label in quotes, else its action, else its id."""
        step_id = line.get("step_id")
        label = self.step_labels.get(step_id) if step_id is not None else None
        if label:
            return f"“{label}”"
        if detail.get("action"):
            return f"The step {detail['action']}"
        return "The run" if step_id is None else f"Step {step_id}"

    def phase(self, key: Any) -> str:
        if not key:
            return "the run"
        return f"phase “{self.phase_labels.get(key) or key}”"


NO_CONTEXT = Context()


# ── small words ────────────────────────────────────────────────────────────────────────


def _article(noun: str) -> str:
    return f"an {noun}" if noun[:1].lower() in "aeiou" else f"a {noun}"


def _quoted(value: Any) -> str:
    if isinstance(value, str):
        return f"“{value}”"
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, ensure_ascii=False, default=str).replace("=", " is ")


def _noun(kind: Any, count: int) -> str:
    """A resource kind as a noun: ``openarena.bot`` -> ``bot``/``bots``."""
    name = str(kind or "thing").rsplit(".", 1)[-1].replace("_", " ")
    return name if count == 1 or name.endswith("s") else f"{name}s"


def _named(values: Mapping[str, Any] | None) -> str:
    """``colour “north”, weight 1.5``: named values in words."""
    return ", ".join(f"{str(k).replace('_', ' ')} {_quoted(v)}" for k, v in (values or {}).items())


def _reason(detail: Detail, key: str = "reason") -> str:
    found = detail.get(key)
    return f": {found}" if found else ""


def _attempts(detail: Detail) -> str:
    attempt, of = detail.get("attempt"), detail.get("of")
    if attempt is None or (attempt == 1 and of is None):
        return ""
    return f" (attempt {attempt} of {of})" if of else f" (attempt {attempt})"


def _when(value: Any) -> list[Part]:
    at = instant_or_none(value)
    return [at] if at is not None else []


def _instants(sentence: str) -> list[Part]:
    """A stored sentence with each ISO instant in it turned into an instant."""
    parts: list[Part] = []
    last = 0
    for found in _ISO.finditer(sentence):
        at = instant_or_none(found.group(0))
        if at is None:
            continue
        parts.append(sentence[last : found.start()])
        parts.append(at)
        last = found.end()
    parts.append(sentence[last:])
    return [p for p in parts if p != ""]


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


#: A status as the verb a sentence about a run or a step ends on.
STATUS_WORDS = {
    "scheduled": "is scheduled",
    "starting": "is starting",
    "running": "is running",
    "paused": "is paused",
    "ending": "is ending",
    "completed": "completed",
    "failed": "failed",
    "cancelled": "was cancelled",
    "aborted": "was aborted",
    "missed": "was missed",
    "blacked_out": "was blacked out",
    "done": "is done",
    "pending": "is waiting its turn",
    "skipped": "was skipped",
    "refused": "was refused",
}


def _status(value: Any) -> str:
    return STATUS_WORDS.get(str(value), f"is {str(value).replace('_', ' ')}")


def _was(value: Any) -> str:
    return str(value).replace("_", " ")


def resources_parts(resources: Any) -> list[Part]:
    """What an envelope's ``resources`` made, as a person reads it: ``6 creatures
    (guardian, yew: c00001…c00006) and 1 gate (closes at 20:31: gate-7f3a)``. Resources of
    one kind and one description are counted together; an instant among a resource's
    fields stays an instant, for the surface's clock."""
    groups: dict[tuple[Any, ...], list[str]] = {}
    for item in resources if isinstance(resources, list) else []:
        if not isinstance(item, Mapping):
            continue
        described: list[Part] = []
        for key, value in item.items():
            if key in ("kind", "ref", "id") or isinstance(value, (dict, list)):
                continue
            if value in (None, ""):
                continue
            if described:
                described.append(", ")
            at = instant_or_none(value) if isinstance(value, str) and len(value) >= 20 else None
            if at is not None:
                described += [f"{key.replace('_', ' ')} ", at]
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                described.append(f"{key.replace('_', ' ')} {value}")
            else:
                described.append(str(value))
        groups.setdefault((str(item.get("kind")), *described), []).append(str(item.get("ref")))
    if not groups:
        return ["nothing"]
    out: list[Part] = []
    for n, (key, refs) in enumerate(groups.items()):
        kind, described = key[0], list(key[1:])
        if n:
            out.append(" and " if n == len(groups) - 1 else ", ")
        shown = ", ".join(refs) if len(refs) <= 2 else f"{refs[0]}…{refs[-1]}"
        out.append(f"{len(refs)} {_noun(kind, len(refs))} (")
        out += [*described, ": "] if described else []
        out.append(f"{shown})")
    return out


def resources_words(resources: Any, tz: str = "UTC") -> str:
    """:func:`resources_parts` as text, its instants on ``tz``'s clock."""
    return _join(resources_parts(resources), tz)


def _join(parts: Sequence[Part], tz: str) -> str:
    return "".join(clock(p, tz) if isinstance(p, datetime) else p for p in parts)


def _gate_words(gate: Detail) -> list[Part]:
    if gate.get("kind") == "after":
        return [f"after {gate.get('after')}, at ", *_when(gate.get("deadline"))]
    if gate.get("kind") == "reading":
        return [
            f"when {gate.get('reading')} reads at least {gate.get('at_least')}, or at ",
            *_when(gate.get("deadline")),
            f" ({gate.get('else')})",
        ]
    where = f" where {gate['condition']}" if gate.get("condition") else ""
    needed = gate.get("needed") or 1
    times = "once" if needed == 1 else f"{needed} times"
    return [f"when {gate.get('trigger_id')} fires{where} {times}"]


def _amount(ctx: Context, dimension: Any, amount: Any) -> str:
    unit = ctx.units.get(str(dimension)) or str(dimension)
    return f"{amount} {unit}"


# ── one sentence a kind ────────────────────────────────────────────────────────────────

Say = Callable[[Mapping[str, Any], Detail, Context], list[Part]]

_SOURCES = {"schedule": "by the schedule", "manual": "by hand"}


def _run_created(line: Mapping[str, Any], d: Detail, ctx: Context) -> list[Part]:
    how = _SOURCES.get(str(d.get("source")), "")
    out: list[Part] = [
        f"The run was made {how}".rstrip() + ", to start at ",
        *_when(d.get("scheduled_for")),
    ]
    if d.get("params"):
        out.append(f", with {_named(d['params'])}")
    if d.get("dst_adjusted"):
        out.append(" (moved by a daylight-saving change)")
    return out


def _run_status(line: Mapping[str, Any], d: Detail, ctx: Context) -> list[Part]:
    text = f"The run {_status(d.get('to'))}"
    if d.get("from"):
        text += f" (it was {_was(d['from'])})"
    if d.get("because") and d.get("to") == "starting":
        # A start's is a sentence of its own: "started 40 min late, catching up after ...".
        text += f": {d['because']}"
    elif d.get("because"):
        text += f", because {d['because']}"
    text += _reason(d)
    if d.get("cancelled_steps"):
        n = d["cancelled_steps"]
        text += f"; {n} step{'' if n == 1 else 's'} will not run"
    if d.get("grace_seconds"):
        text += f"; it was {elapsed(d['grace_seconds'])} late"
    out: list[Part] = [text]
    if d.get("scheduled_for") and d.get("to") == "scheduled":
        out += ["; due at ", *_when(d["scheduled_for"])]
    return out


def _run_health(line: Mapping[str, Any], d: Detail, ctx: Context) -> list[Part]:
    text = f"The run's health is now {d.get('to')}"
    if d.get("because"):
        text += f": {d['because']}"
    if d.get("waited_seconds"):
        text += f" (waited {elapsed(d['waited_seconds'])})"
    return [text]


def _run_waiting(line: Mapping[str, Any], d: Detail, ctx: Context) -> list[Part]:
    if not d.get("reason"):
        return ["No longer waiting"]
    found = d.get("words")
    if isinstance(found, list) and found:
        parts = waiting_words(found)
    else:
        parts = _instants(str(d.get("sentence") or str(d["reason"]).replace("_", " ")))
    if parts and isinstance(parts[0], str):
        parts[0] = _cap(parts[0])
    return parts


def waiting_words(found: Sequence[Any]) -> list[Part]:
    """A ``waiting_on``'s ``words`` (:func:`pageant.runs.waiting.said`) as parts: its
    instants, stored or in hand, as instants."""
    parts: list[Part] = []
    for part in found:
        at = instant_or_none(part) if isinstance(part, (str, datetime)) else None
        parts.append(at if at is not None else str(part))
    return parts


def waiting(found: Mapping[str, Any] | None) -> list[Part]:
    """What a run waits on (its ``waiting_on``), as a sentence's parts, as it was written
    (``waiting for a person to confirm …``, to follow a page's "Waiting:")."""
    if not found:
        return []
    words = found.get("words")
    if isinstance(words, list) and words:
        return waiting_words(words)
    return _instants(str(found.get("sentence") or ""))


def _run_repinned(line: Mapping[str, Any], d: Detail, ctx: Context) -> list[Part]:
    return ["The run now follows the event's newest published version"]


def _run_moved(line: Mapping[str, Any], d: Detail, ctx: Context) -> list[Part]:
    out: list[Part] = ["The run moved from ", *_when(d.get("from")), " to ", *_when(d.get("to"))]
    if d.get("dst_adjusted"):
        out.append(" (moved by a daylight-saving change)")
    return out


#: What an overlap did, as told on the run that became due (its newcomer) and on the run
#: that held the key: the words before and after the other run's "run 12, due at 20:00".
_OVERLAP_WORDS = {
    ("skip", True): ("", " was still going, so this run was skipped"),
    ("skip", False): ("", " was skipped: this run was still going"),
    ("replace", True): ("", " was cancelled to let this run start"),
    ("replace", False): ("", " replaced this run"),
    ("allow", True): ("This run started beside ", ""),
    ("allow", False): ("", " started beside this run"),
}


def _run_overlap(line: Mapping[str, Any], d: Detail, ctx: Context) -> list[Part]:
    policy = str(d.get("overlap"))
    before, after = _OVERLAP_WORDS.get((policy, bool(d.get("newcomer"))), ("", " met this run"))
    other = f"run {d.get('other_run_id')}"
    due = _when(d.get("other_scheduled_for"))
    out: list[Part] = [before + (other if before else _cap(other))]
    if due:
        out += [", due at ", *due, "," if after else ""]
    out.append(f"{after} (concurrency key {_quoted(d.get('key'))}, overlap {policy})")
    return out


def _step_status(line: Mapping[str, Any], d: Detail, ctx: Context) -> list[Part]:
    to = d.get("to")
    text = f"{ctx.step(line, d)} {_status(to)}"
    text += _attempts(d)
    if d.get("because"):
        text += f", because {d['because']}"
    if d.get("error"):
        text += f": {d['error']}"
    out: list[Part] = [text]
    if d.get("resources"):
        out += ["; made ", *resources_parts(d["resources"])]
    if d.get("hold_seconds"):
        out.append(f"; what follows waits {elapsed(d['hold_seconds'])}")
    return out


def _step_retry(line: Mapping[str, Any], d: Detail, ctx: Context) -> list[Part]:
    return [
        f"{ctx.step(line, d)} failed{_attempts(d)}: {d.get('error')}; trying again at ",
        *_when(d.get("next_at")),
    ]


def _step_refused(line: Mapping[str, Any], d: Detail, ctx: Context) -> list[Part]:
    name = ctx.step(line, d)
    if d.get("code") == "cap" and d.get("cap") is not None:
        dim = d.get("dimension")
        asked = _amount(ctx, dim, d.get("asked"))
        return [
            f"{name} was refused: it asks for {asked}, and {d.get('consumed')} of the cap "
            f"of {_amount(ctx, dim, d['cap'])} are already spent this run"
        ]
    return [f"{name} was refused: {d.get('error') or 'no reason given'}"]


def _step_parked(line: Mapping[str, Any], d: Detail, ctx: Context) -> list[Part]:
    return [f"{ctx.step(line, d)} waits for a person to confirm it"]


def _step_stale(line: Mapping[str, Any], d: Detail, ctx: Context) -> list[Part]:
    text = f"{ctx.step(line, d)} answered “{_was(d.get('outcome'))}” after its claim had been "
    text += "taken back; the answer was set aside"
    return [text + (f" ({d['error']})" if d.get("error") else "")]


def _step_version_drift(line: Mapping[str, Any], d: Detail, ctx: Context) -> list[Part]:
    return [
        f"{ctx.step(line, d)} was written for version {d.get('stored_version')} of "
        f"{d.get('action')}, which is now version {d.get('declared_version')}"
    ]


def _phase_entered(line: Mapping[str, Any], d: Detail, ctx: Context) -> list[Part]:
    n = d.get("steps", 0)
    out: list[Part] = [
        f"{_cap(ctx.phase(line.get('phase')))} began with {n} step{'' if n == 1 else 's'}"
    ]
    gate = d.get("gate")
    if isinstance(gate, Mapping):
        out += ["; it moves on ", *_gate_words(gate)]
    return out


def _phase_completed(line: Mapping[str, Any], d: Detail, ctx: Context) -> list[Part]:
    return [f"{_cap(ctx.phase(line.get('phase')))} finished its steps"]


_SATISFIED = {
    "deadline": "its time was up",
    "tally": "enough firings were counted",
    "forced": "a person moved it on",
    "reading": "its reading reached the number",
}


def _phase_gate(line: Mapping[str, Any], d: Detail, ctx: Context) -> list[Part]:
    why = _SATISFIED.get(str(d.get("satisfied_by")), str(d.get("satisfied_by")))
    text = f"The gate of {ctx.phase(line.get('phase'))} opened: {why}"
    if d.get("kind") == "on" and d.get("needed"):
        text += f" ({d.get('tally')} of {d['needed']})"
    return [text]


def _phase_advanced(line: Mapping[str, Any], d: Detail, ctx: Context) -> list[Part]:
    why = _SATISFIED.get(str(d.get("because")), str(d.get("because") or "its gate opened"))
    text = f"Moved on from {ctx.phase(line.get('phase'))} after "
    text += f"{elapsed(d.get('waited_seconds') or 0)}: {why}"
    return [text + _reason(d)]


def _condition_evaluated(line: Mapping[str, Any], d: Detail, ctx: Context) -> list[Part]:
    return [firing_words(d, ctx)]


def firing_words(d: Detail, ctx: Context) -> str:
    """A counted firing: its sentence (the trigger's own, declared as its ``sentence`` and
    kept with the record; else the seam, then the payload's conventional names, then the
    trigger and its named values) and the tally it made: ``Major fragged Sarge with a rocket
    — 3 of 5``."""
    trigger = str(d.get("trigger_id") or "a trigger")
    found, carried = d.get("values"), d.get("payload")
    named: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    payload: Mapping[str, Any] = carried if isinstance(carried, Mapping) else {}
    values = {**payload, **named}
    declared = d.get("sentence")
    said = declared if isinstance(declared, str) and declared else None
    if said is None and ctx.firing is not None:
        said = ctx.firing(trigger, values)
    if said is None:
        said = generic_firing(trigger, values)
    if said is None:
        said = f"{trigger} fired"
        if named:
            said += f" with {_named(named)}"
    tally = f" — {d.get('tally')} of {d.get('needed')}" if d.get("needed") else ""
    return said + tally


def _control(verb: str) -> Say:
    def say(line: Mapping[str, Any], d: Detail, ctx: Context) -> list[Part]:
        return [f"{verb}{_reason(d)}"]

    return say


def _control_cancel(line: Mapping[str, Any], d: Detail, ctx: Context) -> list[Part]:
    text = f"Cancelled{_reason(d)}"
    n = d.get("cancelled_steps") or 0
    if n:
        text += f"; {n} step{'' if n == 1 else 's'} will not run"
    if d.get("cleanup") is False:
        text += "; what it holds in the world is left there"
    return [text]


def _control_confirm(line: Mapping[str, Any], d: Detail, ctx: Context) -> list[Part]:
    return [f"{ctx.step(line, d)} confirmed{_reason(d, 'note')}"]


def _control_skip(line: Mapping[str, Any], d: Detail, ctx: Context) -> list[Part]:
    return [f"{ctx.step(line, d)} skipped{_reason(d)}"]


def _control_retry(line: Mapping[str, Any], d: Detail, ctx: Context) -> list[Part]:
    return [f"{ctx.step(line, d)} will be tried again{_reason(d)}"]


def _control_cleanup(line: Mapping[str, Any], d: Detail, ctx: Context) -> list[Part]:
    return [f"Cleanup asked for again; it is now {str(d.get('result')).replace('_', ' ')}"]


def _control_reschedule(line: Mapping[str, Any], d: Detail, ctx: Context) -> list[Part]:
    return [
        "Rescheduled from ",
        *_when(d.get("from")),
        " to ",
        *_when(d.get("to")),
        _reason(d),
    ]


def _announce(line: Mapping[str, Any], d: Detail, ctx: Context) -> list[Part]:
    leg = d.get("leg")
    via = f" on {leg}" if leg else ""
    return [f"Announced{via}: {_quoted(d.get('message'))}"]


def _resource_placeholder(line: Mapping[str, Any], d: Detail, ctx: Context) -> list[Part]:
    return [f"{ctx.step(line, d)} is about to change the world; recorded before the call"]


def _resource_reserved(line: Mapping[str, Any], d: Detail, ctx: Context) -> list[Part]:
    return [f"{ctx.step(line, d)} reserved {d.get('target')} until ", *_when(d.get("until"))]


def _resource_confirmed(line: Mapping[str, Any], d: Detail, ctx: Context) -> list[Part]:
    name = ctx.step(line, d)
    if "lease" in d:
        return [
            f"{name} set {d.get('target')} to {_quoted(d.get('applied'))} "
            f"(it was {_quoted(d.get('baseline'))})"
        ]
    return [f"{name} recorded ", *resources_parts(d.get("resources") or [])]


def _row(d: Detail) -> str:
    if d.get("kind") == "@step":  # a placeholder whose answer never came
        return "what a step may have done (its answer never came)"
    return f"the {_noun(d.get('kind'), 1)} {d.get('ref')}"


def _resource_reverted(line: Mapping[str, Any], d: Detail, ctx: Context) -> list[Part]:
    return [f"Gave back {_row(d)}"]


def _resource_revert_failed(line: Mapping[str, Any], d: Detail, ctx: Context) -> list[Part]:
    return [f"Could not give back {_row(d)}{_attempts(d)}: {d.get('error')}"]


def _resource_drifted(line: Mapping[str, Any], d: Detail, ctx: Context) -> list[Part]:
    return [
        f"{_cap(_row(d))} was changed by someone else (it was set to {_quoted(d.get('applied'))}, "
        f"found {_quoted(d.get('found'))}); left alone"
    ]


def _resource_orphaned(line: Mapping[str, Any], d: Detail, ctx: Context) -> list[Part]:
    return [f"{_cap(_row(d))} is no longer in the game, {d.get('by') or 'its plugin'} says"]


def _resource_reconcile_failed(line: Mapping[str, Any], d: Detail, ctx: Context) -> list[Part]:
    return [f"{d.get('owner')} could not say what it still holds: {d.get('error')}"]


_CLEANUP = {
    "not_required": "nothing to give back",
    "pending": "giving back what is held",
    "incomplete": "something is still held and nothing is left to try",
    "complete": "everything was given back",
    "left": "what it holds is left in the world",
}


def _resource_cleanup(line: Mapping[str, Any], d: Detail, ctx: Context) -> list[Part]:
    to = str(d.get("to"))
    text = f"Cleanup: {_CLEANUP.get(to, to.replace('_', ' '))}"
    return [text + (f", because {d['because']}" if d.get("because") else "")]


#: How each kind of record reads.
SAY: dict[LogKind, Say] = {
    LogKind.RUN_CREATED: _run_created,
    LogKind.RUN_STATUS: _run_status,
    LogKind.RUN_HEALTH: _run_health,
    LogKind.RUN_WAITING: _run_waiting,
    LogKind.RUN_REPINNED: _run_repinned,
    LogKind.RUN_MOVED: _run_moved,
    LogKind.RUN_OVERLAP: _run_overlap,
    LogKind.STEP_STATUS: _step_status,
    LogKind.STEP_RETRY: _step_retry,
    LogKind.STEP_REFUSED: _step_refused,
    LogKind.STEP_PARKED: _step_parked,
    LogKind.STEP_STALE: _step_stale,
    LogKind.STEP_VERSION_DRIFT: _step_version_drift,
    LogKind.PHASE_ENTERED: _phase_entered,
    LogKind.PHASE_COMPLETED: _phase_completed,
    LogKind.PHASE_GATE: _phase_gate,
    LogKind.PHASE_ADVANCED: _phase_advanced,
    LogKind.CONDITION_EVALUATED: _condition_evaluated,
    LogKind.CONTROL_PAUSE: _control("Paused"),
    LogKind.CONTROL_RESUME: _control("Resumed"),
    LogKind.CONTROL_CANCEL: _control_cancel,
    LogKind.CONTROL_CONFIRM: _control_confirm,
    LogKind.CONTROL_SKIP: _control_skip,
    LogKind.CONTROL_RETRY: _control_retry,
    LogKind.CONTROL_CLEANUP: _control_cleanup,
    LogKind.CONTROL_RESCHEDULE: _control_reschedule,
    LogKind.ANNOUNCE: _announce,
    LogKind.RESOURCE_PLACEHOLDER: _resource_placeholder,
    LogKind.RESOURCE_RESERVED: _resource_reserved,
    LogKind.RESOURCE_CONFIRMED: _resource_confirmed,
    LogKind.RESOURCE_REVERTED: _resource_reverted,
    LogKind.RESOURCE_REVERT_FAILED: _resource_revert_failed,
    LogKind.RESOURCE_DRIFTED: _resource_drifted,
    LogKind.RESOURCE_ORPHANED: _resource_orphaned,
    LogKind.RESOURCE_RECONCILE_FAILED: _resource_reconcile_failed,
    LogKind.RESOURCE_CLEANUP: _resource_cleanup,
}


def _unknown(line: Mapping[str, Any], d: Detail, ctx: Context) -> list[Part]:
    """A kind this host does not know (a plugin's own line): its message, or its values."""
    if d.get("message"):
        return [f"{ctx.step(line, d)} says: {d['message']}"]
    return [f"{ctx.step(line, d)} noted {_named(d) or 'nothing more'}"]


def words(line: Mapping[str, Any], context: Context = NO_CONTEXT) -> list[Part]:
    """What a record says, as words and instants (without who did it: the surfaces show the
    actor beside it)."""
    found = line.get("detail")
    detail: Detail = found if isinstance(found, Mapping) else {}
    kind = str(line.get("kind"))
    say = SAY.get(LogKind(kind)) if kind in LogKind._value2member_map_ else None
    parts = (say or _unknown)(line, detail, context)
    return [p for p in parts if p != ""]


def clock(at: datetime, tz: str = "UTC", *, seconds: bool = False) -> str:
    """An instant as its time of day on ``tz``'s clock: ``20:01`` (``20:01:07``)."""
    return at.astimezone(ZoneInfo(tz)).strftime("%H:%M:%S" if seconds else "%H:%M")


def text(line: Mapping[str, Any], context: Context = NO_CONTEXT, tz: str = "UTC") -> str:
    """A record's sentence for a terminal: :func:`words` with each instant drawn on
    ``tz``'s clock, and who did it."""
    out = _join(words(line, context), tz)
    if line.get("actor"):
        out += f" (by {line['actor']})"
    return out


def stored(line: Mapping[str, Any]) -> str:
    """The record as stored: its kind and its detail as JSON, for the one switch that shows
    the records behind the sentences."""
    detail = json.dumps(line.get("detail") or {}, ensure_ascii=False, sort_keys=True, default=str)
    return f"{line.get('kind')} {detail}"


def labels_of(steps: Sequence[Mapping[str, Any]]) -> dict[int, str]:
    """Each step's label by its id."""
    return {int(s["id"]): str(s["label"]) for s in steps if s.get("label")}
