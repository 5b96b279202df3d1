"""A fake OpenArena remote console on a local UDP port: answers each request as a test
scripts it, and records what it was asked."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

PREFIX = b"\xff\xff\xff\xff"

#: What a script answers for one request: a list of (delay seconds, datagram) to send back.
Reply = list[tuple[float, bytes]]


def printed(text: str) -> bytes:
    return PREFIX + b"print\n" + text.encode("latin-1")


@dataclass
class FakeRcon:
    script: Callable[[str, str, int], Reply]
    asked: list[tuple[float, str, str]] = field(default_factory=list)
    port: int = 0


class _Protocol(asyncio.DatagramProtocol):
    def __init__(self, fake: FakeRcon) -> None:
        self.fake = fake
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a datagram endpoint's transport

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        assert data.startswith(PREFIX + b"rcon ")
        _, password, command = data[len(PREFIX) :].decode("latin-1").split(" ", 2)
        self.fake.asked.append((time.monotonic(), password, command))
        for delay, datagram in self.fake.script(password, command, len(self.fake.asked)):
            asyncio.get_running_loop().call_later(delay, self._send, datagram, addr)

    def _send(self, datagram: bytes, addr: tuple[str, int]) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.sendto(datagram, addr)


@asynccontextmanager
async def fake_rcon(script: Callable[[str, str, int], Reply]) -> AsyncIterator[FakeRcon]:
    """Serve ``script(password, command, nth_request)`` on 127.0.0.1 for the block."""
    fake = FakeRcon(script)
    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_datagram_endpoint(
        lambda: _Protocol(fake), local_addr=("127.0.0.1", 0)
    )
    fake.port = transport.get_extra_info("sockname")[1]
    try:
        yield fake
    finally:
        transport.close()
