"""``core``: the host's built-in actions, lifecycle triggers, announce legs and option sources.

Registered through the same pipeline, hooks, validation and namespace checks as a
third-party plugin; nothing in the engine names these ids.

The bodies reach the host through ``ctx.services`` (the contract's
:class:`~pageant.hookspecs.StepServices`: the run log, the registry, the settings and an
HTTP session), which the engine supplies on every dispatch.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any, Literal

from pageant.builtin_plugins.announce_chat import (
    discord_payload,
    not_configured,
    send_to_discord,
    send_to_slack,
    slack_payload,
    unconfigured_setting,
)
from pageant.builtin_plugins.announce_email import email_preview, send_email
from pageant.hookspecs import (
    Action,
    ActionContext,
    AnnounceLeg,
    OptionSource,
    Param,
    PluginContext,
    SendContext,
    StepServices,
    Trigger,
    TriggerVariable,
    hookimpl,
)


async def observe() -> dict[str, Any]:
    """core keeps no world of its own: whatever it changes goes through the host's services
    (the run log, webhook posts), which ``pageant contract-check`` intercepts and sees."""
    return {}


PLUGIN_INFO = {"owner": "core", "contract": "^1.5", "observe": observe}

DEFAULT_LEG = "core.log"
MAX_WAIT_SECONDS = 86_400

#: ``core.wait``'s one param: its bounds are checked when a spec is saved, at verify, and
#: here at the step (a run param written out at the run may bring any value), with the
#: same sentence each time.
SECONDS = Param(
    name="seconds",
    type="integer",
    required=True,
    description=f"How long to hold what follows (0 to {MAX_WAIT_SECONDS}).",
    example=300,
    minimum=0,
    maximum=MAX_WAIT_SECONDS,
)

NO_SERVICES = {"ok": False, "retry": False, "error": "no host services in this context"}


# ── actions ───────────────────────────────────────────────────────────────────


async def _send(ctx: ActionContext, leg_id: str, message: str) -> object:
    """The leg's answer, unread: the engine reads it as the step's envelope."""
    services = ctx.services
    if services is None:
        return dict(NO_SERVICES)
    leg = services.registry.legs.get(leg_id)
    if leg is None:
        return {"ok": False, "retry": False, "error": f"no plugin registers the leg {leg_id!r}"}
    if ctx.verify:
        # Nothing is sent, but a leg with nowhere to send is refused now, naming its setting.
        missing = unconfigured_setting(leg_id, getattr(services, "settings", None))
        if missing is not None:
            return {"ok": False, "retry": False, "error": not_configured(missing)}
        return {"ok": True}
    # The host's services render the run's event template; a stand-in without them (the
    # kit's) hands the message on as written.
    render = getattr(services, "announcement", None)
    announcement = await render(message) if render is not None else None
    send_ctx = SendContext(
        run=ctx.run,
        step_id=services.step_id,
        idempotency_key=ctx.idempotency_key,
        deadline=ctx.deadline,
        services=services,
        announcement=announcement,
    )
    return await leg.send(message if announcement is None else announcement.body, send_ctx)


async def announce(ctx: ActionContext) -> object:
    """Send ``message`` to the announce leg ``leg``."""
    return await _send(ctx, ctx.params["leg"], ctx.params["message"])


async def wait(ctx: ActionContext) -> dict[str, Any]:
    """Finish at once and hold what follows for ``seconds``."""
    ok, seconds, why = SECONDS.check(ctx.params.get("seconds"))
    if not ok:
        given = json.dumps(ctx.params.get("seconds"), default=repr)
        return {"ok": False, "retry": False, "error": f'"seconds" {why}; got {given}'}
    return {"ok": True, "hold_for": seconds}


async def cue(ctx: ActionContext) -> object:
    """Announce ``message`` (to ``leg``, the run log by default), then wait for a person."""
    sent = await _send(ctx, ctx.params.get("leg") or DEFAULT_LEG, ctx.params["message"])
    if not isinstance(sent, dict) or sent.get("ok") is not True:
        return sent
    return {"ok": True, "park": True}


#: The lease steps reverted in this process, newest last, at most :data:`REVERTED_KEYS`: a
#: revert is final for its key (contract 1.2), so a lease performed after its step's revert
#: borrows nothing. (A lease reserved anyway is the host's own ledger row, given back by
#: the cleanup stage; this keeps the contract's letter within one process.)
_reverted: dict[str, None] = {}
REVERTED_KEYS = 10_000


async def lease(ctx: ActionContext) -> dict[str, Any]:
    """Borrow ``lease`` on ``target``: reserve the target's ledger row first (a target
    another run holds is refused by name before anything is applied), apply ``value``, and
    record the baseline it replaced. The cleanup stage puts the baseline back at the
    deadline (``minutes``) or when the run ends, whichever is first."""
    # The host's own step services: the ledger's lease calls are core's, not the contract's.
    services: Any = ctx.services
    if services is None:
        return {"ok": False, "retry": False, "error": "no host services in this context"}
    lease_id, target, value = ctx.params["lease"], ctx.params["target"], ctx.params["value"]
    minutes = ctx.params["minutes"]
    declared = services.registry.leases.get(lease_id)
    if declared is None:
        return {"ok": False, "retry": False, "error": f"no plugin declares the lease {lease_id!r}"}
    refusal = services.registry.lease_target_refusal(lease_id, target)
    if refusal is not None:
        return {"ok": False, "retry": False, "error": refusal}
    longest = services.settings.lease_max_minutes
    if not 1 <= minutes <= longest:
        return {
            "ok": False,
            "retry": False,
            "error": f"minutes must be between 1 and {longest} (lease_max_minutes), not {minutes}",
        }
    if ctx.verify or ctx.idempotency_key in _reverted:
        return {"ok": True}
    until = services.now() + timedelta(minutes=minutes)
    row_id, holder = await services.reserve_lease(lease_id, target, value, until=until)
    if row_id is None:
        return {
            "ok": False,
            "retry": False,
            "error": f"{lease_id} for {target} is already leased by run {holder}",
        }
    try:
        # The step's key is the lease's: fixed for this borrowing, the same on a retry, a
        # re-dispatch after a crash, and the restore that gives it back.
        baseline = await declared.apply_keyed(target, value, until, ctx.idempotency_key)
    except Exception as exc:
        # An apply that raised may have landed, its answer lost on the way back: the
        # reservation stays (the retry reuses it, and the game answers it from the key), and
        # should no retry succeed the cleanup stage reads the target before giving it back.
        return {"ok": False, "retry": True, "error": f"apply failed: {type(exc).__name__}: {exc}"}
    await services.lease_applied(row_id, lease_id, target, baseline, value)
    return {"ok": True}


async def lease_revert(ctx: ActionContext) -> dict[str, Any]:
    """Nothing to give back per step (a lease is given back through its own ledger row);
    the key is final from here on."""
    _reverted[ctx.idempotency_key] = None
    while len(_reverted) > REVERTED_KEYS:
        del _reverted[next(iter(_reverted))]
    return {"ok": True}


# ── lifecycle triggers ─────────────────────────────────────────────────────

#: The variables every lifecycle trigger carries: a run's public facts, never its errors.
LIFECYCLE_VARIABLES: tuple[tuple[str, Literal["string", "integer"], str, str | int], ...] = (
    ("event", "string", "The slug of the run's event.", "champion-muster"),
    ("run_id", "integer", "The run's id.", 42),
    ("scope", "string", 'The run\'s scope ("" when it has none).', "north"),
    ("status", "string", "The run's status after the transition.", "completed"),
    ("phase", "string", 'The phase the run is in (or ended in; "" before any).', "finale"),
    ("health", "string", "ok, degraded or stalled.", "ok"),
)
LIFECYCLE_TRIGGERS = (
    ("core.run.scheduled", "An occurrence was scheduled (a schedule made its run)"),
    ("core.run.started", "A run started (entered its first phase)"),
    ("core.run.ending", "A run's last phase ended; what it holds is being given back"),
    ("core.run.completed", "A run completed"),
    ("core.run.failed", "A run failed"),
    ("core.run.cancelled", "A run was cancelled by a person"),
    ("core.phase.entered", "A run entered a phase"),
)


def lifecycle_triggers() -> list[Trigger]:
    variables = [
        TriggerVariable(name=name, type=kind, description=text, example=example)
        for name, kind, text, example in LIFECYCLE_VARIABLES
    ]
    return [
        Trigger(id=ident, label=label, variables=variables) for ident, label in LIFECYCLE_TRIGGERS
    ]


# ── legs ─────────────────────────────────────────────────────────────────────


async def send_to_log(message: str, ctx: SendContext) -> dict[str, Any]:
    """Write the message into the run log (kind ``announce``)."""
    if ctx.verify:
        return {"ok": True}
    if ctx.services is None:
        return dict(NO_SERVICES)
    await ctx.services.write_log("announce", {"leg": "core.log", "message": message})
    return {"ok": True}


async def send_to_webhook(message: str, ctx: SendContext) -> dict[str, Any]:
    """POST ``{"message", "run", "idempotency_key"}`` as JSON to every configured URL.

    A post is not idempotent: once any request has left, a failure answers
    ``retry: false`` so no receiver is sent the message twice. Only when no request left at
    all (every connection refused, say) may the step be retried.
    """
    if ctx.verify:
        # A dry run sends nothing; whether URLs are configured is the operator's concern.
        return {"ok": True}
    services: StepServices | None = ctx.services
    if services is None:
        return dict(NO_SERVICES)
    urls = list(services.settings.webhook_urls)
    if not urls:
        return {"ok": False, "retry": False, "error": "no webhook_urls are configured"}
    body = json.dumps(
        {
            "message": message,
            "idempotency_key": ctx.idempotency_key,
            "run": None
            if ctx.run is None
            else {"id": ctx.run.id, "scope": ctx.run.scope, "slug": ctx.run.slug},
        }
    )
    failures = []
    any_sent = False
    for url in urls:
        posted = await services.post_json(url, body)
        any_sent = any_sent or posted.sent
        if posted.error is not None:
            failures.append(f"{url}: {posted.error}")
    if failures:
        return {"ok": False, "retry": not any_sent, "error": "; ".join(failures)}
    return {"ok": True}


# ── option sources ───────────────────────────────────────────────────────────


class CorePlugin:
    """The built-in plugin object (a class so each host gets its own context)."""

    PLUGIN_INFO = PLUGIN_INFO

    def __init__(self) -> None:
        self.context: PluginContext | None = None

    async def resolve_leases(self) -> list[dict[str, Any]]:
        if self.context is None:
            return []
        leases = self.context.registry.leases
        return [{"value": lid, "label": leases[lid].label} for lid in sorted(leases)]

    async def resolve_legs(self) -> list[dict[str, Any]]:
        if self.context is None:
            return []
        legs = self.context.registry.legs
        return [{"value": leg_id, "label": legs[leg_id].label} for leg_id in sorted(legs)]

    @hookimpl
    def pageant_actions(self) -> list[Action]:

        def leg_param(required: bool) -> Param:
            return Param(
                name="leg",
                type="string",
                required=required,
                description="Where the message goes: an announce leg id.",
                example=DEFAULT_LEG,
                option_source="core.options.legs",
            )

        message = Param(
            name="message",
            type="string",
            required=True,
            description="What to announce.",
            example="The champion stirs in Yew",
        )
        return [
            Action(
                id="core.announce",
                label="Announce",
                risk="notify",
                budget_ms=10_000,
                params=[leg_param(required=True), message],
                perform=announce,
                description="Send a message to an announce leg.",
            ),
            Action(
                id="core.wait",
                label="Wait",
                risk="notify",
                budget_ms=1_000,
                params=[SECONDS],
                perform=wait,
                description="Hold the run; across a phase boundary when it is a phase's last step.",
            ),
            Action(
                id="core.cue",
                label="Cue a person",
                risk="notify",
                budget_ms=10_000,
                params=[message, leg_param(required=False)],
                perform=cue,
                description="Announce a cue, then wait until a person confirms the step.",
            ),
            Action(
                id="core.lease",
                label="Lease a value",
                risk="change",
                reversible="full",
                budget_ms=10_000,
                params=[
                    Param(
                        name="lease",
                        type="string",
                        required=True,
                        description="Which borrowed value: a lease id a plugin declares.",
                        example="wisps.weather",
                        option_source="core.options.leases",
                    ),
                    Param(
                        name="target",
                        type="string",
                        required=True,
                        description="What it is borrowed for (a region, a shard).",
                        example="north",
                    ),
                    Param(
                        name="value",
                        type="string",
                        required=True,
                        description="The value to set while the lease lasts.",
                        example="storm",
                    ),
                    Param(
                        name="minutes",
                        type="integer",
                        required=True,
                        description="How long at most; it is given back at the run's end "
                        "if that comes first (1 to lease_max_minutes).",
                        example=60,
                        minimum=1,
                    ),
                ],
                perform=lease,
                revert=lease_revert,
                description="Set a plugin's borrowed value for a while and put it back.",
            ),
        ]

    @hookimpl
    def pageant_announce_legs(self) -> list[AnnounceLeg]:
        return [
            AnnounceLeg(id="core.log", label="Run log", send=send_to_log),
            AnnounceLeg(id="core.webhook", label="Webhook (JSON POST)", send=send_to_webhook),
            AnnounceLeg(
                id="core.email", label="Email (SMTP)", send=send_email, preview=email_preview
            ),
            AnnounceLeg(
                id="core.discord",
                label="Discord channel",
                send=send_to_discord,
                preview=discord_payload,
            ),
            AnnounceLeg(
                id="core.slack", label="Slack channel", send=send_to_slack, preview=slack_payload
            ),
        ]

    @hookimpl
    def pageant_triggers(self) -> list[Trigger]:
        return lifecycle_triggers()

    @hookimpl
    def pageant_option_sources(self) -> list[OptionSource]:
        return [
            OptionSource(id="core.options.legs", label="Announce legs", resolve=self.resolve_legs),
            OptionSource(id="core.options.leases", label="Leases", resolve=self.resolve_leases),
        ]

    @hookimpl
    def pageant_startup(self, context: PluginContext) -> None:
        self.context = context
