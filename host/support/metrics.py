"""The host's metrics, in the Prometheus text format (``GET /metrics``).

Each :class:`~pageant.hosting.Host` has its own registry (nothing is registered at import or
in a global), so two hosts in one process - the tests, an embedder - never mix counters. The
engine counts as it goes; what is a fact of the database (runs by status) is read when
scraped, so every host of a shared database reports the same numbers for it.
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

CONTENT_TYPE = CONTENT_TYPE_LATEST

#: Seconds: from a fast webhook to an action's whole budget.
DISPATCH_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
#: Seconds a due step waited to be claimed: a healthy host claims within a poll.
LATENESS_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 15, 30, 60, 300, 900, 3600)
#: Seconds a database outage lasted: a failover's blip to an afternoon's repair.
OUTAGE_BUCKETS = (1, 5, 15, 30, 60, 300, 900, 3600, 14400)
TICK_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class Metrics:
    """Every family pageant exports, on a registry of its own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry

        def counter(name: str, said: str, label: str) -> Counter:
            return Counter(name, said, [label], registry=r)

        def gauge(name: str, said: str, label: str) -> Gauge:
            return Gauge(name, said, [label], registry=r)

        self.runs = gauge(
            "pageant_runs", "Runs in the database, by status (read when scraped).", "status"
        )
        self.steps_dispatched = counter(
            "pageant_steps_dispatched", "Steps this host claimed and dispatched.", "action"
        )
        self.steps_failed = counter(
            "pageant_steps_failed",
            "Steps that failed for good (attempts used up or fatal).",
            "action",
        )
        self.steps_refused = counter(
            "pageant_steps_refused",
            "Steps refused before perform (not allowed, unavailable).",
            "action",
        )
        self.steps_retried = counter(
            "pageant_steps_retried", "Step attempts that failed and were rescheduled.", "action"
        )
        self.dispatch_seconds = Histogram(
            "pageant_dispatch_seconds",
            "How long an action's perform took.",
            ["action"],
            buckets=DISPATCH_BUCKETS,
            registry=r,
        )
        self.tick_seconds = Histogram(
            "pageant_tick_seconds",
            "How long one engine tick (every leg) took.",
            buckets=TICK_BUCKETS,
            registry=r,
        )
        self.step_lateness_seconds = Histogram(
            "pageant_step_lateness_seconds",
            "How long after its due_at a step was claimed.",
            buckets=LATENESS_BUCKETS,
            registry=r,
        )
        self.deadlocks_retried = counter(
            "pageant_deadlocks_retried",
            "Deadlocks, lock waits and Galera certification conflicts the engine met and retried, "
            "by the work that met them (without its ids).",
            "where",
        )
        self.plugins = gauge(
            "pageant_plugins", "Plugins by load status (loaded, refused).", "status"
        )
        self.last_tick = Gauge(
            "pageant_engine_last_tick_timestamp_seconds",
            "When the engine last finished a tick (Unix time); 0 before the first.",
            registry=r,
        )
        self.database_unreachable_seconds = Gauge(
            "pageant_database_unreachable_seconds",
            "How long the engine has found the database out of reach (0 while it answers).",
            registry=r,
        )
        self.database_outage_seconds = Histogram(
            "pageant_database_outage_seconds",
            "How long each database outage the engine met lasted, observed when it ended.",
            buckets=OUTAGE_BUCKETS,
            registry=r,
        )
        self.tokens_refused = counter(
            "pageant_game_tokens_refused",
            "Requests a game token's bindings refused: a trigger of an owner it is not bound "
            "to (owner), a link server it does not speak for (server), or a link request "
            "with a bad, revoked or expired token (unauthenticated).",
            "reason",
        )
        self.link_servers = gauge(
            "pageant_link_servers",
            "Game-link servers by state (up, down, unknown), as this host last saw them.",
            "state",
        )
        self.link_syncs_held = Gauge(
            "pageant_link_syncs_held", "Agent syncs held open on this host now.", registry=r
        )
        self.link_late = counter(
            "pageant_link_late_answers",
            "Agents' answers that came after their command was withdrawn (kept, not acted on).",
            "server",
        )
        self.started = time.time()

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def count_plugins(self, records: Any) -> None:
        counts = {"loaded": 0, "refused": 0}
        for record in records:
            counts[record.status] = counts.get(record.status, 0) + 1
        for status, n in counts.items():
            self.plugins.labels(status=status).set(n)
