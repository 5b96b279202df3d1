"""Time, injected: the engine, claim leases and schedules read ``clock.now()`` and never the wall
clock directly, so tests move time instead of sleeping."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock: aware UTC datetimes."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class FakeClock:
    """A clock that moves only when told to. ``sleep`` records what was asked and returns
    at once, advancing time by the amount asked (or by nothing, with ``advance_on_sleep``
    off)."""

    def __init__(self, start: datetime | None = None, *, advance_on_sleep: bool = True) -> None:
        self._now = start or datetime(2027, 1, 1, 12, 0, tzinfo=UTC)
        self.advance_on_sleep = advance_on_sleep
        self.sleeps: list[float] = []

    def now(self) -> datetime:
        return self._now

    def advance(self, seconds: float = 0, **kwargs: float) -> datetime:
        self._now += timedelta(seconds=seconds, **kwargs)
        return self._now

    def set(self, when: datetime) -> None:
        self._now = when

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if self.advance_on_sleep:
            self._now += timedelta(seconds=max(0.0, seconds))
        await asyncio.sleep(0)
