"""Calling a plugin's callable the way the host does: within its budget, never raising.

The answer's shape is the contract's (:mod:`pageant.hookspecs.envelope`); this is host
mechanics, shared by the engine's dispatch, an event's verification and the kit's dry runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace

from pageant.hookspecs.envelope import Envelope, classify
from pageant.plugins.tracing import exception_text


class PluginSlots:
    """At most ``limit`` calls into one plugin at a time (perform, revert, restore).

    Each plugin has slots of its own: a plugin whose calls hang fills only its own, and
    another plugin's calls never queue behind them.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._slots: dict[str, asyncio.Semaphore] = {}

    def of(self, owner: str) -> asyncio.Semaphore:
        """The slots of the plugin that owns ``owner``'s ids."""
        slots = self._slots.get(owner)
        if slots is None:
            slots = self._slots[owner] = asyncio.Semaphore(self.limit)
        return slots


def _retryable(reason: str, error: str) -> Envelope:
    return Envelope(ok=False, retry=True, error=error, malformed=reason)


async def run_with_envelope(
    fn: Callable[..., Awaitable[object]], *args: object, timeout: float
) -> Envelope:
    """Await ``fn(*args)`` within ``timeout`` seconds and classify what it answered.

    An exception or a timeout is a retryable failure; cancellation of the caller itself
    is passed on.
    """
    try:
        # asyncio.timeout, not wait_for: no task per call, and on Python 3.11 wait_for can
        # swallow a cancellation of the caller that arrives as the answer does.
        async with asyncio.timeout(timeout):
            answer = await fn(*args)
    except TimeoutError:
        return _retryable("timeout", f"no answer within {timeout:g} s")
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # any plugin failure is an answer, never a crash of the host
        error = f"{type(exc).__name__}: {exception_text(exc)}"
        return replace(_retryable("exception", error), exception=exc)
    return classify(answer)
