"""The run console's readers' share of a host: a budget of reads at once."""

from __future__ import annotations

import asyncio


class ConsoleReads:
    """The run console's readers' share of a host: at most ``concurrency`` consoles read at
    once; the rest wait their turn in arrival order.

    The engine shares the event loop and the database pool with every reader. Readers that
    ask as fast as they are answered would otherwise take most of both: reading a console is
    a dozen statements and milliseconds of Python.
    """

    def __init__(self, concurrency: int) -> None:
        self.slots = asyncio.Semaphore(concurrency)
