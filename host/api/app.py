"""The app factory: ``make_app(host)`` builds the aiohttp application over one host.

Routes come from every module in :mod:`pageant.api.routes` (each exposes ``routes``, a
:class:`~pageant.api.routing.RouteTable`); the OpenAPI document is built from the same list.
The web console (:mod:`pageant.console`) is mounted on the same app, outside ``/api/``.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import pkgutil
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from pageant.api import middleware
from pageant.api.keys import HOST, ROUTES
from pageant.api.malformed import quiet_malformed_requests
from pageant.api.routing import Route
from pageant.console import app as console
from pageant.engine import Engine
from pageant.hosting import Host


def all_routes() -> list[Route]:
    import pageant.api.routes as package

    found: list[Route] = []
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        table = getattr(module, "routes", None)
        if table is not None:
            found.extend(table.routes)
    return found


#: The most fields a console form may post: the editor's form of a spec at its bounds (a
#: fan-out of 1,000 param sets, hundreds of steps) has many more than aiohttp's default of
#: 1,000, which refused it (413). The 1 MiB body bound still holds.
MAX_FORM_FIELDS = 50_000


def _form_fields() -> dict[str, Any]:
    """The app's bound on a form's fields, where the installed aiohttp has one (3.14 on)."""
    if "client_max_fields" in inspect.signature(web.Application).parameters:
        return {"client_max_fields": MAX_FORM_FIELDS}
    return {}


def make_app(host: Host, *, run_engine: bool = True) -> web.Application:
    """Build the app. Its cleanup context opens the database, starts the plugins and, with
    ``run_engine``, the engine task - and stops them in reverse order."""
    quiet_malformed_requests()
    # The console's middleware is innermost: it renders its own pages' errors as HTML and
    # passes every /api/ request straight through to the API's JSON envelope.
    # Admission is outermost: a request waiting its turn holds no connection and has not
    # been authenticated yet.
    app = web.Application(
        middlewares=[
            middleware.admission(
                host.settings.http_concurrency,
                middleware.readers_pace(host.settings.console_reads_per_second),
                # A console reader's request is handled while it waits its turn, up to half
                # the age of what is kept ahead of it; its answer is held until the turn.
                read_ahead=host.settings.console_max_age_ms / 2000,
            ),
            middleware.fresh_after_writes,
            middleware.errors,
            middleware.bearer,
            console.pages,
        ],
        **_form_fields(),
    )
    app[HOST] = host
    routes = all_routes()
    app[ROUTES] = routes
    for route in routes:
        app.router.add_route(route.method, route.path, route.handler)
    console.mount(app, host)

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        if not host.started:
            await host.start_plugins()
        runner = None
        watch = None
        if run_engine:
            # The one reconnect the host can see is its own start: ask every plugin which
            # of its recorded resources are still in the world before the first tick.
            await host.reconcile_all()
            runner = await start_engine(host)
            # The game link's servers go down by silence: someone must look at the clock.
            watch = asyncio.get_running_loop().create_task(host.link.watch())
        yield
        if watch is not None:
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch
        if runner is not None:
            await runner.stop()
        await host.close()

    app.cleanup_ctx.append(lifecycle)
    return app


async def start_engine(host: Host) -> Engine:
    """Build the host's engine (it attaches itself to the host) and start its task."""
    engine = Engine(host)
    await engine.start()
    return engine
