"""Exercising a loaded plugin's declarations the way the host will call them.

The kit's dry runs, each answering :class:`Check` lines: ``perform`` with ``verify=True`` on
the declared examples, ``cost`` of the same params, ``revert`` against ``reversible``, option
sources resolving and param examples among their values, trigger examples as one firing. A
plugin's defect is reported, never raised.

Plugins are started as ``serve`` starts them, but with a :class:`KitContext` whose ``emit``
checks the payload as the emit path does and writes nothing; ``perform`` receives
:class:`KitServices` in place of a step's services. Nothing here needs a database, and
nothing a correct plugin does here changes its game.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pageant.errors import Invalid, NotFound
from pageant.gates.conditions import check_payload
from pageant.hookspecs import Action, ActionContext, Envelope, Posted
from pageant.hookspecs.models import check_literal
from pageant.plugins.calls import run_with_envelope
from pageant.plugins.loader import PluginManager, PluginRecord
from pageant.plugins.options import resolve_options
from pageant.plugins.registry import Registry
from pageant.settings import Settings

Outcome = Literal["pass", "warning", "violation"]

#: How many resolved values a warning shows before it says "...".
SHOWN_VALUES = 10


@dataclass(frozen=True)
class Check:
    """One line of the report: what was checked, how it came out, and why."""

    #: The plugin's label ``dist[entry]``; None for the manifest file as a whole.
    plugin: str | None
    #: load, startup, perform, cost, revert, option_source, option_example, trigger, manifest.
    check: str
    #: What was checked: a plugin, an action, a source or trigger id, ``action.param``, a file.
    subject: str
    outcome: Outcome
    message: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class KitServices:
    """What ``perform`` finds in ``ctx.services`` during the kit's dry runs.

    The registry and settings are real; the run log is a list; ``post_json`` sends nothing
    and remembers the attempt, because a dry run that posts has changed the world.
    """

    def __init__(self, registry: Registry, settings: Settings) -> None:
        self.registry = registry
        self.settings = settings
        self.run_id: int | None = None
        self.step_id: int | None = None
        self.phase = "contract-check"
        self.logged: list[tuple[str, dict[str, Any]]] = []
        self.posted: list[str] = []

    async def write_log(self, kind: str, detail: dict[str, Any]) -> None:
        self.logged.append((kind, detail))

    async def post_json(self, url: str, body: str | dict[str, Any]) -> Posted:
        self.posted.append(url)
        return Posted(None, "not sent: contract-check sends nothing", False)


class KitContext:
    """What ``pageant_startup`` receives during a check: the plugin context without a host.

    ``emit`` refuses an unknown trigger or a payload that does not fit its variables exactly
    as the emit path does, then counts no gates (there are none); ``reconcile`` does nothing.
    """

    def __init__(self, registry: Registry, plugin_label: str, owner: str) -> None:
        self.registry = registry
        self.plugin = plugin_label
        self.owner = owner
        self.emitted: list[tuple[str, dict[str, Any]]] = []

    async def emit(self, trigger_id: str, payload: dict[str, Any]) -> dict[str, int]:
        trigger = self.registry.triggers.get(trigger_id)
        if trigger is None:
            raise NotFound(f"no such trigger: {trigger_id!r} (no installed plugin registers it)")
        checked, errors = check_payload(trigger, payload)
        if errors:
            raise Invalid(f"the payload does not fit {trigger_id}'s variables", details=errors)
        self.emitted.append((trigger_id, checked))
        return {"gates_matched": 0, "gates_closed": 0}

    async def reconcile(self) -> None:
        return None


def start(manager: PluginManager) -> set[str]:
    """Start every loaded plugin as the host does; answers the labels refused for raising.

    Every plugin, not only the ones checked: a checked plugin may lean on another's option
    source or budget, exactly as it would under ``serve``.
    """
    return manager.start(
        lambda record: KitContext(manager.registry, record.label, record.owner or "")
    )


async def exercise(registry: Registry, record: PluginRecord, services: KitServices) -> list[Check]:
    """The kit's checks of what one loaded plugin declared."""
    owned = {
        key: sorted(i for (k, i), o in registry.owners.items() if k == key and o == record.label)
        for key in ("actions", "option_sources", "triggers")
    }
    checks: list[Check] = []
    resolved: dict[str, dict[str, Any]] = {}
    for source_id in owned["option_sources"]:
        resolved[source_id] = await resolve_options(registry.option_sources[source_id])
        checks.append(_source_check(record.label, source_id, resolved[source_id]))
    for action_id in owned["actions"]:
        action = registry.actions[action_id]
        for params in example_param_sets(action):
            checks.append(await _perform_check(record.label, action, params, services))
            checks.append(_cost_check(record.label, action, params, registry))
        checks.append(_revert_check(record.label, action))
        for param in action.params:
            if param.option_source is None:
                continue
            source = registry.option_sources.get(param.option_source)
            if param.option_source not in resolved and source is not None:
                resolved[param.option_source] = await resolve_options(source)
            checks.append(
                _example_check(
                    record.label,
                    action,
                    param.name,
                    param.example,
                    param.option_source,
                    resolved.get(param.option_source),
                )
            )
    for trigger_id in owned["triggers"]:
        checks.append(_trigger_check(record.label, registry, trigger_id))
    return checks


def example_param_sets(action: Action) -> list[dict[str, Any]]:
    """Every param's example; then, when some params are optional, the required ones alone
    (a step may leave an optional param out, and ``perform`` must cope)."""
    every = {p.name: p.example for p in action.params}
    required = {p.name: p.example for p in action.params if p.required}
    return [every] if required == every else [every, required]


async def _perform_check(
    label: str, action: Action, params: dict[str, Any], services: KitServices
) -> Check:
    subject = action.id
    bad = [
        f"{p.name} example {p.example!r} {why}"
        for p in action.params
        for ok, _, why in [check_literal(p.type, p.example)]
        if not ok
    ]
    if bad:
        return Check(label, "perform", subject, "violation", f"{subject}: {'; '.join(bad)}")
    before = len(services.posted)
    context = ActionContext(
        params=dict(params),
        idempotency_key=f"contract-check:{action.id}",
        run=None,  # a verification happens outside any run
        verify=True,
        deadline=datetime.now(UTC) + timedelta(milliseconds=action.budget_ms),
        services=services,
    )
    envelope = await run_with_envelope(action.perform, context, timeout=action.budget_ms / 1000)
    call = f"perform(verify=True) with {_show(params)}"
    if not envelope.ok:
        return Check(
            label,
            "perform",
            subject,
            "violation",
            f"{subject}: {call} answered {describe(envelope, action)}; "
            "expected ok: a dry run of the declared examples must pass",
        )
    if len(services.posted) > before:
        return Check(
            label,
            "perform",
            subject,
            "violation",
            f"{subject}: {call} posted to {', '.join(services.posted[before:])}; "
            "expected a dry run to send nothing",
        )
    if envelope.resources:
        return Check(
            label,
            "perform",
            subject,
            "warning",
            f"{subject}: {call} answered ok with resources "
            f"{', '.join(f'{r.kind}:{r.ref}' for r in envelope.resources)}; "
            "a dry run should create nothing",
        )
    return Check(label, "perform", subject, "pass", f"{subject}: {call} answered ok")


def describe(envelope: Envelope, action: Action | None = None) -> str:
    """An envelope in words, as the host would read it."""
    if envelope.ok:
        return "ok"
    text = f"ok: false, retry: {str(envelope.retry).lower()}, error: {_show(envelope.error)}"
    if envelope.malformed == "exception":
        return f"{text} (it raised)"
    if envelope.malformed == "timeout" and action is not None:
        return f"{text} (it outlived budget_ms {action.budget_ms})"
    if envelope.malformed:
        return f"{text} (read as a failure: {envelope.malformed})"
    return text


def _cost_check(label: str, action: Action, params: dict[str, Any], registry: Registry) -> Check:
    subject = action.id
    if action.cost is None:
        return Check(label, "cost", subject, "pass", f"{subject}: declares no cost")
    call = f"cost({_show(params)})"
    try:
        answer = action.cost(dict(params))
    except Exception as exc:  # the plugin's defect, reported rather than raised
        return Check(
            label,
            "cost",
            subject,
            "violation",
            f"{subject}: {call} raised {type(exc).__name__}: {exc}; "
            "expected an answer for the declared examples",
        )
    if not isinstance(answer, Mapping):
        return Check(
            label,
            "cost",
            subject,
            "violation",
            f"{subject}: {call} answered {type(answer).__name__}; "
            "expected a mapping of budget dimension to amount",
        )
    problems = []
    for dimension, amount in answer.items():
        if dimension not in registry.budgets:
            declared = ", ".join(sorted(registry.budgets)) or "none"
            problems.append(
                f"names {dimension!r}, which no plugin declares as a budget (declared: {declared})"
            )
        elif (
            isinstance(amount, bool)
            or not isinstance(amount, (int, float))
            or not math.isfinite(amount)
            or amount < 0
        ):
            problems.append(f"gives {dimension} {amount!r}; expected a non-negative finite number")
    if problems:
        return Check(
            label, "cost", subject, "violation", f"{subject}: {call} {'; '.join(problems)}"
        )
    return Check(label, "cost", subject, "pass", f"{subject}: {call} = {_show(dict(answer))}")


def _revert_check(label: str, action: Action) -> Check:
    # The loader refuses an action whose revert and reversibility disagree (the Action
    # model), so a loaded action always agrees; the line tells the author what was seen.
    said = "a revert is declared" if action.revert is not None else "no revert is declared"
    return Check(
        label, "revert", action.id, "pass", f"{action.id}: reversible {action.reversible}; {said}"
    )


def _source_check(label: str, source_id: str, answer: Mapping[str, Any]) -> Check:
    if answer["ok"]:
        return Check(
            label,
            "option_source",
            source_id,
            "pass",
            f"{source_id}: resolved {len(answer['items'])} value(s)",
        )
    return Check(
        label,
        "option_source",
        source_id,
        "violation",
        f"{answer['reason']}; expected resolve() to answer a list of {{value, label}}",
    )


def _example_check(
    label: str,
    action: Action,
    param: str,
    example: Any,
    source_id: str,
    answer: Mapping[str, Any] | None,
) -> Check:
    # A warning, never a violation: a source's values are live (a game's regions today),
    # so an example missing from them may be the game's state rather than the plugin's bug.
    subject = f"{action.id}.{param}"
    head = f"{action.id} param {param}: example {_show(example)}"
    if answer is None or not answer["ok"]:
        why = "is not declared" if answer is None else "did not resolve"
        return Check(
            label,
            "option_example",
            subject,
            "warning",
            f"{head} could not be checked: {source_id} {why}",
        )
    values = [item["value"] for item in answer["items"]]
    if any(_show(v) == _show(example) for v in values):
        return Check(
            label, "option_example", subject, "pass", f"{head} is one of {source_id}'s values"
        )
    shown = ", ".join(_show(v) for v in values[:SHOWN_VALUES])
    if len(values) > SHOWN_VALUES:
        shown += ", ..."
    return Check(
        label,
        "option_example",
        subject,
        "warning",
        f"{head} is not among the values {source_id} resolved ({shown or 'none'}); "
        "expected an example staff could pick",
    )


def _trigger_check(label: str, registry: Registry, trigger_id: str) -> Check:
    # The examples as one firing, through the emit path's own payload check.
    trigger = registry.triggers[trigger_id]
    _, errors = check_payload(
        trigger, {v.name: v.example for v in trigger.variables}, path="examples"
    )
    if errors:
        return Check(
            label, "trigger", trigger_id, "violation", f"{trigger_id}: {'; '.join(errors)}"
        )
    shown = ", ".join(f"{v.name} {v.type}" for v in trigger.variables) or "no variables"
    return Check(
        label,
        "trigger",
        trigger_id,
        "pass",
        f"{trigger_id}: variable examples type-check ({shown})",
    )


def _show(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr)
