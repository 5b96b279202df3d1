"""``pageant demo``: the Champion Muster, run against the simulated shard by the real engine.

What a newcomer runs first. Everything is the real thing: a fresh database migrated as
``db upgrade`` does, a host loading the built-ins and every installed plugin through the real
loader (the ``pageant-shard`` example plugin is required), the switchboard opened through the
functions the admin API calls, an event created and published the same way, a run started as
start-now starts one, and the engine ticking. The shard's own simulation makes its world live
and fires its triggers through the plugin context, as a game would. Nothing is written with
raw SQL, so the run console at the end is exactly what the API would answer.

Time is compressed: the host's clock runs :data:`COMPRESSION` times faster than the wall
clock, so the event's minutes pass in seconds. The event has four phases:

- ``herald``: a broadcast, a town crier notice, and a cue a moderator confirms (the demo
  confirms it, as the moderator);
- ``muster``: guardians and wolves spawned under a cap, the world's XP rate leased, a gate
  opened from Vesper to Yew; the phase waits for two bosses to rise in Yew;
- ``champion``: a broadcast, then two (compressed) minutes;
- ``wind-down``: a reward and a farewell. Then everything is given back.

``--faults`` runs the same event with the shard going down after its first world change and
its first two despawns failing: the run degrades, waits, and recovers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pageant.cli.demo_text import stream_lines
from pageant.db.contents import foreign_tables_and_counts
from pageant.db.engine import shown_url
from pageant.db.errors import DatabaseError
from pageant.db.migrate import upgrade
from pageant.errors import PageantError
from pageant.events import definitions
from pageant.hosting import Host
from pageant.runs import controls
from pageant.runs.console import console
from pageant.runs.create import start_now
from pageant.runs.sentences import Context
from pageant.states import RUN_ENDED
from pageant.support.settings import Settings
from pageant.switchboard import board

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from pageant.plugins.loader import Candidate
    from pageant.support.clock import Clock

TITLE = "Champion Muster"
#: Who the demo acts as: an admin opens the switchboard, authors, publishes and starts;
#: a moderator confirms the cue.
STAFF_ACTOR = "admin:demo"
MODERATOR_ACTOR = "moderator:demo"
#: How many seconds of the host's clock pass in one second of the wall clock.
COMPRESSION = 60.0
#: How long the demo waits for its run to end and be cleaned up (real seconds).
TIMEOUT_SECONDS = 60.0
#: How often the demo looks at its run while it waits (real seconds).
POLL_SECONDS = 0.1
#: How long the moderator takes to confirm the cue (real seconds): long enough to be seen.
CONFIRM_AFTER_SECONDS = 1.0
#: The shard plugin's settings for the demo: a lively world on a fixed seed.
SHARD_SETTINGS: dict[str, Any] = {"simulate": True, "seed": 11, "tick_seconds": 0.3}
#: What ``--faults`` adds: down for 4 s after the first world change; two despawns fail.
FAULT_SETTINGS: dict[str, Any] = {
    "fault_down_after": 1,
    "fault_down_seconds": 4.0,
    "fault_revert_failures": 2,
}
#: The switchboard the demo opens: action -> its per-run caps.
SWITCHBOARD: dict[str, dict[str, int | None]] = {
    "shard.spawn": {"shard.creatures": 12},
    "shard.gate.open": {},
    "shard.reward.grant": {"shard.rewards": 1},
    "core.lease": {},
}
NEEDS_SHARD = (
    "pageant demo runs its event on the simulated shard, and the pageant-shard plugin is not "
    "loaded; install it with: pip install -e ./example_plugins/shard"
)


class DemoFailed(PageantError):
    """The demo could not begin: its database was refused or could not be opened, or the
    shard plugin is missing."""

    code = "demo_failed"


@dataclass(frozen=True)
class DemoResult:
    """A finished demo: its run, how it ended, and the run console (as
    ``GET /api/v1/admin/runs/{run_id}`` answers it)."""

    run_id: int
    #: The run's last status; None when it had not ended within ``timeout``.
    status: str | None
    timeout: float
    console: dict[str, Any]
    #: Real seconds from the start of the run to the end of its cleanup.
    wall_seconds: float

    @property
    def problem(self) -> str | None:
        """Why the demo failed, in a sentence; None when the run completed and gave back
        everything it held."""
        run = self.console["run"]
        if self.status is None:
            where = f" in phase {run['current_phase']}" if run["current_phase"] else ""
            waiting = (run["waiting_on"] or {}).get("sentence")
            return (
                f"run {self.run_id} did not end within {self.timeout:g} s: it is "
                f"{run['status']}{where}" + (f", {waiting}" if waiting else "")
            )
        if self.status != "completed":
            because = run["last_error"] or run["cancel_reason"]
            return f"run {self.run_id} ended {self.status}, not completed" + (
                f": {because}" if because else ""
            )
        if run["cleanup_status"] not in ("complete", "not_required"):
            return (
                f"run {self.run_id} completed but its cleanup is {run['cleanup_status']}: "
                f"{self.console['cleanup_summary']}"
            )
        return None


def demo_spec() -> dict[str, Any]:
    """The Champion Muster: herald, muster, champion, wind-down."""
    return {
        "schedule": {"kind": "manual"},
        "phases": [
            {
                "key": "herald",
                "label": "Herald",
                "steps": [
                    _say("shard.broadcast", "The Ashen Champion stirs: muster in Yew Woods!"),
                    _say(
                        "shard.towncrier.post", "Champion Muster tonight at the Shrine of the Oak"
                    ),
                    {
                        "action": "core.cue",
                        "params": {"message": "Moderator: take your place at the shrine"},
                    },
                ],
            },
            {
                "key": "muster",
                "label": "Muster",
                "steps": [
                    _spawn("guardian", 6),
                    _spawn("wolf", 4),
                    {
                        "action": "core.lease",
                        "params": {
                            "lease": "shard.config",
                            "target": "xp_rate",
                            "value": "2.0",
                            "minutes": 60,
                        },
                    },
                    {
                        "action": "shard.gate.open",
                        "params": {"from": "vesper", "to": "yew", "minutes": 30},
                    },
                ],
                "advance": {
                    "on": "shard.boss.spawned",
                    "where": {"var": "region", "op": "eq", "value": "yew"},
                    "count": 2,
                },
            },
            {
                "key": "champion",
                "label": "Champion",
                "steps": [_say("shard.broadcast", "The Champion rises at the shrine!")],
                "advance": {"after": "2m"},
            },
            {
                "key": "wind-down",
                "label": "Wind down",
                "steps": [
                    {
                        "action": "shard.reward.grant",
                        "params": {"item": "champion_sigil", "amount": 1},
                    },
                    _say("shard.broadcast", "The muster is over; thank you for playing"),
                ],
            },
        ],
    }


def _say(action: str, message: str) -> dict[str, Any]:
    return {"action": action, "params": {"message": message}}


def _spawn(creature: str, count: int) -> dict[str, Any]:
    return {
        "action": "shard.spawn",
        "params": {"region": "yew", "creature": creature, "count": count},
    }


# ── the clock ────────────────────────────────────────────────────────────────


class CompressedClock:
    """The host's clock for the demo: it starts at the wall clock's now and runs ``factor``
    times faster, so a 2-minute gate takes 2 s. :meth:`set_factor` changes the pace from now
    on without a jump (``--serve`` runs on at the wall clock's pace)."""

    def __init__(self, factor: float = COMPRESSION) -> None:
        self.factor = factor
        self._origin = datetime.now(UTC)
        self._real = time.monotonic()

    def now(self) -> datetime:
        return self._origin + timedelta(seconds=(time.monotonic() - self._real) * self.factor)

    def set_factor(self, factor: float) -> None:
        self._origin, self._real = self.now(), time.monotonic()
        self.factor = factor

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds) / self.factor)


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


def demo_settings(settings: Settings, url: str, *, faults: bool) -> Settings:
    """The host settings of the demo: ``url``, and the shard's ``[plugins.shard]`` table
    with the demo's simulation (and faults) over what the settings file says."""
    tables = {owner: settings.plugin_table(owner) for owner in ("shard",)}
    tables["shard"] = {**tables["shard"], **SHARD_SETTINGS, **(FAULT_SETTINGS if faults else {})}
    return settings.model_copy(update={"database_url": url}).with_plugin_tables(tables)


# ── setting up ───────────────────────────────────────────────────────────────


def require_shard(host: Host) -> None:
    """Raise :class:`DemoFailed` unless the shard plugin is loaded (naming why it was
    refused, when it was)."""
    if "shard.spawn" in host.registry.actions:
        return
    refused = [
        f"{record.label}: {record.reason}"
        for record in host.plugins.records
        if record.status != "loaded" and record.owner == "shard"
    ]
    raise DemoFailed(NEEDS_SHARD, details=refused)


async def enable_action(host: Host, action_id: str, caps: dict[str, int | None]) -> None:
    """Enable ``action_id`` with ``caps``, as an admin does through
    ``PUT /api/v1/admin/actions/{action_id}``."""
    async with host.db.begin() as conn:
        await board.set_action(
            conn,
            host.registry,
            action_id,
            enabled=True,
            caps=caps,
            actor=STAFF_ACTOR,
            now=host.clock.now(),
        )


async def open_switchboard(host: Host, say: Say) -> None:
    """Enable the world-changing actions the event uses, with their caps, as an admin does
    through ``PUT /api/v1/admin/actions/{action_id}``."""
    for action_id, caps in SWITCHBOARD.items():
        await enable_action(host, action_id, caps)
        capped = ", ".join(f"{dim} at most {n} per run" for dim, n in caps.items())
        say(f"switch    {action_id} enabled" + (f" ({capped})" if capped else ""))


async def seed(host: Host) -> int:
    """Create and publish the demo event as an admin would through the API; its id."""
    return await publish(
        host,
        TITLE,
        demo_spec(),
        description="The showcase `pageant demo` seeds and runs on the simulated shard.",
    )


async def publish(host: Host, title: str, raw: dict[str, Any], *, description: str) -> int:
    """Create and publish one staff-only event from its spec, as an admin would; its id."""
    async with host.db.begin() as conn:
        return await definitions.create_and_publish(
            conn,
            host.registry,
            raw,
            title=title,
            now=host.clock.now(),
            actor=STAFF_ACTOR,
            horizon_days=host.settings.horizon_days,
            description=description,
        )


# ── following the run ────────────────────────────────────────────────────────

Say = Callable[[str], None]
#: Receives the run console on every look (a live view draws it; the default ignores it).
Show = Callable[[Mapping[str, Any]], None]


async def look(
    host: Host, run_id: int, seen: int, say: Say, show: Show
) -> tuple[dict[str, Any], int]:
    """One look at the run: its console shown, and each log line after the first ``seen``
    said. Answers the console and how many log lines have now been said."""
    view = await console(host, run_id)
    show(view)
    for text in stream_lines(view["log"][seen:], context=Context.of_console(view)):
        say(text)
    return view, len(view["log"])


async def _follow(host: Host, run_id: int, say: Say, show: Show) -> str:
    """Print each new log line of the run, confirm its cue as the moderator, and say when
    the run waits on the shard; until the run has ended and nothing is left to give back.
    Answers the run's last status."""
    seen = 0
    confirming: int | None = None  # the parked step the moderator is walking to
    confirmed: set[int] = set()
    parked_since = 0.0
    while True:
        view, seen = await look(host, run_id, seen, say, show)
        run = view["run"]
        waiting = run["waiting_on"] or {}
        if waiting.get("reason") == "parked" and waiting["step_id"] not in confirmed:
            if confirming != waiting["step_id"]:
                confirming, parked_since = waiting["step_id"], time.monotonic()
                say(f"demo      {MODERATOR_ACTOR} reads the cue and walks to the shrine ...")
            elif time.monotonic() - parked_since >= CONFIRM_AFTER_SECONDS:
                step_id = int(waiting["step_id"])
                await controls.confirm(
                    host, run_id, step_id, actor=MODERATOR_ACTOR, note="in place at the shrine"
                )
                say(f"demo      {MODERATOR_ACTOR} confirms the cue (step {step_id})")
                confirmed.add(step_id)
        if run["status"] in RUN_ENDED and run["cleanup_status"] != "pending":
            return str(run["status"])
        await asyncio.sleep(POLL_SECONDS)


@contextlib.asynccontextmanager
async def _running(host: Host) -> AsyncIterator[None]:
    from pageant.engine import Engine

    engine = Engine(host)
    await engine.start()
    try:
        yield
    finally:
        await engine.stop()


Serve = Callable[[Host, DemoResult], Any]


async def run_demo(
    settings: Settings,
    *,
    say: Say = lambda line: None,
    show: Show = lambda view: None,
    clock: Clock | None = None,
    plugins: Sequence[Candidate] = (),
    discover: bool = True,
    timeout: float = TIMEOUT_SECONDS,
    faults: bool = False,
    serve: Serve | None = None,
) -> DemoResult:
    """Run the demo start to finish and answer its run with the run's console.

    The database is ``settings.database_url`` when one was configured (it must be empty:
    :func:`require_empty`), else a SQLite file in a temporary folder removed at the end.
    ``say`` receives a line for each thing that happens along the way and ``show`` the run
    console on every look; ``clock`` (default: a :class:`CompressedClock`), ``plugins`` and
    ``discover`` are handed to the :class:`~pageant.hosting.Host`. ``faults`` turns on the
    shard's outage and failing despawns. A run not ended and cleaned up after ``timeout``
    real seconds is left as it is and answered with its console as it stands
    (:attr:`DemoResult.problem` says so). ``serve``, when given, is awaited with the host
    and the result before anything is closed (``--serve`` serves the API from it). Raises
    :class:`DemoFailed` when the database is refused or the shard plugin is missing.
    """
    with _database_url(settings) as (url, temporary):
        host = Host(
            demo_settings(settings, url, faults=faults),
            clock=clock or CompressedClock(),
            plugins=plugins,
            discover=discover,
        )
        try:
            require_shard(host)
            result = await _demo(host, url, temporary, say, show, timeout, faults)
            if serve is not None:
                await serve(host, result)
            return result
        finally:
            await _stop_plugins(host)
            await host.close()


async def _stop_plugins(host: Host) -> None:
    """Stop what the loaded plugins started (the shard's simulation) before the host closes.

    Contract 1.1 has no shutdown hook; the shard plugin offers ``stop()`` for whoever
    embeds a host, and the demo is such an embedder. A plugin without one is left alone.
    """
    for record in host.plugins.loaded():
        stop = getattr(record.plugin, "stop", None)
        if stop is not None and asyncio.iscoroutinefunction(stop):
            await stop()


async def _demo(
    host: Host,
    url: str,
    temporary: bool,
    say: Say,
    show: Show,
    timeout: float,
    faults: bool,
) -> DemoResult:
    factor = getattr(host.clock, "factor", None)
    pace = f", the clock running {factor:g} times fast" if factor else ""
    say(f"pageant demo: the {TITLE}, run on the simulated shard{pace}")
    if faults:
        say(
            "faults    the shard goes down for "
            f"{FAULT_SETTINGS['fault_down_seconds']:g} s after its first world change, and "
            f"its first {FAULT_SETTINGS['fault_revert_failures']} despawns fail"
        )
    await require_empty(host.db, url)
    await upgrade(host.db)
    await host.start_plugins()
    say(f"database  {shown_url(url)}" + (" (temporary, removed at the end)" if temporary else ""))
    for record in host.plugins.records:
        if record.status == "loaded":
            say(f"plugin    {record.label} {record.version}")
            for dropped in record.dropped:  # its lease's self-check at start
                lease, target = dropped["lease"], dropped["target"]
                say(f"dropped   {lease} target {target!r}: {dropped['reason']}")
        else:
            say(f"refused   {record.reason}")
    await open_switchboard(host, say)
    definition_id = await seed(host)
    say(f'event     {definition_id} "{TITLE}", created and published as version 1')
    async with _running(host):
        began = time.monotonic()
        run_id, _ = await start_now(host, definition_id, scope="", actor=STAFF_ACTOR)
        say(f"run       {run_id}, started now")
        status: str | None
        try:
            async with asyncio.timeout(timeout):
                status = await _follow(host, run_id, say, show)
        except TimeoutError:
            status = None
        took = time.monotonic() - began
    found = await console(host, run_id)
    show(found)
    return DemoResult(
        run_id=run_id, status=status, timeout=timeout, console=found, wall_seconds=took
    )


# ── the end ──────────────────────────────────────────────────────────────────


def console_json(found: dict[str, Any]) -> str:
    """The console in the API's own JSON encoding, indented for a terminal."""
    from pageant.api.routing import dumps

    return json.dumps(json.loads(dumps(found)), indent=2, ensure_ascii=False)


# ── the live view ────────────────────────────────────────────────────────────


class DemoLive:
    """The demo in a terminal (``rich``): the progress lines scroll by, and the run's state
    — phase, health, what it waits on, the gate's tally, the budget and what it holds —
    stays drawn below them, redrawn on every look. Used only when standard output is a
    terminal; elsewhere the demo prints plain lines."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.live import Live

        self._live = Live(console=Console(), refresh_per_second=8, transient=True)
        self._live.start()

    def say(self, line: str) -> None:
        self._live.console.print(line, markup=False, highlight=False, soft_wrap=True)

    def show(self, view: Mapping[str, Any]) -> None:
        self._live.update(live_panel(view))

    def stop(self) -> None:
        if self._live.is_started:
            self._live.stop()


def live_panel(view: Mapping[str, Any]) -> Any:
    """The run's state as a ``rich`` table."""
    from rich.table import Table

    run = view["run"]
    table = Table(title=f"{run['definition_title']} · run {run['id']}", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    health = run["health"]
    colour = {"ok": "green", "degraded": "yellow"}.get(health, "red")
    table.add_row("status", f"{run['status']} ([{colour}]{health}[/{colour}])")
    table.add_row("phase", run["current_phase"] or "-")
    table.add_row("waiting", (run["waiting_on"] or {}).get("sentence") or "on nothing")
    gate = view.get("gate")
    if gate is not None and gate.get("kind") == "on":
        table.add_row("gate", f"{gate['condition']}: {gate['tally']} of {gate['needed']}")
    for row in view["budget"]:
        cap = "∞" if row["cap"] is None else row["cap"]
        table.add_row("budget", f"{row['dimension']} {row['consumed']} / {cap}")
    held = [r for r in view["resources"] if r["status"] in ("pending", "confirmed")]
    table.add_row("held", f"{len(held)} resource(s) out in the world")
    return table
