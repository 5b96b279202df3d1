"""``pageant serve``: bind, then start the engine; on SIGTERM or SIGINT, stop cleanly.

The order matters to an operator: a port that is taken is reported before the engine has
touched the database, and a stop lets the engine finish (within its grace) while the HTTP
API still answers ``/healthz``, then closes the API.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import json
import logging
import logging.handlers
import os
import queue
import signal
import sys
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import click

from pageant.cli.common import require_schema, run, settings_options
from pageant.support.settings import Settings

log = logging.getLogger("pageant")

#: Attributes every LogRecord has; anything else on a record is a field of the line.
_STANDARD = frozenset(
    vars(logging.LogRecord("x", logging.INFO, "x", 0, "x", None, None)).keys()
    | {"message", "asctime", "taskName"}
)


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    """The structured fields passed with ``extra=`` (run_id, step_id, action, outcome...)."""
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}


def _stamp(record: logging.LogRecord) -> str:
    instant = datetime.fromtimestamp(record.created, UTC)
    return instant.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ts, level, logger, msg, the record's fields, exc if any."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": _stamp(record),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
            **fields_of(record),
        }
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, ensure_ascii=False)


class KeyValueFormatter(logging.Formatter):
    """``ts=... level=... logger=... msg="..." run_id=1 ...``; a traceback follows indented."""

    def format(self, record: logging.LogRecord) -> str:
        pairs = {
            "ts": _stamp(record),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
            **fields_of(record),
        }
        text = " ".join(f"{key}={_kv(value)}" for key, value in pairs.items())
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


def _kv(value: Any) -> str:
    text = str(value)
    if text and not any(c in text for c in ' "=\\\n'):
        return text
    return json.dumps(text, ensure_ascii=False)


#: The least time the plugins' ``pageant_shutdown`` get when the engine's stop took the grace.
PLUGIN_SHUTDOWN_FLOOR_SECONDS = 1.0

#: glibc's ``mallopt`` parameter for the most arenas its allocator makes (``M_ARENA_MAX``).
_M_ARENA_MAX = -8

#: The arenas ``pageant serve`` lets glibc's allocator make, unless ``MALLOC_ARENA_MAX`` is set.
MALLOC_ARENAS = 2


def limit_malloc_arenas(
    count: int = MALLOC_ARENAS, *, environ: Mapping[str, str] = os.environ
) -> bool:
    """Let glibc's allocator make at most ``count`` arenas; True if it took the limit.

    glibc gives each new thread an arena of its own, up to eight a core, and memory freed in
    one arena serves only that arena again. The host keeps a thread for each SQLite
    connection of its pool, so on SQLite a long-running server's memory crept up a megabyte
    every few thousand runs as twenty arenas each kept their own free pages. Call it before
    the threads start. Nothing is done where ``MALLOC_ARENA_MAX`` is set (glibc read it at
    start: the operator's word stands) or where the C library is not glibc.
    """
    if "MALLOC_ARENA_MAX" in environ or not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc: no mallopt, or none to reach
        return False
    return bool(mallopt(_M_ARENA_MAX, count))


class LineQueueHandler(logging.handlers.QueueHandler):
    """Hands a record to the log's thread with its message made, and nothing else done.

    The standard ``QueueHandler.prepare`` formats the whole line where it is logged (on the
    event loop, which is what the queue is for) and drops the exception, so the JSON line's
    ``exc`` would be lost into ``msg``. Only the message is made here, so that arguments
    changed after the call cannot change the line; the thread formats the rest.
    """

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        record.msg = record.getMessage()
        record.args = None
        return record


def configure_logging(settings: Settings) -> logging.handlers.QueueListener:
    """Log to standard error in ``log_format`` at ``log_level``, from a thread of its own.

    Every change of a run or a step is a line here as well as in the run log, so the lines
    are written as the engine works: the root logger's one handler puts each record on a
    queue, and a ``QueueListener`` formats and writes it off the event loop. Answers the
    listener, started; the caller stops it (which writes every line still queued) once the
    host has stopped.
    """
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if settings.log_format == "json" else KeyValueFormatter())
    lines: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
    listener = logging.handlers.QueueListener(lines, handler, respect_handler_level=True)
    root = logging.getLogger()
    root.handlers[:] = [LineQueueHandler(lines)]
    root.setLevel(settings.log_level)
    # Alembic announces its dialect every time /healthz reads the schema revision, and
    # aiohttp's access log is a line per request: both are for debugging, not operating.
    logging.getLogger("alembic").setLevel(logging.WARNING)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    listener.start()
    return listener


async def serve_host(host: Any, settings: Settings, *, say: Callable[[str], Any] = print) -> None:
    """Serve ``host`` until SIGTERM or SIGINT, then stop cleanly (see the module doc)."""
    from aiohttp import web

    from pageant.api.app import make_app, start_engine
    from pageant.cli.operator import port_in_use
    from pageant.engine.outside import watch_outside_writes

    app = make_app(host, run_engine=False)
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, settings.host, settings.port)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise port_in_use(settings.host, settings.port, exc) from exc

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def _on_signal(signum: int) -> None:
        # Set here, synchronously: from this instant on nothing is claimed.
        if host.engine is not None:
            host.engine.stopping = True
        if not stop.is_set():
            log.info(
                "received %s; stopping (grace %.0f s)",
                signal.Signals(signum).name,
                settings.stop_grace_seconds,
            )
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, _on_signal, signum)
    engine = None
    # What is loaded by now (the plugins, the app, the libraries) lives as long as the
    # process: set apart from the collector, an oldest-generation collection no longer walks
    # it, and such a pause under load stays a few milliseconds instead of tens.
    gc.freeze()
    watches: list[asyncio.Task[None]] = []
    try:
        engine = await start_engine(host)
        # The game link's servers go down by silence: someone must look at the clock (as
        # make_app does when it runs the engine itself).
        watches.append(loop.create_task(host.link.watch(), name="pageant-link-watch"))
        if settings.outside_wake_ms:
            watches.append(
                asyncio.create_task(
                    watch_outside_writes(host, engine, settings.outside_wake_ms / 1000),
                    name="pageant-outside-writes",
                )
            )
        say(f"pageant serving on http://{settings.host}:{_bound_port(site)} as {host.identity}")
        await stop.wait()
    finally:
        began_stopping = loop.time()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
        for watch in watches:
            watch.cancel()
        await asyncio.gather(*watches, return_exceptions=True)
        if engine is not None:
            await engine.stop()
        # The plugins' pageant_shutdown gets what the engine's stop left of the grace (at
        # least PLUGIN_SHUTDOWN_FLOOR_SECONDS), in this loop, before the API closes.
        left = settings.stop_grace_seconds - (loop.time() - began_stopping)
        await host.stop_plugins(max(PLUGIN_SHUTDOWN_FLOOR_SECONDS, left))
        await runner.cleanup()
    log.info("stopped cleanly")


def _bound_port(site: Any) -> int:
    server = getattr(site, "_server", None)
    sockets = getattr(server, "sockets", None) or []
    return sockets[0].getsockname()[1] if sockets else 0


@click.command()
@settings_options
def serve(settings: Settings) -> None:
    """Run the host: the engine and the HTTP API.

    The address is bound before the engine starts. SIGTERM or SIGINT stops cleanly: nothing
    new is claimed, steps in perform get ``stop_grace_seconds`` to finish, every claim is
    handed back, and the exit status is 0. Exit 1: an error named on one line.
    """
    from pageant.cli.operator import check_sqlite_exists
    from pageant.cli.plugins import plugin_lines
    from pageant.cli.running import note_started, note_stopped
    from pageant.hosting import Host
    from pageant.plugins.loader import plugin_listing

    listener = configure_logging(settings)
    try:
        limit_malloc_arenas()
        host = Host(settings)

        async def _check() -> None:
            try:
                check_sqlite_exists(settings.database_url)
                await require_schema(host.db, settings.database_url)
            finally:
                await host.close()  # this loop ends here; the app opens its own pool

        run(_check())

        for line in plugin_lines(plugin_listing(host.plugins)):
            click.echo(line, err=True)
        # Noted once the database is known to be there, so a command run from another folder
        # can say where it is (pageant.cli.running); marked stopped however serving ends.
        noted = note_started(settings.database_url)
        try:
            run(serve_host(host, settings, say=click.echo))
        finally:
            note_stopped(noted)
    finally:
        # The listener's thread is a daemon: lines still queued at exit would be lost
        # without this (the last, "stopped cleanly", always is one).
        listener.stop()
