"""Keeping work that is not the host's out of the host's log.

A rehearsal drives the real engine over a made-up run in a throwaway database: its run log
lines ("run 1 step 3 step.refused: disabled", "run 1 run.health: stalled") are the report's
material, and written to the host's log they would read as the real run 1's. Anyone who
alerts on the log would be misled, so while :func:`muted` holds, no ``pageant.*`` logger
passes a record on - in the task that entered it and every task it starts (a context
variable, copied into each), while the real engine's tasks beside it log as ever.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Iterator
from contextlib import contextmanager

_MUTED: contextvars.ContextVar[bool] = contextvars.ContextVar("pageant_log_muted", default=False)


class _UnlessMuted(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not _MUTED.get()


_FILTER = _UnlessMuted()


def _guard_loggers() -> None:
    # A logger's filters see only the records logged on it (not those its children pass
    # up), so every pageant logger carries the filter; adding it twice is a no-op.
    manager = logging.Logger.manager
    for name, logger in list(manager.loggerDict.items()):
        if (name == "pageant" or name.startswith("pageant.")) and isinstance(
            logger, logging.Logger
        ):
            logger.addFilter(_FILTER)


@contextmanager
def muted() -> Iterator[None]:
    """No ``pageant.*`` log record leaves this context (or the tasks started in it)."""
    _guard_loggers()
    token = _MUTED.set(True)
    try:
        yield
    finally:
        _MUTED.reset(token)
