"""What the host lends an action or announce leg during one dispatch (``ctx.services``).

The contract's :class:`pageant.hookspecs.StepServices` says what a plugin may rely on;
this is the host's implementation of it.

Bound to one run and one step: ``write_log`` writes into that run's log, ``post_json`` posts
through the engine's one HTTP session, and ``registry``, ``settings``, ``run_id`` and
``step_id`` say where the call is.

The lines a perform writes are held until its answer is recorded, and committed in the
answer's own transaction (:meth:`StepServices.write_held`), or just before the answer's
record when that is not the shared ``done`` write (:meth:`StepServices.flush`): a reader
never sees a step's lines without its outcome, a step costs one transaction rather than
one more per line, and a dispatch lost to a crash leaves no line behind for the
re-dispatch to repeat. A line written after the answer was recorded (from a task the
plugin left running) is committed at once.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

import aiohttp

from pageant.db import runlog
from pageant.db.log_kinds import LogKind
from pageant.db.shared import Batch
from pageant.events.authoring import announce
from pageant.hookspecs import Announcement, Posted
from pageant.states import CleanupStatus, ResourceStatus

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

    from pageant.db.engine_rows import RunRow
    from pageant.hosting import Host
    from pageant.plugins.registry import Registry
    from pageant.support.settings import Settings


class StepServices:
    """Host services for one step's dispatch (:class:`pageant.hookspecs.StepServices`)."""

    def __init__(
        self,
        host: Host,
        *,
        run_id: int,
        step_id: int,
        phase: str,
        session: Callable[[], Awaitable[aiohttp.ClientSession]],
        run: RunRow | None = None,
    ) -> None:
        self._host = host
        self._session = session
        #: The run as its pass read it (its event's title, slug and visibility, its instant
        #: and scope): what an announcement says of it, with no read of its own.
        self._run = run
        self.run_id = run_id
        self.step_id = step_id
        self.phase = phase
        #: Lines held for the answer's transaction; None once the answer is recorded.
        self._held: list[tuple[LogKind, datetime, dict[str, Any]]] | None = []

    @property
    def _step(self) -> dict[str, Any]:
        """Where this step's log lines go (:data:`pageant.db.runlog.StepRow`)."""
        return {"run_id": self.run_id, "phase": self.phase, "id": self.step_id}

    @property
    def registry(self) -> Registry:
        return self._host.registry

    @property
    def settings(self) -> Settings:
        return self._host.settings

    def now(self) -> Any:
        """The host's clock (injected, so a test's fake clock reaches the action)."""
        return self._host.clock.now()

    async def write_log(self, kind: str, detail: dict[str, Any]) -> None:
        """Append a line of ``kind`` (a :class:`~pageant.db.log_kinds.LogKind` value) to this
        run's log, attributed to this step; committed with the step's answer. Raises
        ValueError for a kind not in the enumeration."""
        line = (LogKind(kind), self._host.clock.now(), detail)
        if self._held is not None:
            self._held.append(line)
            return
        # Inserted at once, not kept for the batch: the run may have moved on, and a line of
        # its own written at once in the same batch must not come before this one.
        await self._host.outcomes.run(lambda conn, _: self._write(conn, [line], None))

    async def write_held(self, conn: AsyncConnection, *, lines: Batch | None) -> None:
        """Write the held lines in ``conn``, the answer's transaction (which may run more
        than once: the lines stay held until :meth:`settle`); kept for ``lines``'s one
        insert when given."""
        await self._write(conn, self._held or [], lines)

    def settle(self) -> None:
        """The answer is recorded: from now on a line is committed as it is written."""
        self._held = None

    async def flush(self) -> None:
        """Commit the held lines in a transaction of their own, then :meth:`settle`."""
        held = self._held
        if held:
            # Settled only once committed: a collision here is retried with the lines held.
            await self._host.outcomes.run(lambda conn, group: self._write(conn, held, group))
        self._held = None

    async def _write(
        self,
        conn: AsyncConnection,
        lines: list[tuple[LogKind, datetime, dict[str, Any]]],
        batch: Batch | None,
    ) -> None:
        for kind, at, detail in lines:
            await runlog.plugin_line(conn, self._step, kind, at=at, detail=detail, batch=batch)

    # ── leases (core.lease) ───────────────────────────────────────────────────

    async def reserve_lease(
        self, lease_id: str, target: str, value: Any, *, until: Any
    ) -> tuple[int | None, int | None]:
        """Reserve the ledger row for ``lease_id`` on ``target`` before anything is applied.

        Answers ``(row id, None)``, or ``(None, holder run id)`` when another row already
        holds the target. This step's own reservation (a retry, a re-dispatch) is reused.
        """
        from pageant.db import resources

        owner = lease_id.split(".", 1)[0]
        now = self._host.clock.now()
        async with self._host.db.begin() as conn:
            new = await resources.hold(
                conn,
                run_id=self.run_id,
                step_id=self.step_id,
                owner=owner,
                kind=lease_id,
                ref=target,
                status=ResourceStatus.PENDING,
                payload={"lease": lease_id, "target": target, "applied": value},
                now=now,
                lease_until=until,
            )
            if new is not None:
                await runlog.resource_reserved(
                    conn, self._step, at=now, lease=lease_id, target=target, until=until
                )
                await resources.set_cleanup_status(conn, self.run_id, CleanupStatus.PENDING)
                return new, None
            held = await resources.holder(conn, owner, lease_id, target)
        if (
            held is not None
            and held.step_id == self.step_id
            and "baseline" not in (held.payload or {})
        ):
            return held.id, None
        return None, None if held is None else held.run_id

    async def lease_applied(
        self, row_id: int, lease_id: str, target: str, baseline: Any, value: Any
    ) -> None:
        """Record what the lease replaced and what it set: the row is ``confirmed``."""
        from pageant.db import resources

        now = self._host.clock.now()
        payload = {"lease": lease_id, "target": target, "baseline": baseline, "applied": value}
        async with self._host.db.begin() as conn:
            await resources.set_lease_payload(conn, row_id, payload, now)
            await runlog.resource_confirmed(conn, self._step, at=now, lease=payload)

    # ── announcements (core's announce legs) ─────────────────────────────────

    async def http_session(self) -> aiohttp.ClientSession:
        """The engine's one HTTP session, for a built-in leg that reads more of an answer
        than :meth:`post_json` tells (a chat service's rate limit)."""
        return await self._session()

    async def sleep(self, seconds: float) -> None:
        """Wait on the host's clock (a test's fake clock returns at once, moved on)."""
        await self._host.clock.sleep(seconds)

    async def announcement(self, message: str) -> Announcement:
        """``message`` as this run's event template renders it (the run's version's
        ``announcement``; the message itself and the event's title without one).

        Read from what the step already holds: the run's row as its pass read it and the
        pinned version from the engine's cache. An announcement costs no query, which a
        sequence of announce steps would otherwise pay on every step."""
        run = self._run
        pinned = None
        if run is not None:
            pinned = await self._host.versions.fetch(self._host.db, run["version_id"])
        if run is None or pinned is None:
            return Announcement(title="", body=message)
        spec = pinned.spec if isinstance(pinned.spec, dict) else {}
        facts = announce.Facts(
            title=run["title"],
            slug=run["slug"],
            timezone=pinned.timezone,
            scheduled_for=run["scheduled_for"],
            public=run["visibility"] == "public",
            phase=self.phase,
            scope=run["scope"],
        )
        return announce.announcement(
            spec.get("announcement"),
            message,
            facts,
            link_pattern=self._host.settings.public_page_url,
        )

    async def post_json(self, url: str, body: str | dict[str, Any]) -> Posted:
        """POST ``body`` (a JSON string, or data to encode) to ``url`` within the webhook
        timeout. Never raises for a network failure: the answer says what happened."""
        data = body if isinstance(body, str) else json.dumps(body)
        session = await self._session()
        timeout = aiohttp.ClientTimeout(total=self._host.settings.webhook_timeout_seconds)
        try:
            async with session.post(
                url,
                data=data.encode(),
                headers={"Content-Type": "application/json"},
                timeout=timeout,
            ) as response:
                await response.read()
                error = None if response.status < 300 else f"HTTP {response.status}"
                return Posted(response.status, error, True)
        except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
            return Posted(None, f"not sent: {type(exc).__name__}: {exc}", False)
        except aiohttp.InvalidURL as exc:
            return Posted(None, f"not sent: invalid URL {exc}", False)
        except (aiohttp.ClientError, TimeoutError) as exc:
            # Anything after connecting may have reached the receiver: treat it as sent.
            return Posted(None, f"{type(exc).__name__}: {exc or 'timed out'}", True)
