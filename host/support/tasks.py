"""The host's own long-running asyncio tasks: the loops that watch, check and poll."""

from __future__ import annotations

import asyncio


def end_if_cancelled() -> None:
    """Raise :class:`asyncio.CancelledError` when the current task has been cancelled but
    is running on: a database driver may swallow a cancel that lands inside its call while
    it gives its connection back, and a loop that then sleeps watches on for ever while its
    owner waits for it to end. A loop calls this before it goes round again."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
