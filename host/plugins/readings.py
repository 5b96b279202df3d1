"""Reading what plugins declared, live: readings (``pageant_readings``), bounded and shared.

A reading is read at most once per ``reading_interval_seconds`` for the same (reading,
params): with a ``server`` param that is once per server, however many events' start
conditions and gates ask. Askers within the interval share the answer kept from the last
read; askers arriving while a read is under way wait for that read rather than start
another. A read that raises, outlasts its ``budget_ms`` or answers anything but a number is
:data:`~pageant.hookspecs.UNKNOWN`, with the reason kept beside it and logged.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pageant.hookspecs import UNKNOWN, ReadContext, Reading, Unknown
from pageant.hookspecs.models import reading_value

if TYPE_CHECKING:
    from pageant.plugins.registry import Registry
    from pageant.support.clock import Clock

log = logging.getLogger("pageant.plugins")


@dataclass(frozen=True)
class Read:
    """One answer of a reading: the number (or unknown), when it was read, and why it is
    unknown when it is."""

    value: int | float | Unknown
    at: datetime
    why: str | None = None

    @property
    def known(self) -> bool:
        return not isinstance(self.value, Unknown)

    @property
    def amount(self) -> float | None:
        """The number read, or None when it is unknown."""
        return None if isinstance(self.value, Unknown) else self.value


def _key(reading: str, params: dict[str, Any]) -> tuple[str, str]:
    return reading, json.dumps(params, sort_keys=True, default=str)


class Readings:
    """A host's readings, each (reading, params) read at most once per ``interval``."""

    def __init__(self, registry: Registry, clock: Clock, interval_seconds: float) -> None:
        self.registry = registry
        self.clock = clock
        self.interval = timedelta(seconds=interval_seconds)
        self._kept: dict[tuple[str, str], Read] = {}
        self._reading: dict[tuple[str, str], asyncio.Future[Read]] = {}
        #: How many times each (reading, params) reached its plugin's ``read``.
        self.calls: dict[tuple[str, str], int] = {}

    def last(self, reading: str, params: dict[str, Any]) -> Read | None:
        """The answer kept from the last read, however old; None before any."""
        return self._kept.get(_key(reading, params))

    async def read(self, reading: str, params: dict[str, Any]) -> Read:
        """The reading's value for ``params``: the kept answer while it is younger than the
        interval, else a fresh read (shared with every asker meanwhile). Never raises."""
        key = _key(reading, params)
        kept = self._kept.get(key)
        if kept is not None and self.clock.now() - kept.at < self.interval:
            return kept
        going = self._reading.get(key)
        if going is None:
            going = asyncio.ensure_future(self._read(reading, params))
            self._reading[key] = going
            going.add_done_callback(lambda _: self._reading.pop(key, None))
        # Shielded: one asker cancelled (its run's task stopped) does not cancel the read the
        # others wait for.
        answer = await asyncio.shield(going)
        self._kept[key] = answer
        return answer

    async def read_now(self, reading: str, params: dict[str, Any]) -> Read:
        """A fresh read, whatever is kept (the kit's, and contract-check's); kept after."""
        answer = await self._read(reading, params)
        self._kept[_key(reading, params)] = answer
        return answer

    async def _read(self, reading: str, params: dict[str, Any]) -> Read:
        now = self.clock.now()
        declared: Reading | None = self.registry.readings.get(reading)
        if declared is None:
            return Read(UNKNOWN, now, f"no loaded plugin declares the reading {reading}")
        key = _key(reading, params)
        self.calls[key] = self.calls.get(key, 0) + 1
        budget = declared.budget_ms / 1000
        ctx = ReadContext(reading=reading, deadline=now + timedelta(seconds=budget))
        try:
            async with asyncio.timeout(budget):
                answer = await declared.read(dict(params), ctx)
        except TimeoutError:
            why = f"{reading} did not answer within {budget:g} s"
            log.warning("reading %s: %s", reading, why, extra={"reading": reading})
            return Read(UNKNOWN, now, why)
        except Exception as exc:  # a plugin's failure is an unknown, never a crash
            why = f"{reading} raised {type(exc).__name__}: {exc}"
            log.error("reading %s raised", reading, exc_info=exc, extra={"reading": reading})
            return Read(UNKNOWN, now, why)
        value = reading_value(answer)
        if isinstance(value, Unknown):
            if answer is UNKNOWN:
                return Read(UNKNOWN, now, f"{reading} answered unknown")
            why = f"{reading} answered {answer!r}; expected a number or UNKNOWN"
            log.warning("reading %s: %s", reading, why, extra={"reading": reading})
            return Read(UNKNOWN, now, why)
        return Read(value, now)
