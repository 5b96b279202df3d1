"""The gate tests' engine: over the plain test host."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from pageant.engine import Engine
from pageant.hosting import Host


@pytest.fixture
async def engine(host: Host) -> AsyncIterator[Engine]:
    e = Engine(host)
    try:
        yield e
    finally:
        await e.stop()
