"""Shared test helpers: events written straight into the database, spec builders, a host
with extra plugins, and ``Probe`` — a stand-in for a game plugin whose answers a test
scripts."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from pageant import hookimpl
from pageant.db import runlog, steps
from pageant.db.tables import event_definitions, event_runs, event_versions
from pageant.hookspecs import ActionContext
from pageant.hosting import Host
from pageant.plugins.loader import candidate_for
from pageant.support.settings import Settings

_slugs = itertools.count(1)


# ── specs ─────────────────────────────────────────────────────────────────────


def step(
    action: str,
    *,
    label: str | None = None,
    on_failure: str | None = None,
    hold_seconds: int | None = None,
    **params: Any,
):
    """One authored step."""
    out: dict[str, Any] = {"action": action, "params": params}
    if label is not None:
        out["label"] = label
    if on_failure is not None:
        out["on_failure"] = on_failure
    if hold_seconds is not None:
        out["hold_seconds"] = hold_seconds
    return out


def phase(key: str, *steps_: dict[str, Any], advance: dict[str, Any] | None = None):
    out: dict[str, Any] = {"key": key, "label": key.title(), "steps": list(steps_)}
    if advance is not None:
        out["advance"] = advance
    return out


def spec(*phases: dict[str, Any]) -> dict[str, Any]:
    return {"schedule": {"kind": "manual"}, "phases": list(phases)}


def announce(message: str, leg: str = "core.log", **kw: Any) -> dict[str, Any]:
    return step("core.announce", leg=leg, message=message, **kw)


def wait(seconds: int, **kw: Any) -> dict[str, Any]:
    return step("core.wait", seconds=seconds, **kw)


def probe_step(name: str, **kw: Any) -> dict[str, Any]:
    return step("probe.step", name=name, **kw)


# ── the database ──────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Event:
    id: int
    version_id: int
    slug: str


async def publish_event(
    db: AsyncEngine,
    now: Any,
    event_spec: dict[str, Any] | None = None,
    *,
    title: str = "Champion muster",
    concurrency_key: str | None = None,
    grace_seconds: int = 300,
    state: str = "ready",
    published: bool = True,
    verified: bool = True,
    timezone: str = "UTC",
    visibility: str = "staff",
) -> Event:
    """A definition with (unless ``published=False``) one published version of ``spec``,
    verified unless ``verified=False`` (scheduled occurrences of an unverified version are
    held)."""
    event_spec = event_spec if event_spec is not None else spec(phase("main", announce("hi")))
    slug = f"event-{next(_slugs)}"
    async with db.begin() as conn:
        definition_id = (
            await conn.execute(
                insert(event_definitions).values(
                    title=title,
                    slug=slug,
                    description="",
                    timezone=timezone,
                    grace_seconds=grace_seconds,
                    concurrency_key=concurrency_key,
                    visibility=visibility,
                    state=state if published else "draft",
                    spec=event_spec,
                    created_at=now,
                    updated_at=now,
                )
            )
        ).inserted_primary_key[0]
        version_id = 0
        if published:
            version_id = (
                await conn.execute(
                    insert(event_versions).values(
                        definition_id=definition_id,
                        number=1,
                        spec=event_spec,
                        timezone=timezone,
                        published_at=now,
                        published_by="admin:test",
                        verified_at=now if verified else None,
                        verified_by="admin:test" if verified else None,
                    )
                )
            ).inserted_primary_key[0]
            await conn.execute(
                update(event_definitions)
                .where(event_definitions.c.id == definition_id)
                .values(current_version_id=version_id)
            )
    return Event(definition_id, version_id, slug)


async def add_version(db: AsyncEngine, event: Event, now: Any, event_spec: dict) -> int:
    """Publish another version of ``event`` (number 2, 3, ...) and make it current."""
    async with db.begin() as conn:
        numbers = (
            await conn.execute(
                select(event_versions.c.number).where(event_versions.c.definition_id == event.id)
            )
        ).scalars()
        version_id = (
            await conn.execute(
                insert(event_versions).values(
                    definition_id=event.id,
                    number=max(numbers, default=0) + 1,
                    spec=event_spec,
                    timezone="UTC",
                    published_at=now,
                    published_by="admin:test",
                )
            )
        ).inserted_primary_key[0]
        await conn.execute(
            update(event_definitions)
            .where(event_definitions.c.id == event.id)
            .values(current_version_id=version_id)
        )
    return version_id


async def run_row(db: AsyncEngine, run_id: int) -> Any:
    async with db.connect() as conn:
        return (await conn.execute(select(event_runs).where(event_runs.c.id == run_id))).one()


async def set_run(db: AsyncEngine, run_id: int, **values: Any) -> None:
    async with db.begin() as conn:
        await conn.execute(update(event_runs).where(event_runs.c.id == run_id).values(**values))


async def step_rows(db: AsyncEngine, run_id: int) -> list[Any]:
    async with db.connect() as conn:
        return await steps.steps_of_run(conn, run_id)


async def log_kinds(db: AsyncEngine, run_id: int) -> list[str]:
    async with db.connect() as conn:
        return [line.kind for line in await runlog.lines_of(conn, run_id)]


async def log_lines(db: AsyncEngine, run_id: int, kind: str | None = None) -> list[Any]:
    async with db.connect() as conn:
        lines = await runlog.lines_of(conn, run_id)
    return [line for line in lines if kind is None or line.kind == kind]


# ── plugins and hosts ─────────────────────────────────────────────────────────

Answer = dict[str, Any] | Callable[[ActionContext], Awaitable[Any]]


@dataclass
class Probe:
    """A fake game plugin. ``probe.step {name}`` answers from ``script[name]`` (one answer
    per call, in order; ``{"ok": True}`` once the list is used up); an answer may be an
    async callable of the context. Every call is kept in ``calls``."""

    PLUGIN_INFO = {"owner": "probe", "contract": "^1.0"}  # noqa: RUF012 - read by the loader

    script: dict[str, list[Answer]] = field(default_factory=dict)
    calls: list[ActionContext] = field(default_factory=list)

    def names(self) -> list[str]:
        return [ctx.params["name"] for ctx in self.calls]

    async def perform(self, ctx: ActionContext) -> Any:
        self.calls.append(ctx)
        queue = self.script.get(ctx.params["name"]) or []
        answer = queue.pop(0) if queue else {"ok": True}
        if callable(answer):
            return await answer(ctx)
        return answer

    @hookimpl
    def pageant_actions(self) -> list[dict[str, Any]]:
        name = {
            "name": "name",
            "type": "string",
            "required": True,
            "description": "Which scripted answer to give.",
            "example": "a",
        }
        base = {"params": [name], "perform": self.perform, "budget_ms": 5_000}
        return [
            {"id": "probe.step", "label": "Probe step", "risk": "notify", **base},
            {"id": "probe.change", "label": "Probe change", "risk": "change", **base},
            {"id": "probe.burn", "label": "Probe burn", "risk": "irreversible", **base},
        ]


def make_host(settings: Settings, db: AsyncEngine, clock: Any, plugins: Sequence[Any] = ()) -> Host:
    """A host on ``db`` with the built-ins and ``plugins`` (each registered through the real
    loader), and no installed plugins."""
    candidates = [candidate_for(p, type(p).__name__.lower()) for p in plugins]
    return Host(settings, plugins=candidates, discover=False, clock=clock, db=db)


async def tick_beside_another_host(
    host: Host, settings: Settings, db: AsyncEngine, clock: Any, ticks: int
) -> None:
    """``ticks`` ticks of ``host``'s engine, each at once with a tick of a second host's on
    the same database: two hosts deciding the same runs together."""
    from pageant.engine import Engine

    other = Host(settings, clock=clock, db=db)
    first, second = Engine(host), Engine(other)
    try:
        for _ in range(ticks):
            await asyncio.gather(first.tick(), second.tick())
    finally:
        await first.stop()
        await second.stop()
        await other.close()


class Blocker:
    """An answer that blocks until released: a slow ``perform`` a test controls."""

    def __init__(self, answer: dict[str, Any] | None = None) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.answer = answer or {"ok": True}

    async def __call__(self, ctx: ActionContext) -> Any:
        self.entered.set()
        await self.release.wait()
        return self.answer


async def start_event(host: Host, event_spec: dict[str, Any]) -> int:
    """Publish ``event_spec`` as a new event and start a run of it now, as an admin; the run's
    id."""
    from pageant.runs.create import start_now

    event = await publish_event(host.db, host.clock.now(), event_spec)
    run_id, _ = await start_now(host, event.id, scope="", actor="admin:test")
    return run_id


@dataclass
class Counted:
    """How many times a patched coroutine function was called (see :func:`count_calls`)."""

    calls: int = 0


def count_calls(monkeypatch: Any, owner: Any, name: str) -> Counted:
    """Patch ``owner.name`` (a coroutine function) with one that counts its calls and then
    does what it did; answers the count."""
    counted = Counted()
    original = getattr(owner, name)

    async def counting(*args: Any, **kwargs: Any) -> Any:
        counted.calls += 1
        return await original(*args, **kwargs)

    monkeypatch.setattr(owner, name, counting)
    return counted
