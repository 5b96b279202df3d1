"""RCON: the Quake III remote console over UDP, as OpenArena's ``ioq3ded`` speaks it.

A request is one datagram, ``\\xff\\xff\\xff\\xffrcon PASSWORD COMMAND``; the answer is the
console output the command printed, in one or more datagrams each starting
``\\xff\\xff\\xff\\xffprint\\n`` (the server flushes its buffer into a new datagram when it
fills, so a long answer such as ``serverinfo`` arrives in pieces, with no sequence number).
Nothing says an answer is complete: the client collects datagrams until none has come for
``settle`` seconds. Nothing says a request arrived either: no answer within ``timeout`` is
:class:`NoAnswer`. A wrong password is answered ``Bad rconpassword.``: :class:`BadPassword`.

The server rations rcon per client address, silently: a burst of ten requests, then one a
second (ioquake3's leaky bucket; a request past it is dropped and reads as no answer). The
client keeps to a bucket of its own a little inside that (``burst`` requests, then one every
``refill`` seconds), waiting rather than sending what would be dropped.
"""

from __future__ import annotations

import asyncio
import re
import time

PREFIX = b"\xff\xff\xff\xff"
PRINT = PREFIX + b"print\n"
#: ``^1``, ``^7``, ``^a``: Quake III colour escapes, dropped from every answer.
COLOUR = re.compile(r"\^[0-9A-Za-z]")
#: A word the server would split or run as a second command (``;``, quotes, newlines).
UNSAFE = re.compile(r"[;\"\n\r\x00]")


class RconError(Exception):
    """RCON failed; the message says what happened and where."""


class NoAnswer(RconError):
    """No answer came within the timeout (after any retries)."""


class BadPassword(RconError):
    """The server answered ``Bad rconpassword.``."""


def strip_colours(text: str) -> str:
    """``text`` without Quake III colour escapes (``"800^7"`` -> ``"800"``)."""
    return COLOUR.sub("", text)


class _Collector(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.datagrams: asyncio.Queue[bytes] = asyncio.Queue()

    def datagram_received(self, data: bytes, addr: object) -> None:
        self.datagrams.put_nowait(data)

    def error_received(self, exc: Exception) -> None:
        # A refused port (ICMP unreachable) reads as silence: the timeout says it.
        pass


class Rcon:
    """One server's remote console. ``command`` is safe to call concurrently: requests go
    one at a time, so answers never interleave."""

    def __init__(
        self,
        host: str,
        port: int,
        password: str,
        *,
        timeout: float = 2.0,
        retries: int = 2,
        settle: float = 0.15,
        burst: int = 8,
        refill: float = 1.05,
    ) -> None:
        self.host, self.port, self.password = host, port, password
        self.timeout, self.retries, self.settle = timeout, retries, settle
        self.burst, self.refill = burst, refill
        self._lock = asyncio.Lock()
        self._tokens = float(burst)
        self._stamp = time.monotonic()
        #: When the server last answered (``time.monotonic()``; 0: never).
        self.answered_at = 0.0

    @property
    def where(self) -> str:
        return f"{self.host}:{self.port}"

    async def command(self, text: str, *, idempotent: bool, settle: float | None = None) -> str:
        """Run ``text`` on the server's console and answer what it printed, colours
        stripped. A read (``idempotent``) is asked again up to ``retries`` times when no
        answer comes; anything else is sent once, because a lost answer may hide a command
        that ran. ``settle`` overrides the client's for an answer known to be long. Raises
        :class:`NoAnswer`, :class:`BadPassword`, or :class:`RconError` for a command that
        cannot be sent safely."""
        if UNSAFE.search(text) or UNSAFE.search(self.password):
            raise RconError(f"refusing to send {text!r}: it holds ; or a quote or a newline")
        tries = 1 + (self.retries if idempotent else 0)
        async with self._lock:
            for _ in range(tries):
                answer = await self._once(text, self.settle if settle is None else settle)
                if answer is not None:
                    break
            else:
                sent = f"asked {tries} times" if tries > 1 else "sent once, not again"
                raise NoAnswer(
                    f"no answer from the OpenArena server at {self.where} within "
                    f"{self.timeout:g} s ({sent})"
                )
        if answer.strip() == "Bad rconpassword.":
            raise BadPassword(f"the OpenArena server at {self.where} refused the rcon password")
        return strip_colours(answer)

    async def _ration(self) -> None:
        """Wait for a token of the client's bucket, and spend it."""
        while True:
            now = time.monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._stamp) / self.refill)
            self._stamp = now
            if self._tokens >= 1:
                self._tokens -= 1
                return
            await asyncio.sleep((1 - self._tokens) * self.refill)

    async def _once(self, text: str, settle: float) -> str | None:
        """One request and its answer, or None when nothing that reads as an answer came."""
        await self._ration()
        loop = asyncio.get_running_loop()
        transport, protocol = await loop.create_datagram_endpoint(
            _Collector, remote_addr=(self.host, self.port)
        )
        try:
            transport.sendto(PREFIX + f"rcon {self.password} {text}".encode("latin-1"))
            pieces: list[bytes] = []
            deadline = time.monotonic() + self.timeout
            while True:
                # The first piece may take the whole timeout; each later one must follow
                # within ``settle``, or the answer is complete.
                left = (deadline - time.monotonic()) if not pieces else settle
                try:
                    data = await asyncio.wait_for(protocol.datagrams.get(), max(left, 0))
                except TimeoutError:
                    break
                if data.startswith(PRINT):  # anything else is not an answer: ignore it
                    pieces.append(data[len(PRINT) :])
            if not pieces:
                return None
            self.answered_at = time.monotonic()
            return b"".join(pieces).decode("latin-1")
        finally:
            transport.close()
