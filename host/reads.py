"""The run console's readers' share of a host: a budget of reads at once, and the consoles
last built."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Any

#: How many run consoles a host keeps built (the least recently read dropped first), one per
#: run and log shape; a 100-step run's console is about 0.3 MB in memory.
CONSOLES_KEPT = 64


class ConsoleReads:
    """The run console's readers' share of a host: at most ``concurrency`` consoles read at
    once (the rest wait their turn in arrival order), and the consoles last built, each with
    the marks of the rows it was built from.

    The engine shares the event loop and the database pool with every reader. Readers that
    ask as fast as they are answered would otherwise take most of both: reading a console is
    a dozen statements and milliseconds of Python. A console read again with nothing changed
    is answered from memory after two small reads (the run's row and its marks).
    """

    def __init__(self, concurrency: int, kept: int = CONSOLES_KEPT) -> None:
        self.slots = asyncio.Semaphore(concurrency)
        self.kept = kept
        self._built: OrderedDict[tuple[int, int | None], tuple[Any, dict[str, Any]]] = OrderedDict()

    def recall(self, run_id: int, log_tail: int | None, marks: Any) -> dict[str, Any] | None:
        """The console kept for ``(run_id, log_tail)`` when it was built at ``marks``."""
        found = self._built.get((run_id, log_tail))
        if found is None or found[0] != marks:
            return None
        self._built.move_to_end((run_id, log_tail))
        return found[1]

    def keep(self, run_id: int, log_tail: int | None, marks: Any, data: dict[str, Any]) -> None:
        self._built[(run_id, log_tail)] = (marks, data)
        self._built.move_to_end((run_id, log_tail))
        while len(self._built) > self.kept:
            self._built.popitem(last=False)
