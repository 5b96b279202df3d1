"""The connection pool: a burst of connections beyond SQLAlchemy's default five is served
next time by connections the pool kept, not opened anew (on SQLite a thread each, on MariaDB
a login each), and ``database_pool_size`` sizes what it keeps."""

from __future__ import annotations

from contextlib import AsyncExitStack

import pytest
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine

from pageant.errors import Invalid
from pageant.hosting import Host
from pageant.support.settings import Settings, load_settings

BURST = 12


async def _opened_by_burst(engine: AsyncEngine) -> int:
    """How many new connections ``BURST`` connections in use at once made the pool open."""
    opened = 0

    def count(*_: object) -> None:
        nonlocal opened
        opened += 1

    event.listen(engine.sync_engine, "connect", count)
    try:
        async with AsyncExitStack() as stack:
            for _ in range(BURST):
                conn = await stack.enter_async_context(engine.connect())
                await conn.execute(text("SELECT 1"))
    finally:
        event.remove(engine.sync_engine, "connect", count)
    return opened


@pytest.mark.parametrize(("size", "kept"), [(None, BURST), (3, 3)])
async def test_a_burst_of_connections_is_kept_for_the_next_up_to_the_pool_size(
    settings: Settings, size: int | None, kept: int
) -> None:
    if size is not None:
        settings = settings.model_copy(update={"database_pool_size": size})
    host = Host(settings)
    try:
        assert await _opened_by_burst(host.db) == BURST  # a new pool opens each
        # The second burst reuses what the pool kept; the rest are opened again.
        assert await _opened_by_burst(host.db) == BURST - kept
    finally:
        await host.close()


@pytest.mark.parametrize("bad", [0, -1, 501, "many"])
def test_a_bad_pool_size_is_refused_by_name(bad: object) -> None:
    with pytest.raises(Invalid) as caught:
        load_settings(flags={"database_pool_size": bad}, environ={})
    assert "database_pool_size" in str(caught.value.details) + caught.value.message


@pytest.mark.parametrize("edge", [1, 500])
def test_the_pool_sizes_bounds_are_accepted(edge: int) -> None:
    loaded = load_settings(flags={}, environ={"PAGEANT_DATABASE_POOL_SIZE": str(edge)})
    assert loaded.database_pool_size == edge
