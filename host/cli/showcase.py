"""``pageant demo``: a seeded three-phase event, run to completion by the real engine.

What a newcomer runs first. Everything is the real thing — a fresh database migrated as
``db upgrade`` does, a host loading the built-ins and every installed plugin through the real
loader, an event created and published through the functions the admin API calls, a run
started as start-now starts one, the engine ticking on the real clock, and firings sent
through :meth:`~pageant.hosting.Host.emit` as a game server's would be. Nothing is written
with raw SQL, so the run console at the end is exactly what the API would answer.

The event has three phases: ``muster`` (an announcement, a 2-second wait, and a gate on two
northern ``wisps.caught`` firings — or, without the wisps plugin, a 3-second ``after`` gate),
``hunt`` (an announcement and a 3-second ``after`` gate) and ``wind-down`` (a last
announcement). The whole run takes about ten seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pageant.db import runs
from pageant.db.contents import foreign_tables_and_counts
from pageant.db.engine import shown_url
from pageant.db.errors import DatabaseError
from pageant.db.migrate import upgrade
from pageant.errors import PageantError
from pageant.events import definitions
from pageant.events.slugs import slugify
from pageant.events.spec import validator as specs
from pageant.hosting import Host
from pageant.runs.console import console
from pageant.runs.create import start_now
from pageant.settings import Settings

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from pageant.clock import Clock
    from pageant.plugins.loader import Candidate

TITLE = "Wisp hunt"
TRIGGER = "wisps.caught"
#: Who the demo acts as: an admin authors, publishes and starts; a game server fires.
STAFF_ACTOR = "admin:demo"
GAME_ACTOR = "game:demo-shard"
#: How long the demo waits for its run to end before giving up (real seconds).
TIMEOUT_SECONDS = 60.0
#: How often the demo looks at its run while it waits.
POLL_SECONDS = 0.1


@dataclass(frozen=True)
class Firing:
    """One firing of the demo's trigger, ``after`` seconds into the muster phase."""

    after: float
    payload: dict[str, Any]


#: Two northern wisps with a southern one between them: the gate counts 1 of 2, sees a near
#: miss (the right trigger, the wrong colour), then closes on the second northern one. The
#: first comes while the phase's wait still holds, to show that a gate counts from phase
#: entry, not from the end of the phase's steps.
FIRINGS = (
    Firing(1.0, {"colour": "north", "weight": 1.5}),
    Firing(3.0, {"colour": "south", "weight": 0.8}),
    Firing(5.0, {"colour": "north", "weight": 2.25}),
)


NO_WISPS = (
    f"the wisps plugin is not loaded, so the muster phase waits 3 s (an after gate) instead "
    f"of two northern {TRIGGER} firings; install the wisps example plugin to see a trigger gate"
)


class DemoFailed(PageantError):
    """The demo could not begin: its database was refused or could not be opened."""

    code = "demo_failed"


@dataclass(frozen=True)
class DemoResult:
    """A finished demo: its run, how it ended, and the run console (``{run, steps, gate,
    log}``, as ``GET /api/v1/admin/runs/{run_id}`` answers it)."""

    run_id: int
    #: The run's last status; None when it had not ended within ``timeout``.
    status: str | None
    timeout: float
    console: dict[str, Any]
    with_wisps: bool

    @property
    def problem(self) -> str | None:
        """Why the demo failed, in a sentence; None when the run completed."""
        if self.status == "completed":
            return None
        run = self.console["run"]
        if self.status is None:
            where = f" in phase {run['current_phase']}" if run["current_phase"] else ""
            waiting = (run["waiting_on"] or {}).get("sentence")
            return (
                f"run {self.run_id} did not end within {self.timeout:g} s: it is "
                f"{run['status']}{where}" + (f", {waiting}" if waiting else "")
            )
        because = run["last_error"] or run["cancel_reason"]
        return f"run {self.run_id} ended {self.status}, not completed" + (
            f": {because}" if because else ""
        )


def demo_spec(*, with_wisps: bool) -> dict[str, Any]:
    """The demo event's spec: muster, hunt, wind-down.

    ``with_wisps`` gates the muster on two northern ``wisps.caught`` firings; without the
    plugin that declares the trigger, the muster waits 3 seconds instead.
    """
    muster_gate: dict[str, Any] = (
        {"on": TRIGGER, "where": {"var": "colour", "op": "eq", "value": "north"}, "count": 2}
        if with_wisps
        else {"after": "3s"}
    )
    return {
        "schedule": {"kind": "manual"},
        "phases": [
            {
                "key": "muster",
                "label": "Muster",
                "steps": [
                    _announce("The wisps gather at the northern stones"),
                    {"action": "core.wait", "params": {"seconds": 2}},
                ],
                "advance": muster_gate,
            },
            {
                "key": "hunt",
                "label": "Hunt",
                "steps": [_announce("The hunt is on: three seconds on the clock")],
                "advance": {"after": "3s"},
            },
            {
                "key": "wind-down",
                "label": "Wind down",
                "steps": [_announce("The hunt is over; thank you for playing")],
            },
        ],
    }


def _announce(message: str) -> dict[str, Any]:
    return {"action": "core.announce", "params": {"leg": "core.log", "message": message}}


# ── the database ─────────────────────────────────────────────────────────────

FAILED_CONNECT_GRACE_SECONDS = 0.1


async def require_empty(db: AsyncEngine, url: str) -> None:
    """Refuse a database that holds anything but an empty pageant schema.

    The demo writes an event and a run; mixed into real data they would be one more event
    on a real calendar. A database that ``db upgrade`` made and nothing has written to yet
    is empty enough. Raises :class:`DemoFailed` naming the database and what it holds.
    """
    try:
        foreign, counts = await foreign_tables_and_counts(db)
    except DatabaseError as exc:
        # aiosqlite's failed connect queues its worker thread's stop with a future of this
        # loop and does not await it; answered after asyncio.run closed the loop, the thread
        # dies with "Event loop is closed". A moment here lets it answer a live loop.
        await asyncio.sleep(FAILED_CONNECT_GRACE_SECONDS)
        raise DemoFailed(
            f"cannot open the database {shown_url(url)}",
            details=[str(getattr(exc, "orig", None) or exc)],
        ) from None
    held = [f"{name}: {count} row{'s' if count != 1 else ''}" for name, count in counts.items()]
    if not foreign and not held:
        return
    what = [f"tables pageant does not own: {', '.join(foreign)}"] if foreign else held
    raise DemoFailed(
        f"the database {shown_url(url)} is not empty; pageant demo writes an event and a run "
        "and will not mix them into existing data. Give it an empty database with "
        "--database-url, or none at all to use a temporary one",
        details=what,
    )


@contextlib.contextmanager
def _database_url(settings: Settings) -> Any:
    """The demo's database: the one configured, else a SQLite file in a temporary folder
    that is removed afterwards. Yields ``(url, temporary)``."""
    if "database_url" in settings.model_fields_set:
        yield settings.database_url, False
        return
    with tempfile.TemporaryDirectory(prefix="pageant-demo-") as folder:
        yield f"sqlite+aiosqlite:///{Path(folder) / 'demo.db'}", True


# ── seeding ──────────────────────────────────────────────────────────────────


async def seed(host: Host, *, with_wisps: bool) -> int:
    """Create and publish the demo event as an admin would through the API; its id."""
    raw = demo_spec(with_wisps=with_wisps)
    async with host.db.begin() as conn:
        spec = specs.validate(raw, host.registry, stored=None)
        definition_id = await definitions.create_definition(
            conn,
            title=TITLE,
            slug=None,
            derived_slug=slugify(TITLE),
            spec=spec,
            now=host.clock.now(),
            actor=STAFF_ACTOR,
            description="The showcase `pageant demo` seeds and runs.",
            timezone=definitions.DEFAULT_TIMEZONE,
            grace_seconds=definitions.DEFAULT_GRACE_SECONDS,
            concurrency_key=None,
            series_id=None,
            visibility="staff",
        )
    async with host.db.begin() as conn:
        await definitions.publish_definition(
            conn,
            definition_id,
            host.registry,
            now=host.clock.now(),
            actor=STAFF_ACTOR,
            horizon_days=host.settings.horizon_days,
        )
    return definition_id


# ── the run ──────────────────────────────────────────────────────────────────

Say = Callable[[str], None]


async def _run_row(host: Host, run_id: int) -> Any:
    async with host.db.connect() as conn:
        row = await runs.get_run(conn, run_id)
        await conn.rollback()
    return row


async def _fire_when_mustered(host: Host, run_id: int, say: Say, started: datetime) -> None:
    """Play the game server: once the muster phase (and so its gate) is current, fire each
    of :data:`FIRINGS` at its offset into the phase."""
    while True:
        row = await _run_row(host, run_id)
        if row.status in runs.TERMINAL:
            return
        if row.current_phase == "muster":
            break
        await host.clock.sleep(POLL_SECONDS)
    entered = host.clock.now()
    for firing in FIRINGS:
        delay = firing.after - (host.clock.now() - entered).total_seconds()
        if delay > 0:
            await host.clock.sleep(delay)
        answer = await host.emit(TRIGGER, firing.payload, actor=GAME_ACTOR)
        say(
            f"{_since(host, started)}  fired {TRIGGER} {json.dumps(firing.payload)}: "
            f"gates matched {answer['gates_matched']}, closed {answer['gates_closed']}"
        )


def _since(host: Host, started: datetime) -> str:
    return f"+{(host.clock.now() - started).total_seconds():.1f} s".ljust(7)


async def _follow(host: Host, run_id: int, say: Say, started: datetime) -> str:
    """Report each change of the run's status or phase until it ends; its last status."""
    seen: tuple[str, str | None] | None = None
    while True:
        row = await _run_row(host, run_id)
        now_seen = (row.status, row.current_phase)
        if now_seen != seen:
            where = f", phase {row.current_phase}" if row.current_phase else ""
            say(f"{_since(host, started)}  run {run_id} {row.status}{where}")
            seen = now_seen
        if row.status in runs.TERMINAL:
            return row.status
        await host.clock.sleep(POLL_SECONDS)


async def _play(
    host: Host, run_id: int, say: Say, *, with_wisps: bool, timeout: float
) -> str | None:
    """Follow the run (and play the game server) until it ends; its last status, or None
    when it did not end within ``timeout`` real seconds."""
    started = host.clock.now()
    follow = asyncio.create_task(_follow(host, run_id, say, started))
    tasks: list[asyncio.Task[Any]] = [follow]
    if with_wisps:
        tasks.append(asyncio.create_task(_fire_when_mustered(host, run_id, say, started)))
    try:
        async with asyncio.timeout(timeout):
            await asyncio.gather(*tasks)
    except TimeoutError:
        return None
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return follow.result()


@contextlib.asynccontextmanager
async def _running(host: Host) -> AsyncIterator[None]:
    from pageant.engine import Engine

    engine = Engine(host)
    await engine.start()
    try:
        yield
    finally:
        await engine.stop()


async def run_demo(
    settings: Settings,
    *,
    say: Say = lambda line: None,
    clock: Clock | None = None,
    plugins: Sequence[Candidate] = (),
    discover: bool = True,
    timeout: float = TIMEOUT_SECONDS,
) -> DemoResult:
    """Run the demo start to finish and answer its run with the run's console.

    The database is ``settings.database_url`` when one was configured (it must be empty:
    :func:`require_empty`), else a SQLite file in a temporary folder removed at the end.
    ``say`` receives a line for each thing that happens along the way; ``clock``,
    ``plugins`` and ``discover`` are handed to the :class:`~pageant.hosting.Host`. A run
    that has not ended after ``timeout`` real seconds is left as it is and answered with
    its console as it stands (:attr:`DemoResult.problem` says so). Raises
    :class:`DemoFailed` when the database is refused. The engine, the plugins' host and
    the database engine are closed before it returns.
    """
    with _database_url(settings) as (url, temporary):
        host = Host(
            settings.model_copy(update={"database_url": url}),
            clock=clock,
            plugins=plugins,
            discover=discover,
        )
        try:
            return await _demo(host, url, temporary, say, timeout)
        finally:
            await host.close()


async def _demo(host: Host, url: str, temporary: bool, say: Say, timeout: float) -> DemoResult:
    say("pageant demo: a three-phase event, run to completion by the engine (about 10 s)")
    await require_empty(host.db, url)
    await upgrade(host.db)
    await host.start_plugins()
    with_wisps = TRIGGER in host.registry.triggers
    say(f"database  {shown_url(url)}" + (" (temporary, removed at the end)" if temporary else ""))
    for record in host.plugins.records:
        if record.status == "loaded":
            say(f"plugin    {record.label} {record.version}")
        else:
            say(f"refused   {record.reason}")
    if not with_wisps:
        say(f"note      {NO_WISPS}")
    definition_id = await seed(host, with_wisps=with_wisps)
    say(f'event     {definition_id} "{TITLE}", created and published as version 1')
    async with _running(host):
        run_id, _ = await start_now(host, definition_id, scope="", actor=STAFF_ACTOR)
        say(f"run       {run_id}, started now")
        status = await _play(host, run_id, say, with_wisps=with_wisps, timeout=timeout)
    return DemoResult(
        run_id=run_id,
        status=status,
        timeout=timeout,
        console=await console(host, run_id),
        with_wisps=with_wisps,
    )


def console_json(found: dict[str, Any]) -> str:
    """The console in the API's own JSON encoding, indented for a terminal."""
    from pageant.api.routing import dumps

    return json.dumps(json.loads(dumps(found)), indent=2, ensure_ascii=False)
