"""The ledger tests' games and their hosts: a smith whose forge makes swords in an in-memory
world (its revert takes them away again), and a weather a run can borrow as a lease. The root
``conftest.py`` registers this module, so its fixtures serve every folder's tests."""

from __future__ import annotations

from typing import Any

import pytest

from pageant import hookimpl
from pageant.engine import Engine
from pageant.switchboard import board
from tests.factories import make_host, step


class Smith:
    """A game with an in-memory world: ``smith.forge {count}`` makes swords and reports
    them; its revert takes them away again (and succeeds for what is not there), and is
    final for its key (contract 1.2): a forge under a reverted key makes nothing."""

    PLUGIN_INFO = {"owner": "smith", "contract": "^1.2"}  # noqa: RUF012 - read by the loader

    def __init__(self) -> None:
        self.world: dict[str, str] = {}
        self.made = 0
        self.performs: list[Any] = []
        self.reverts: list[Any] = []
        self.answers: list[Any] = []
        self.revert_error: str | None = None
        self.reconcile_error: Exception | None = None
        self.reconciled: list[Any] = []
        #: The keys reverted: final, so a forge under one makes nothing.
        self.reverted: set[str] = set()
        #: Called first by every perform; an answer it gives is the perform's answer.
        self.first: Any = None

    async def forge(self, ctx: Any) -> Any:
        self.performs.append(ctx)
        if self.first is not None:
            answer = await self.first(ctx)
            if answer is not None:
                return answer
        if self.answers:
            answer = self.answers.pop(0)
            if answer is not None:
                return answer
        made = []
        if ctx.idempotency_key in self.reverted:
            return {"ok": True, "resources": made}
        for _ in range(ctx.params["count"]):
            self.made += 1
            ref = f"sword-{self.made}"
            self.world[ref] = ctx.idempotency_key
            made.append({"kind": "sword", "ref": ref})
        return {"ok": True, "resources": made}

    async def unforge(self, ctx: Any) -> Any:
        self.reverts.append(ctx)
        if self.revert_error is not None:
            return {"ok": False, "error": self.revert_error}
        self.reverted.add(ctx.idempotency_key)
        for res in ctx.resources:
            self.world.pop(res.ref, None)  # reverting what is not there succeeds
        if not ctx.resources:  # a lost answer: take back whatever this key made
            for ref in [r for r, key in self.world.items() if key == ctx.idempotency_key]:
                del self.world[ref]
        return {"ok": True}

    @hookimpl
    def pageant_actions(self) -> list[dict[str, Any]]:
        count = {
            "name": "count",
            "type": "integer",
            "required": True,
            "description": "How many swords.",
            "example": 1,
        }
        return [
            {
                "id": "smith.forge",
                "label": "Forge",
                "risk": "change",
                "reversible": "full",
                "budget_ms": 5_000,
                "params": [count],
                "perform": self.forge,
                "revert": self.unforge,
            },
            {
                "id": "smith.melt",
                "label": "Melt",
                "risk": "irreversible",
                "budget_ms": 5_000,
                "params": [count],
                "perform": self.forge,
            },
        ]

    @hookimpl
    async def pageant_reconcile(self, resources: list[Any]) -> Any:
        self.reconciled.append(list(resources))
        if self.reconcile_error is not None:
            raise self.reconcile_error
        return [r.ref for r in resources if r.ref in self.world]


def forge(count: int, **kw: Any) -> dict[str, Any]:
    return step("smith.forge", count=count, **kw)


class Weather:
    """A game whose regions have a weather a run can borrow (``wx.sky``)."""

    PLUGIN_INFO = {"owner": "wx", "contract": "^1.0"}  # noqa: RUF012 - read by the loader

    def __init__(self) -> None:
        self.sky: dict[str, str] = {"north": "clear", "south": "rain"}
        self.restored: list[tuple[str, str]] = []

    async def read(self, target: str) -> str:
        return self.sky[target]

    async def apply(self, target: str, value: str, until: Any = None) -> str:
        # Told the lease's end (contract 1.2), as a game that restores by itself would be.
        before = self.sky[target]
        self.sky[target] = value
        return before

    async def restore(self, target: str, baseline: str) -> None:
        self.restored.append((target, baseline))
        self.sky[target] = baseline

    @hookimpl
    def pageant_leases(self) -> list[dict[str, Any]]:
        return [
            {
                "id": "wx.sky",
                "label": "A region's weather",
                "read": self.read,
                "apply": self.apply,
                "restore": self.restore,
            }
        ]


def lease(target: str, value: str, minutes: int = 60, **kw: Any) -> dict[str, Any]:
    return step("core.lease", lease="wx.sky", target=target, value=value, minutes=minutes, **kw)


@pytest.fixture
def weather() -> Weather:
    return Weather()


@pytest.fixture
async def wx_host(settings, db, clock, weather, smith):
    h = make_host(settings, db, clock, [weather, smith])
    async with h.db.begin() as conn:
        for action_id in ("core.lease", "smith.forge"):
            await board.set_action(
                conn, h.registry, action_id, enabled=True, actor="admin:test", now=clock.now()
            )
    try:
        yield h
    finally:
        await h.close()


@pytest.fixture
async def wx_engine(wx_host):
    e = Engine(wx_host)
    try:
        yield e
    finally:
        await e.stop()


@pytest.fixture
def smith() -> Smith:
    return Smith()


@pytest.fixture
async def smith_host(settings, db, clock, smith):
    h = make_host(settings, db, clock, [smith])
    async with h.db.begin() as conn:
        await board.set_action(
            conn, h.registry, "smith.forge", enabled=True, actor="admin:test", now=clock.now()
        )
    try:
        yield h
    finally:
        await h.close()


@pytest.fixture
async def smith_engine(smith_host):
    e = Engine(smith_host)
    try:
        yield e
    finally:
        await e.stop()
