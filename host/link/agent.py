"""A stand-in for a game's link agent: it syncs with a real host over the real HTTP route,
as an agent in a game would, so a link plugin's tests need no game
(``pageant.testing.FakeAgent``).

Scriptable: ``answers`` says what each command answers (a value, or a function of the
payload; an exception it raises becomes the result's ``error``); ``delay`` holds each answer
back; ``drop`` names commands taken and never answered; ``stop()`` makes the agent vanish
(it stops syncing) and ``start()`` brings it back, remembering (or, after
``restart(forget=True)``, forgetting) the keys it did.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp

#: How long the agent waits after a sync that failed (no host, a 5xx) before the next.
RETRY_PAUSE = 0.05


class FakeAgent:
    """An agent for ``server`` syncing with the host at ``base`` (its URL, or an
    aiohttp test client) with a game ``token`` bound to the server.

    Example::

        agent = FakeAgent(pageant_client, token, "world-a", answers={"spawn": {"id": 7}})
        await agent.start()
        ...  # run an event whose steps call context.link.call("world-a", "spawn", ...)
        await agent.stop()
        assert [c["command"] for c in agent.received] == ["spawn"]
    """

    def __init__(
        self,
        base: Any,
        token: str,
        server: str,
        *,
        answers: Mapping[str, Any] | None = None,
        delay: float = 0.0,
        drop: set[str] | frozenset[str] = frozenset(),
        wait: float = 1.0,
    ) -> None:
        self.base = base
        self.token = token
        self.server = server
        #: command -> its answer, or a function of the payload answering it.
        self.answers: dict[str, Any] = dict(answers or {})
        self.delay = delay
        self.drop = set(drop)
        self.wait = wait
        #: Every command handed to the agent, in order (repeats included).
        self.received: list[dict[str, Any]] = []
        #: (command, key) -> the answer it gave (a repeat is answered from here, not redone).
        self.done: dict[tuple[str, str], dict[str, Any]] = {}
        #: How many times each (command, key) was actually carried out.
        self.performed: dict[tuple[str, str], int] = {}
        #: Every sync's status, in order.
        self.statuses: list[int] = []
        self._results: list[dict[str, Any]] = []
        self._happenings: list[dict[str, Any]] = []
        self._task: asyncio.Task[None] | None = None
        self._session: aiohttp.ClientSession | None = None

    def happen(self, trigger: str, payload: Mapping[str, Any], *, key: str | None = None) -> None:
        """Report a happening on the next sync (``key`` makes a re-sent one count once)."""
        item: dict[str, Any] = {"trigger": trigger, "payload": dict(payload)}
        if key is not None:
            item["id"] = key
        self._happenings.append(item)

    async def sync(self, wait: float = 0.0) -> tuple[int, dict[str, Any]]:
        """One sync: send what is pending, carry out what comes back. Answers the status and
        the host's answer."""
        body = {"results": self._results, "happenings": self._happenings, "wait": wait}
        status, answer = await self._post(body)
        self.statuses.append(status)
        if status != 200:
            return status, answer
        self._results, self._happenings = [], []
        for command in answer.get("commands", []):
            self.received.append(command)
            result = await self._carry_out(command)
            if result is not None:
                self._results.append(result)
        return status, answer

    async def _carry_out(self, command: dict[str, Any]) -> dict[str, Any] | None:
        name, key = command["command"], command["key"]
        if (name, key) in self.done:
            return self.done[(name, key)]
        if name in self.drop:
            return None
        self.performed[(name, key)] = self.performed.get((name, key), 0) + 1
        if self.delay:
            await asyncio.sleep(self.delay)
        result: dict[str, Any] = {"command": name, "key": key}
        answer = self.answers.get(name, {"ok": True})
        try:
            result["answer"] = answer(command["payload"]) if callable(answer) else answer
        except Exception as exc:
            result["error"] = str(exc) or type(exc).__name__
        self.done[(name, key)] = result
        return result

    async def _post(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        path = f"/api/v1/link/{self.server}/sync"
        headers = {"Authorization": f"Bearer {self.token}"}
        if isinstance(self.base, str):
            if self._session is None:
                self._session = aiohttp.ClientSession()
            poster: Callable[..., Any] = self._session.post
            url = self.base.rstrip("/") + path
        else:
            poster = self.base.post
            url = path
        timeout = self.wait + 30
        async with poster(url, json=body, headers=headers, timeout=timeout) as response:
            try:
                data = await response.json()
            except (aiohttp.ContentTypeError, ValueError):
                data = {}
            return response.status, data

    async def _loop(self) -> None:
        while True:
            try:
                status, _ = await self.sync(self.wait)
            except (aiohttp.ClientError, TimeoutError, OSError):
                status = 0
            if status != 200:
                await asyncio.sleep(RETRY_PAUSE)

    async def start(self) -> None:
        """Start syncing in the background (long polls of ``wait`` seconds)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        """Stop syncing: to the host, the agent disappears (answers it holds are not sent)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def restart(self, *, forget: bool = False) -> None:
        """Stop and start again; ``forget`` drops the keys it did and the answers it held,
        as a game restarted without a memory would."""
        await self.stop()
        if forget:
            self.done.clear()
            self._results.clear()
        await self.start()
