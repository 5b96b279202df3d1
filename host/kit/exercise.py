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

import asyncio
import json
import math
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pageant.errors import Invalid, PageantError
from pageant.events.verify import DryRunServices
from pageant.gates.conditions import check_payload
from pageant.gates.emit import MAX_BATCH, check_firing, refusal
from pageant.gates.firers import check_plugin_firing
from pageant.hookspecs import (
    UNKNOWN,
    Action,
    ActionContext,
    AnnounceLeg,
    Envelope,
    GameLink,
    Lease,
    Param,
    ReadContext,
    Reading,
    SendContext,
    Unknown,
)
from pageant.hookspecs.models import changes_world, reading_value
from pageant.plugins import tracing
from pageant.plugins.calls import run_with_envelope
from pageant.plugins.loader import PluginManager, PluginRecord
from pageant.plugins.options import resolve_options
from pageant.plugins.registry import Registry
from pageant.support.settings import Settings

Outcome = Literal["pass", "warning", "violation"]

#: How many resolved values a warning shows before it says "...".
SHOWN_VALUES = 10
#: The target the kit walks each lease through: the plugin's own stand-in must accept it.
LEASE_TARGET = "contract-check"
#: What each announce leg is asked to send, with ``verify``.
LEG_MESSAGE = "pageant contract-check: a dry run of this leg"
#: The bound on a lease call, a leg's send and an ``observe()``.
CALL_SECONDS = 10.0
OBSERVE_SECONDS = 10.0


@dataclass(frozen=True)
class Check:
    """One line of the report: what was checked, how it came out, and why."""

    #: The plugin's label ``dist[entry]``; None for the manifest file as a whole.
    plugin: str | None
    #: load, startup, perform, perform_fresh, cost, revert, revert_final, option_source,
    #: option_example, bounds, trigger, lease, leg, reading, observe, world, manifest.
    check: str
    #: What was checked: a plugin, an action, a source or trigger id, ``action.param``, a file.
    subject: str
    outcome: Outcome
    message: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class KitServices(DryRunServices):
    """What ``perform`` finds in ``ctx.services`` during the kit's dry runs: verify's
    stand-in (real registry and settings, the run log a list, ``post_json`` sending nothing
    and remembering the attempt), under the kit's own phase."""

    phase = "contract-check"
    not_sent = "not sent: contract-check sends nothing"


class KitLink:
    """``context.link`` during a check: no host, no agent; every call is answered
    ``{"ok": True}`` at once and kept in ``calls``, so a link plugin's ``perform`` and
    ``revert`` run to their envelope. A plugin's own tests drive the real route with
    :class:`pageant.testing.FakeAgent`."""

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.calls: list[tuple[str, str, dict[str, Any], str]] = []

    async def call(
        self,
        server: str,
        command: str,
        payload: Mapping[str, Any],
        *,
        key: str,
        deadline: datetime,
    ) -> Any:
        self.calls.append((server, command, dict(payload), key))
        return {"ok": True}

    def servers(self) -> dict[str, str]:
        return {server: "up" for server, *_ in self.calls}

    def up(self) -> list[str]:
        return sorted(self.servers())


class KitContext:
    """What ``pageant_startup`` receives during a check: the plugin context without a host.

    ``emit`` (and ``emit_batch``) refuses another owner's trigger, an unknown trigger, or a
    payload, key or ``at`` that does not fit, exactly as the emit path does, then counts no
    gates (there are none); ``reconcile`` does nothing, and ``set_available`` is only kept.
    """

    def __init__(
        self,
        registry: Registry,
        plugin_label: str,
        owner: str,
        *,
        settings: Any = None,
        link: GameLink | None = None,
    ) -> None:
        self.registry = registry
        self.plugin = plugin_label
        self.owner = owner
        self.settings = settings
        self.emitted: list[tuple[str, dict[str, Any]]] = []
        #: The game link as the check lends it: by default every command answered at once,
        #: as an agent that did what it was told would (:class:`KitLink`); with
        #: ``--live-link``, a real host's link, answered by the agents syncing with it.
        self.link: GameLink = link if link is not None else KitLink(owner)

    async def emit(
        self,
        trigger_id: str,
        payload: dict[str, Any],
        *,
        key: str | None = None,
        at: datetime | None = None,
    ) -> dict[str, int]:
        check_plugin_firing(trigger_id, self.owner)
        firing = check_firing(
            self.registry,
            trigger_id,
            payload,
            key=key,
            at=at,
            now=datetime.now(UTC),
            max_age_seconds=Settings().firing_max_age_seconds,
        )
        self.emitted.append((trigger_id, firing.payload))
        return {"gates_matched": 0, "gates_closed": 0}

    async def emit_batch(self, firings: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        if not isinstance(firings, list) or not 1 <= len(firings) <= MAX_BATCH:
            raise Invalid(f"expected a list of 1 to {MAX_BATCH} firings")
        answers = []
        for item in firings:
            try:
                fields = item if isinstance(item, Mapping) else {}
                answer = await self.emit(
                    fields.get("trigger", ""), fields.get("payload", {}), key=fields.get("id")
                )
            except PageantError as refused:
                answers.append(refusal(refused))
            else:
                answers.append({"status": 200, **answer})
        return answers

    async def reconcile(self) -> None:
        return None

    def set_available(self, available: bool, reason: str | None = None) -> None:
        """Kept, so a check can see what the plugin said; nothing waits on it here."""
        self.available = (available, reason)


def start(manager: PluginManager, link: Callable[[str], GameLink] | None = None) -> set[str]:
    """Start every loaded plugin as the host does; answers the labels refused for raising.

    Every plugin, not only the ones checked: a checked plugin may lean on another's option
    source or budget, exactly as it would under ``serve``. ``link`` makes each plugin's
    ``context.link`` from its owner (default: a :class:`KitLink`).
    """
    return manager.start(
        lambda record: KitContext(
            manager.registry,
            record.label,
            record.owner or "",
            settings=record.settings,
            link=link(record.owner or "") if link is not None else None,
        )
    )


async def exercise(
    registry: Registry,
    record: PluginRecord,
    services: KitServices,
    *,
    resolve_seconds: float | None = None,
) -> list[Check]:
    """The kit's checks of what one loaded plugin declared."""
    owned = {
        key: sorted(i for (k, i), o in registry.owners.items() if k == key and o == record.label)
        for key in ("actions", "option_sources", "triggers", "leases", "legs", "readings")
    }
    world = World.of(record)
    checks: list[Check] = []
    resolved: dict[str, dict[str, Any]] = {}
    for source_id in owned["option_sources"]:
        resolved[source_id] = await resolve_options(
            registry.option_sources[source_id], timeout=resolve_seconds
        )
        checks.append(_source_check(record.label, source_id, resolved[source_id]))
    for action_id in owned["actions"]:
        action = registry.actions[action_id]
        for params in example_param_sets(action):
            found = await _perform_check(record.label, action, params, services, world)
            checks.extend(world.reported(found))
            checks.append(_cost_check(record.label, action, params, registry))
        checks.extend(world.reported(await _revert_check(record.label, action, services, world)))
        if action.revert is not None:
            found = await _revert_final_check(record.label, action, services, world)
            checks.extend(world.reported(found))
        for param in action.params:
            if param.bounds:
                checks.append(_bounds_check(record.label, action, param))
            if param.option_source is None:
                continue
            source = registry.option_sources.get(param.option_source)
            if param.option_source not in resolved and source is not None:
                resolved[param.option_source] = await resolve_options(
                    source, timeout=resolve_seconds
                )
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
    for lease_id in owned["leases"]:
        checks.append(await _lease_check(record.label, registry.leases[lease_id]))
    for leg_id in owned["legs"]:
        found = await _leg_check(record.label, registry.legs[leg_id], services, world)
        checks.extend(world.reported(found))
    for reading_id in owned["readings"]:
        checks.append(await _reading_check(record.label, registry.readings[reading_id]))
    checks.append(world.summary(record.label))
    return checks


async def perform_again(
    registry: Registry, record: PluginRecord, services: KitServices
) -> list[Check]:
    """Each example's dry run once more, on a host loaded afresh (check ``perform_fresh``):
    a dry run that passes only once, or only on a host it has already run on, fails."""
    world = World.of(record)
    checks = []
    owned = sorted(
        i for (k, i), o in registry.owners.items() if k == "actions" and o == record.label
    )
    for action_id in owned:
        action = registry.actions[action_id]
        for params in example_param_sets(action):
            found = await _perform_check(record.label, action, params, services, world)
            checks.extend(world.reported(replace(found, check="perform_fresh")))
    return checks


class World:
    """What the kit can see of a plugin's world: its ``PLUGIN_INFO["observe"]``, if any.

    The kit cannot see a game; a plugin that declares ``observe`` lets it compare the
    world before and after every dry run and every revert of nothing. Without one, those
    checks can only see what reaches the host (posts through the services, resources in an
    answer), and the report says so.
    """

    def __init__(self, observe: Any = None) -> None:
        self.observe = observe
        #: Every failure of ``observe()`` so far, and those not yet reported as a check.
        self.failures: list[str] = []
        self._unreported: list[str] = []

    @classmethod
    def of(cls, record: PluginRecord) -> World:
        return cls(getattr(record.info, "observe", None))

    async def take(self, when: str) -> tuple[Any, str | None]:
        """``(picture, None)``, or ``(None, why)`` when ``observe()`` itself failed (kept,
        for :meth:`reported` to turn into a check of its own); ``when`` is ``before`` or
        ``after`` the call it brackets."""
        if self.observe is None:
            return None, None
        try:
            async with asyncio.timeout(OBSERVE_SECONDS):
                picture = await self.observe()
            return json.loads(json.dumps(picture, sort_keys=True, default=repr)), None
        except TimeoutError:
            why = f"observe() did not answer within {OBSERVE_SECONDS:g} s {when} the call"
        except Exception as exc:  # the plugin's defect, reported rather than raised
            why = f"observe() raised {_raised(exc)} {when} the call"
        self.failures.append(why)
        self._unreported.append(why)
        return None, why

    def reported(self, found: Check) -> list[Check]:
        """``found``, then a violation of its own for each ``observe()`` failure around its
        call: an action that failed too is not allowed to hide a world the kit could not
        see, and a call that passed was passed unseen."""
        if not self._unreported:
            return [found]
        why = "; ".join(self._unreported)
        self._unreported.clear()
        return [
            found,
            Check(
                found.plugin,
                "observe",
                found.subject,
                "violation",
                f"{found.subject}: {why} (check {found.check}); expected observe() to answer "
                "a JSON-able picture of the world every time: without it the kit cannot tell "
                "whether the call changed the game",
            ),
        ]

    def summary(self, label: str) -> Check:
        if self.failures:
            return Check(
                label,
                "world",
                label,
                "violation",
                f'PLUGIN_INFO["observe"] failed {len(self.failures)} time(s) (the observe '
                f"checks name each): the kit could not see the world around those calls; "
                f"first: {self.failures[0]}",
            )
        if self.observe is None:
            return Check(
                label,
                "world",
                label,
                "warning",
                'declares no PLUGIN_INFO["observe"]: the kit cannot see whether a dry run or a '
                "revert of nothing changed the game, only what reached the host; expected "
                'PLUGIN_INFO["observe"], an async def answering a JSON-able picture of the '
                "world the plugin changes",
            )
        return Check(
            label,
            "world",
            label,
            "pass",
            'seen through PLUGIN_INFO["observe"] before and after every dry run',
        )


async def _observed(world: World, call: Any) -> tuple[Envelope, str | None]:
    """Run ``call()`` (an envelope coroutine) between two observations; answers the envelope
    and, when the world changed, how. A world that could not be seen is not judged here:
    ``world`` keeps the failure, reported as a check of its own (:meth:`World.reported`)."""
    before, broken = await world.take("before")
    envelope = await call()
    after, broken_after = await world.take("after")
    if broken is not None or broken_after is not None:
        return envelope, None
    if before != after:
        return (
            envelope,
            f"changed the world: observe() answered {_show(before)} before and "
            f"{_show(after)} after",
        )
    return envelope, None


def example_param_sets(action: Action) -> list[dict[str, Any]]:
    """Every param's example; then, when some params are optional, the required ones alone
    (a step may leave an optional param out, and ``perform`` must cope)."""
    every = {p.name: p.example for p in action.params}
    required = {p.name: p.example for p in action.params if p.required}
    return [every] if required == every else [every, required]


async def _perform_check(
    label: str,
    action: Action,
    params: dict[str, Any],
    services: KitServices,
    world: World | None = None,
) -> Check:
    subject = action.id
    bad = [
        f"{p.name} example {p.example!r} {why}"
        for p in action.params
        for ok, _, why in [p.check(p.example)]
        if not ok
    ]
    if bad:
        return Check(label, "perform", subject, "violation", f"{subject}: {'; '.join(bad)}")
    before = len(services.posted)
    context = ActionContext(
        params=dict(params),
        idempotency_key=f"contract-check:{action.id}:{uuid.uuid4().hex[:12]}",
        run=None,  # a verification happens outside any run
        verify=True,
        deadline=datetime.now(UTC) + timedelta(milliseconds=action.budget_ms),
        services=services,
    )

    async def call() -> Envelope:
        return await run_with_envelope(action.perform, context, timeout=action.budget_ms / 1000)

    envelope, changed = await _observed(world or World(), call)
    call_text = f"perform(verify=True) with {_show(params)}"
    if not envelope.ok:
        return Check(
            label,
            "perform",
            subject,
            "violation",
            f"{subject}: {call_text} answered {describe(envelope, action)}; "
            "expected ok: a dry run of the declared examples must pass",
        )
    if changed is not None:
        return Check(
            label,
            "perform",
            subject,
            "violation",
            f"{subject}: {call_text} {changed}; expected a dry run to write nothing",
        )
    if len(services.posted) > before:
        return Check(
            label,
            "perform",
            subject,
            "violation",
            f"{subject}: {call_text} posted to {', '.join(services.posted[before:])}; "
            "expected a dry run to send nothing",
        )
    if envelope.resources:
        unrecorded = (
            f"; and a {action.risk} action's resources are never recorded (only change and "
            "irreversible actions' are): in a run the host drops them, and never gives them back"
            if not changes_world(action.risk)
            else ""
        )
        return Check(
            label,
            "perform",
            subject,
            "warning",
            f"{subject}: {call_text} answered ok with resources "
            f"{', '.join(f'{r.kind}:{r.ref}' for r in envelope.resources)}; "
            f"a dry run should create nothing{unrecorded}",
        )
    return Check(label, "perform", subject, "pass", f"{subject}: {call_text} answered ok")


def describe(envelope: Envelope, action: Action | None = None) -> str:
    """An envelope in words, as the host would read it."""
    if envelope.ok:
        return "ok"
    text = f"ok: false, retry: {str(envelope.retry).lower()}, error: {_show(envelope.error)}"
    if envelope.malformed == "exception":
        where = tracing.innermost_frame(envelope.exception) if envelope.exception else None
        return f"{text} (it raised{f' at {where}' if where else ''})"
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


async def _revert_check(label: str, action: Action, services: KitServices, world: World) -> Check:
    # The loader refuses an action whose revert and reversibility disagree (the Action
    # model), so a loaded action always agrees. A revert may meet a step whose perform
    # never happened (its answer was lost): reverting nothing must succeed and change
    # nothing, so the kit reverts under a key nothing was performed with.
    subject = action.id
    said = f"reversible {action.reversible}"
    if action.revert is None:
        return Check(label, "revert", subject, "pass", f"{subject}: {said}; no revert declared")
    revert = action.revert
    context = ActionContext(
        params={p.name: p.example for p in action.params},
        idempotency_key=f"contract-check:never-performed:{uuid.uuid4().hex}",
        run=None,
        verify=False,
        deadline=datetime.now(UTC) + timedelta(milliseconds=action.budget_ms),
        services=services,
    )

    async def call() -> Envelope:
        return await run_with_envelope(revert, context, timeout=action.budget_ms / 1000)

    envelope, changed = await _observed(world, call)
    what = f"{subject}: revert of nothing (a fresh idempotency key)"
    if not envelope.ok:
        return Check(
            label,
            "revert",
            subject,
            "violation",
            f"{what} answered {describe(envelope, action)}; expected ok: reverting what "
            "was never done must succeed",
        )
    if changed is not None:
        return Check(
            label,
            "revert",
            subject,
            "violation",
            f"{what} {changed}; expected reverting nothing to change nothing",
        )
    return Check(label, "revert", subject, "pass", f"{what} answered ok ({said})")


async def _revert_final_check(
    label: str, action: Action, services: KitServices, world: World
) -> Check:
    # A revert is final for its key (contract 1.2): a perform that arrives after it under
    # the same key (a retry, or a call still in flight) must make nothing and answer ok
    # with no resources; otherwise a slow game plus a cancel leaves what nobody gives back.
    subject = action.id
    key = f"contract-check:reverted-first:{uuid.uuid4().hex}"
    params = {p.name: p.example for p in action.params}

    def context() -> ActionContext:
        return ActionContext(
            params=params,
            idempotency_key=key,
            run=None,
            verify=False,
            deadline=datetime.now(UTC) + timedelta(milliseconds=action.budget_ms),
            services=services,
        )

    timeout = action.budget_ms / 1000
    revert, perform = action.revert, action.perform
    assert revert is not None

    async def call() -> Envelope:
        reverted = await run_with_envelope(revert, context(), timeout=timeout)
        if not reverted.ok:
            return reverted
        return await run_with_envelope(perform, context(), timeout=timeout)

    envelope, changed = await _observed(world, call)
    what = f"{subject}: perform after a revert under the same idempotency key"
    if not envelope.ok or envelope.resources:
        answered = describe(envelope, action)
        if envelope.ok:
            made = [f"{r.kind} {r.ref}" for r in envelope.resources]
            answered = f"ok with {len(made)} resource(s) ({_show(made)})"
        return Check(
            label,
            "revert_final",
            subject,
            "violation",
            f"{what} answered {answered}; expected ok with no resources: "
            "a revert is final for its key, and what arrives after it makes nothing",
        )
    if changed is not None:
        return Check(
            label,
            "revert_final",
            subject,
            "violation",
            f"{what} {changed}; expected a perform after its revert to make nothing",
        )
    return Check(label, "revert_final", subject, "pass", f"{what} answered ok and made nothing")


async def _bounded(fn: Any, *args: Any) -> Any:
    async with asyncio.timeout(CALL_SECONDS):
        return await fn(*args)


async def _lease_check(label: str, lease: Lease) -> Check:
    """``read`` -> ``apply`` -> ``read`` -> ``restore`` -> ``read`` on the kit's target."""
    subject = lease.id
    step = "read"
    try:
        original = await _bounded(lease.read, LEASE_TARGET)
        value = lease.example if lease.example is not None else original
        step = "apply"
        until = datetime.now(UTC) + timedelta(minutes=1)
        key = "contract-check-lease"
        baseline = await _bounded(lease.apply_keyed, LEASE_TARGET, value, until, key)
        step = "read after apply"
        applied = await _bounded(lease.read, LEASE_TARGET)
        step = "restore"
        await _bounded(lease.restore_keyed, LEASE_TARGET, baseline, key)
        step = "read after restore"
        restored = await _bounded(lease.read, LEASE_TARGET)
    except TimeoutError:
        return Check(
            label,
            "lease",
            subject,
            "violation",
            f"{subject}: {step} on {_show(LEASE_TARGET)} did not answer within {CALL_SECONDS:g} s",
        )
    except Exception as exc:  # the plugin's defect, reported rather than raised
        return Check(
            label,
            "lease",
            subject,
            "violation",
            f"{subject}: {step} on {_show(LEASE_TARGET)} raised {_raised(exc)}",
        )
    problems = []
    if _show(baseline) != _show(original):
        problems.append(
            f"apply answered the baseline {_show(baseline)}, but read had answered "
            f"{_show(original)}; expected apply to answer the value it replaced"
        )
    if lease.example is not None and _show(applied) != _show(value):
        problems.append(
            f"read after apply answered {_show(applied)}; expected the applied {_show(value)}"
        )
    if _show(restored) != _show(original):
        problems.append(
            f"read after restore answered {_show(restored)}; expected the original "
            f"{_show(original)} back"
        )
    if problems:
        return Check(label, "lease", subject, "violation", f"{subject}: {'; '.join(problems)}")
    return Check(
        label,
        "lease",
        subject,
        "pass",
        f"{subject}: read {_show(original)}, applied {_show(value)}, restored on "
        f"{_show(LEASE_TARGET)}",
    )


async def _leg_check(label: str, leg: AnnounceLeg, services: KitServices, world: World) -> Check:
    """The leg's ``send`` with ``verify``: ok, nothing posted, the world unchanged."""
    subject = leg.id
    before = len(services.posted)
    context = SendContext(
        run=None,
        step_id=None,
        idempotency_key=f"contract-check:{leg.id}:{uuid.uuid4().hex[:12]}",
        deadline=datetime.now(UTC) + timedelta(seconds=CALL_SECONDS),
        services=services,
        verify=True,
    )

    async def call() -> Envelope:
        return await run_with_envelope(leg.send, LEG_MESSAGE, context, timeout=CALL_SECONDS)

    envelope, changed = await _observed(world, call)
    what = f"{subject}: send(verify=True)"
    if not envelope.ok:
        return Check(
            label,
            "leg",
            subject,
            "violation",
            f"{what} answered {describe(envelope)}; expected ok",
        )
    if changed is not None:
        return Check(label, "leg", subject, "violation", f"{what} {changed}; expected nothing sent")
    if len(services.posted) > before:
        return Check(
            label,
            "leg",
            subject,
            "violation",
            f"{what} posted to {', '.join(services.posted[before:])}; expected nothing sent",
        )
    return Check(label, "leg", subject, "pass", f"{what} answered ok and sent nothing")


async def _reading_check(label: str, reading: Reading) -> Check:
    """``read`` with each param's example, within the reading's budget: it answers a number
    or ``UNKNOWN`` (a game the kit cannot reach is unknown, not a defect)."""
    subject = reading.id
    params = {param.name: param.example for param in reading.params}
    budget = reading.budget_ms / 1000
    context = ReadContext(
        reading=reading.id, deadline=datetime.now(UTC) + timedelta(seconds=budget)
    )
    what = f"{subject}: read({_show(params)})"
    try:
        async with asyncio.timeout(budget):
            answer = await reading.read(params, context)
    except TimeoutError:
        return Check(
            label,
            "reading",
            subject,
            "violation",
            f"{what} did not answer within its budget_ms ({reading.budget_ms}); expected a "
            "number, or UNKNOWN when it cannot tell",
        )
    except Exception as exc:  # the plugin's defect, reported rather than raised
        return Check(
            label,
            "reading",
            subject,
            "violation",
            f"{what} raised {_raised(exc)}; expected a number, or UNKNOWN when it cannot tell",
        )
    if answer is UNKNOWN:
        return Check(label, "reading", subject, "pass", f"{what} answered UNKNOWN")
    if isinstance(reading_value(answer), Unknown):
        return Check(
            label,
            "reading",
            subject,
            "violation",
            f"{what} answered {_show(answer)}; expected a number, or UNKNOWN when it cannot tell",
        )
    return Check(label, "reading", subject, "pass", f"{what} answered {_show(answer)}")


def _raised(exc: BaseException) -> str:
    where = tracing.innermost_frame(exc)
    return f"{type(exc).__name__}: {exc}{f' at {where}' if where else ''}"


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


def bounds_text(param: Param) -> str:
    """A param's declared bounds in words: ``minimum 1, maximum 50``."""
    parts = []
    for name, value in param.bounds.items():
        if name == "enum":
            parts.append("one of " + ", ".join(_show(v) for v in value))
        else:
            parts.append(f"{name.replace('_', ' ')} {_show(value)}")
    return ", ".join(parts)


def _bounds_check(label: str, action: Action, param: Param) -> Check:
    # The loader already refuses an example outside its own bounds; this line shows the
    # bounds an author declared (the manifest records them too), and would catch a
    # declaration that reached the kit some other way.
    subject = f"{action.id}.{param.name}"
    head = f"{action.id} param {param.name}: {param.type}, {bounds_text(param)}"
    problem = param.bound_problem(param.example)
    if problem:
        return Check(
            label,
            "bounds",
            subject,
            "violation",
            f"{head}; its example {_show(param.example)} {problem}: an example must lie "
            "within its own bounds",
        )
    return Check(
        label, "bounds", subject, "pass", f"{head}; example {_show(param.example)} within them"
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
