"""Rehearsal: a version run on a virtual clock in a throwaway in-memory database.

The real engine advances a real run, but in a database that lives for one call, with every
action replaced by its own ``perform(verify=True)`` (so nothing reaches a game), the
switchboard's current rows copied in (so enablement and caps bite as they would), and the
clock jumped from one due instant to the next instead of slept. Gates are fed by simulated
firings (``{"after": "5m", "trigger": ..., "payload": {...}}``, offsets from the start), or by
the firings a finished run received, at their offsets from its start
(:mod:`pageant.engine.replay`), when the answer also says where the two runs differ. A
parked step is confirmed at once, as a person would. The answer is the timeline (each
phase's entry and exit, each step's virtual start and end, as offsets from the occurrence,
and the countdown's rungs before it),
the worst-case spend per dimension against the current caps, every refusal the real run
would meet, and the instant a run would turn ``stalled`` on a gate that never opens.

The real database is only read (the version and the switchboard); nothing is written to it,
and nothing of the made-up run reaches the host's log.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pageant.db import rehearsal as rows
from pageant.db import runlog
from pageant.db import switchboard as board_rows
from pageant.db.countdown import COUNTDOWN_PHASE
from pageant.db.due import next_instant
from pageant.db.log_kinds import LogKind
from pageant.engine import replay
from pageant.engine.advance_stage import advance
from pageant.errors import Conflict, Invalid, NotFound
from pageant.events import definitions
from pageant.events.authoring import validator as specs
from pageant.events.authoring.advance import parse_after
from pageant.gates.conditions import check_payload
from pageant.gates.phase import elapsed
from pageant.hosting import Host
from pageant.plugins.registry import Registry
from pageant.runs import controls
from pageant.runs.countdown import ladder
from pageant.runs.create import start_now
from pageant.runs.sentences import Context, words
from pageant.states import Health
from pageant.support.clock import FakeClock
from pageant.support.muting import muted
from pageant.support.settings import Settings
from pageant.switchboard.pricing import plan_dimensions, price, tightest

if TYPE_CHECKING:
    from pageant.hookspecs import Action


#: Bounds on one rehearsal: virtual time and engine ticks (a plan that never ends stops here).
MAX_VIRTUAL = timedelta(days=31)
MAX_TICKS = 20_000
ACTOR = "rehearsal"


@dataclasses.dataclass(frozen=True)
class Firing:
    after: float  # seconds from the start
    trigger: str
    payload: dict[str, Any]


def check_firings(raw: Sequence[Mapping[str, Any]], host: Host) -> list[Firing]:
    """Every simulated firing checked against the triggers; Invalid naming each problem."""
    problems: list[str] = []
    firings: list[Firing] = []
    for i, item in enumerate(raw):
        path = f"body.firings[{i}]"
        after = parse_after(item.get("after"))
        if after is None and item.get("after") not in ("0s", "0m"):
            problems.append(f'{path}.after: expected a length like "30s", "5m", "2h" or "1d"')
        trigger = host.registry.triggers.get(item.get("trigger", ""))
        if trigger is None:
            problems.append(f"{path}.trigger: no plugin registers {item.get('trigger')!r}")
            continue
        payload, errors = check_payload(trigger, item.get("payload", {}), f"{path}.payload")
        problems.extend(errors)
        firings.append(Firing(after or 0, trigger.id, payload))
    if problems:
        raise Invalid("invalid simulated firings", details=problems)
    return sorted(firings, key=lambda f: f.after)


def _recorded_firings(real: replay.Recorded, host: Host) -> list[Firing]:
    """A finished run's firings as the rehearsal feeds them; Conflict naming a trigger no
    installed plugin registers any more."""
    gone = sorted({f["trigger"] for f in real.firings} - set(host.registry.triggers))
    if gone:
        raise Conflict(
            f"run {real.run_id} received firings of {', '.join(gone)}, which no installed "
            "plugin registers now: they cannot be replayed"
        )
    return [Firing(f["after"], f["trigger"], f["payload"]) for f in real.firings]


def _dry(action: Action) -> Action:
    perform = action.perform

    async def rehearsed(ctx: Any) -> Any:
        return await perform(dataclasses.replace(ctx, verify=True))

    return action.model_copy(update={"perform": rehearsed})


def dry_registry(registry: Registry) -> Registry:
    """The registry with every action's ``perform`` made a ``perform(verify=True)``."""
    copy = Registry(
        actions={ident: _dry(a) for ident, a in registry.actions.items()},
        budgets=dict(registry.budgets),
        leases=dict(registry.leases),
        option_sources=dict(registry.option_sources),
        triggers=dict(registry.triggers),
        legs=dict(registry.legs),
        readings=dict(registry.readings),
        owners=dict(registry.owners),
    )
    return copy


async def _source(host: Host, definition_id: int, number: int | None) -> tuple[Any, Any]:
    async with host.db.connect() as conn:
        row = await definitions.require_definition(conn, definition_id)
        if number is None:
            version = await definitions.published_version(conn, definition_id)
            if version is None:
                raise Conflict(
                    f"event {definition_id} has no published version; publish it or name one"
                )
        else:
            version = await definitions.get_version(conn, definition_id, number)
            if version is None:
                raise NotFound(f"event {definition_id} has no version {number}")
        settings = await board_rows.all_settings(conn)
    return row, (version, settings)


def _offset(at: datetime | None, start: datetime) -> float | None:
    return None if at is None else round((at - start).total_seconds(), 3)


async def rehearse(
    host: Host,
    definition_id: int,
    *,
    version_number: int | None = None,
    firings: Sequence[Mapping[str, Any]] = (),
    params: Mapping[str, Any] | None = None,
    from_run: int | None = None,
) -> dict[str, Any]:
    """Rehearse a version of ``definition_id`` (the published one unless named), as a run
    started with ``params`` (refused as a start would refuse them).

    With ``from_run``, the firings are those the finished run ``from_run`` of this event
    received, at their offsets from its start, and ``params`` default to its own; the
    answer adds ``replayed`` (``{firings, recorded, from_run, version, status, phases,
    ended_seconds}``: how many of the run's recorded firings were replayed before the
    rehearsed run stopped, and the real run) and
    ``differences`` (:func:`pageant.engine.replay.differences`). Simulated ``firings`` and
    ``from_run`` together are refused (:class:`~pageant.errors.Invalid`), as is what
    :func:`pageant.engine.replay.recorded` refuses."""
    from pageant.engine.loop import Engine

    began = time.perf_counter()
    real = None
    if from_run is not None:
        if firings:
            raise Invalid(
                "give simulated firings or a run to replay, not both",
                details=["body.from_run: a rehearsal from a run replays that run's firings"],
            )
        real = await replay.recorded(host, definition_id, from_run)
    schedule = check_firings(firings, host) if real is None else _recorded_firings(real, host)
    if real is not None and not params:
        params = real.params
    definition, (version, settings) = await _source(host, definition_id, version_number)
    spec = version.spec if isinstance(version.spec, dict) else {}
    start = host.clock.now()
    clock = FakeClock(start)
    throwaway = rows.throwaway_engine()
    rig = Host(
        Settings(
            database_url="sqlite+aiosqlite://",
            stall_seconds=host.settings.stall_seconds,
            steps_per_run_per_tick=10_000,
            max_attempts=1,
        ),
        discover=False,
        clock=clock,
        db=throwaway,
    )
    rig.registry = dry_registry(host.registry)
    try:
        # The made-up run's log lines feed the report and never reach the host's log, where
        # they would read as a real run's (:mod:`pageant.support.muting`).
        with muted():
            async with throwaway.begin() as conn:
                await rows.seed(
                    conn,
                    definition=definition,
                    version=version,
                    spec=spec,
                    settings=settings.values(),
                    now=start,
                )
            run_id, _ = await start_now(rig, definition.id, params=params, actor=ACTOR)
            fired = await _drive(rig, Engine(rig), run_id, schedule, start, clock)
            report = await _report(rig, run_id, spec, start, settings, host.registry)
    finally:
        await rig.close()
        await throwaway.dispose()
    report.update(
        event_id=definition.id,
        version={"id": version.id, "number": version.number},
        firings=fired,
        took_ms=round((time.perf_counter() - began) * 1000, 1),
    )
    if real is not None:
        report.update(
            replayed={
                "firings": len(fired),
                "recorded": len(real.firings),
                "from_run": real.run_id,
                "version": real.version_number,
                "status": real.status,
                "phases": real.phases,
                "ended_seconds": real.ended_seconds,
            },
            differences=replay.differences(real, report, spec),
        )
    return report


async def _drive(
    rig: Any,
    engine: Any,
    run_id: int,
    schedule: list[Firing],
    start: datetime,
    clock: Any,
) -> list[dict[str, Any]]:
    pending = list(schedule)
    fired: list[dict[str, Any]] = []
    try:
        for _ in range(MAX_TICKS):
            now = clock.now()
            while pending and start + timedelta(seconds=pending[0].after) <= now:
                firing = pending.pop(0)
                answer = await rig.emit(firing.trigger, firing.payload, actor=ACTOR)
                fired.append({"after_seconds": firing.after, "trigger": firing.trigger, **answer})
            # Only the advance leg: nothing here is reclaimed, expanded, missed or pruned.
            await advance(rig, now)
            await engine.drain()
            async with rig.db.connect() as conn:
                run, parked = await rows.run_state(conn, run_id)
                following = await next_instant(conn, now, stall_seconds=rig.settings.stall_seconds)
            if run.status in rows.STOPPED:
                break
            if parked:
                for step_id in parked:
                    await controls.confirm(
                        rig, run_id, step_id, actor=ACTOR, note="confirmed by the rehearsal"
                    )
                continue
            if run.health == Health.STALLED and not pending:
                break  # a gate that never opens: the run would wait here for a person
            candidates = [t for t in (following,) if t is not None and t > now]
            if pending:
                candidates.append(start + timedelta(seconds=pending[0].after))
            if not candidates:
                break
            target = min(candidates)
            if target - start > MAX_VIRTUAL:
                break
            clock.set(target)
    finally:
        await engine.stop()
    return fired


async def _report(
    rig: Any,
    run_id: int,
    spec: Mapping[str, Any],
    start: datetime,
    settings: Mapping[str, Any],
    registry: Registry,
) -> dict[str, Any]:
    async with rig.db.connect() as conn:
        run, steps, meters = await rows.outcome(conn, run_id)
        lines = await runlog.lines_of(conn, run_id)
    labels = {p.get("key"): p.get("label") for p in spec.get("phases") or []}
    refusals, stalls = [], []
    for line in lines:
        detail = line.detail or {}
        if line.kind == LogKind.STEP_REFUSED:
            refusals.append(
                {
                    "step_id": line.step_id,
                    "phase": line.phase,
                    "action": detail.get("action"),
                    "code": detail.get("code"),
                    "error": detail.get("error"),
                    "at_seconds": _offset(line.at, start),
                }
            )
        elif line.kind == LogKind.RUN_HEALTH and detail.get("to") == Health.STALLED:
            gate = detail.get("gate") or {}
            stalls.append(
                {
                    "phase": line.phase,
                    "trigger_id": gate.get("trigger_id"),
                    "stalled_seconds": _offset(line.at, start),
                }
            )
    caps = {ident: dict(r.caps or {}) for ident, r in settings.items()}
    totals: dict[str, int] = {}
    for _path, step in specs.action_steps(spec):
        action = registry.actions.get(step.get("action", ""))
        if action is not None:
            for dimension, amount in price(
                action, step.get("params") or {}, registry
            ).amounts.items():
                totals[dimension] = totals.get(dimension, 0) + amount
    spend = []
    for dimension, spenders in sorted(plan_dimensions(spec, registry).items()):
        cap, source = tightest(dimension, spenders, caps)
        budget = registry.budgets[dimension]
        spend.append(
            {
                "dimension": dimension,
                "label": budget.label,
                "unit": budget.unit,
                "worst_case": totals.get(dimension, 0),
                "rehearsed": meters.get(dimension, 0),
                "cap": cap,
                "cap_source_action": source,
                "over_cap": cap is not None and totals.get(dimension, 0) > cap,
            }
        )
    return {
        "started_at": start,
        "outcome": {
            "status": run.status,
            "health": run.health,
            "ended_seconds": _offset(run.ended_at, start),
            "last_error": run.last_error,
        },
        "timeline": {
            "phases": replay.phase_timeline(lines, start, labels),
            "countdown": rehearsed_countdown(spec),
            "steps": [
                {
                    "phase": st.phase,
                    "seq": st.seq,
                    "label": st.label,
                    "action": st.action,
                    "status": st.status,
                    "started_seconds": _offset(st.started_at, start),
                    "finished_seconds": _offset(st.finished_at, start),
                }
                for st in steps
                # A rung is rehearsed as the ladder says (above): the rehearsal's run starts
                # at once, so every rung of its own would be one whose time had passed.
                if st.phase != COUNTDOWN_PHASE
            ],
        },
        "spend": spend,
        "refusals": refusals,
        "stalls": stalls,
        "story": _story(lines, steps, labels, start),
    }


def rehearsed_countdown(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The countdown a run of ``spec`` sends before it begins: each rung's offset from the
    start (negative), leg, label and message, earliest first."""
    return [
        {
            "at_seconds": -rung.before,
            "leg": rung.leg,
            "label": rung.label,
            "message": rung.message,
        }
        for rung in ladder(spec)
    ]


def _story(
    lines: Sequence[Any], steps: Sequence[Any], labels: Mapping[Any, Any], start: datetime
) -> list[dict[str, Any]]:
    """The rehearsed run's log as the one renderer's sentences (:mod:`pageant.runs.sentences`),
    each at its offset from the virtual start; an instant inside a sentence reads as its
    offset too (``+10 min``), since a rehearsal's clock is nobody's."""
    context = Context(
        step_labels={int(st.id): st.label for st in steps if st.label},
        phase_labels={k: v for k, v in labels.items() if k and v},
    )
    story = []
    for line in lines:
        parts = words(line._mapping, context)
        sentence = "".join(
            f"+{elapsed(_offset(p, start) or 0)}" if isinstance(p, datetime) else p for p in parts
        )
        story.append(
            {
                "at_seconds": _offset(line.at, start),
                "phase": line.phase,
                "sentence": sentence,
                "actor": line.actor,
            }
        )
    return story
