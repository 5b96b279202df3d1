"""``pageant demo --game openarena``: the Low-Gravity Frenzy on a real OpenArena server.

The same real parts as the shard's demo (a fresh database migrated as ``db upgrade`` does,
every installed plugin through the real loader, the switchboard opened and the event
published as the admin API does, the engine ticking) with a real game under them: a
private ``ioq3ded`` in a temporary folder, on 127.0.0.1 and a free port. The Frenzy's own
file (``example_plugins/openarena/events/frenzy.json``, shipped in the plugin's folder) is
the event. Time is not compressed: the bots fight in real time, and the hunt takes tens of
seconds. At the end the server has no bot and its gravity is 800, as it was.

``--faults`` kills the game server (SIGKILL) once the hunt begins and starts it again a few
seconds later, empty: the plugin reports it down, then back; reconcile finds the bots gone
and the lease's restore finds gravity changed (``drifted``, left alone). To let the hunt
finish, the demo then adds three bots of the game's own by hand, and kicks them at the end.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from pageant.db.migrate import upgrade
from pageant.hosting import Host
from pageant.runs.console import console
from pageant.runs.create import start_now
from pageant.states import RUN_ENDED
from pageant.support.clock import SystemClock
from pageant.support.settings import Settings

from .showcase import (
    STAFF_ACTOR,
    DemoFailed,
    DemoResult,
    Say,
    Show,
    enable_action,
    look,
    publish,
    require_empty,
)

#: The switchboard the demo opens: action -> its per-run caps.
SWITCHBOARD: dict[str, dict[str, int | None]] = {
    "openarena.bots.add": {"openarena.bots": 3},
    "core.lease": {},
}
#: How long the demo waits for its run to end and be cleaned up (real seconds).
TIMEOUT_SECONDS = 300.0
POLL_SECONDS = 0.2
#: How long ``--faults`` keeps the game server down (real seconds): longer than the plugin
#: takes to notice (probe_seconds + rcon_timeout_seconds x (1 + rcon_retries), 5 s here).
DOWN_SECONDS = 10.0
NEEDS_PLUGIN = (
    "pageant demo --game openarena needs the pageant-openarena plugin; install it with: "
    "pip install -e ./example_plugins/openarena"
)


def _plugin_module(name: str) -> Any:
    try:
        return importlib.import_module(f"pageant_openarena.{name}")
    except ModuleNotFoundError:
        raise DemoFailed(NEEDS_PLUGIN) from None


def require_game() -> Any:
    """The plugin's ``dedicated`` module, once the plugin and the game server are both
    installed; else :class:`DemoFailed` in one line saying how to install what is missing."""
    dedicated = _plugin_module("dedicated")
    if dedicated.find_engine() is None:
        raise DemoFailed(
            "pageant demo --game openarena needs OpenArena's server (ioq3ded); on Debian: "
            + dedicated.INSTALL
        )
    return dedicated


def frenzy() -> dict[str, Any]:
    """The Low-Gravity Frenzy: the plugin's ``events/frenzy.json``."""
    package = Path(_plugin_module("rcon").__file__).resolve().parent
    found = package.parent / "events" / "frenzy.json"
    if not found.is_file():
        raise DemoFailed(f"the Low-Gravity Frenzy is missing: {found} does not exist")
    return dict(json.loads(found.read_text()))


async def run_openarena_demo(
    settings: Settings,
    *,
    say: Say = lambda line: None,
    show: Show = lambda view: None,
    timeout: float = TIMEOUT_SECONDS,
    faults: bool = False,
) -> DemoResult:
    """Start a private game server, run the Frenzy on it, stop the server; answer the run
    with its console. Raises :class:`DemoFailed` when the plugin or the game server is not
    installed, or the configured database is not empty."""
    dedicated = require_game()
    event = frenzy()
    with tempfile.TemporaryDirectory(prefix="pageant-openarena-") as folder:
        arena = dedicated.Dedicated(Path(folder) / "arena")
        url = (
            settings.database_url
            if "database_url" in settings.model_fields_set
            else f"sqlite+aiosqlite:///{Path(folder) / 'demo.db'}"
        )
        say(f"pageant demo: the {event['title']}, run on a real OpenArena server")
        await arena.start()
        say(f"game      ioq3ded on 127.0.0.1:{arena.port}, map {arena.map}, log {arena.log_path}")
        table = {
            **settings.plugin_table("openarena"),
            "rcon_port": arena.port,
            "rcon_password": arena.password,
            "log_path": str(arena.log_path),
            "state_dir": folder,
            "rcon_timeout_seconds": 1.0,
            "probe_seconds": 2.0,
        }
        tables = {"openarena": table}
        host = Host(
            settings.model_copy(update={"database_url": url}).with_plugin_tables(tables),
            clock=SystemClock(),
        )
        try:
            return await _demo(host, url, arena, event, say, show, timeout, faults)
        finally:
            for record in host.plugins.loaded():
                stop = getattr(record.plugin, "stop", None)
                if record.owner == "openarena" and stop is not None:
                    await stop()
            await host.close()
            await arena.stop()


async def _demo(
    host: Host,
    url: str,
    arena: Any,
    event: dict[str, Any],
    say: Say,
    show: Show,
    timeout: float,
    faults: bool,
) -> DemoResult:
    from pageant.engine import Engine

    await require_empty(host.db, url)
    await upgrade(host.db)
    await host.start_plugins()
    if "openarena.bots.add" not in host.registry.actions:
        raise DemoFailed(NEEDS_PLUGIN)
    for action_id, caps in SWITCHBOARD.items():
        await enable_action(host, action_id, caps)
        say(f"switch    {action_id} enabled")
    definition_id = await _publish(host, event)
    say(f'event     {definition_id} "{event["title"]}", created and published')
    engine = Engine(host)
    await engine.start()
    house: list[str] = []
    try:
        began = time.monotonic()
        run_id, _ = await start_now(host, definition_id, scope="", actor=STAFF_ACTOR)
        say(f"run       {run_id}, started now")
        status: str | None = None
        seen, faulted = 0, not faults
        try:
            async with asyncio.timeout(timeout):
                while True:
                    view, seen = await look(host, run_id, seen, say, show)
                    run = view["run"]
                    if not faulted and run["current_phase"] == "hunt":
                        faulted = True
                        house = await _outage(arena, say)
                    if run["status"] in RUN_ENDED and run["cleanup_status"] != "pending":
                        status = str(run["status"])
                        break
                    await asyncio.sleep(POLL_SECONDS)
        except TimeoutError:
            status = None
        took = time.monotonic() - began
    finally:
        await engine.stop()
        rcon = arena.rcon()
        for name in house:
            await rcon.command(f"kick {name}", idempotent=True)
    found = await console(host, run_id)
    show(found)
    answer = await arena.rcon().command("g_gravity", idempotent=True)
    say(f"game      after the run: {answer.strip()}; status lists no bot")
    return DemoResult(
        run_id=run_id, status=status, timeout=timeout, console=found, wall_seconds=took
    )


async def _outage(arena: Any, say: Say) -> list[str]:
    """Kill the game server, start it again empty, and add the game's own bots by hand so
    the hunt can go on; answers their names (kicked at the end)."""
    say("faults    the game server is killed (SIGKILL) mid-hunt")
    arena.kill()
    await asyncio.sleep(DOWN_SECONDS)
    await arena.start()
    say(f"faults    the game server is back after {DOWN_SECONDS:g} s: no bots, gravity 800")
    rcon = arena.rcon()
    names = ["HouseSarge", "HouseGrunt", "HouseMajor"]
    for name, character in zip(names, ("sarge", "grunt", "major"), strict=True):
        await rcon.command(f"addbot {character} 3 free 0 {name}", idempotent=False)
    say("faults    the game's admin adds three bots of its own, so the hunt goes on")
    return names


async def _publish(host: Host, event: dict[str, Any]) -> int:
    return await publish(
        host, event["title"], event["spec"], description=event.get("description", "")
    )
