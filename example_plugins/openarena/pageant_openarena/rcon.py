"""RCON: the Quake III remote console over UDP, as OpenArena's ``ioq3ded`` speaks it.

A request is one datagram, ``\\xff\\xff\\xff\\xffrcon PASSWORD COMMAND``; the answer is the
console output the command printed, in one or more datagrams each starting
``\\xff\\xff\\xff\\xffprint\\n`` (the server flushes its buffer into a new datagram when it
fills, so a long answer such as ``serverinfo`` arrives in pieces, with no sequence number).
Nothing says an answer is complete: the client collects datagrams until none has come for
``settle`` seconds. Nothing says a request arrived either: no answer within ``timeout`` is
:class:`NoAnswer`. A wrong password is answered ``Bad rconpassword.``: :class:`BadPassword`.

The server rations rcon per client address, silently (see :mod:`.pacing`): a request past
the ration is dropped and reads as no answer. The client keeps to a :class:`~.pacing.Bucket`
of the same size, waiting rather than sending what would be dropped, and, since another
client on the same address may have spent the ration, a read that got no answer within
``resend`` seconds is sent again (up to its whole wait): the first copy answered is the
answer.
"""

from __future__ import annotations

import asyncio
import random
import re
import time

from .pacing import Bucket, Slots

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
        resend: float = 0.5,
        bucket: Bucket | None = None,
    ) -> None:
        self.host, self.port, self.password = host, port, password
        self.timeout, self.retries, self.settle = timeout, retries, settle
        self.resend = min(resend, timeout)
        self.bucket = bucket if bucket is not None else Bucket()
        self.slots = Slots(self.bucket.per_second)
        self._lock = asyncio.Lock()
        #: When the server last answered (``time.monotonic()``; 0: never).
        self.answered_at = 0.0
        #: Datagrams sent, and how many of them the server answered (for figures and tests).
        self.sent = 0
        self.answered = 0

    @property
    def where(self) -> str:
        return f"{self.host}:{self.port}"

    async def command(
        self,
        text: str,
        *,
        idempotent: bool,
        settle: float | None = None,
        within: float | None = None,
    ) -> str:
        """Run ``text`` on the server's console and answer what it printed, colours
        stripped. A read (``idempotent``) is sent again every ``resend`` seconds while no
        answer comes, for up to ``timeout`` times ``1 + retries``; anything else is sent
        once and waited for ``within`` seconds (default ``timeout``), because a lost answer
        may hide a command that ran. ``settle`` overrides the client's for an answer known
        to be long. Raises :class:`NoAnswer`, :class:`BadPassword`, or :class:`RconError`
        for a command that cannot be sent safely."""
        if UNSAFE.search(text) or UNSAFE.search(self.password):
            raise RconError(f"refusing to send {text!r}: it holds ; or a quote or a newline")
        wait = self.timeout * (1 + self.retries) if idempotent else (within or self.timeout)
        async with self._lock:
            answer = await self._ask(
                text,
                self.settle if settle is None else settle,
                wait,
                self.resend if idempotent else None,
            )
        if answer is None:
            sent = f"sent again for {wait:g} s" if idempotent else "sent once, not again"
            raise NoAnswer(
                f"no answer from the OpenArena server at {self.where} within {wait:g} s ({sent})"
            )
        if answer.strip() == "Bad rconpassword.":
            raise BadPassword(f"the OpenArena server at {self.where} refused the rcon password")
        return strip_colours(answer)

    async def _ask(self, text: str, settle: float, wait: float, resend: float | None) -> str | None:
        """One request and its answer, or None when nothing that reads as an answer came
        within ``wait``. Every ``resend`` seconds without an answer the request goes again,
        on the same socket, so an answer to any copy is taken."""
        loop = asyncio.get_running_loop()
        transport, protocol = await loop.create_datagram_endpoint(
            _Collector, remote_addr=(self.host, self.port)
        )
        datagram = PREFIX + f"rcon {self.password} {text}".encode("latin-1")
        copies = 0
        try:
            await self.bucket.take()
            await asyncio.sleep(self.slots.wait())
            deadline = time.monotonic() + wait
            sent_at = time.monotonic()
            transport.sendto(datagram)
            copies = 1
            pieces: list[bytes] = []
            while True:
                if pieces:
                    # Each later piece must follow within ``settle``, or the answer is whole.
                    left = settle
                else:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    if resend is not None:
                        # Jittered, so copies never keep step with a client polling at a
                        # fixed beat (which would take the freed slot first, every time).
                        left = min(left, resend * random.uniform(0.5, 1.0))
                try:
                    data = await asyncio.wait_for(protocol.datagrams.get(), left)
                except TimeoutError:
                    if pieces:
                        break
                    if resend is None or time.monotonic() >= deadline:
                        continue
                    # No answer yet: that copy was dropped (or is late), and did not count.
                    self.slots.lost()
                    self.bucket.give_back()
                    await self.bucket.take()
                    sent_at = time.monotonic()
                    transport.sendto(datagram)
                    copies += 1
                    continue
                if data.startswith(PRINT):  # anything else is not an answer: ignore it
                    pieces.append(data[len(PRINT) :])
            self.sent += copies
            if not pieces:
                self.slots.lost()
                self.bucket.give_back()
                return None
            self.slots.won(sent_at)
            self.answered += 1
            self.answered_at = time.monotonic()
            return b"".join(pieces).decode("latin-1")
        finally:
            transport.close()
