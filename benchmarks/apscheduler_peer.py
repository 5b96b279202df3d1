"""The APScheduler 4 side of ``throughput.py``: the same workload as pageant's, as chained jobs.

Runs in the benchmark's own virtualenv (APScheduler is not a dependency of pageant):

    python3 -m venv benchmarks/.venv-apscheduler
    benchmarks/.venv-apscheduler/bin/pip install \
        'apscheduler[sqlalchemy]>=4.0.0a1' aiosqlite asyncmy sniffio

One ``AsyncScheduler`` (scheduler and worker roles, the default) with a
``SQLAlchemyDataStore`` on ``--url`` and the in-process event broker; on SQLite the file is
in WAL mode and each connection runs ``synchronous=NORMAL``, as pageant's do. A "run" of S
steps is a chain of S jobs: job ``k`` writes one line through :mod:`logging` (to a file, as
pageant's ``core.log`` leg writes one line to the run log) and then adds job ``k + 1`` of its
run to the data store, so a run's steps happen in order, one at a time, each a job persisted
in the database, acquired, run and released. With ``--wait W``, job 0 adds job 1 as a one-off
schedule (``DateTrigger``) W seconds ahead instead, and job 1 measures how late it began
against that instant. With ``--independent`` the same R x S jobs are all added at once and
none adds another (no order between them: APScheduler's most favourable shape, many workers'
worth of independent work); the run is over when the last of them has finished.

With ``--best`` (the peer at its best) the same R x S independent jobs are all queued in the
data store **before** the scheduler starts (``start_in_background``), and only the draining is
timed: the scheduler runs up to ``max_concurrent_jobs`` (100) at once, and the task's
``max_running_jobs`` is unlimited (None; APScheduler's default for a task is 1, which
``--independent`` keeps). The time the queueing took is reported apart (``queue_s``).

The clock starts when the first job is added (the scheduler is already running and its
tables made) and stops when the last job of the last run has finished; with ``--best`` it
starts as the scheduler starts. It prints one JSON object:
``{"jobs", "wall_s", "rate", "cpu_s", "cpu_ms_per_job", "lateness_ms", "queue_s"}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from typing import ClassVar

from apscheduler import AsyncScheduler, SchedulerRole, current_async_scheduler, current_job
from apscheduler.datastores.sqlalchemy import SQLAlchemyDataStore
from apscheduler.triggers.date import DateTrigger
from sqlalchemy import event
from sqlalchemy.ext.asyncio import create_async_engine

log = logging.getLogger("peer.job")


class State:
    runs = 0
    steps = 0
    wait = 0.0
    finished = 0
    done: asyncio.Event
    lateness: ClassVar[list[float]] = []


async def step(run: int, seq: int) -> None:
    """One step of a run: a log line, then the next step of the same run."""
    if State.wait and seq == 1:
        due = current_job.get().scheduled_fire_time
        if due is not None:
            State.lateness.append((datetime.now(UTC) - due).total_seconds() * 1000)
    log.info("run %d step %d", run, seq)
    if seq + 1 == State.steps:
        State.finished += 1
        if State.finished == State.runs:
            State.done.set()
        return
    scheduler = current_async_scheduler.get()
    assert scheduler is not None
    if State.wait and seq == 0:
        at = datetime.now(UTC) + timedelta(seconds=State.wait)
        await scheduler.add_schedule(step, DateTrigger(at), args=(run, seq + 1))
    else:
        await scheduler.add_job(step, args=(run, seq + 1))


async def lone(n: int) -> None:
    """One independent job: a log line, counted."""
    log.info("job %d", n)
    State.finished += 1
    if State.finished == State.runs * State.steps:
        State.done.set()


#: ``--best``: the jobs the scheduler runs at once (APScheduler 4's default, said aloud).
BEST_CONCURRENT_JOBS = 100


async def main(
    url: str,
    runs: int,
    steps: int,
    wait: float,
    timeout: float,
    independent: bool = False,
    best: bool = False,
) -> dict:
    State.runs, State.steps, State.wait = runs, steps, wait
    State.done = asyncio.Event()
    engine = create_async_engine(url)
    if engine.dialect.name == "sqlite":
        # The durability pageant's own SQLite engine runs with (WAL is set on the file).
        @event.listens_for(engine.sync_engine, "connect")
        def _on_connect(dbapi_connection: object, _record: object) -> None:
            cursor = dbapi_connection.cursor()  # type: ignore[attr-defined]  # a DBAPI connection, typed as object
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA busy_timeout=5000")
            cursor.close()

    store = SQLAlchemyDataStore(engine)
    # Chained jobs need no schedule processing: the worker role alone runs them. (The
    # scheduler role's schedule acquisition is a WITH ... UPDATE, which MariaDB refuses.)
    role = SchedulerRole.both if wait else SchedulerRole.worker
    queue_s = None
    async with AsyncScheduler(
        store, role=role, max_concurrent_jobs=BEST_CONCURRENT_JOBS
    ) as scheduler:
        if best:
            # Queued first, then drained: no job waits on another's insert, and the task
            # may run as many at once as the scheduler will.
            await scheduler.configure_task(lone, max_running_jobs=None)
            q0 = time.perf_counter()
            for n in range(runs * steps):
                await scheduler.add_job(lone, args=(n,))
            queue_s = time.perf_counter() - q0
            cpu0, t0 = time.process_time(), time.perf_counter()
            await scheduler.start_in_background()
        else:
            await scheduler.start_in_background()
            cpu0, t0 = time.process_time(), time.perf_counter()
        if independent and not best:
            for n in range(runs * steps):
                await scheduler.add_job(lone, args=(n,))
        elif not best:
            for run in range(runs):
                await scheduler.add_job(step, args=(run, 0))
        try:
            await asyncio.wait_for(State.done.wait(), timeout)
            timed_out = False
        except TimeoutError:
            timed_out = True
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        await scheduler.stop()
    await engine.dispose()
    jobs = runs * steps
    return {
        "jobs": jobs,
        "runs_finished": State.finished // (steps if independent or best else 1),
        "timed_out": timed_out,
        "wall_s": wall,
        "rate": jobs / wall if not timed_out else None,
        "cpu_s": cpu,
        "cpu_ms_per_job": cpu * 1000 / jobs,
        "lateness_ms": sorted(State.lateness),
        "queue_s": queue_s,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="a SQLAlchemy async URL (aiosqlite, asyncmy)")
    parser.add_argument("--runs", type=int, required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--wait", type=float, default=0.0, help="seconds between job 0 and 1")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument(
        "--independent", action="store_true", help="runs x steps unordered jobs, added at once"
    )
    parser.add_argument(
        "--best",
        action="store_true",
        help="runs x steps unordered jobs queued before the scheduler starts; the drain timed",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        handler = logging.FileHandler(os.path.join(folder, "jobs.log"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False
        logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
        result = asyncio.run(
            main(
                args.url,
                args.runs,
                args.steps,
                args.wait,
                args.timeout,
                args.independent,
                args.best,
            )
        )
    print(json.dumps(result))
