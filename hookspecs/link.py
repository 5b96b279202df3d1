"""The game link, as a plugin sees it: ``context.link`` and the failures a call can end in.

A game that can only call out (a Luanti mod, a Paper plugin, a server behind NAT) runs an
agent that syncs with the host (``POST /api/v1/link/{server}/sync``, ``docs/link.md``). The
plugin's code does not see the HTTP: it calls :meth:`GameLink.call` and gets the agent's
answer, or one of the failures below, each saying truthfully what became of the command.

Added in contract 1.3.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field


class LinkUse(BaseModel):
    """``PLUGIN_INFO["link"]``: the plugin reaches its game through the host's game link.

    ``servers`` are the server ids it uses from the start (more are learned from its calls
    and from the game tokens bound to its owner that sync); while one of them is down, the
    plugin's ``change`` and ``irreversible`` steps wait, spending no attempt, and its
    return reconciles the plugin. ``commands`` names the commands its agent understands
    (documentation: the host sends any).

    Example::

        PLUGIN_INFO = {"owner": "mygame", "contract": "^1.3",
                       "link": {"servers": ["world-a"], "commands": ["spawn", "despawn"]}}

    Added in contract 1.3.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    servers: tuple[str, ...] = Field(default=(), max_length=1000)
    commands: tuple[str, ...] = Field(default=(), max_length=1000)


class LinkFailure(Exception):
    """A link call that did not get an answer. ``server`` and ``command`` name it; the
    message says what became of it. Added in contract 1.3."""

    def __init__(self, server: str, command: str, message: str) -> None:
        super().__init__(message)
        self.server = server
        self.command = command
        self.message = message


class NotDelivered(LinkFailure):
    """The command never reached the agent and was withdrawn, or was never queued (the
    server's queue was full): **nothing happened** in the game, so the step may be tried
    again. Added in contract 1.3."""


class Unanswered(LinkFailure):
    """The command was delivered but its answer did not come within its deadline; it was
    withdrawn. The game **may have acted**: treat it as a perform whose answer was lost
    (the host reverts under the same key, and a revert is final for its key). An answer
    that comes later is recorded, never acted on. Added in contract 1.3."""


class Down(LinkFailure):
    """The server is down (it has not synced within ``link_offline_seconds``) or has never
    synced: nothing was queued. Added in contract 1.3."""


class GameLink(Protocol):
    """``context.link``: the plugin's way to a game that calls out.

    When: any time after ``pageant_startup``, typically inside ``perform`` and ``revert``
    (pass the step's ``ctx.idempotency_key`` and ``ctx.deadline``, so a retry finds the same
    command and its budget is the step's). The link is the host's: a plugin that uses it
    opens no port of its own. During ``pageant contract-check`` the kit lends a link with no
    agent behind it that answers every command ``{"ok": True}`` at once (with
    ``--live-link``, the real link of a host whose test world's agent answers); a plugin's own
    tests drive the real route with ``pageant.testing.FakeAgent``.

    Example::

        async def perform(ctx: ActionContext) -> dict[str, Any]:
            try:
                said = await context.link.call(
                    ctx.params["server"],
                    "spawn",
                    {"mob": "wisp"},
                    key=ctx.idempotency_key,
                    deadline=ctx.deadline,
                )
            except NotDelivered as exc:
                return {"ok": False, "retry": True, "error": exc.message}
            except (Unanswered, Down) as exc:
                return {"ok": False, "retry": True, "error": exc.message}
            return {"ok": True, "resources": [{"kind": "mygame.mob", "ref": said["id"]}]}

    Added in contract 1.3.
    """

    async def call(
        self,
        server: str,
        command: str,
        payload: Mapping[str, Any],
        *,
        key: str,
        deadline: datetime,
    ) -> Any:
        """Queue ``command`` with ``payload`` (JSON) for ``server``'s agent under ``key``
        and wait for its answer until ``deadline`` (timezone-aware).

        Returns what the agent answered (its result's ``answer``). The same ``command`` and
        ``key`` again finds the command already queued (an answer already given is
        answered at once; a withdrawn one is queued again). Raises :class:`NotDelivered`,
        :class:`Unanswered`, :class:`Down`, or :class:`LinkFailure` for an agent that
        answered with an ``error`` (its message), and ``ValueError`` for a ``server``,
        ``command`` or ``key`` that does not fit (1 to 100, 100 and 200 characters).
        """
        ...

    def servers(self) -> Mapping[str, str]:
        """Every server this plugin's link knows, and its state now: ``up``, ``down`` or
        ``unknown`` (never synced since the host started, for its first
        ``link_offline_seconds``)."""
        ...

    def up(self) -> Sequence[str]:
        """The servers that are ``up`` now, sorted."""
        ...
