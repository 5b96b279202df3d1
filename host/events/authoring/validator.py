"""The event spec: the one place that decides whether a spec is well formed.

A spec is the authored tree a definition's working copy carries and a version freezes::

    {"schedule": {...}, "phases": [{"key", "label", "steps": [...], "advance"?}]}

:func:`validate` answers a new, normalised tree or raises :class:`~pageant.errors.Invalid`
listing every problem it found, each prefixed by its path from ``spec``. Every check here
is a boundary: the console may repeat some of them for a friendlier form, but a spec
arriving by any route (an edit, a restore, a fixture) gets this answer.

Three rules shape the whole module:

- **Validate accepts its own output** (``validate(validate(x)) == validate(x)``). A saved
  spec is validated again on every later save and at publish, so the output-only fields the
  validator writes (``action_version``, ``dormant``) are accepted back and recomputed, never
  trusted; and everything that has two spellings (weekday order, ``120m``) is stored in one,
  so two versions never differ as JSON without differing in meaning.
- **Unknown keys are refused, never preserved.** A spec that silently carries a key nothing
  reads is a spec whose author believes it does something.
- **What nobody registers is dormant, not lost.** A step already saved keeps an action whose
  plugin was uninstalled, and a gate keeps a trigger nobody registers: both save, marked
  ``dormant``, and neither publishes (:func:`dormant_items`). A *new* step may not name an
  unregistered action. So uninstalling a plugin never destroys authored work.

Bounds (all paste guards, so the wrong JSON is a refusal with a number in it rather than a
run of fifty thousand steps): :data:`MAX_PHASES`, :data:`MAX_STEPS_PER_PHASE`,
:data:`MAX_STEPS`, :data:`MAX_PHASE_KEY`, :data:`MAX_LABEL` (phase and step labels),
:data:`MAX_STRING_PARAM` (each string param); gates have their own in
:mod:`pageant.events.authoring.advance` (re-exported here with the rest of that module's
public names).
"""

from __future__ import annotations

import re
from datetime import date
from typing import TYPE_CHECKING, Any

from pageant.errors import Invalid
from pageant.events.authoring import params as run_params

# The gate grammar lives in its own module; its names stay importable from here.
from pageant.events.authoring.advance import (  # noqa: F401 - re-exported, importable from here
    ADVANCE_KINDS,
    AFTER,
    AFTER_GATE_KEYS,
    AFTER_UNIT_SECONDS,
    MAX_ADVANCE_COUNT,
    MAX_AFTER_SECONDS,
    MIN_AFTER_SECONDS,
    ON_GATE_KEYS,
    format_after,
    parse_after,
    validate_advance,
)
from pageant.events.authoring.announce import MAX_BODY as MAX_TEMPLATE_BODY
from pageant.events.authoring.announce import MAX_TITLE as MAX_TEMPLATE_TITLE
from pageant.events.authoring.announce import validate_template
from pageant.events.authoring.cautions import validate_acknowledged
from pageant.events.authoring.countdown import validate_countdown
from pageant.events.authoring.start_when import START_WHEN_SCHEMA, validate_start_when
from pageant.events.authoring.subscriptions import (
    MAX_BLACKOUTS,
    validate_blackouts,
    validate_stagger,
    validate_zones,
)
from pageant.events.slugs import MAX_SLUG, SLUG_RE
from pageant.hookspecs.models import ON_FAILURE_BY_RISK
from pageant.runs.requires import REQUIRES_SCHEMA, validate_requires
from pageant.schedules.catchup import CATCH_UP_SCHEMA, validate_catch_up
from pageant.schedules.recurrence import WEEKDAYS
from pageant.support.refusals import an_object, bounded_list, refuse_unknown, show
from pageant.support.timefmt import EARLIEST, LATEST, SUPPORTED

if TYPE_CHECKING:
    from pageant.hookspecs import Action
    from pageant.plugins.registry import Registry

# ── the vocabulary ─────────────────────────────────────────────────────────────

SPEC_KEYS = (
    "params",
    "schedule",
    "phases",
    "announcement",
    "acknowledge",
    "catch_up",
    "blackouts",
    "start_when",
    "requires",
)
#: ``manual`` first: it is the default, and what an unscheduled draft carries.
SCHEDULE_KINDS = ("manual", "once", "weekly", "monthly")
#: Each schedule kind's keys besides ``kind``, and the only ones it may carry.
SCHEDULE_KEYS: dict[str, tuple[str, ...]] = {
    "manual": (),
    "once": ("at", "params", "stagger", "zones"),
    "weekly": ("days", "time", "params", "stagger", "zones"),
    "monthly": ("nth", "weekday", "time", "params", "stagger", "zones"),
}
#: -1 is "last", which differs from 4 in a month with five of that weekday. There is no 5:
#: every month has a first to fourth of each weekday, so no occurrence can be absent.
MONTHLY_NTH = (1, 2, 3, 4, -1)
PHASE_KEYS = ("key", "label", "steps", "advance", "countdown")
#: ``action_version`` and ``dormant`` are output-only: accepted back, then recomputed.
STEP_KEYS = (
    "action",
    "label",
    "params",
    "on_failure",
    "hold_seconds",
    "action_version",
    "dormant",
)
#: What a step does once its attempts are exhausted.
ON_FAILURE = ("skip", "pause", "abort_run")

# ── the bounds ─────────────────────────────────────────────────────────────────

MAX_PHASES = 40
MAX_STEPS_PER_PHASE = 100
MAX_STEPS = 500
MAX_PHASE_KEY = 64
MAX_LABEL = 200
MAX_STRING_PARAM = 4000
#: The longest a notify step may be held for its plugin (``hold_seconds``): an hour.
MAX_HOLD_SECONDS = 3600

# ── the grammars ───────────────────────────────────────────────────────────────

#: A phase key is stored on every run step and is what an operator reads in the console.
PHASE_KEY = re.compile(r"[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*")
# [0-9] rather than \d, which also admits other scripts' digits; fullmatch, never $, which
# admits a trailing newline.
TIME = re.compile(r"(?:[01][0-9]|2[0-3]):[0-5][0-9]")
AT = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T(?:[01][0-9]|2[0-3]):[0-5][0-9]")
_MANUAL = {"kind": "manual"}


# ── small public helpers ───────────────────────────────────────────────────────


def empty_spec() -> dict[str, Any]:
    """The spec a new draft carries: manual, one empty phase ``main``."""
    return {
        "schedule": {"kind": "manual"},
        "phases": [{"key": "main", "label": "Main", "steps": []}],
    }


def default_on_failure(risk: str) -> str:
    """The disposition a step takes by default from its action's risk class alone (an
    action may declare its own: :attr:`pageant.hookspecs.Action.default_on_failure`)."""
    return ON_FAILURE_BY_RISK.get(risk, "pause")


def action_steps(spec: Any) -> list[tuple[str, dict[str, Any]]]:
    """Every step of ``spec`` as ``(path, step)``, e.g. ``("spec.phases[0].steps[1]", {...})``.

    Tolerant of a malformed tree (what is not a phase or a step is passed over), because it
    also reads the stored spec, which predates the current validation.
    """
    found: list[tuple[str, dict[str, Any]]] = []
    for i, phase in _phases_of(spec):
        steps = phase.get("steps")
        if not isinstance(steps, list):
            continue
        for j, step in enumerate(steps):
            if isinstance(step, dict):
                found.append((f"spec.phases[{i}].steps[{j}]", step))
    return found


def dormant_items(spec: Any) -> list[str]:
    """Everything dormant in a validated spec, with its path: what stops it publishing.

    ``["spec.phases[0].steps[1]: wisps.summon", "spec.phases[2].advance: wisps.caught"]``;
    empty when the spec may be published. Read the output of :func:`validate`, which
    recomputes dormancy against the registry of the moment.
    """
    items: list[str] = []
    for i, phase in _phases_of(spec):
        steps = phase.get("steps")
        for j, step in enumerate(steps if isinstance(steps, list) else []):
            if isinstance(step, dict) and step.get("dormant") is True:
                items.append(f"spec.phases[{i}].steps[{j}]: {step.get('action')}")
        advance = phase.get("advance")
        if isinstance(advance, dict) and advance.get("dormant") is True:
            items.append(f"spec.phases[{i}].advance: {advance.get('on')}")
    return items


def _phases_of(spec: Any) -> list[tuple[int, dict[str, Any]]]:
    phases = spec.get("phases") if isinstance(spec, dict) else None
    if not isinstance(phases, list):
        return []
    return [(i, phase) for i, phase in enumerate(phases) if isinstance(phase, dict)]


# ── validation ─────────────────────────────────────────────────────────────────


def validate(
    raw: Any, registry: Registry, *, stored: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Check ``raw`` against the registry and answer the normalised spec.

    ``stored`` is the spec saved before this edit (or ``None``): a step naming an action no
    plugin registers is refused when it is new, and kept as ``dormant`` when that action is
    among the stored spec's steps. Raises ``Invalid("invalid spec", details=[...])`` naming
    every problem, each prefixed by its path (``spec.phases[1].steps[0].params: "count" is
    required``), never only the first.
    """
    if not isinstance(raw, dict):
        raise Invalid("invalid spec", details=["spec: expected an object with schedule, phases"])
    errors: list[str] = []
    refuse_unknown(raw, SPEC_KEYS, "spec", errors)
    declared = run_params.validate_declarations(raw.get("params"), registry, errors)
    types = run_params.declared_types(declared)
    by_name = {param["name"]: param for param in declared}
    schedule = _schedule(raw.get("schedule"), errors)
    fan_out = _fan_out(raw.get("schedule"), schedule, declared, errors, registry)
    if fan_out is not None:
        schedule["params"] = fan_out
    staggered = validate_stagger(raw.get("schedule"), fan_out, errors, declared=declared)
    if staggered is not None:
        schedule["stagger"] = staggered
    zones = validate_zones(raw.get("schedule"), schedule, errors)
    if zones:
        schedule["zones"] = zones
    subscribed = validate_blackouts(raw.get("blackouts"), "spec.blackouts", errors)
    kept = frozenset(
        step["action"] for _, step in action_steps(stored) if isinstance(step.get("action"), str)
    )
    phases = _phases(raw.get("phases"), registry, kept, types, by_name, errors)
    template = validate_template(raw.get("announcement"), "spec.announcement", errors)
    acknowledged = validate_acknowledged(raw.get("acknowledge"), "spec.acknowledge", errors)
    catch_up = validate_catch_up(raw.get("catch_up"), "spec.catch_up", errors)
    start_when = validate_start_when(
        raw.get("start_when"),
        "spec.start_when",
        registry,
        errors,
        types=types,
        declared=by_name,
    )
    required = validate_requires(raw.get("requires"), "spec.requires", errors)
    if errors:
        raise Invalid("invalid spec", details=errors)
    out: dict[str, Any] = {"schedule": schedule, "phases": phases}
    # Omitted when empty, so a spec without params reads as it always did.
    if declared:
        out = {"params": declared, **out}
    # Each omitted when empty (catch-up's "none" included), so a spec without it reads as it
    # always did; in this order, so two saves of one spec are the same JSON.
    optional = {
        "announcement": template,
        "acknowledge": acknowledged,
        "catch_up": catch_up,
        "blackouts": subscribed,
        "start_when": start_when,
        "requires": required,
    }
    return {**out, **{key: value for key, value in optional.items() if value}}


def _fan_out(
    raw: Any,
    schedule: dict[str, Any],
    declared: list[dict[str, Any]],
    errors: list[str],
    registry: Registry,
) -> list[dict[str, Any]] | dict[str, Any] | None:
    """A schedule's ``params``: the param sets each occurrence makes one run of, or the
    option source whose values it fans out over (``{"for_each": {param: source}}``)."""
    if not isinstance(raw, dict) or schedule["kind"] == "manual":
        return None
    over = raw.get("params")
    if isinstance(over, dict) and run_params.FOR_EACH in over:
        return run_params.validate_for_each(
            over, declared, registry, "spec.schedule.params", errors
        )
    return run_params.validate_param_sets(
        raw.get("params"), declared, "spec.schedule.params", errors
    )


def _label(raw: Any, path: str, errors: list[str], *, required: bool) -> str | None:
    """A label, or ``None`` when blank (an error only where a label is ``required``)."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        if required:
            errors.append(f"{path}: a label is required")
        return None
    if not isinstance(raw, str):
        errors.append(f"{path}: expected a string; got {show(raw)}")
        return None
    if len(raw) > MAX_LABEL:
        errors.append(f"{path}: at most {MAX_LABEL} characters; this one has {len(raw)}")
        return None
    return raw


# ── schedule ──


def _schedule(raw: Any, errors: list[str]) -> dict[str, Any]:
    """The normalised schedule; ``manual`` whenever the input is not a good one."""
    path = "spec.schedule"
    if raw is None:
        return dict(_MANUAL)
    if not isinstance(raw, dict):
        errors.append(f"{path}: expected an object with a kind")
        return dict(_MANUAL)
    kind = raw.get("kind")
    if kind not in SCHEDULE_KINDS:
        errors.append(f"{path}.kind: expected one of {', '.join(SCHEDULE_KINDS)}; got {show(kind)}")
        return dict(_MANUAL)
    refuse_unknown(raw, ("kind", *SCHEDULE_KEYS[kind]), path, errors, f' for a "{kind}" schedule')
    if kind == "manual":
        return dict(_MANUAL)
    if kind == "once":
        at = raw.get("at")
        match = AT.fullmatch(at) if isinstance(at, str) else None
        if match is None:
            errors.append(
                f'{path}.at: expected a local date and time as "YYYY-MM-DDTHH:MM"; got {show(at)}'
            )
            return dict(_MANUAL)
        year, month, day = (int(g) for g in match.groups())
        try:
            date(year, month, day)
        except ValueError:
            errors.append(f"{path}.at: {show(at)} is not a real date")
            return dict(_MANUAL)
        if not EARLIEST.year <= year < LATEST.year:
            # Resolved in a zone, a date at either end of the calendar overflows.
            errors.append(f"{path}.at: {show(at)} is outside the supported range ({SUPPORTED})")
            return dict(_MANUAL)
        # A wall clock in the definition's own zone, never an instant: the zone is a
        # sibling column, and the instant is derived when the occurrence is materialised.
        return {"kind": "once", "at": at}
    time = _time(raw.get("time"), errors)
    if kind == "weekly":
        days = _days(raw.get("days"), errors)
        if time is None or days is None:
            return dict(_MANUAL)
        return {"kind": "weekly", "days": days, "time": time}
    weekday = _weekday(raw.get("weekday"), f"{path}.weekday", errors)
    nth = raw.get("nth")
    # bool is an int in Python, and True would otherwise pass as 1.
    if isinstance(nth, bool) or not isinstance(nth, int) or nth not in MONTHLY_NTH:
        errors.append(f"{path}.nth: expected 1, 2, 3, 4 or -1 (the last); got {show(nth)}")
        nth = None
    if time is None or weekday is None or nth is None:
        return dict(_MANUAL)
    return {"kind": "monthly", "nth": nth, "weekday": weekday, "time": time}


def _time(raw: Any, errors: list[str]) -> str | None:
    if isinstance(raw, str) and TIME.fullmatch(raw):
        return raw
    errors.append(f'spec.schedule.time: expected a 24-hour time as "HH:MM"; got {show(raw)}')
    return None


def _weekday(raw: Any, path: str, errors: list[str]) -> str | None:
    name = raw.lower() if isinstance(raw, str) else None
    if name in WEEKDAYS:
        return name
    errors.append(f"{path}: {show(raw)} is not a weekday; expected one of {', '.join(WEEKDAYS)}")
    return None


def _days(raw: Any, errors: list[str]) -> list[str] | None:
    """Weekday names in week order from Monday, duplicates collapsed.

    Week order, not typed order: ``["friday", "monday"]`` and ``["monday", "friday"]`` are
    one schedule, and storing both spellings is a version history of edits nobody made.
    """
    path = "spec.schedule.days"
    if not isinstance(raw, list) or not raw:
        errors.append(f"{path}: expected a non-empty list of weekday names")
        return None
    named = [_weekday(day, f"{path}[{i}]", errors) for i, day in enumerate(raw)]
    if None in named:
        return None
    return [day for day in WEEKDAYS if day in named]


# ── phases ──


def _phases(
    raw: Any,
    registry: Registry,
    kept: frozenset[str],
    types: dict[str, str],
    declared: dict[str, dict[str, Any]],
    errors: list[str],
) -> list[dict[str, Any]]:
    path = "spec.phases"
    what = "expected a non-empty list of phases"
    raw = bounded_list(raw, path, errors, what, MAX_PHASES, "phases", "this spec has", quote=False)
    if raw is None:
        return []
    first_use: dict[str, int] = {}
    total_steps = 0
    phases = []
    for i, raw_phase in enumerate(raw):
        ppath = f"{path}[{i}]"
        if not isinstance(raw_phase, dict):
            errors.append(f"{ppath}: expected an object")
            continue
        refuse_unknown(raw_phase, PHASE_KEYS, ppath, errors)
        key = _phase_key(raw_phase.get("key"), ppath, i, first_use, errors)
        label = _label(raw_phase.get("label"), f"{ppath}.label", errors, required=True)
        raw_steps = raw_phase.get("steps")
        steps: list[dict[str, Any]] = []
        if not isinstance(raw_steps, list):
            errors.append(f"{ppath}.steps: expected a list of steps")
        elif len(raw_steps) > MAX_STEPS_PER_PHASE:
            total_steps += len(raw_steps)
            errors.append(
                f"{ppath}.steps: at most {MAX_STEPS_PER_PHASE} steps in one phase; "
                f"this one has {len(raw_steps)}"
            )
        else:
            total_steps += len(raw_steps)
            for j, raw_step in enumerate(raw_steps):
                step = _step(
                    raw_step, f"{ppath}.steps[{j}]", registry, kept, types, declared, errors
                )
                if step is not None:
                    steps.append(step)
        advance = validate_advance(
            raw_phase.get("advance"), f"{ppath}.advance", registry, errors, params=types
        )
        phase: dict[str, Any] = {"key": key, "label": label, "steps": steps}
        # Omitted rather than null: most phases have no gate, and a null on every phase would
        # make the first gate anyone adds look like an edit to every phase.
        if advance is not None:
            phase["advance"] = advance
        countdown = validate_countdown(
            raw_phase.get("countdown"), f"{ppath}.countdown", registry, errors, index=i, key=key
        )
        if countdown is not None:
            phase["countdown"] = countdown
        phases.append(phase)
    if total_steps > MAX_STEPS:
        errors.append(
            f"{path}: at most {MAX_STEPS} steps across all phases; this spec has {total_steps}"
        )
    return phases


def _phase_key(
    raw: Any, path: str, index: int, first_use: dict[str, int], errors: list[str]
) -> str | None:
    path = f"{path}.key"
    if raw is None or raw == "":
        errors.append(f"{path}: a phase needs a key")
        return None
    if not isinstance(raw, str) or not PHASE_KEY.fullmatch(raw):
        errors.append(
            f"{path}: {show(raw)} is not a phase key; expected a slug such as "
            '"wind-down" (lowercase letters and digits, words joined by - or _)'
        )
        return None
    if len(raw) > MAX_PHASE_KEY:
        errors.append(f"{path}: at most {MAX_PHASE_KEY} characters; this one has {len(raw)}")
        return None
    if raw in first_use:
        # Run steps are unique on (run, phase, seq): two phases sharing a key would collapse
        # into one when a run is materialised and half the authored steps would vanish.
        errors.append(f'{path}: "{raw}" is already the key of spec.phases[{first_use[raw]}]')
        return None
    first_use[raw] = index
    return raw


# ── steps ──


def _step(
    raw: Any,
    path: str,
    registry: Registry,
    kept: frozenset[str],
    types: dict[str, str],
    declared: dict[str, dict[str, Any]],
    errors: list[str],
) -> dict[str, Any] | None:
    if not isinstance(raw, dict):
        errors.append(f"{path}: expected an object")
        return None
    refuse_unknown(raw, STEP_KEYS, path, errors)
    action_id = raw.get("action")
    if not isinstance(action_id, str) or not action_id:
        errors.append(f"{path}.action: a step needs an action id; got {show(action_id)}")
        return None
    declaration = registry.actions.get(action_id)
    if declaration is None:
        if action_id in kept:
            return _dormant_step(action_id, raw)
        errors.append(f'{path}.action: no plugin registers "{action_id}"')
        return None
    before = len(errors)
    params = _params(declaration, raw.get("params"), f"{path}.params", types, declared, errors)
    if len(errors) == before:
        errors.extend(
            f"{path}: {problem}" for problem in _undeclared_costs(declaration, params, registry)
        )
    on_failure = raw.get("on_failure")
    if on_failure is None:
        on_failure = declaration.default_on_failure
    elif on_failure not in ON_FAILURE:
        errors.append(
            f"{path}.on_failure: expected one of {', '.join(ON_FAILURE)}; got {show(on_failure)}"
        )
    label = _label(raw.get("label"), f"{path}.label", errors, required=False)
    hold = _hold_seconds(raw, f"{path}.hold_seconds", errors)
    return {
        "action": action_id,
        "label": label or declaration.label,
        "params": params,
        "on_failure": on_failure,
        **({} if hold is None else {"hold_seconds": hold}),
        # Taken from the declaration at save, so a later version bump can be shown to the
        # author rather than dispatching a param whose meaning changed.
        "action_version": declaration.version,
        "dormant": False,
    }


def _hold_seconds(raw: dict[str, Any], path: str, errors: list[str]) -> int | None:
    """A step's ``hold_seconds`` (None when not given): how long a notify step waits for its
    plugin when that is down, a whole number of seconds from 0 (refuse at once) to
    :data:`MAX_HOLD_SECONDS`."""
    value = raw.get("hold_seconds")
    if value is None:
        return None
    whole = isinstance(value, int) and not isinstance(value, bool)
    if not whole or not 0 <= value <= MAX_HOLD_SECONDS:
        errors.append(
            f"{path}: expected a whole number of seconds from 0 to {MAX_HOLD_SECONDS}; "
            f"got {show(value)}"
        )
        return None
    return int(value)


def _undeclared_costs(declaration: Action, params: dict[str, Any], registry: Registry) -> list[str]:
    """Each dimension the step's ``cost`` names that no installed plugin declares.

    Found at save, so the author reads it where the step is written rather than at verify,
    rehearsal or dispatch. A ``cost`` that raises or answers something other than a mapping
    is verify's to report (with the amounts, against the caps): here it names nothing.
    """
    if declaration.cost is None:
        return []
    try:
        answer = declaration.cost(dict(params))
    except Exception:  # a plugin's cost failing is reported, with its reason, by verify
        return []
    if not isinstance(answer, dict):
        return []
    return [
        f"{show(str(dimension))} is not a budget dimension any installed plugin declares"
        for dimension in sorted(map(str, answer))
        if dimension not in registry.budgets
    ]


def _dormant_step(action_id: str, raw: dict[str, Any]) -> dict[str, Any]:
    """A stored step whose action nobody registers now: kept as it was, and marked.

    Its params pass through unchecked, because the only thing that could check them left
    with the plugin; refusing the save would make the uninstall destructive after the fact.
    """
    label = raw.get("label")
    version = raw.get("action_version")
    on_failure = raw.get("on_failure")
    params = raw.get("params")
    hold = _hold_seconds(raw, "", [])
    return {
        "action": action_id,
        "label": label if isinstance(label, str) and label.strip() else action_id,
        "params": params if isinstance(params, dict) else {},
        "on_failure": on_failure if on_failure in ON_FAILURE else "pause",
        **({} if hold is None else {"hold_seconds": hold}),
        "action_version": (
            version if isinstance(version, int) and not isinstance(version, bool) else 1
        ),
        "dormant": True,
    }


def _params(
    declaration: Action,
    raw: Any,
    path: str,
    types: dict[str, str],
    declared_params: dict[str, dict[str, Any]],
    errors: list[str],
) -> dict[str, Any]:
    """The declared params of one step, checked against each param's type and bounds
    (:meth:`~pageant.hookspecs.Param.check`), in declaration order; a value may be
    ``{"param": name}``, a run param whose type fits (and, for a param with an option
    source, whose declaration names that source or has a default), written out when the
    run reaches it (a reference is not a value: its bounds are the written-out value's).

    An unknown param is an error rather than a silent drop: ``creatures`` typed for
    ``creature`` is a step that would dispatch without it while looking saved.
    """
    raw = an_object({} if raw is None else raw, path, errors)
    if raw is None:
        return {}
    declared = {param.name for param in declaration.params}
    for name in raw:
        if name not in declared:
            errors.append(f"{path}: {show(name)} is not a param of {declaration.id}")
    params: dict[str, Any] = {}
    for param in declaration.params:
        value = raw.get(param.name)
        if value is None or (isinstance(value, str) and value == ""):
            if param.required:
                errors.append(f'{path}: "{param.name}" is required')
            continue
        if run_params.is_reference(value):
            where = f'{path}: "{param.name}"'
            if run_params.check_reference(
                value,
                param.type,
                types,
                where,
                errors,
                declared=declared_params,
                option_source=param.option_source,
            ):
                params[param.name] = {"param": value["param"]}
            continue
        ok, value, why = param.check(value)
        if not ok:
            # Escaped: a value holding half of a surrogate pair is refused, and the message
            # naming it must itself be text.
            got = show(raw[param.name]).encode("utf-8", "backslashreplace").decode("utf-8")
            errors.append(f'{path}: "{param.name}" {why}; got {got}')
            continue
        if param.type == "string" and len(value) > MAX_STRING_PARAM:
            errors.append(
                f'{path}: "{param.name}" is at most {MAX_STRING_PARAM} characters; '
                f"this one has {len(value)}"
            )
            continue
        params[param.name] = value
    return params


# ── the document ───────────────────────────────────────────────────────────────


def _closed(properties: dict[str, Any], required: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
        **extra,
    }


_TIME = {"type": "string", "pattern": f"^{TIME.pattern}$", "description": "24-hour HH:MM"}
_STAGGER = {
    "type": "string",
    "pattern": "^([0-9]{1,6}[smhd]|local)$",
    "description": "a fan-out's runs spread over this window (1s to 1d), each param set at "
    "its own stable offset; or local: each param set at the schedule's time in the zone its "
    "option source gives (kept in schedule.zones, written at save); only with schedule.params",
}
_ZONES = {
    "type": "object",
    "additionalProperties": {"type": "string", "description": "an IANA time zone"},
    "description": 'with "stagger": "local", each param set\'s zone by its scope '
    '({"server=eu-1": "Europe/Berlin"}): written by the host at save from the option '
    "sources; one sent is replaced. A set without one keeps the event's zone",
}
_SCHEDULES = [
    _closed({"kind": {"const": "manual"}}, ["kind"], description="started by hand only"),
    _closed(
        {
            "kind": {"const": "once"},
            "at": {
                "type": "string",
                "pattern": f"^{AT.pattern}$",
                "description": f"a local date and time in the event's zone, {SUPPORTED}",
            },
            "stagger": _STAGGER,
            "zones": _ZONES,
        },
        ["kind", "at"],
    ),
    _closed(
        {
            "kind": {"const": "weekly"},
            "days": {
                "type": "array",
                "minItems": 1,
                "items": {"enum": list(WEEKDAYS)},
            },
            "time": _TIME,
            "stagger": _STAGGER,
            "zones": _ZONES,
        },
        ["kind", "days", "time"],
    ),
    _closed(
        {
            "kind": {"const": "monthly"},
            "nth": {"enum": list(MONTHLY_NTH), "description": "-1 is the last"},
            "weekday": {"enum": list(WEEKDAYS)},
            "time": _TIME,
            "stagger": _STAGGER,
            "zones": _ZONES,
        },
        ["kind", "nth", "weekday", "time"],
    ),
]

#: A schedule's fan-out (``schedule.params``), as the HTTP API documents it.
_FAN_OUT = {
    "description": "one run per param set at every occurrence: a list of sets, or the "
    "values of an option source (docs/schedules.md)",
    "oneOf": [
        {
            "type": "array",
            "minItems": 1,
            "maxItems": run_params.MAX_PARAM_SETS,
            "items": {"type": "object", "description": "a value for each declared param"},
        },
        _closed(
            {
                run_params.FOR_EACH: {
                    "type": "object",
                    "minProperties": 1,
                    "maxProperties": 1,
                    "additionalProperties": {"type": "string"},
                    "description": "the param and the option source whose values it takes, "
                    'e.g. {"server": "openarena.options.servers"}',
                }
            },
            [run_params.FOR_EACH],
        ),
    ],
}
for _shape in _SCHEDULES:
    if _shape["properties"]["kind"] != {"const": "manual"}:
        _shape["properties"]["params"] = _FAN_OUT

#: The spec's shape, as the HTTP API documents it. The validator checks more than a schema
#: can say (each action and its params against the registry, conditions, the bounds across
#: phases), and answers every problem with its path.
SPEC_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "The spec: when the event happens (schedule) and what it does (phases, "
    "each a list of steps and an optional gate); see docs/schedules.md, docs/gates.md and the "
    "catalog (GET /api/v1/admin/catalog) for the actions and their params.",
    "properties": {
        "schedule": {"oneOf": _SCHEDULES},
        "phases": {
            "type": "array",
            "maxItems": MAX_PHASES,
            "items": _closed(
                {
                    "key": {
                        "type": "string",
                        "pattern": f"^{PHASE_KEY.pattern}$",
                        "maxLength": MAX_PHASE_KEY,
                    },
                    "label": {"type": "string", "maxLength": MAX_LABEL},
                    "steps": {
                        "type": "array",
                        "maxItems": MAX_STEPS_PER_PHASE,
                        "items": _closed(
                            {
                                "action": {
                                    "type": "string",
                                    "description": "an action id from the catalog",
                                },
                                "label": {"type": "string", "maxLength": MAX_LABEL},
                                "params": {
                                    "type": "object",
                                    "description": "the action's declared params",
                                },
                                "on_failure": {"enum": list(ON_FAILURE)},
                                "action_version": {
                                    "type": "integer",
                                    "description": "output only: recomputed when saved",
                                },
                                "dormant": {
                                    "type": "boolean",
                                    "description": "output only: recomputed when saved",
                                },
                            },
                            ["action"],
                        ),
                    },
                    "advance": {
                        "type": ["object", "null"],
                        "description": "the phase's gate (docs/gates.md)",
                    },
                },
                ["key"],
            ),
        },
        "blackouts": {
            "type": "array",
            "maxItems": MAX_BLACKOUTS,
            "items": {"type": "string", "pattern": SLUG_RE.pattern, "maxLength": MAX_SLUG},
            "description": "the slugs of the blackouts the event subscribes to "
            "(GET /api/v1/admin/blackouts); an occurrence inside one of their periods is "
            "blacked out, never run",
        },
        "acknowledge": {
            "type": "array",
            "maxItems": 100,
            "items": {"type": "string", "minLength": 1, "maxLength": 200},
            "description": "the ids of the save warnings (the event's warnings) its author "
            "has read and meant; an acknowledged warning is no longer given",
        },
        "announcement": {
            "type": "object",
            "description": "the event's announcement template: title and body, each a text "
            "with placeholders in braces (docs/announcements.md)",
            "properties": {
                "title": {"type": "string", "minLength": 1, "maxLength": MAX_TEMPLATE_TITLE},
                "body": {"type": "string", "minLength": 1, "maxLength": MAX_TEMPLATE_BODY},
            },
            "additionalProperties": False,
        },
        "catch_up": CATCH_UP_SCHEMA,
        "start_when": START_WHEN_SCHEMA,
        "requires": REQUIRES_SCHEMA,
    },
    "additionalProperties": False,
}
