"""beacon: a fixture plugin that opens what a game bridge opens at startup - an HTTP
endpoint for the game to call and a heartbeat task - and closes both at shutdown.

``BEACON_NOTES`` (a file path, optional) gets a line for each start and each shutdown, so a
test can see both happened, in one process.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import aiohttp
from aiohttp import web

from pageant import hookimpl


def _note(text: str) -> None:
    path = os.environ.get("BEACON_NOTES")
    if path:
        with open(path, "a") as notes:
            notes.write(text + "\n")


class Beacon:
    PLUGIN_INFO = {"owner": "beacon", "contract": "^1.3"}  # noqa: RUF012 - read by the loader

    def __init__(self) -> None:
        self.runner: web.AppRunner | None = None
        self.heartbeat: asyncio.Task[None] | None = None

    @hookimpl
    def pageant_startup(self, context: Any) -> None:
        loop = asyncio.get_running_loop()
        self.opening = loop.create_task(self._open())
        self.heartbeat = loop.create_task(self._beat())
        _note("started")

    async def _open(self) -> None:
        app = web.Application()
        app.router.add_get("/", lambda request: web.Response(text="beacon"))
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = self.runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}/"

    async def _beat(self) -> None:
        # The game's side, played here: it calls the endpoint, keeping its connection.
        await self.opening
        self.session = aiohttp.ClientSession()
        while True:
            async with self.session.get(self.url) as answer:
                await answer.read()
            await asyncio.sleep(0.02)

    @hookimpl
    async def pageant_shutdown(self) -> None:
        await self.opening
        if self.heartbeat is not None:
            self.heartbeat.cancel()
            await asyncio.gather(self.heartbeat, return_exceptions=True)
        await self.session.close()
        if self.runner is not None:
            await self.runner.cleanup()
        _note("closed")
