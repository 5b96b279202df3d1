"""The claims about processes, proven with processes: two ``pageant serve`` on one MariaDB
database, a SIGTERM mid-flight, and a ``kill -9`` mid-flight followed by a restart - each
with webhook steps delivered to a receiver on 127.0.0.1 that records every delivery.

The events are authored, published and started through the HTTP API, as in a walk; what is
observed is the engine's claims (which host holds a step, whether a run's claim was handed
back), which no route shows, so these read the database and live with the engine's tests
rather than the walks (``tests/project/test_walks_public.py``).

What counts: a step (a run and its message) delivered under two different idempotency keys
is a double delivery the receiver cannot recognise; a step never delivered is lost; a run not
completed when the hosts are done is stuck.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from pageant.access.tokens import create_token
from pageant.db.engine import create_engine
from pageant.db.migrate import upgrade
from pageant.db.tables import event_run_steps, event_runs
from tests.conftest import FIGURES, MYSQL_ENV
from tests.databases import empty_database
from tests.processes import Receiver, Serve, until

MESSAGES = ("muster", "march", "muster-out")


def _report(request: pytest.FixtureRequest, text: str) -> None:
    FIGURES.append(f"{request.node.name}: {text}")


def _sync(coro: Any) -> Any:
    return asyncio.run(coro)


async def _prepare(url: str) -> str:
    engine = create_engine(url)
    try:
        await upgrade(engine)
        return await create_token(engine, role="admin", name="proof", now=datetime.now(UTC))
    finally:
        await engine.dispose()


async def _read(url: str, statement: Any) -> list[Any]:
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            rows = list((await conn.execute(statement)).all())
            await conn.rollback()
        return rows
    finally:
        await engine.dispose()


def read(url: str, statement: Any) -> list[Any]:
    return _sync(_read(url, statement))


def completed_runs(url: str) -> int:
    return read(url, select(func.count()).where(event_runs.c.status == "completed"))[0][0]


def call(base: str, token: str, method: str, path: str, body: Any = None) -> Any:
    request = urllib.request.Request(
        base + "/api/v1/admin" + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def seed(bases: list[str], token: str, runs: int) -> list[int]:
    """One published event of three webhook steps, and ``runs`` runs of it started now
    (each through the next host in ``bases``, in turn)."""
    steps = [
        {"action": "core.announce", "params": {"leg": "core.webhook", "message": m}}
        for m in MESSAGES
    ]
    event = call(
        bases[0],
        token,
        "POST",
        "/events",
        {
            "title": "Proof",
            "spec": {
                "schedule": {"kind": "manual"},
                "phases": [{"key": "main", "label": "Main", "steps": steps}],
            },
        },
    )
    call(bases[0], token, "POST", f"/events/{event['id']}/publish")
    return [
        call(
            bases[i % len(bases)], token, "POST", f"/events/{event['id']}/runs", {"scope": f"s{i}"}
        )["id"]
        for i in range(runs)
    ]


def tally(receiver: Receiver, run_ids: list[int]) -> dict[str, int]:
    """Per step (run, message): how many were lost, doubled under another key, repeated."""
    keys = receiver.keys_by_step()
    wanted = [(run_id, m) for run_id in run_ids for m in MESSAGES]
    return {
        "steps": len(wanted),
        "deliveries": len(receiver.deliveries),
        "lost": sum(1 for step in wanted if not keys.get(step)),
        "other_key": sum(1 for step in wanted if len(set(keys.get(step, []))) > 1),
        "same_key_again": sum(len(k) - len(set(k)) for k in keys.values()),
    }


def completed_and_tallied(url: str, receiver: Receiver, run_ids: list[int]) -> dict[str, int]:
    """Wait (60 s at most) until every run of ``run_ids`` completed; answer the tally."""
    assert until(lambda: completed_runs(url) == len(run_ids), timeout=60, every=0.5), (
        f"{completed_runs(url)} of {len(run_ids)} runs completed"
    )
    return tally(receiver, run_ids)


@pytest.fixture
def database(dialect: str, tmp_path: Path) -> Iterator[str]:
    with empty_database(dialect, tmp_path) as url:
        yield url


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    try:
        yield found
    finally:
        found.close()


@pytest.fixture
def hosts() -> Iterator[list[Serve]]:
    started: list[Serve] = []
    try:
        yield started
    finally:
        for serve in started:
            serve.kill()


def test_two_hosts_on_one_mariadb_deliver_each_step_under_one_key(
    request, tmp_path, receiver, hosts
) -> None:
    if not os.environ.get(MYSQL_ENV):
        pytest.skip(f"needs MariaDB ({MYSQL_ENV}); CI always sets it")
    with empty_database("mariadb", tmp_path) as url:
        token = _sync(_prepare(url))
        for name in ("a", "b"):
            hosts.append(
                Serve(url, tmp_path / f"{name}.log", webhook_urls=receiver.url, poll_seconds=1)
            )
        started = time.monotonic()
        run_ids = seed([h.base for h in hosts], token, runs=300)
        assert until(lambda: completed_runs(url) == len(run_ids), timeout=60, every=0.5), (
            f"{completed_runs(url)} of {len(run_ids)} runs completed"
        )
        elapsed = time.monotonic() - started
        for serve in hosts:
            serve.signal(signal.SIGTERM)
        assert [serve.wait(40) for serve in hosts] == [0, 0]

        figures = tally(receiver, run_ids)
        stuck = read(url, select(func.count()).where(event_runs.c.status != "completed"))[0][0]
        open_steps = read(url, select(func.count()).where(event_run_steps.c.status != "done"))[0][0]
        owners = {row[0] for row in read(url, select(event_run_steps.c.claimed_by).distinct())}
        _report(
            request,
            f"2 hosts, {len(run_ids)} runs, {figures['steps']} steps, "
            f"{figures['deliveries']} deliveries, {figures['other_key']} under another key, "
            f"{figures['same_key_again']} repeated under the same key, {figures['lost']} lost, "
            f"{stuck} stuck, in {elapsed:.1f} s",
        )
        assert figures["other_key"] == 0
        assert figures["lost"] == 0
        assert stuck == 0 and open_steps == 0
        assert len(owners) == 2, "both hosts dispatched steps"
        # Normal two-host contention is not an operator's alarm.
        for serve in hosts:
            assert [line for line in serve.log_lines() if line["level"] == "ERROR"] == []


def test_sigterm_mid_flight_starts_nothing_after_the_signal_and_delivers_once(
    request, database, tmp_path, receiver, hosts
) -> None:
    token = _sync(_prepare(database))
    receiver.delay = 0.3  # a slow game server: steps are in perform when the signal comes
    settings = {"webhook_urls": receiver.url, "poll_seconds": 1}
    hosts.append(Serve(database, tmp_path / "first.log", **settings))
    run_ids = seed([hosts[0].base], token, runs=40)
    assert until(lambda: len(receiver.deliveries) >= 20, timeout=30)
    signalled = hosts[0].signal(signal.SIGTERM)
    assert hosts[0].wait(40) == 0
    stopped_in = time.time() - signalled

    # The host acts on a signal once its event loop runs the handler, which begins the stop
    # and logs it: a step claimed between the kill and that instant was claimed before the
    # host knew. So "after the signal" is after the engine's "stopping:" line (whose instant
    # is to the millisecond; hence the millisecond added), never before the kill itself.
    noticed = next(
        line["ts"]
        for line in hosts[0].log_lines()
        if line["logger"] == "pageant.engine" and line["msg"].startswith("stopping:")
    )
    heard = datetime.fromisoformat(noticed.replace("Z", "+00:00")) + timedelta(milliseconds=1)
    after = max(datetime.fromtimestamp(signalled, UTC), heard)
    started_after = read(
        database, select(func.count()).where(event_run_steps.c.started_at > after)
    )[0][0]
    held = read(
        database,
        select(func.count())
        .where((event_run_steps.c.status == "running") | event_runs.c.claimed_by.is_not(None))
        .select_from(event_run_steps.join(event_runs)),
    )[0][0]
    left = read(database, select(func.count()).where(event_run_steps.c.status == "pending"))[0][0]
    delivered_at_stop = len(receiver.deliveries)

    hosts.append(Serve(database, tmp_path / "second.log", **settings))
    assert until(lambda: completed_runs(database) == len(run_ids), timeout=60, every=0.5)
    figures = tally(receiver, run_ids)
    _report(
        request,
        f"{len(run_ids)} runs, {figures['steps']} steps, {delivered_at_stop} delivered before "
        f"the stop ({stopped_in:.1f} s after the signal), {left} left pending, "
        f"{started_after} started after the signal, {figures['other_key']} under another key, "
        f"{figures['same_key_again']} repeated, {figures['lost']} lost",
    )
    assert started_after == 0
    assert held == 0, "every claim was handed back"
    assert left > 0, "the stop came while work remained (else this proves nothing)"
    assert figures["other_key"] == figures["same_key_again"] == figures["lost"] == 0
    first = hosts[0].log_lines()
    assert any(line["msg"].startswith("received SIGTERM") for line in first)
    assert any(line["msg"] == "stopped cleanly" for line in first)


def test_kill_9_mid_flight_then_a_restart_loses_nothing_and_keeps_the_keys(
    request, database, tmp_path, receiver, hosts
) -> None:
    token = _sync(_prepare(database))
    receiver.delay = 0.3
    settings = {
        "webhook_urls": receiver.url,
        "poll_seconds": 1,
        # Short leases, so the restarted host takes over what the dead one held in seconds.
        "step_lease_margin_seconds": 1,
        "run_lease_seconds": 3,
    }
    hosts.append(Serve(database, tmp_path / "first.log", **settings))
    run_ids = seed([hosts[0].base], token, runs=30)
    assert until(lambda: len(receiver.deliveries) >= 15, timeout=30)
    hosts[0].kill()
    held = read(database, select(func.count()).where(event_run_steps.c.status == "running"))[0][0]

    hosts.append(Serve(database, tmp_path / "second.log", **settings))
    figures = completed_and_tallied(database, receiver, run_ids)
    _report(
        request,
        f"{len(run_ids)} runs, {figures['steps']} steps, {held} in flight at the kill, "
        f"{figures['other_key']} under another key, {figures['same_key_again']} repeated under "
        f"the same key, {figures['lost']} lost",
    )
    assert figures["other_key"] == 0
    assert figures["lost"] == 0


#: The claim lease of a ``core.announce`` step: its time limit (10 s) plus the margin the
#: takeover test sets.
ANNOUNCE_BUDGET_S = 10.0
SHORT_MARGIN_S = 0.5
#: How long past the lease the test waits. The benchmark's ``takeover`` case holds the issue's
#: bound (lease + 2 s, p99); this walk runs beside the rest of the suite on a shared machine,
#: so it allows a little more. Without the takeover of a dead host's run claims the steps wait
#: for the run claim lease (900 s), far past either.
TAKEOVER_SLACK_S = 5.0


def test_a_survivor_takes_over_a_killed_hosts_steps_within_the_claim_lease(
    request, tmp_path, receiver, hosts
) -> None:
    if not os.environ.get(MYSQL_ENV):
        pytest.skip(f"needs MariaDB ({MYSQL_ENV}); CI always sets it")
    receiver.delay = 0.3  # a slow game server: steps are in perform at the kill
    # The step claim lease shortened through its margin; the run claim lease is the default.
    settings = {
        "webhook_urls": receiver.url,
        "poll_seconds": 1,
        "step_lease_margin_seconds": SHORT_MARGIN_S,
    }
    lease = ANNOUNCE_BUDGET_S + SHORT_MARGIN_S
    with empty_database("mariadb", tmp_path) as url:
        token = _sync(_prepare(url))
        for name in ("a", "b"):
            hosts.append(Serve(url, tmp_path / f"{name}.log", **settings))
        run_ids = seed([h.base for h in hosts], token, runs=30)
        assert until(lambda: len(receiver.deliveries) >= 20, timeout=30)
        dead = hosts[0]
        dead.kill()
        killed = time.monotonic()
        # A claim's owner is "host:pid:random".
        theirs = event_run_steps.c.claimed_by.like(f"%:{dead.process.pid}:%")
        held = {
            row[0]
            for row in read(
                url,
                select(event_run_steps.c.id).where(event_run_steps.c.status == "running", theirs),
            )
        }
        assert held, "the kill came while the host held steps (else this proves nothing)"

        taken: dict[int, float] = {}

        def all_taken() -> bool:
            rows = read(
                url,
                select(event_run_steps.c.id).where(
                    event_run_steps.c.id.in_(held),
                    event_run_steps.c.claimed_by.is_not(None),
                    ~theirs,
                ),
            )
            for (step_id,) in rows:
                taken.setdefault(step_id, time.monotonic() - killed)
            return len(taken) == len(held)

        until(all_taken, timeout=lease + TAKEOVER_SLACK_S, every=0.1)
        slowest = max(taken.values(), default=None)
        _report(
            request,
            f"{len(held)} steps held at the kill, {len(taken)} taken over within "
            f"{lease + TAKEOVER_SLACK_S:.1f} s (the claim lease {lease:.1f} s + "
            f"{TAKEOVER_SLACK_S:.0f} s), the slowest after "
            f"{slowest if slowest is None else round(slowest, 1)} s",
        )
        assert sorted(taken) == sorted(held), "every held step was claimed by the survivor"
        assert max(taken.values()) <= lease + TAKEOVER_SLACK_S

        figures = completed_and_tallied(url, receiver, run_ids)
        _report(
            request,
            f"{figures['other_key']} under another key, {figures['same_key_again']} repeated "
            f"under the same key, {figures['lost']} lost",
        )
        assert figures["other_key"] == 0
        assert figures["lost"] == 0
        # Only a step in perform at the kill may be sent again, and under its own key.
        assert figures["same_key_again"] <= len(held)


def test_the_figures_helper_counts_what_it_says() -> None:
    receiver = Receiver()
    try:
        from tests.processes import Delivery

        receiver.deliveries += [
            Delivery("k1", 1, "muster", 0),
            Delivery("k1", 1, "muster", 0),
            Delivery("k2", 1, "march", 0),
            Delivery("k3", 1, "march", 0),
        ]
        assert tally(receiver, [1]) == {
            "steps": 3,
            "deliveries": 4,
            "lost": 1,
            "other_key": 1,
            "same_key_again": 1,
        }
    finally:
        receiver.close()
