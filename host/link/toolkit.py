"""What a plugin whose game calls out builds on: the parts of such a plugin that are the same
for every game (``docs/link.md``, "For plugin authors").

A link plugin's ``perform`` sends one command and reads the agent's answer; its lease reads,
sets and puts back a named value in the world; its option sources list the places and
settings it was configured with; its reconcile asks each world which of its things are still
there. The game differs only in the command names and payloads, so those parts live here:

- :class:`LinkSettings` — the settings every link plugin has: its ``servers``, named
  ``places`` in them, the ``settings`` its lease may borrow, and ``command_seconds``;
- :class:`LinkPlugin` — a base class holding the context and the settings, with
  :meth:`~LinkPlugin.call`, :meth:`~LinkPlugin.step` and :meth:`~LinkPlugin.guard` (the
  envelope of a step over the link), :meth:`~LinkPlugin.place`, the option sources of places
  and settings, and a reconcile of things the world lists (:meth:`~LinkPlugin.reconcile_listed`);
- :class:`SettingLease` — a borrowed-value lease whose ``read``, ``apply`` and ``restore``
  are three commands of the agent.

It imports nothing of the host but the contract, so a plugin importing it loads no database
or HTTP code. Added with contract 1.3's game link.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from pydantic import BaseModel, Field, field_validator, model_validator

from pageant.hookspecs import ActionContext, HeldResource, LinkFailure, PluginContext, hookimpl

__all__ = ["LinkPlugin", "LinkSettings", "Place", "SettingLease", "parse_places"]

#: ``name=x,y,z`` or ``name=x,y,z@server``: one place as the environment writes it.
PLACE = re.compile(r"^\s*([a-z][a-z0-9_-]*)\s*=\s*(-?\d+),(-?\d+),(-?\d+)(?:@(\S+))?\s*$")
#: The target ``pageant contract-check`` walks every lease through: ``settings`` may name it
#: beside ``LEASABLE``, and must, for the check's walk of the lease to reach the agent.
CHECK_TARGET = "contract-check"


class Place(BaseModel):
    """A named spot in one world."""

    id: str = Field(pattern=r"^[a-z][a-z0-9_-]*$", description="How events name the place.")
    server: str | None = Field(None, description="Its world (default: the first server).")
    x: int
    y: int
    z: int


def parse_places(value: Any) -> Any:
    """``altar=0,9,0;gate=12,9,-4@world_b`` (the environment's form) as a list of place
    tables; anything but a string is answered as it is. A part that does not fit raises
    ``ValueError`` quoting it."""
    if not isinstance(value, str):
        return value
    found = []
    for part in filter(str.strip, value.split(";")):
        match = PLACE.match(part)
        if match is None:
            raise ValueError(f"{part.strip()!r} is not name=x,y,z or name=x,y,z@server")
        name, x, y, z, server = match.groups()
        found.append({"id": name, "x": x, "y": y, "z": z, "server": server})
    return found


class LinkSettings(BaseModel):
    """The settings every link plugin has; subclass it to add the game's own, and set
    ``LEASABLE`` to the settings its agent can lease.

    ``servers`` names the worlds (each a server id of the game link, comma-separated in the
    environment); ``places`` names spots in them (a table per place in the settings file, or
    ``altar=0,9,0;gate=12,9,-4@world_b`` in the environment), each in the first server unless
    it names another; ``settings`` is the allowlist of the lease (of ``LEASABLE``);
    ``command_seconds`` bounds a call made outside a step (a lease's, a reconcile's).

    Example::

        class MySettings(LinkSettings):
            LEASABLE: ClassVar[tuple[str, ...]] = ("weather",)
            settings: list[str] = Field(default_factory=lambda: ["weather"])
    """

    #: The settings the game's agent can lease; ``settings`` may name only these.
    LEASABLE: ClassVar[tuple[str, ...]] = ()

    servers: list[str] = Field(
        default_factory=lambda: ["world"],
        description="The server ids of the worlds (comma-separated in the environment).",
    )
    places: list[Place] = Field(default_factory=list, description="Named spots in the worlds.")
    settings: list[str] = Field(
        default_factory=list, description="The settings the lease may borrow."
    )
    command_seconds: float = Field(
        20.0, gt=0, le=300, description="How long a lease's call waits for the world's answer."
    )

    @field_validator("servers", "settings", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("places", mode="before")
    @classmethod
    def _places(cls, value: Any) -> Any:
        return parse_places(value)

    @field_validator("settings")
    @classmethod
    def _leasable(cls, value: list[str]) -> list[str]:
        bad = [name for name in value if name not in (*cls.LEASABLE, CHECK_TARGET)]
        if bad:
            raise ValueError(f"not a setting the bridge can lease: {', '.join(bad)}")
        return value

    @model_validator(mode="after")
    def _known(self) -> LinkSettings:
        for place in self.places:
            place.server = place.server or self.servers[0]
            if place.server not in self.servers:
                raise ValueError(f"place {place.id}: no server {place.server!r} in servers")
        ids = [place.id for place in self.places]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise ValueError(f"places: id(s) given twice: {', '.join(twice)}")
        return self


class LinkPlugin:
    """A base for a plugin that reaches its game through ``context.link``.

    It keeps the context and the plugin's settings (``settings_model``, filled by the host)
    from ``pageant_startup``, and ``now``, the clock a call made outside a step takes its
    deadline from (a test sets it to the host's). A subclass declares its actions, whose
    ``perform`` and ``revert`` use :meth:`guard` and :meth:`step`.

    Example::

        class MyGame(LinkPlugin):
            settings_model = MySettings

            async def spawn(self, ctx):
                async def do():
                    said = await self.step(ctx, "world", "spawn", {"mob": "wisp"})
                    mobs = self.listed("mygame.mob", "world", said["ids"])
                    return {"ok": True, "resources": mobs}
                return await self.guard(ctx, do)
    """

    settings_model: ClassVar[type[LinkSettings]] = LinkSettings

    def __init__(self) -> None:
        self.settings: Any = self.settings_model()
        self.context: PluginContext | None = None
        self.now: Callable[[], datetime] = lambda: datetime.now(UTC)

    @hookimpl
    def pageant_startup(self, context: PluginContext) -> None:
        self.context = context
        self.settings = getattr(context, "settings", None) or self.settings_model()

    # ── calls ────────────────────────────────────────────────────────────────

    async def call(
        self,
        server: str,
        command: str,
        payload: dict[str, Any],
        key: str | None = None,
        deadline: datetime | None = None,
    ) -> Any:
        """``command`` on ``server``'s agent: its answer, or a :class:`LinkFailure`. Without
        ``key`` a fresh one is made; without ``deadline`` it is ``command_seconds`` away."""
        link = self.context.link if self.context is not None else None
        if link is None:
            raise LinkFailure(server, command, "the host lends this plugin no game link")
        if deadline is None:
            deadline = self.now() + timedelta(seconds=self.settings.command_seconds)
        return await link.call(
            server, command, payload, key=key or uuid.uuid4().hex, deadline=deadline
        )

    async def step(
        self, ctx: ActionContext, server: str, command: str, payload: dict[str, Any]
    ) -> Any:
        """``command`` under the step's idempotency key and deadline, so a retry of the step
        finds the same command and the step's budget bounds it."""
        return await self.call(server, command, payload, ctx.idempotency_key, ctx.deadline)

    async def guard(
        self,
        ctx: ActionContext,
        do: Callable[[], Awaitable[dict[str, Any]]],
        check: Callable[[ActionContext], None] | None = None,
    ) -> dict[str, Any]:
        """The envelope of a step over the link. A dry run (``ctx.verify``) runs only
        ``check`` and answers ok; otherwise ``do()``'s answer. A ``ValueError`` (a param the
        world cannot take) is a final failure; the agent's own error (a plain
        :class:`LinkFailure`) is final; a command not delivered, or delivered and not
        answered (the host reverts it first, under the same key), may be retried."""
        try:
            if ctx.verify:
                if check is not None:
                    check(ctx)
                return {"ok": True}
            return await do()
        except ValueError as exc:
            return {"ok": False, "retry": False, "error": str(exc)}
        except LinkFailure as exc:
            return {"ok": False, "retry": type(exc) is not LinkFailure, "error": exc.message}

    # ── places ───────────────────────────────────────────────────────────────

    def place(self, name: str) -> Place:
        """The place named ``name``; ``ValueError`` naming the known ones if there is none."""
        for place in self.settings.places:
            if place.id == name:
                return place
        known = ", ".join(p.id for p in self.settings.places) or "none configured"
        raise ValueError(f"no place {name!r}; the places are {known}")

    def where(self, name: str) -> dict[str, Any]:
        """The place named ``name`` as a command's payload: ``server``, ``x``, ``y``, ``z``."""
        place = self.place(name)
        return {"server": place.server, "x": place.x, "y": place.y, "z": place.z}

    async def place_options(self) -> list[dict[str, str]]:
        """An option source's ``resolve``: the configured places."""
        return [
            {"value": p.id, "label": f"{p.id} ({p.x}, {p.y}, {p.z} in {p.server})"}
            for p in self.settings.places
        ]

    # ── things the world lists ───────────────────────────────────────────────

    @staticmethod
    def listed(kind: str, server: str, ids: Sequence[str]) -> list[dict[str, Any]]:
        """One resource of ``kind`` per id the world answered, its ref ``server/id``."""
        return [{"kind": kind, "ref": f"{server}/{i}", "server": server, "id": i} for i in ids]

    async def reconcile_listed(
        self,
        resources: Sequence[HeldResource],
        kind: str,
        command: str,
        ids: Callable[[Any], Sequence[str]],
    ) -> list[str]:
        """A ``pageant_reconcile`` answer: resources of ``kind`` (refs ``server/id``, as
        :meth:`listed` makes them) stand while their world lists their id (``command`` on
        each world, read with ``ids``); every other kind stands. A world that cannot answer
        raises, so nothing changes."""
        still = [r.ref for r in resources if r.kind != kind]
        servers = sorted({r.ref.partition("/")[0] for r in resources if r.kind == kind})
        present: set[str] = set()
        for server in servers:
            said = await self.call(server, command, {})
            present |= {f"{server}/{i}" for i in ids(said)}
        return still + [r.ref for r in resources if r.kind == kind and r.ref in present]

    def setting_lease(self, id: str, label: str, **commands: str) -> dict[str, Any]:
        """A ``pageant_leases`` declaration of a :class:`SettingLease` on this plugin's
        worlds (``commands`` renames the agent's ``get``, ``set`` and ``restore``)."""
        return SettingLease(self, id, **commands).declaration(label)

    async def setting_options(self) -> list[dict[str, str]]:
        """An option source's ``resolve``: every leasable setting of every server, as a
        :class:`SettingLease` names its targets."""
        first = self.settings.servers[0]
        return [
            {"value": n if s == first else f"{s}:{n}", "label": f"{n} in {s}"}
            for s in self.settings.servers
            for n in self.settings.settings
        ]


class SettingLease:
    """A borrowed-value lease over the link: ``read``, ``apply`` and ``restore`` are the
    agent's ``get``, ``set`` and ``restore`` commands, each with the setting's ``name``.

    ``get`` answers ``{"value"}``; ``set`` takes ``value`` and ``until`` (ISO 8601, UTC),
    answers ``{"baseline"}``, and should put the baseline back by itself past ``until``, in
    case pageant is gone; ``restore`` takes ``baseline``. A target is ``name`` on the first
    server or ``server:name``, where ``name`` is one of the plugin's ``settings``.
    """

    def __init__(
        self,
        plugin: LinkPlugin,
        id: str,
        *,
        get: str = "setting_get",
        set: str = "setting_set",
        restore: str = "setting_restore",
    ) -> None:
        self.plugin, self.id = plugin, id
        self.commands = {"get": get, "set": set, "restore": restore}

    def target(self, target: str) -> tuple[str, str]:
        """The server and the setting ``target`` names; ``ValueError`` for a server or a
        setting the plugin's settings do not name."""
        settings = self.plugin.settings
        server, _, name = target.rpartition(":")
        server = server or settings.servers[0]
        if server not in settings.servers:
            raise ValueError(f"no server {server!r} for {target!r}")
        if name not in settings.settings:
            allowed = ", ".join(settings.settings)
            raise ValueError(
                f"{name!r} is not a setting {self.id} may lease; it may lease {allowed}"
            )
        return server, name

    async def _command(
        self, target: str, which: str, payload: dict[str, Any], key: str | None
    ) -> Any:
        server, name = self.target(target)
        return await self.plugin.call(server, self.commands[which], {"name": name, **payload}, key)

    async def read(self, target: str) -> str | None:
        """The setting's value now."""
        return (await self._command(target, "get", {}, None)).get("value")

    async def apply(
        self, target: str, value: Any, until: datetime, key: str | None = None
    ) -> str | None:
        """Set ``value`` until ``until``; answers the baseline. Without ``key``, one made of
        the target, value and ``until``, so the same apply again is the same command."""
        stamp = until.astimezone(UTC).isoformat().replace("+00:00", "Z")
        payload = {"value": str(value), "until": stamp}
        said = await self._command(target, "set", payload, key or f"lease/{target}/{value}/{stamp}")
        return said.get("baseline")

    async def restore(self, target: str, baseline: str | None, key: str | None = None) -> None:
        """Put ``baseline`` back."""
        await self._command(target, "restore", {"baseline": baseline}, key)

    def declaration(self, label: str) -> dict[str, Any]:
        """This lease as ``pageant_leases`` declares it."""
        return {
            "id": self.id,
            "label": label,
            "read": self.read,
            "apply": self.apply,
            "restore": self.restore,
        }
