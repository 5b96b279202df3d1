"""What the host hands a plugin: its context at startup, what a call receives and the
services it may use.

These are :class:`typing.Protocol`\\ s: the host's own objects (and the kit's stand-ins during
``pageant contract-check``) satisfy them, and a plugin types against them without importing
anything of the host. ``docs/hooks.md`` renders them with the hooks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from .link import GameLink
from .models import Action, AnnounceLeg, Budget, Lease, OptionSource, Trigger


class Declarations(Protocol):
    """What every loaded plugin declared, by kind, each keyed by id. Read it; never change it.

    When: reached as ``context.registry`` and ``ctx.services.registry``; it reflects the
    plugins loaded now, so look an id up when you need it rather than keeping a copy.

    Example::

        legs = context.registry.legs
        choices = [{"value": leg_id, "label": legs[leg_id].label} for leg_id in sorted(legs)]

    Added in contract 1.1.
    """

    @property
    def actions(self) -> Mapping[str, Action]: ...
    @property
    def budgets(self) -> Mapping[str, Budget]: ...
    @property
    def leases(self) -> Mapping[str, Lease]: ...
    @property
    def option_sources(self) -> Mapping[str, OptionSource]: ...
    @property
    def triggers(self) -> Mapping[str, Trigger]: ...
    @property
    def legs(self) -> Mapping[str, AnnounceLeg]: ...


class HostSettings(Protocol):
    """The host settings a plugin may read (``ctx.services.settings``).

    When: any time during a call; they do not change while the host runs.

    Example::

        if not ctx.services.settings.webhook_urls:
            return {"ok": False, "retry": False, "error": "no webhook_urls are configured"}

    Added in contract 1.1.
    """

    @property
    def webhook_urls(self) -> Sequence[str]:
        """Where the built-in ``core.webhook`` leg posts; empty when none are configured."""
        ...


class Posted(NamedTuple):
    """What became of one :meth:`StepServices.post_json`.

    ``sent`` is False only when the request certainly never left this host (the connection
    was refused, the name did not resolve, connecting timed out); a caller may retry only
    then, because a post is not idempotent. ``status`` is the HTTP status when an answer
    came back, and ``error`` says what went wrong, if anything did.
    """

    status: int | None
    error: str | None
    sent: bool


class StepServices(Protocol):
    """What the host lends one call of ``perform``, ``revert`` or a leg's ``send``.

    When: ``ctx.services`` of an :class:`~pageant.hookspecs.ActionContext` or
    :class:`~pageant.hookspecs.SendContext`, bound to one run and one step. During
    ``pageant contract-check`` the kit lends a stand-in: the registry and settings are
    real, the run log is a list, ``post_json`` sends nothing, and ``run_id`` and
    ``step_id`` are ``None``. It is ``None`` where no host lends anything (a plugin's own
    tests, say), so check before use.

    Example::

        async def perform(ctx: ActionContext) -> dict[str, Any]:
            if ctx.services is None:
                return {"ok": False, "retry": False, "error": "no host services here"}
            detail = {"leg": "mygame.log", "message": ctx.params["message"]}
            await ctx.services.write_log("announce", detail)
            return {"ok": True}

    Added in contract 1.1.
    """

    @property
    def run_id(self) -> int | None:
        """The run the call belongs to; ``None`` outside a run."""
        ...

    @property
    def step_id(self) -> int | None:
        """The step being called; ``None`` outside a run."""
        ...

    @property
    def phase(self) -> str:
        """The key of the phase the step belongs to."""
        ...

    @property
    def registry(self) -> Declarations:
        """What every loaded plugin declared."""
        ...

    @property
    def settings(self) -> HostSettings:
        """The host settings a plugin may read."""
        ...

    async def write_log(self, kind: str, detail: dict[str, Any]) -> None:
        """Append a line of ``kind`` with ``detail`` to the run's log, naming this step.
        ``kind`` is one of the run log's kinds (``docs/runs.md``), for a plugin
        ``"announce"``; the host raises ``ValueError`` for any other string. The host
        commits the line with the step's answer, in the same transaction: a reader never
        sees it without the step's outcome, and a dispatch lost to a crash leaves none."""
        ...

    async def post_json(self, url: str, body: str | dict[str, Any]) -> Posted:
        """POST ``body`` (a JSON string, or data to encode) to ``url`` within the host's
        webhook timeout. Never raises for a network failure: the answer says what happened."""
        ...


class PluginContext(Protocol):
    """A plugin's way back into the host, handed to ``pageant_startup``; keep it.

    When: received once per host start, before the engine's first tick; valid until the
    host stops. During ``pageant contract-check`` the kit hands a stand-in whose ``emit``
    checks the payload exactly as the host does and closes no gate.

    Example::

        async def on_boss_slain(context: PluginContext, region: str) -> None:
            answer = await context.emit("mygame.boss_slain", {"region": region})
            if answer["gates_closed"]:
                log.info("the slaying advanced %d event(s)", answer["gates_closed"])

    Added in contract 1.0; typed as a protocol in 1.1.
    """

    @property
    def plugin(self) -> str:
        """The plugin's label, ``distribution[entry point]``."""
        ...

    @property
    def owner(self) -> str:
        """The plugin's owner: the first segment of every id it declares."""
        ...

    @property
    def registry(self) -> Declarations:
        """What every loaded plugin declared."""
        ...

    async def emit(
        self,
        trigger_id: str,
        payload: dict[str, Any],
        *,
        key: str | None = None,
        at: datetime | None = None,
    ) -> Mapping[str, int]:
        """Fire ``trigger_id`` with ``payload``, feeding phase gates as the HTTP fire route
        does; answers ``{"gates_matched": n, "gates_closed": m}``. Raises
        ``pageant.errors.Invalid`` naming the variable when the payload does not fit the
        trigger's declared variables (or ``key`` or ``at`` does not fit),
        ``pageant.errors.NotFound`` for a trigger no plugin registers, and
        ``pageant.errors.Forbidden`` for a trigger of another owner (core's lifecycle
        triggers among them): a plugin fires only its own owner's triggers (contract 1.2).

        ``key`` (contract 1.2, 1 to 200 characters) makes a retry safe: a key this plugin
        sent before (kept at least a day) answers the first answer and counts nothing.
        ``at`` (contract 1.2) is when it happened in the game, timezone-aware, not ahead of
        the host's clock and not older than the host's ``firing_max_age_seconds``."""
        ...

    async def emit_batch(self, firings: Sequence[Mapping[str, Any]]) -> Sequence[Mapping[str, Any]]:
        """Fire up to 500 firings, ``{"trigger", "payload", "id"?, "at"?}`` each, in one
        transaction, as ``POST /api/v1/triggers/fire`` does. Answers one entry per firing in
        order: ``{"status": 200, "gates_matched", "gates_closed"}``, or a refused firing's
        ``{"status": 400 | 403 | 404, "error": {...}}`` (it changes nothing, and the others
        are still recorded; 403 for another owner's trigger). Raises
        ``pageant.errors.Invalid`` for a list empty or past 500. Added in contract 1.2."""
        ...

    async def reconcile(self) -> None:
        """Ask the host to reconcile this plugin's recorded resources now (through
        ``pageant_reconcile``): call it when the game comes back. What the plugin no longer
        reports is marked ``orphaned``, never reverted."""
        ...

    @property
    def link(self) -> GameLink | None:
        """The host's game link, its calls made as this plugin (:class:`GameLink`); None
        where nothing lends one. Added in contract 1.3."""
        ...

    def set_available(self, available: bool, reason: str | None = None) -> None:
        """Tell the host whether the plugin's game can take world-changing steps now.
        While it cannot, its ``change`` and ``irreversible`` steps wait (``waiting_on.reason``
        ``unavailable``, with ``reason``) and so do the reverts of what it holds, spending
        no attempts; they go on once it is available again. Added in contract 1.1."""
        ...


@dataclass(frozen=True)
class HeldResource:
    """A resource the host holds on record for a plugin: what ``pageant_reconcile`` checks.

    ``owner`` is the plugin's owner; ``kind`` and ``ref`` are what the plugin's ``perform``
    reported in its envelope's ``resources``; ``status`` is the host's record of it (for
    example whether a revert has run); ``payload`` is the rest of what was reported beside
    ``kind`` and ``ref``.
    """

    owner: str
    kind: str
    ref: str
    status: str
    payload: Mapping[str, Any] = field(default_factory=dict)


# ── what the host hands to the callables ───────────────────────────────────────


@dataclass(frozen=True)
class RunInfo:
    """The run a step belongs to."""

    id: int
    scope: str
    definition_id: int
    slug: str


@dataclass(frozen=True)
class Resource:
    """Something a ``perform`` created in the world, reported in its envelope."""

    kind: str
    ref: str
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ActionContext:
    """What ``perform`` and ``revert`` receive.

    ``idempotency_key`` is fixed per step: the same on every retry and on every
    re-dispatch after a crash, so a plugin can make a repeated call harmless.
    ``verify`` asks for a dry run: validate and write nothing. ``resources`` is what the
    ledger recorded for the step (empty for ``perform``; possibly empty for a ``revert``
    whose answer was lost, so reverting something that does not exist must succeed).
    A revert is final for its key: a ``perform`` under a key already reverted makes nothing
    and answers ok with no resources (contract 1.2).
    """

    params: dict[str, Any]
    idempotency_key: str
    run: RunInfo | None
    verify: bool
    deadline: datetime
    resources: tuple[Resource, ...] = ()
    #: What the host lends this call (see :class:`~pageant.hookspecs.StepServices`);
    #: ``None`` where no host lends anything, as in a plugin's own tests.
    services: StepServices | None = None


@dataclass(frozen=True)
class Announcement:
    """An announcement as its event's template rendered it, for a leg that shows more than
    one line of text (an email's subject, a chat embed's title and link).

    ``body`` is the message the leg is handed as ``message``; ``title`` is the headline;
    ``when`` is the occurrence's start (UTC) and ``when_text`` the same instant written in
    the event's time zone (``Fri 4 Dec 2026, 20:00 CET``); ``link`` is the event's public
    page, or ``""`` when there is none to show (a staff-only event, no ``public_page_url``).

    Example::

        async def send(message: str, ctx: SendContext) -> dict[str, Any]:
            headline = ctx.announcement.title if ctx.announcement else "Announcement"
            await game.broadcast(f"{headline}: {message}")
            return {"ok": True}

    Added in contract 1.2.
    """

    title: str
    body: str
    link: str = ""
    when: datetime | None = None
    when_text: str = ""
    timezone: str = ""


@dataclass(frozen=True)
class SendContext:
    """What an announce leg's ``send`` receives besides the message.

    ``verify`` (contract 1.1) asks for a dry run: check the message could go, send nothing.
    ``announcement`` (contract 1.2) is the message as the event's template rendered it, with
    its title, time and link; ``None`` where no run's event stands behind the call.
    """

    run: RunInfo | None
    step_id: int | None
    idempotency_key: str
    deadline: datetime
    #: What the host lends this call; ``None`` where no host lends anything.
    services: StepServices | None = None
    verify: bool = False
    announcement: Announcement | None = None


@dataclass(frozen=True)
class ReadContext:
    """What the host hands a reading's ``read`` besides its params.

    ``reading`` is the reading's id; ``deadline`` is when the host stops waiting (the read
    then counts as :data:`UNKNOWN`).

    .. versionadded:: 1.5
    """

    reading: str
    deadline: datetime
