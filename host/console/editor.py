"""The event editor's form: a spec read from form fields and written back into them.

No JSON is typed anywhere. The form names every part of the spec by position
(``p0-key``, ``p0-s1-param-count``, ``p2-c0-op``...), so :func:`spec_from_form` can rebuild
the spec from a post, :func:`apply_op` can add or remove a phase, a step or a condition,
and :func:`editor_view` lays a spec out again for the template, with each validation
message placed at the field its path names (:func:`place_errors`).

Run params are declared in their own fields (``rp0-name``, ``rp0-type``, ``rp0-source``...),
and a step's param or a condition's value may be "the run's param X", picked beside its value
(``p0-s1-param-server-from``, ``p2-c0-from``): the spec then holds ``{"param": "X"}``. A
schedule's fan-out is a list of param sets (``fan0-server``), one run each per occurrence.
The spec's ``acknowledge`` is every ``acknowledge`` field posted: a warning's "don't warn me
again" box, and a hidden field for each id acknowledged before (:mod:`.cautions`).

What the builder writes of a gate's ``where``: a single comparison, or ``all`` of several
(the common case, and what a form can show plainly). A stored condition the builder cannot
show (``any``, ``not``, nesting) is kept as it is and rendered as its sentence; removing the
gate or choosing "replace" is how an author changes it from here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from pageant.events.authoring import validator as specs
from pageant.events.authoring.params import MAX_PARAM_SETS
from pageant.gates.conditions import OPERATORS, render
from pageant.gates.durations import format_after, parse_after
from pageant.plugins.registry import Registry
from pageant.runs.params import FOR_EACH, PARAM_TYPES, is_reference
from pageant.schedules.recurrence import WEEKDAYS

AFTER_UNITS = ("s", "m", "h", "d")
GATE_KINDS = ("none", "after", "on")
_DURATION = re.compile(r"([0-9]+)([smhd])")
_PATH = re.compile(r"^([A-Za-z_.\[\]0-9]+): (.*)$", re.S)
_PARAM_NAME = re.compile(r'^"([a-z][a-z0-9_]*)"')
#: The most run params and fan-out sets the form reads (the validator's own bounds are
#: lower; past them it names the problem, so a set past the bound is never dropped unsaid).
_MAX_RUN_PARAMS = 50
_MAX_SETS = MAX_PARAM_SETS + 1


def _get(form: Mapping[str, Any], name: str) -> str:
    value = form.get(name)
    return value.strip() if isinstance(value, str) else ""


def _filled(form: Mapping[str, Any], prefix: str, **fields: str) -> dict[str, str]:
    """The optional fields ``{prefix}-{field}`` that are filled in, each under its spec key
    (``key=field``): a blank field is left out of the spec, not saved as ``""``."""
    given = {key: _get(form, f"{prefix}-{field}") for key, field in fields.items()}
    return {key: value for key, value in given.items() if value}


def _count(form: Mapping[str, Any], name: str, limit: int) -> int:
    raw = _get(form, name)
    return min(int(raw), limit) if raw.isascii() and raw.isdigit() else 0


# ── form -> spec ───────────────────────────────────────────────────────────────


def _typed(kind: str, raw: str) -> Any:
    """A form field's text as the declared type; text that does not parse is passed on
    unchanged, so the validator names it (``"count" expected an integer; got "lots"``)."""
    if raw == "":
        return None
    try:
        if kind == "integer":
            return int(raw)
        if kind == "number":
            return float(raw) if any(c in raw for c in ".eE") else int(raw)
    except ValueError:
        return raw
    if kind == "boolean":
        return {"true": True, "false": False}.get(raw, raw)
    return raw


def run_params_from_form(form: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The event's declared run params (``spec.params``) from their fields, in order; a
    blank label is left out (the validator makes it the name)."""
    declared = []
    for k in range(_count(form, "run-params", _MAX_RUN_PARAMS)):
        prefix = f"rp{k}"
        type_ = _get(form, f"{prefix}-type") or "string"
        param: dict[str, Any] = {
            "name": _get(form, f"{prefix}-name"),
            "type": type_,
            "required": _get(form, f"{prefix}-required") == "yes",
        }
        param.update(_filled(form, prefix, label="label", option_source="source"))
        default = _typed(type_, _get(form, f"{prefix}-default"))
        if default is not None:
            param["default"] = default
        declared.append(param)
    return declared


def _fan_out_from_form(
    form: Mapping[str, Any], declared: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """A schedule's param sets, one run each per occurrence; an empty field is left out,
    so the param's default (or its being required) decides."""
    sets = []
    for k in range(_count(form, "fanout", _MAX_SETS)):
        values: dict[str, Any] = {}
        for param in declared:
            name = param.get("name") or ""
            value = _typed(param.get("type") or "string", _get(form, f"fan{k}-{name}"))
            if name and value is not None:
                values[name] = value
        sets.append(values)
    return sets


def schedule_from_form(
    form: Mapping[str, Any], declared: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    kind = _get(form, "schedule-kind") or "manual"
    schedule: dict[str, Any]
    if kind == "once":
        schedule = {"kind": "once", "at": _get(form, "schedule-at")}
    elif kind == "weekly":
        days = [d for d in form.getall("schedule-days", []) if isinstance(d, str)]  # type: ignore[attr-defined]  # a form is a MultiDict; the annotation is its Mapping
        schedule = {"kind": "weekly", "days": days, "time": _get(form, "schedule-time")}
    elif kind == "monthly":
        nth = _get(form, "schedule-nth")
        schedule = {
            "kind": "monthly",
            "nth": int(nth) if nth in ("1", "2", "3", "4", "-1") else nth,
            "weekday": _get(form, "schedule-weekday"),
            "time": _get(form, "schedule-time"),
        }
    else:
        return {"kind": kind}
    over = _for_each_from_form(form)
    sets = _fan_out_from_form(form, declared or [])
    if over is not None:
        schedule["params"] = over
    elif sets:
        schedule["params"] = sets
    stagger = _get(form, "schedule-stagger")
    if stagger:
        schedule["stagger"] = stagger
    return schedule


def _for_each_from_form(form: Mapping[str, Any]) -> dict[str, Any] | None:
    """A fan-out over an option source, kept as the form carried it (the editor shows it
    and can take it away; the validator checks it)."""
    raw = _get(form, "fanout-for-each")
    if not raw:
        return None
    try:
        over = json.loads(raw)
    except ValueError:
        return None
    return {FOR_EACH: over} if isinstance(over, dict) else None


def _reference(form: Mapping[str, Any], name: str) -> dict[str, str] | None:
    """``{"param": X}`` when the field's picker says "the run's param X"."""
    chosen = _get(form, f"{name}-from")
    return {"param": chosen} if chosen else None


def _step_from_form(
    form: Mapping[str, Any], prefix: str, registry: Registry
) -> dict[str, Any] | None:
    action_id = _get(form, f"{prefix}-action")
    if not action_id:
        return None
    step: dict[str, Any] = {"action": action_id}
    step.update(_filled(form, prefix, label="label", on_failure="on_failure"))
    declaration = registry.actions.get(action_id)
    if declaration is None:
        # A dormant step: its params are carried through untouched (nothing can check them).
        kept = _get(form, f"{prefix}-kept")
        try:
            step.update(json.loads(kept) if kept else {})
        except ValueError:
            pass
        step["action"] = action_id
        return step
    params: dict[str, Any] = {}
    for param in declaration.params:
        field = f"{prefix}-param-{param.name}"
        value = _reference(form, field) or _typed(param.type, _get(form, field))
        if value is not None:
            params[param.name] = value
    step["params"] = params
    return step


def _conditions_from_form(
    form: Mapping[str, Any], prefix: str, registry: Registry, trigger_id: str
) -> Any:
    kept = _get(form, f"{prefix}-where-kept")
    if kept:
        try:
            return json.loads(kept)
        except ValueError:
            return None
    trigger = registry.triggers.get(trigger_id)
    types = {v.name: v.type for v in trigger.variables} if trigger else {}
    leaves = []
    for k in range(_count(form, f"{prefix}-conds", 50)):
        var = _get(form, f"{prefix}-c{k}-var")
        op = _get(form, f"{prefix}-c{k}-op")
        raw = _get(form, f"{prefix}-c{k}-value")
        if not var:
            continue
        kind = types.get(var, "string")
        reference = _reference(form, f"{prefix}-c{k}") if op != "in" else None
        if reference is not None:
            value: Any = reference
        elif op == "in":
            value = [_typed(kind, part.strip()) for part in raw.split(",") if part.strip()]
        else:
            value = _typed(kind, raw)
            if value is None:
                value = ""
        leaves.append({"var": var, "op": op, "value": value})
    if not leaves:
        return None
    return leaves[0] if len(leaves) == 1 else {"all": leaves}


def _advance_from_form(
    form: Mapping[str, Any], prefix: str, registry: Registry
) -> dict[str, Any] | None:
    kind = _get(form, f"{prefix}-gate")
    if kind == "after":
        amount = _get(form, f"{prefix}-after-n")
        unit = _get(form, f"{prefix}-after-unit") or "m"
        # A blank amount is a blank duration, not the unit alone: the validator asks for one.
        return {"after": f"{amount}{unit}" if amount.strip() else ""}
    if kind == "reading":
        text = _get(form, f"{prefix}-reading-gate").strip()
        if not text:
            return {"reading": None}  # refused by the validator, naming the reading
        try:
            found = json.loads(text)
        except ValueError:
            return {"reading": text}
        return found if isinstance(found, dict) else {"reading": found}
    if kind == "on":
        trigger_id = _get(form, f"{prefix}-on")
        gate: dict[str, Any] = {"on": trigger_id}
        count = _get(form, f"{prefix}-count")
        gate["count"] = _typed("integer", count) if count else 1
        gate["where"] = _conditions_from_form(form, prefix, registry, trigger_id)
        if _get(form, f"{prefix}-public"):
            gate["public"] = True
        label = _get(form, f"{prefix}-public-label")
        if label:
            gate["label"] = label
        milestones = _milestones_from_form(form, prefix)
        if milestones is not None:
            gate["milestones"] = milestones
        return gate
    return None


def _milestones_from_form(form: Mapping[str, Any], prefix: str) -> dict[str, Any] | None:
    """A count gate's milestones from their three fields (None when all are blank): the
    percentages and the legs each a comma-separated list, as the page shows them."""
    at = _get(form, f"{prefix}-milestones-at")
    legs = _get(form, f"{prefix}-milestones-legs")
    message = _get(form, f"{prefix}-milestones-message")
    if not (at or legs or message):
        return None
    return {
        # A part that is not a whole number is passed on, for the validator to name.
        "at": [_typed("integer", part) for part in _listed(at)],
        "legs": _listed(legs),
        "message": message,
    }


def _listed(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _countdown_from_form(form: Mapping[str, Any], prefix: str) -> dict[str, Any] | None:
    """A phase's countdown from its three fields (None when all are blank): the times and
    the legs each a comma-separated list, as the page shows them."""
    before = _get(form, f"{prefix}-countdown-before")
    legs = _get(form, f"{prefix}-countdown-legs")
    message = _get(form, f"{prefix}-countdown-message")
    if not (before or legs or message):
        return None
    return {"before": _listed(before), "legs": _listed(legs), "message": message}


def spec_from_form(form: Mapping[str, Any], registry: Registry) -> dict[str, Any]:
    """The spec the editor's fields describe (not yet validated)."""
    phases = []
    for i in range(_count(form, "phases", specs.MAX_PHASES)):
        prefix = f"p{i}"
        steps = []
        for j in range(_count(form, f"{prefix}-steps", specs.MAX_STEPS_PER_PHASE)):
            step = _step_from_form(form, f"{prefix}-s{j}", registry)
            if step is not None:
                steps.append(step)
        phase: dict[str, Any] = {
            "key": _get(form, f"{prefix}-key"),
            "label": _get(form, f"{prefix}-label"),
            "steps": steps,
        }
        advance = _advance_from_form(form, prefix, registry)
        if advance is not None:
            phase["advance"] = advance
        countdown = _countdown_from_form(form, prefix)
        if countdown is not None:
            phase["countdown"] = countdown
        phases.append(phase)
    declared = run_params_from_form(form)
    out: dict[str, Any] = {"schedule": schedule_from_form(form, declared), "phases": phases}
    if declared:
        out = {"params": declared, **out}
    template = {k: _get(form, f"announce-{k}") for k in ("title", "body")}
    if any(template.values()):
        out["announcement"] = {k: v for k, v in template.items() if v}
    # Each warning's "don't warn me again" box, and the ids acknowledged before whose
    # warning is gone (kept, as the API keeps them).
    acknowledged = form.getall("acknowledge", [])  # type: ignore[attr-defined]  # a form is a MultiDict; the annotation is its Mapping
    if acknowledged:
        out["acknowledge"] = [a.strip() if isinstance(a, str) else a for a in acknowledged]
    catch_up = catch_up_from_form(form)
    if catch_up is not None:
        out["catch_up"] = catch_up
    start_when = start_when_from_form(form)
    if start_when is not None:
        out["start_when"] = start_when
    required = requires_from_form(form)
    if required is not None:
        out["requires"] = required
    # The blackouts it keeps out of: a box for each blackout there is.
    blackouts = form.getall("blackouts", [])  # type: ignore[attr-defined]  # a form is a MultiDict; the annotation is its Mapping
    if blackouts:
        out["blackouts"] = [b for b in blackouts if isinstance(b, str)]
    return out


def start_when_from_form(form: Mapping[str, Any]) -> Any:
    """The spec's ``start_when`` from its field, written as JSON (None when blank); text
    that is not JSON is handed on as it is, for the validator to refuse naming the field."""
    text = _get(form, "start-when").strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def catch_up_from_form(form: Mapping[str, Any]) -> dict[str, Any] | None:
    """The spec's ``catch_up`` from its select and window fields; None for "none" (the
    window is then not sent: only "one" and "all" have one)."""
    policy = _get(form, "catch-up") or "none"
    if policy == "none":
        return None
    amount = _get(form, "catch-up-within-n")
    unit = _get(form, "catch-up-within-unit") or "h"
    # A blank amount is a blank window, not the unit alone: the validator asks for one.
    return {"policy": policy, "within": f"{amount}{unit}" if amount else ""}


def requires_from_form(form: Mapping[str, Any]) -> dict[str, Any] | None:
    """The spec's ``requires`` from its event, outcome and window fields; None when no
    event is named."""
    event = _get(form, "requires-event")
    if not event:
        return None
    amount = _get(form, "requires-within-n")
    unit = _get(form, "requires-within-unit") or "d"
    return {
        "event": event,
        "outcome": _get(form, "requires-outcome") or "completed",
        # A blank amount is a blank window, not the unit alone: the validator asks for one.
        "within": f"{amount}{unit}" if amount else "",
    }


# ── the editor's buttons that change the form, not the event ───────────────────


def apply_op(spec: dict[str, Any], op: str, form: Mapping[str, Any], registry: Registry) -> str:
    """Apply a structural button (``add-phase``, ``add-step:0``, ``remove-step:0:1``,
    ``move-step:0:1:up``, ``move-phase:1:down``, ``add-cond:2``, ``remove-cond:2:0``,
    ``remove-phase:1``, ``add-param``, ``remove-param:0``, ``add-fan``, ``remove-fan:1``,
    ``refresh``) to ``spec`` in place; answers a sentence saying what
    changed (shown until the author saves)."""
    name, _, rest = op.partition(":")
    parts = [int(p) for p in rest.split(":") if p.isascii() and p.isdigit()] if rest else []
    phases = spec["phases"]
    if name == "add-param":
        declared = spec.setdefault("params", [])
        declared.append({"name": "", "type": "string", "required": False})
        return f"Added run param {len(declared)}; name it and save."
    if name == "remove-param" and parts and parts[0] < len(spec.get("params") or []):
        gone = spec["params"].pop(parts[0])
        return (
            f"Removed the run param {gone.get('name') or parts[0] + 1}; a step or condition "
            "still taking it is named when you save."
        )
    if name in ("add-fan", "remove-fan"):
        schedule = spec.setdefault("schedule", {"kind": "manual"})
        if schedule.get("kind", "manual") == "manual":
            return "A manual event has no schedule to fan out; choose another kind first."
        if isinstance(schedule.get("params"), dict):
            return _for_each_op(schedule, name)
        sets = schedule.setdefault("params", [])
        if name == "add-fan":
            sets.append({})
            return f"Added run {len(sets)} to each occurrence; fill in its params and save."
        if parts and parts[0] < len(sets):
            sets.pop(parts[0])
            if not sets:
                schedule.pop("params")
            return "Removed a run from each occurrence; save to keep the change."
    if name == "add-phase":
        n = len(phases) + 1
        taken = {p.get("key") for p in phases}
        key = next(f"phase-{k}" for k in range(n, n + 100) if f"phase-{k}" not in taken)
        phases.append({"key": key, "label": f"Phase {n}", "steps": []})
        return f"Added phase {n}; save to keep it."
    if name == "remove-phase" and parts and parts[0] < len(phases):
        gone = phases.pop(parts[0])
        return f"Removed phase {gone.get('label') or parts[0] + 1}; save to keep the change."
    if name == "add-step" and parts and parts[0] < len(phases):
        action_id = _get(form, f"p{parts[0]}-new-action")
        declaration = registry.actions.get(action_id)
        if declaration is None:
            return "Choose an action to add."
        phases[parts[0]]["steps"].append({"action": action_id, "params": {}})
        return f"Added a step ({declaration.label}); fill in its fields and save."
    if name == "remove-step" and len(parts) == 2 and parts[0] < len(phases):
        steps = phases[parts[0]]["steps"]
        if parts[1] < len(steps):
            steps.pop(parts[1])
            return "Removed the step; save to keep the change."
    if name == "move-phase" and len(parts) == 1 and parts[0] < len(phases):
        to = parts[0] + (-1 if rest.endswith(":up") else 1)
        if 0 <= to < len(phases):
            phases[parts[0]], phases[to] = phases[to], phases[parts[0]]
            return f"Moved phase {parts[0] + 1} to place {to + 1}; save to keep the order."
        return "That phase cannot move further."
    if name == "move-step" and len(parts) == 2 and parts[0] < len(phases):
        steps = phases[parts[0]]["steps"]
        to = parts[1] + (-1 if rest.endswith(":up") else 1)
        if parts[1] < len(steps) and 0 <= to < len(steps):
            steps[parts[1]], steps[to] = steps[to], steps[parts[1]]
            return (
                f"Moved step {parts[1] + 1} of phase {parts[0] + 1} to place {to + 1}; "
                "save to keep the order."
            )
        return "That step cannot move further."
    if name in ("add-cond", "remove-cond") and parts and parts[0] < len(phases):
        gate = phases[parts[0]].get("advance")
        if not isinstance(gate, dict) or "on" not in gate:
            return 'Choose the gate kind "on a trigger" first.'
        leaves = leaves_of(gate.get("where")) or []
        if name == "add-cond":
            trigger = registry.triggers.get(gate["on"])
            first = trigger.variables[0] if trigger and trigger.variables else None
            var = first.name if first else ""
            op = OPERATORS[first.type][0] if first else "eq"
            leaves.append({"var": var, "op": op, "value": ""})
        elif len(parts) == 2 and parts[1] < len(leaves):
            leaves.pop(parts[1])
        gate["where"] = None if not leaves else leaves[0] if len(leaves) == 1 else {"all": leaves}
        return "Changed the conditions; save to keep them."
    return "Updated the form; save to keep the changes."


def focus_after(spec: dict[str, Any], op: str) -> str:
    """The id of the control the focus goes to once the form is drawn again after ``op``:
    a moved step's or phase's button for the same direction at its new place, or the one
    pressed; ``notice`` (the sentence saying what changed) when that is gone."""
    name, _, rest = op.partition(":")
    parts = rest.split(":") if rest else []
    phases = spec.get("phases") or []
    if name == "move-step" and len(parts) == 3 and parts[0].isdigit() and parts[1].isdigit():
        p, s, way = int(parts[0]), int(parts[1]), parts[2]
        count = len(phases[p]["steps"]) if p < len(phases) else 0
        to = s - 1 if way == "up" else s + 1
        if 0 < to < count if way == "up" else 0 <= to < count - 1:
            return f"op-move-step-{p}-{to}-{way}"
        return "notice"
    if name == "move-phase" and len(parts) == 2 and parts[0].isdigit():
        p, way = int(parts[0]), parts[1]
        to = p - 1 if way == "up" else p + 1
        if 0 < to < len(phases) if way == "up" else 0 <= to < len(phases) - 1:
            return f"op-move-phase-{to}-{way}"
        return "notice"
    if name in ("add-step", "add-phase", "add-cond", "add-param", "add-fan", "refresh"):
        return "op-" + op.replace(":", "-")
    return "notice"


def _for_each_op(schedule: dict[str, Any], name: str) -> str:
    """``add-fan`` / ``remove-fan`` on a schedule that fans out over an option source."""
    if name == "add-fan":
        return (
            "Each occurrence already makes one run for each value of an option source; "
            "fan out by hand instead to list the runs."
        )
    schedule.pop("params")
    return "Each occurrence makes one run again; add runs to list them by hand, and save."


# ── spec -> the editor's view ──────────────────────────────────────────────────


def leaves_of(where: Any) -> list[dict[str, Any]] | None:
    """The comparisons of a condition the builder can show (one, or ``all`` of several),
    or None for one it cannot."""
    if where is None:
        return []
    if isinstance(where, dict) and "var" in where:
        return [dict(where)]
    if (
        isinstance(where, dict)
        and set(where) == {"all"}
        and isinstance(where["all"], list)
        and all(isinstance(c, dict) and "var" in c for c in where["all"])
    ):
        return [dict(c) for c in where["all"]]
    return None


def _shown(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ", ".join(_shown(v) for v in value)
    return str(value)


def _after_parts(after: Any) -> tuple[str, str]:
    match = _DURATION.fullmatch(after) if isinstance(after, str) else None
    if match is None:
        seconds = parse_after(after) if isinstance(after, str) else None
        match = _DURATION.fullmatch(format_after(seconds)) if seconds else None
    return (match.group(1), match.group(2)) if match else ("", "m")


def _declared_view(declared: list[Any]) -> list[dict[str, Any]]:
    """The run params' fields as the template draws them."""
    out = []
    for k, param in enumerate(declared):
        param = param if isinstance(param, dict) else {}
        type_ = param.get("type") if param.get("type") in PARAM_TYPES else "string"
        label = param.get("label") or ""
        out.append(
            {
                "prefix": f"rp{k}",
                "path": f"spec.params[{k}]",
                "name": param.get("name") or "",
                # a label the validator made from the name is not shown as the author's own
                "label": "" if label == param.get("name") else label,
                "type": type_,
                "source": param.get("option_source") or "",
                "default": _shown(param.get("default")),
                "required": param.get("required") is True,
            }
        )
    return out


def _picker(value: Any, type_: str, declared: list[dict[str, Any]]) -> dict[str, Any]:
    """What a field's "the run's param" picker offers (the declared params of its type) and
    which one it holds; a reference to a param not declared (any more) is offered too, so
    the form shows what is stored and the save names the problem."""
    choices = [p["name"] for p in declared if p["name"] and p["type"] == type_]
    ref = value["param"] if is_reference(value) and isinstance(value["param"], str) else ""
    if ref and ref not in choices:
        choices.append(ref)
    return {"choices": choices, "ref": ref}


def _countdown_view(raw: Any, path: str) -> dict[str, Any]:
    """A phase's countdown as its fields show it (each blank without one)."""
    countdown = raw if isinstance(raw, dict) else {}

    return {
        "before": _shown(countdown.get("before")),
        "legs": _shown(countdown.get("legs")),
        "message": _shown(countdown.get("message")),
        "shown": bool(countdown),
        "path": f"{path}.countdown",
    }


def _milestones_view(raw: Any) -> dict[str, str]:
    """A count gate's milestones as their fields show them (each blank without any)."""
    milestones = raw if isinstance(raw, dict) else {}

    return {
        "at": _shown(milestones.get("at")),
        "legs": _shown(milestones.get("legs")),
        "message": _shown(milestones.get("message")),
    }


def editor_view(spec: Mapping[str, Any], registry: Registry) -> dict[str, Any]:
    """The spec laid out for the editor's template: every field's name, path and value."""
    raw_params = spec.get("params")
    declared = _declared_view(raw_params if isinstance(raw_params, list) else [])
    phases = []
    for i, phase in enumerate(spec.get("phases") or []):
        path = f"spec.phases[{i}]"
        steps = []
        for j, step in enumerate(phase.get("steps") or []):
            declaration = registry.actions.get(step.get("action", ""))
            params = step.get("params") or {}
            fields = []
            for param in declaration.params if declaration else []:
                value = params.get(param.name)
                fields.append(
                    {
                        "name": f"p{i}-s{j}-param-{param.name}",
                        "param": param,
                        "value": "" if is_reference(value) else _shown(value),
                        "path": f"{path}.steps[{j}].params.{param.name}",
                        **_picker(value, param.type, declared),
                    }
                )
            steps.append(
                {
                    "prefix": f"p{i}-s{j}",
                    "path": f"{path}.steps[{j}]",
                    "action": step.get("action", ""),
                    "declaration": declaration,
                    "label": step.get("label") or "",
                    "on_failure": step.get("on_failure") or "",
                    "fields": fields,
                    "kept": (
                        json.dumps({k: v for k, v in step.items() if k != "action"})
                        if declaration is None
                        else ""
                    ),
                }
            )
        gate = phase.get("advance")
        kind = "none"
        view_gate: dict[str, Any] = {"after_n": "", "after_unit": "m", "on": "", "count": 1}
        if isinstance(gate, dict) and "after" in gate:
            kind = "after"
            view_gate["after_n"], view_gate["after_unit"] = _after_parts(gate["after"])
        elif isinstance(gate, dict) and "reading" in gate:
            kind = "reading"
            view_gate["reading_json"] = json.dumps(dict(gate), ensure_ascii=False)
        elif isinstance(gate, dict) and "on" in gate:
            kind = "on"
            view_gate["on"] = gate.get("on") or ""
            view_gate["count"] = gate.get("count") or 1
            view_gate["public"] = gate.get("public") is True
            view_gate["public_label"] = gate.get("label") or ""
            view_gate["milestones"] = _milestones_view(gate.get("milestones"))
        leaves = leaves_of(gate.get("where")) if kind == "on" else []
        trigger = registry.triggers.get(view_gate["on"]) if kind == "on" else None
        var_types = {v.name: v.type for v in trigger.variables} if trigger else {}
        view_gate.update(
            kind=kind,
            path=f"{path}.advance",
            trigger=trigger,
            conds=[
                {
                    "var": c.get("var", ""),
                    "op": c.get("op", ""),
                    "value": "" if is_reference(c.get("value")) else _shown(c.get("value")),
                    **_picker(c.get("value"), var_types.get(c.get("var", ""), "string"), declared),
                }
                for c in (leaves or [])
            ],
            kept=json.dumps(gate.get("where")) if leaves is None else "",
            sentence=render(gate.get("where")) if leaves is None else "",
        )
        phases.append(
            {
                "prefix": f"p{i}",
                "path": path,
                "key": phase.get("key") or "",
                "label": phase.get("label") or "",
                "steps": steps,
                "gate": view_gate,
                "countdown": _countdown_view(phase.get("countdown"), path),
            }
        )
    schedule = dict(spec.get("schedule") or {"kind": "manual"})
    raw_sets = schedule.get("params")
    fanout = [
        {
            "prefix": f"fan{k}",
            "path": f"spec.schedule.params[{k}]",
            "values": {
                name: _shown(value) for name, value in (values or {}).items() if name != "scope"
            }
            if isinstance(values, dict)
            else {},
        }
        for k, values in enumerate(raw_sets if isinstance(raw_sets, list) else [])
    ]
    over = raw_sets.get(FOR_EACH) if isinstance(raw_sets, dict) else None
    announce = spec.get("announcement")
    return {
        "params": declared,
        "fanout": fanout,
        "for_each": [
            {"param": str(param), "source": str(source), "kept": json.dumps({param: source})}
            for param, source in (over.items() if isinstance(over, dict) else ())
        ],
        "schedule": schedule,
        "phases": phases,
        "announcement": dict(announce) if isinstance(announce, dict) else {},
        "catch_up": _catch_up_view(spec.get("catch_up")),
        "start_when": (
            json.dumps(spec["start_when"], ensure_ascii=False) if spec.get("start_when") else ""
        ),
        "requires": _requires_view(spec.get("requires")),
        "blackouts": [b for b in spec.get("blackouts") or [] if isinstance(b, str)],
    }


def _requires_view(raw: Any) -> dict[str, str]:
    """The requirement's controls: the event, the outcome, the window as amount and unit."""
    if not isinstance(raw, Mapping):
        return {"event": "", "outcome": "completed", "within_n": "", "within_unit": "d"}
    within_n, within_unit = _after_parts(raw.get("within"))
    return {
        "event": str(raw.get("event") or ""),
        "outcome": str(raw.get("outcome") or "completed"),
        "within_n": within_n,
        "within_unit": within_unit if within_n else "d",
    }


def _catch_up_view(raw: Any) -> dict[str, str]:
    """The catch-up control's values: the policy, and its window as an amount and a unit."""
    if not isinstance(raw, Mapping):
        return {"policy": "none", "within_n": "", "within_unit": "h"}
    within_n, within_unit = _after_parts(raw.get("within"))
    if not within_n:
        within_unit = "h"
    return {
        "policy": str(raw.get("policy") or "none"),
        "within_n": within_n,
        "within_unit": within_unit,
    }


# ── validation messages -> fields ──────────────────────────────────────────────


def place_errors(details: list[str]) -> dict[str, list[str]]:
    """Each ``path: message`` by the path of the field it belongs to. A ``params`` message
    naming a param (``"count" is required``) goes to that param's field."""
    placed: dict[str, list[str]] = {}
    for detail in details:
        match = _PATH.match(detail)
        if match is None:
            placed.setdefault("", []).append(detail)
            continue
        path, message = match.groups()
        path = path.removeprefix("body.")
        if path.endswith(".params"):
            named = _PARAM_NAME.match(message)
            if named:
                path = f"{path}.{named.group(1)}"
        placed.setdefault(path, []).append(message)
    return placed


_PART = re.compile(r"\.?([a-z_]+)(?:\[(\d+)\])?")
#: How the form names the parts of a spec's path.
_PART_WORDS = {
    "phases": "Phase",
    "steps": "step",
    "params": "param",
    "advance": "gate",
    "all": "condition",
    "where": "conditions",
    "schedule": "Schedule",
    "catch_up": "Catch-up",
    "start_when": "Start when",
    "requires": "Requires",
}
_SWITCHBOARD_FIX = (
    re.compile(r"([a-z][a-z0-9_]*\.[a-z][a-z0-9_.]*) is an? [a-z]+ action, disabled"),
    re.compile(r"\(set on ([a-z][a-z0-9_]*\.[a-z][a-z0-9_.]*)\)"),
)


def readable_path(path: str) -> str:
    """A validator's path as the form numbers it: ``spec.phases[0].steps[1].params.count``
    is "Phase 1, step 2, param count"; a path it cannot read is returned as it is."""
    rest = path.removeprefix("body.").removeprefix("spec")
    if not rest:
        return "The event"
    words: list[str] = []
    pos = 0
    while pos < len(rest):
        match = _PART.match(rest, pos)
        if match is None or match.end() == pos:
            return path
        name, index = match.groups()
        word = _PART_WORDS.get(name, name)
        if index is not None:
            words.append(f"{word} {int(index) + 1}")
        elif words and words[-1] == "param":
            words[-1] = f"param {name}"
        else:
            words.append(word)
        pos = match.end()
    text = ", ".join(words)
    return text[:1].upper() + text[1:]


def readable(detail: str) -> dict[str, str | None]:
    """One validation or verification problem for a person: ``{where, message, fix}`` —
    where it is, as the form numbers it; what is wrong; and the page that fixes it (the
    switchboard row of an action that is disabled or whose cap it is over), or None."""
    match = _PATH.match(detail)
    where, message = (readable_path(match.group(1)), match.group(2)) if match else ("", detail)
    fix = None
    for pattern in _SWITCHBOARD_FIX:
        found = pattern.search(message)
        if found:
            fix = f"/switchboard/{found.group(1)}"
            break
    return {"where": where, "message": message, "fix": fix}


WEEKDAY_NAMES = WEEKDAYS
