"""A TCP proxy in front of a database server that a test can cut and black-hole.

``open`` forwards every connection to the server; ``refuse`` closes every connection and
stops listening (a client meets "connection refused"); ``black_hole`` keeps listening and
accepts, but forwards nothing either way on new or existing connections (a client waits for
an answer that never comes); ``open`` again restores the forwarding on the same port.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from sqlalchemy.engine import make_url


class DatabaseProxy:
    def __init__(self, server_host: str, server_port: int) -> None:
        self.target = (server_host, server_port)
        self.port = 0
        self.mode = "open"
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        #: Set while data may pass (open); cleared while black-holed.
        self._flowing = asyncio.Event()
        self._flowing.set()

    @classmethod
    def before(cls, url: str) -> DatabaseProxy:
        parsed = make_url(url)
        return cls(parsed.host or "127.0.0.1", parsed.port or 3306)

    def url_of(self, url: str) -> str:
        """``url`` led through this proxy."""
        return (
            make_url(url)
            .set(host="127.0.0.1", port=self.port)
            .render_as_string(hide_password=False)
        )

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def open(self) -> None:
        self.mode = "open"
        self._flowing.set()
        if self._server is None:
            await self.start()

    async def refuse(self) -> None:
        self.mode = "refuse"
        self._flowing.set()  # held data is dropped with its connection
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        self._drop_all()

    async def black_hole(self) -> None:
        self.mode = "black_hole"
        self._flowing.clear()
        if self._server is None:
            await self.start()

    async def close(self) -> None:
        await self.refuse()

    def _drop_all(self) -> None:
        for writer in list(self._writers):
            writer.close()
        self._writers.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            if self.mode == "black_hole":
                await reader.read()  # accept, and never answer
                return
            up_reader, up_writer = await asyncio.open_connection(*self.target)
            self._writers.add(up_writer)
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        except (ConnectionError, OSError, asyncio.CancelledError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await reader.read(65536):
                await self._flowing.wait()  # held: nothing passes while black-holed
                if self.mode == "refuse":
                    break
                writer.write(data)
                await writer.drain()
        writer.close()


class ThreadedProxy:
    """A :class:`DatabaseProxy` on an event loop of its own thread, for a test that waits on
    processes (its own loop blocked) while the proxy must keep forwarding."""

    def __init__(self, url: str) -> None:
        import threading

        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.proxy = DatabaseProxy.before(url)
        self._do(self.proxy.start())
        self.url = self.proxy.url_of(url)

    def _do(self, work: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(work, self._loop).result(30)

    def open(self) -> None:
        self._do(self.proxy.open())

    def refuse(self) -> None:
        self._do(self.proxy.refuse())

    def black_hole(self) -> None:
        self._do(self.proxy.black_hole())

    def close(self) -> None:
        self._do(self.proxy.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
